"""A term's grading as an instructor meets it (issue 26): submissions that are renamed, a browser's
download copy, a notebook that is not the assignment's, a late one under nbgrader's late penalty, a
written answer not yet graded by hand, a flag that a fixed submission no longer earns, a student
named with no submission, and a forced run stopped half-way — each said in the terminal, the report,
the CSVs and the formgrader (nbgrader's gradebook), and the CSVs agree with the report.

One course serves the module: the first ``grade`` leaves what the later tests read."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from harness import SANDBOX, scratch_course, submission, submit

DUE = datetime(2026, 10, 1, 12, 0, tzinfo=timezone.utc)
CORRECT = 13.0          # the reference answers' auto-graded points; the written answer (2) waits for a person


def stamp(folder: Path, when: datetime) -> None:
    """nbgrader's timestamp.txt, as ``nbgrader collect`` leaves it."""
    (folder / "timestamp.txt").write_text(when.strftime("%Y-%m-%d %H:%M:%S.%f UTC"))


def place(course: Path, student: str, name: str, nb, when: datetime = DUE - timedelta(days=1)) -> Path:
    folder = course / "submitted" / student / "a1_views"
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / name)
    stamp(folder, when)
    return folder


def duplicated() -> nbformat.NotebookNode:
    """The reference answers with one answer cell pasted twice: the grader flags it."""
    nb = submission("a1_views")
    [i] = [i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "shares_memory"]
    copy = nbformat.from_dict(nb.cells[i])
    copy.id = "pasted-again"
    nb.cells.insert(i, copy)
    return nb


def grade(course: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder", *args], cwd=course, capture_output=True,
                          text=True, timeout=900, env=dict(os.environ, COLUMNS="400"))


