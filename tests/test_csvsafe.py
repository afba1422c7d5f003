"""Every CSV the course writes is safe to open in a spreadsheet, and unsafe student ids are refused."""
from __future__ import annotations

import csv

import pytest

from autograder.grading.csvsafe import safe_cell
from autograder.grading.exports import GradesExportPlugin
from autograder.grading.ids import unsafe_id
from autograder.grading.report import CanvasExportPlugin

FORMULAS = ["=1+1", "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\t=1", "\r=1", " =HYPERLINK(\"x\")", "%0A=1", "|x"]


@pytest.mark.parametrize("text", FORMULAS)
def test_a_formula_stays_text(text):
    assert safe_cell(text).startswith("'")


@pytest.mark.parametrize("value,expected", [(None, ""), (13.0, "13"), (-1.5, "-1.5"), (3, "3"), ("alice", "alice"),
                                            ("Liddell, Alice", "Liddell, Alice")])
def test_plain_values_are_unchanged(value, expected):
    assert safe_cell(value) == expected


@pytest.fixture(autouse=True)
def _alembic_on_path(monkeypatch):
    """nbgrader runs the ``alembic`` executable by name when it creates a gradebook."""
    import os
    import sys

    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))


def _gradebook(tmp_path):
    from nbgrader.api import Gradebook

    gb = Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}")
    gb.add_assignment("a1_views")
    for sid, last in (("alice", "Liddell, Alice"), ("=1+1", "=HYPERLINK(\"http://x\",\"y\")"), ("@evil", "-2+3")):
        gb.update_or_create_student(sid, last_name=last, first_name="+x")
    return gb


def _no_formula(path):
    rows = list(csv.reader(path.open(newline="", encoding="utf-8")))
    cells = [c for row in rows for c in row]
    starts = [c for c in cells if c.lstrip(" ")[:1] in "=+-@\t\r|%" and c]
    numbers = [c for c in starts if c.lstrip("-").replace(".", "", 1).isdigit()]
    assert [c for c in starts if c not in numbers] == [], starts
    return rows


def test_grades_csv_through_the_course_plugin_has_no_formula(tmp_path):
    gb = _gradebook(tmp_path)
    out = tmp_path / "grades.csv"
    try:
        GradesExportPlugin(to=str(out)).export(gb)
    finally:
        gb.close()
    rows = _no_formula(out)
    assert rows[0][:4] == ["assignment", "duedate", "timestamp", "student_id"]
    ids = {r[3] for r in rows[1:]}
    assert ids == {"alice", "'=1+1", "'@evil"}
    assert any(r[4] == "Liddell, Alice" for r in rows[1:]), "a comma in a name stays in its cell"


def test_canvas_csv_has_no_formula(tmp_path):
    gb = _gradebook(tmp_path)
    out = tmp_path / "canvas.csv"
    try:
        CanvasExportPlugin(to=str(out)).export(gb)
    finally:
        gb.close()
    rows = _no_formula(out)
    assert {r[3] for r in rows[2:]} == {"alice", "'=1+1", "'@evil"}


def test_nbgrader_export_uses_the_course_plugin():
    from traitlets.config.loader import PyFileConfigLoader

    from harness import ROOT

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    assert config.ExportApp.plugin_class == "autograder.grading.exports.GradesExportPlugin"


@pytest.mark.parametrize("student,ok", [
    ("alice", True), ("jo.smith@uni.example", True), ("s-01_b", True), ("Bob2", True),
    ("=1+1<b>x", False), ("<img src=x onerror=alert(1)>", False), ("-victim", False), ("", False),
    ("a b", False), ("a/b", False), ("é", False), ("a" * 65, False), ("a\n", False),
])
def test_unsafe_ids_are_refused_with_the_reason(student, ok):
    reason = unsafe_id(student)
    assert (reason is None) is ok
    if not ok:
        assert "refused" in reason and "letters, digits" in reason