def notebook_entry(course: Path, student: str):
    """(flagged, the automatic comments by cell) of a student's notebook in nbgrader's gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        sub = gb.find_submission_notebook("a1_views", "a1_views", student)
        return sub.flagged, {c.name: c.auto_comment for c in sub.comments}


def report_rows(course: Path) -> dict[str, dict]:
    return {r["student"]: r for r in csv.DictReader((course / "reports" / "a1_views" / "report.csv").open())}


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    from nbgrader.api import Gradebook

    course = scratch_course(tmp_path_factory.mktemp("term") / "course", "a1_views")
    with (course / "nbgrader_config.py").open("a") as f:
        f.write("\nc.LateSubmissionPlugin.penalty_method = 'zero'\nc.GradeOptions.jobs = 1\n")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        gb.update_or_create_assignment("a1_views", duedate=DUE.replace(tzinfo=None))
    place(course, "alice", "a1_views.ipynb", submission("a1_views"))
    place(course, "renamed", "a1_views_final.ipynb", submission("a1_views"))
    folder = place(course, "download", "a1_views.ipynb", submission("a1_views", blank=True))
    nbformat.write(submission("a1_views"), folder / "a1_views (1).ipynb")
    place(course, "elsewhere", "my notes.ipynb", nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]))
    late = place(course, "late", "a1_views.ipynb", submission("a1_views"), when=DUE + timedelta(hours=3))
    data = json.loads((late / "a1_views.ipynb").read_text())
    for cell in data["cells"]:
        cell.pop("id", None)       # written by a script: nbformat 4.5 without cell ids
    (late / "a1_views.ipynb").write_text(json.dumps(data))
    place(course, "stale", "a1_views.ipynb", duplicated())
    first = grade(course, "grade", "a1_views")
    return SimpleNamespace(course=course, first=first)


@SANDBOX
def test_intake_says_what_it_found_and_grades_an_obvious_copy(term):
    out = " ".join(term.first.stdout.split())
    assert term.first.returncode == 0, term.first.stdout + term.first.stderr
    assert "MissingIDFieldWarning" not in term.first.stdout + term.first.stderr
    rows = report_rows(term.course)
    # a rename: graded as the submission, and said
    assert float(rows["renamed"]["auto_score"]) == CORRECT
    assert "graded a1_views_final.ipynb in its place" in rows["renamed"]["flags"]
    assert (term.course / "autograded" / "renamed" / "a1_views" / "a1_views.ipynb").is_file(), "feedback has a page"
    # the right name left blank beside a filled download copy: left to a person, never a silent 0
    assert float(rows["download"]["score"]) == 0
    assert "a1_views (1).ipynb beside it holds answers" in rows["download"]["flags"]
    # a notebook that is not the assignment's: named
    assert "the folder holds my notes.ipynb" in rows["elsewhere"]["flags"]
    for student in ("renamed", "download", "elsewhere"):
        assert student in out, f"the terminal names {student}: {out}"
    assert "a1_views (1).ipynb" in out and "my notes.ipynb" in out
    flagged, comments = notebook_entry(term.course, "download")
    assert flagged, "the formgrader's flag column"
    assert "a1\\_views (1).ipynb" in comments["predictions"] or "a1_views (1).ipynb" in comments["predictions"], \
        "the reason is the comment of the first answer cell, which the formgrader shows"
    assert comments["predictions"].count("Flagged by the grader") == 1


@SANDBOX
def test_a_student_named_with_no_submission_is_an_error_and_leaves_no_trace(term):
    from nbgrader.api import Gradebook

    proc = grade(term.course, "grade", "a1_views", "--student", "exstudent")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no submission of a1_views for exstudent" in " ".join(proc.stdout.split())
    with Gradebook(f"sqlite:///{term.course / 'gradebook.db'}") as gb:
        assert "exstudent" not in {s.id for s in gb.students}
    export = grade(term.course, "export", "--format", "canvas")
    assert export.returncode == 0, export.stderr
    assert "exstudent" not in (term.course / "canvas.csv").read_text()


@SANDBOX
def test_lateness_and_pending_hand_grading_reach_the_report_and_every_csv(term):
    rows = report_rows(term.course)
    late = rows["late"]
    assert (float(late["raw_score"]), float(late["late_submission_penalty"]), float(late["score"])) == (CORRECT, CORRECT, 0)
    assert int(late["seconds_late"]) == 3 * 3600 and rows["alice"]["seconds_late"] == "0"
    assert rows["alice"]["needs_manual_grade"] == "1", "the written answer waits for a person"
    page = (term.course / "reports" / "a1_views" / "report.html").read_text()
    assert "late by 3.0 h" in page and "1 cell waiting" in page
    proc = grade(term.course, "export")
    assert proc.returncode == 0, proc.stderr
    assert grade(term.course, "export", "--format", "canvas").returncode == 0
    warning = " ".join(proc.stdout.split())
    assert "warning: a1_views:" in warning and "not yet graded by hand" in warning and "alice" in warning
    assert f"a1_views: 1 late submission, exported after nbgrader's late penalty: late (-{CORRECT:g})" in warning
    grades = {r["student_id"]: r for r in csv.DictReader((term.course / "grades.csv").open())}
    canvas = {r[3]: r[5] for r in csv.reader((term.course / "canvas.csv").open()) if r[0] != "Points Possible"}
    for student, row in rows.items():          # the CSVs agree with the report
        assert float(grades[student]["score"]) == float(row["score"]), student
        assert float(grades[student]["raw_score"]) == float(row["raw_score"]), student
        assert float(canvas[student]) == float(row["score"]), student
        assert grades[student]["needs_manual_grade"] == row["needs_manual_grade"], student
        assert grades[student]["seconds_late"] == row["seconds_late"], student


@SANDBOX
def test_a_clean_regrade_takes_back_the_flag_it_no_longer_finds(term):
    assert "appears 2 times" in report_rows(term.course)["stale"]["flags"]
    flagged, comments = notebook_entry(term.course, "stale")
    assert flagged and "appears 2 times" in comments["predictions"]
    place(term.course, "stale", "a1_views.ipynb", submission("a1_views"))
    proc = grade(term.course, "grade", "a1_views")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report_rows(term.course)["stale"]["flags"] == ""
    flagged, comments = notebook_entry(term.course, "stale")
    assert not flagged, "the flag the grader set is taken back"
    assert not any("Flagged" in (c or "") for c in comments.values())
    # a flag a person set stays through a clean re-grade
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{term.course / 'gradebook.db'}") as gb:
        gb.find_submission_notebook("a1_views", "a1_views", "alice").flagged = True
        gb.db.commit()
    assert grade(term.course, "grade", "a1_views", "--student", "alice").returncode == 0
    assert notebook_entry(term.course, "alice")[0]


@SANDBOX
def test_a_run_with_nothing_to_grade_keeps_the_last_runs_figures(term):
    from autograder.grading.state import GradingState

    state = GradingState(term.course / "reports" / "a1_views" / "grading-state.json")
    before = state.runs()
    assert before and before[-1]["graded"] >= 1
    proc = grade(term.course, "grade", "a1_views")
    assert proc.returncode == 0 and "0 graded" in proc.stdout, proc.stdout
    assert state.runs() == before, "a run that graded no one is not a run of the history"
    page = (term.course / "reports" / "a1_views" / "report.html").read_text()
    assert "<h2>Runs</h2>" in page and f">{before[-1]['when']}<" in page


@SANDBOX
def test_an_interrupted_forced_run_is_resumed_by_the_next_run(term):
    from autograder.grading.runner import Grader

    seen: list[str] = []

    def stop_after_one(result):
        seen.append(result.student)
        grader.stop()

    grader = Grader(term.course, "a1_views", log=lambda m: None, only_changed=False)
    done = grader.run(progress=stop_after_one)
    assert len(done) == 1 and grader.interrupted, "stopped after one student"
    left = set(grader.interrupted)
    logged: list[str] = []
    again = Grader(term.course, "a1_views", log=logged.append, only_changed=True)
    results = again.run()
    assert {r.student for r in results} == left, "the students the forced run did not reach are graded now"
    assert any("stopped before" in line for line in logged), logged
    third = Grader(term.course, "a1_views", log=lambda m: None, only_changed=True)
    assert third.run() == [] and len(third.unchanged) == 6, "once resumed, nothing is owed"


@SANDBOX
def test_feedback_is_quiet_by_default_and_says_where_the_pages_are(term):
    proc = grade(term.course, "feedback", "a1_views")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    # every student but the one whose folder held no copy of the notebook (nothing graded, no page)
    assert "feedback of a1_views for 5 students: feedback/<student>/a1_views/" in " ".join(out.split()), out
    for noise in ("[INFO]", "MissingIDFieldWarning", "not recognized by `StripHiddenTracebacks`",
                  "not recognized by `RedactHiddenTestLines`"):
        assert noise not in out, out
    assert len(out.splitlines()) < 10, out
    loud = grade(term.course, "feedback", "a1_views", "--student", "alice", "--verbose")
    assert loud.returncode == 0 and "[GenerateFeedbackApp | INFO]" in loud.stdout + loud.stderr
