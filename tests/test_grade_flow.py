"""A class's grading as an instructor runs it (issue 11): the README's commands typed on a fresh
copy of the course, one gradebook named in the user's Jupyter config folder, the report, re-grades
of what changed that keep manual grades, a first Ctrl-C, the Canvas export.

One course serves the module: its first grading is the README's own commands, so every later
test reads what they left (a few seconds of grading in all)."""
from __future__ import annotations

import csv
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from harness import ROOT, SANDBOX, submission, submit

HOSTILE = "=1+1<b>x"       # a student id that is HTML and a spreadsheet formula: refused at intake
WRITER = "a-payload"        # a safe id whose answer raises an error that is HTML
PAYLOAD = "<img src=x onerror=alert(1)>"
MARK = "<!-- instructor-commands -->"


def readme_commands() -> list[str]:
    """The README's first instructor commands, line by line, as a user would type them."""
    text = (ROOT / "README.md").read_text()
    assert MARK in text, "the README lost its instructor-commands block"
    block = text.split(MARK, 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def venv_in(course: Path) -> None:
    """``course/.venv``: the course's environment, laid out as ``python -m venv`` makes one (its
    ``bin/python`` a link to the base interpreter), sharing the checkout's packages.  A link to the
    whole ``.venv`` would not do: the sandbox shows the environment by its resolved path only."""
    venv, real = course / ".venv", ROOT / ".venv"
    (venv / "bin").mkdir(parents=True)
    shutil.copy2(real / "pyvenv.cfg", venv / "pyvenv.cfg")
    for name in ("lib", "etc", "share", "include"):
        if (real / name).exists():
            (venv / name).symlink_to(real / name)
    for exe in (real / "bin").iterdir():
        target = Path(os.path.realpath(exe)) if exe.name.startswith("python") else exe
        (venv / "bin" / exe.name).symlink_to(target)


def run_as_typed(line: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def flow(tmp_path_factory):
    """A fresh copy of the course (no gradebook: exercises/ committed, nothing generated), a user
    config folder naming a gradebook outside it, three submissions, then the README's commands."""
    base = tmp_path_factory.mktemp("flow")
    course = base / "course"
    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    for folder in ("solutions", "exercises"):
        shutil.copytree(ROOT / folder, course / folder, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    venv_in(course)
    jupyter = base / "jupyter"
    jupyter.mkdir()
    db = base / "shared" / "gradebook.db"
    db.parent.mkdir()
    # the grader account's own settings: its gradebook, and one slot (two cores, shared with other tests)
    (jupyter / "nbgrader_config.py").write_text(f"c = get_config()\nc.CourseDirectory.db_url = 'sqlite:///{db}'\n"
                                                "c.GradeOptions.jobs = 1\n")
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(jupyter))
    submit(course, "a1_views", "alice", submission("a1_views"))
    submit(course, "a1_views", "bob", b"")
    for student in (WRITER, HOSTILE):
        submit(course, "a1_views", student, submission("a1_views", {
            "shares_memory": f"def shares_memory(a, b):\n    raise ValueError({PAYLOAD!r})\n"}))
    runs = [(line, run_as_typed(line, course, env)) for line in readme_commands()]
    return SimpleNamespace(course=course, env=env, db=db, jupyter=jupyter, runs=runs)


def grading_runs(flow) -> list[subprocess.CompletedProcess]:
    return [proc for line, proc in flow.runs if " grade " in line]


def scores(db: Path, student: str) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{db}") as gb:
        return {g.name: (g.auto_score, g.manual_score, g.needs_manual_grade)
                for g in gb.find_submission_notebook("a1_views", "a1_views", student).grades}


@SANDBOX
def test_the_readme_commands_work_as_typed_on_a_fresh_copy(flow):
    assert len(flow.runs) >= 5 and sum(" grade " in line for line, _ in flow.runs) == 2
    for line, proc in flow.runs:
        assert proc.returncode == 0, f"{line}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    first = grading_runs(flow)[0]
    assert "adding a1_views to the gradebook from solutions/" in first.stdout + first.stderr
    assert (flow.course / "feedback" / "alice" / "a1_views" / "a1_views.html").is_file()
    assert (flow.course / "grades.csv").is_file() and (flow.course / "canvas.csv").is_file()


@SANDBOX
def test_grade_feedback_export_and_nbgrader_use_the_gradebook_of_the_user_config(flow):
    assert not (flow.course / "gradebook.db").exists(), "something wrote a second gradebook in the course folder"
    assert sum(v[0] or 0 for v in scores(flow.db, "alice").values()) == 13.0       # grade wrote it
    page = (flow.course / "feedback" / "alice" / "a1_views" / "a1_views.html").read_text()
    assert "a1_views (Score: 13.0 / 15.0)" in page                                # feedback read it
    rows = list(csv.DictReader((flow.course / "grades.csv").open()))
    assert {r["student_id"]: float(r["score"]) for r in rows}["alice"] == 13.0    # export read it
    plain = subprocess.run([sys.executable, "-m", "nbgrader", "export", "--to=plain.csv"], cwd=flow.course,
                           env=dict(flow.env, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"),
                           capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr[-2000:]
    rows = list(csv.DictReader((flow.course / "plain.csv").open()))                # and nbgrader itself
    assert {r["student_id"]: float(r["score"]) for r in rows} == {"alice": 13.0, "bob": 0.0, WRITER: 10.0}
    assert not (flow.course / "gradebook.db").exists()


@SANDBOX
def test_a_run_ends_with_its_counts_and_a_broken_notebook_does_not_fail_it(flow):
    first, second = grading_runs(flow)
    counts = [line for line in first.stdout.splitlines() if line.strip()][-1]
    # the refused id is a broken submission, scored zero like bob's empty file
    assert re.fullmatch(r"a1_views: 4 submissions: 4 graded, 0 unchanged, 2 broken, 0 failed, 0 flagged; "
                     r"this run's mean 5\.75, median 5 of 15; [\d.]+ s", counts), first.stdout
    assert f"{HOSTILE} 0/0: student id" in first.stdout and "refused" in first.stdout
    assert "bob" in first.stdout and "is empty" in first.stdout
    assert not re.search(r"^alice\b", first.stdout, re.M), "a student with nothing to report got a row"
    # no terminal here: progress comes as log lines, the preparation included
    assert re.search(r"^\[\d\d:\d\d\] a1_views: preparing \d/4$", first.stdout, re.M), first.stdout
    assert re.search(r"^\[\d\d:\d\d\] a1_views: grading 4/4$", first.stdout, re.M), first.stdout
    assert "a1_views: 4 submissions: 1 graded, 3 unchanged" in second.stdout.splitlines()[-1], second.stdout


@SANDBOX
def test_the_report_covers_students_and_cells_and_escapes_what_students_wrote(flow):
    folder = flow.course / "reports" / "a1_views"
    page = (folder / "report.html").read_text()
    assert PAYLOAD not in page and "<b>x" not in page
    from autograder.grading.report_page import SCRIPT, SCRIPT_HASH

    assert page.lower().count("<script") == 1 and f"<script>{SCRIPT}</script>" in page, "one script, the page's own"
    assert f"script-src '{SCRIPT_HASH}'" in page, "allowed by its hash alone"
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "=1+1&lt;b&gt;x" in page
    assert 'content="default-src \'none\'; img-src data:' in page
    assert "data:image/svg+xml;base64,PHN2Zy" in page, "the histogram is an inline SVG image"
    assert "<h2>Misconceptions</h2>" in page, "grade passes misconception_counts to the report"
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page), "the report fetches nothing"
    rows = {r["student"]: r for r in csv.DictReader((folder / "report.csv").open())}
    assert rows["alice"]["score"] == "13" and rows["alice"]["status"] == "unchanged"
    assert rows["bob"]["status"] == "broken submission" and "is empty" in rows["bob"]["problems"]
    assert "'" + HOSTILE in rows, "a student id that is a formula stays text in the CSV"
    assert "refused" in rows["'" + HOSTILE]["problems"] and rows["'" + HOSTILE]["status"] == "broken submission"
    cells = {r["cell"]: r for r in csv.DictReader((folder / "cells.csv").open())}
    assert cells["test_shares_memory"]["passed"] == "1" and cells["test_shares_memory"]["students"] == "3"
    # bob's blank release is not attempted work: the hostile answer's error is the diagnosis
    assert cells["test_shares_memory"]["most_common_diagnosis"] == f"ValueError: {PAYLOAD}"   # raised in the judge as in the kernel
    assert cells["test_shares_memory"]["not_attempted"] == "1"
    assert cells["test_predictions"]["most_common_diagnosis"] == "" and cells["test_predictions"]["not_attempted"] == "1"
    assert cells["test_add_one_"]["pass_rate"] == "0.6667"
    assert "ValueError: " + PAYLOAD not in page


@SANDBOX
def test_canvas_csv_has_canvas_columns_and_maps_ids(flow):
    from nbgrader.api import Gradebook

    from autograder.grading.report import CanvasExportPlugin

    rows = list(csv.reader((flow.course / "canvas.csv").open()))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "a1_views"]
    assert rows[1][0] == "Points Possible" and rows[1][5] == "15"
    by_login = {r[3]: r for r in rows[2:]}
    assert by_login["alice"][5] == "13" and by_login["bob"][5] == "0"
    out = flow.course / "canvas-ids.csv"
    with Gradebook(f"sqlite:///{flow.db}") as gb:
        gb.update_or_create_student("alice", first_name="Alice", last_name="Liddell", lms_user_id="12345")
        gb.update_or_create_student("erin")            # in the class, nothing submitted
        CanvasExportPlugin(to=str(out), student_id_column="SIS User ID",
                           assignment_columns={"a1_views": "A1: views (777)"}).export(gb)
    rows = list(csv.reader(out.open()))
    assert rows[0][5] == "A1: views (777)"
    by_sis = {r[2]: r for r in rows[2:]}
    assert by_sis["alice"][:4] == ["Liddell, Alice", "12345", "alice", ""]
    assert by_sis["erin"][5] == "", "no submission: blank, so the import changes nothing"


@SANDBOX
def test_regrades_pick_changed_submissions_and_keep_manual_grades_of_unchanged_cells(flow, monkeypatch):
    from nbgrader.api import Gradebook

    from autograder.grading.config import load_config
    from autograder.grading.runner import Grader

    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(flow.jupyter))
    with Gradebook(f"sqlite:///{flow.db}") as gb:
        for student in ("alice", WRITER):
            [grade] = [g for g in gb.find_submission_notebook("a1_views", "a1_views", student).grades
                       if g.name == "why_not_id"]
            assert grade.needs_manual_grade
            grade.manual_score, grade.needs_manual_grade = 2.0, False    # a person graded the written answer
        gb.db.commit()
    path = flow.course / "submitted" / WRITER / "a1_views" / "a1_views.ipynb"
    nb = nbformat.read(path, as_version=4)
    [answer] = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "why_not_id"]
    answer.source += "\n\nOn second thought, a different answer."
    nbformat.write(nb, path)

    grader = Grader(flow.course, "a1_views", config=load_config(flow.course, cwd=flow.course),
                    only_changed=True, log=lambda m: None)
    assert grader.db_url == f"sqlite:///{flow.db}"
    assert grader._unchanged(grader._hashes()) == ["alice", "bob"], f"only {WRITER} changed"

    forced = Grader(flow.course, "a1_views", students=["alice", WRITER], config=grader.config, only_changed=True,
                    log=lambda m: None)
    results = {r.student: r for r in forced.run()}    # named students are graded, changed or not
    assert (results["alice"].score, results["alice"].auto_score) == (15.0, 13.0), "the total counts the manual grade"
    assert scores(flow.db, "alice")["why_not_id"] == (None, 2.0, False), "unchanged answer: still graded"
    assert scores(flow.db, WRITER)["why_not_id"] == (None, 2.0, True), "changed answer: to be graded again"
    # the report's hook for per-misconception counts, given the autograded notebooks
    page = forced.write_report(list(results.values()),
                               misconception_counts=lambda nbs: {"<b>id() is storage</b>": len(nbs)}).read_text()
    assert "&lt;b&gt;id() is storage&lt;/b&gt;" in page and "<b>id()" not in page


@SANDBOX
def test_the_first_ctrl_c_stops_within_seconds_and_keeps_what_finished(flow):
    from harness import reference_answers

    submit(flow.course, "a1_views", "aaa-quick", submission("a1_views"))
    slow = reference_answers("a1_views")["count_storages"] + "\nimport time\ntime.sleep(120)\n"
    submit(flow.course, "a1_views", "zzz-slow", submission("a1_views", {"count_storages": slow}))
    proc = subprocess.Popen([sys.executable, "-m", "autograder", "grade", "a1_views", "--jobs", "1",
                             "--student", "aaa-quick", "--student", "zzz-slow"], cwd=flow.course, env=flow.env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if "grading 1/2" in line:
                break
        time.sleep(2)                      # zzz-slow's kernel is asleep in its cell now
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    out = "".join(seen) + rest
    # about 1.6 s on a quiet machine (the report included); the bound leaves room for a loaded one,
    # far below the cell's 60 s limit and the 120 s sleep that a run going on would wait out
    assert took < 12, f"took {took:.1f} s to stop\n{out}"
    assert proc.returncode == 130, out
    assert "not graded: zzz-slow" in out and "stopping" in out
    assert sum(v[0] or 0 for v in scores(flow.db, "aaa-quick").values()) == 13.0
    assert (flow.course / "autograded" / "aaa-quick" / "a1_views" / "a1_views.ipynb").is_file()
    assert not (flow.course / "autograded" / "zzz-slow").exists()
    assert not list(flow.course.glob(".copy-that-staging-*"))
    folder = flow.course / "reports" / "a1_views"
    rows = {r["student"]: r for r in csv.DictReader((folder / "report.csv").open())}
    assert rows["zzz-slow"]["status"] == "not graded (interrupted)" and rows["aaa-quick"]["score"] == "13"
    cells = {r["cell"]: r for r in csv.DictReader((folder / "cells.csv").open())}
    assert cells["test_add_one_"]["students"] == "4", "a student never graded is in no cell's pass rate"


def test_grade_reads_its_options_as_nbgrader_does_and_flags_override_them(tmp_path, monkeypatch):
    """No grading: the configuration alone, against nbgrader's own application's."""
    from nbgrader.apps.autogradeapp import AutogradeApp

    from autograder.cli import build_parser
    from autograder.grading.commands import _grading_config
    from autograder.grading.config import GradeOptions, limits, load_config

    course = tmp_path / "course"
    (course / "solutions").mkdir(parents=True)
    shutil.copy2(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    jupyter = tmp_path / "jupyter"
    jupyter.mkdir()
    (jupyter / "nbgrader_config.py").write_text(
        "c = get_config()\nc.CourseDirectory.db_url = 'sqlite:////nowhere/gb.db'\nc.Execute.timeout = 7\n"
        "c.SandboxedExecute.notebook_timeout = 123\nc.GradeOptions.jobs = 3\n")
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(jupyter))
    monkeypatch.chdir(course)
    cfg = load_config(course)
    app = AutogradeApp()
    app.initialize([])
    for section, trait in (("Execute", "timeout"), ("CourseDirectory", "db_url"),
                           ("SandboxedExecute", "notebook_timeout"), ("CourseDirectory", "course_id")):
        assert cfg[section][trait] == app.config[section][trait], (section, trait)
    got = limits(cfg)
    assert (got.cell_timeout, got.notebook_timeout) == (60, 123), "the course's Execute.timeout wins, as in nbgrader"
    assert GradeOptions(config=cfg).jobs == 3
    args = build_parser().parse_args(["grade", "a1_views", "--cell-timeout", "5", "--memory", "1G", "--jobs", "2"])
    root, cfg = _grading_config(args)
    got = limits(cfg)
    assert root == course.resolve() and (got.cell_timeout, got.memory_bytes) == (5, 1 << 30)
    assert cfg.Execute.timeout == 5 and GradeOptions(config=cfg).jobs == 2


def test_every_limit_is_an_option_plain_nbgrader_reads_too(tmp_path, monkeypatch):
    """Processes and the largest file are SandboxedExecute's options like the other limits, so plain
    ``nbgrader autograde`` runs with them; ``c.GradeOptions.processes``, the older spelling, still
    counts where the new one is not set, and ``--processes`` wins over both."""
    from nbgrader.apps.autogradeapp import AutogradeApp

    from autograder.cli import build_parser
    from autograder.grading.commands import _grading_config
    from autograder.grading.config import limits, load_config
    from autograder.grading.execute import SandboxedExecute
    from autograder.grading.sandbox import Limits

    course = tmp_path / "course"
    (course / "solutions").mkdir(parents=True)
    shutil.copy2(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    jupyter = tmp_path / "jupyter"
    jupyter.mkdir()
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(jupyter))
    monkeypatch.chdir(course)
    user = jupyter / "nbgrader_config.py"

    user.write_text("c = get_config()\nc.GradeOptions.processes = 9\n")
    assert limits(load_config(course)).processes == 9, "the older spelling is still read"

    user.write_text("c = get_config()\nc.GradeOptions.processes = 9\nc.SandboxedExecute.processes = 17\n"
                    "c.SandboxedExecute.file_bytes = 12345\n")
    got = limits(load_config(course))
    assert (got.processes, got.file_bytes) == (17, 12345)
    app = AutogradeApp()
    app.initialize([])
    plain = SandboxedExecute(config=app.config).limits()
    assert (plain.processes, plain.file_bytes) == (17, 12345), "plain nbgrader autograde runs with them too"
    assert plain.kernel_limits()["processes"] == 17 and plain.kernel_limits()["file_bytes"] == 12345

    _, cfg = _grading_config(build_parser().parse_args(["grade", "a1_views", "--processes", "5"]))
    assert limits(cfg).processes == 5, "the flag wins over both spellings"

    user.write_text("c = get_config()\n")
    got = limits(load_config(course))
    assert (got.processes, got.file_bytes) == (Limits.processes, Limits.file_bytes)

    # the judge's limits (its own process, per submission) alike: options, flags, plain nbgrader
    user.write_text("c = get_config()\nc.SandboxedExecute.judge_memory_bytes = 3 << 30\n"
                    "c.SandboxedExecute.judge_cpu_seconds = 42\n")
    got = limits(load_config(course))
    assert (got.judge_memory_bytes, got.judge_cpu_seconds) == (3 << 30, 42)
    app = AutogradeApp()
    app.initialize([])
    plain = SandboxedExecute(config=app.config).limits()
    assert (plain.judge_memory_bytes, plain.judge_cpu_seconds) == (3 << 30, 42), "plain nbgrader reads them too"
    _, cfg = _grading_config(build_parser().parse_args(["grade", "a1_views", "--judge-memory", "512M",
                                                        "--judge-cpu-seconds", "9"]))
    assert (limits(cfg).judge_memory_bytes, limits(cfg).judge_cpu_seconds) == (512 << 20, 9)


def test_the_report_escapes_everything_a_student_controls():
    from autograder.grading.report import CellRow, Report, StudentRow
    from autograder.grading.report_page import SCRIPT, render_html

    evil = "</td><script>alert(1)</script>"
    report = Report("a1_views", [StudentRow(evil, "graded", 1.0, 1.0, 2.0, [f"cell with unknown grade id {evil!r}"],
                                            [evil], 1, 0.5)],
                    [CellRow("a1_views", "test_x", 1.0, 1, 0, evil, 1)], {"submissions": 1}, 1.0, 1.0, 2.0, 3.0,
                    {evil: 1})
    page = render_html(report)
    assert "</td><script>" not in page and page.count("<script") == 1 and f"<script>{SCRIPT}</script>" in page
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 5
    assert 'src="data:image/svg+xml;base64,' in page


def test_the_report_csv_keeps_formulas_as_text(tmp_path):
    from autograder.grading.report import Report, StudentRow, write_csv

    report = Report("a1", [StudentRow("=HYPERLINK(\"http://x\")", "graded", 1.0, 1.0, 2.0, [], ["@SUM(A1)"], 0, 0.5)],
                    [], {}, None, None, None, 0.0)
    students, _ = write_csv(report, tmp_path)
    [row] = list(csv.DictReader(students.open()))
    assert row["student"] == "'=HYPERLINK(\"http://x\")" and row["problems"] == "'@SUM(A1)" and row["score"] == "1"


def test_the_hub_guide_covers_what_a_new_instructor_hits(tmp_path, monkeypatch):
    """docs/jupyterhub.md: installing jupyterhub-singleuser, a root hub, user namespaces with what
    doctor really prints, a shared exchange on Kubernetes and TLJH, sizing, a class list in a loop."""
    import autograder.grading.bwrap as bwrap
    from autograder.grading.commands import grading_findings

    guide = " ".join((ROOT / "docs" / "jupyterhub.md").read_text().split())
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(bwrap, "bwrap_path", lambda: str(fake))
    [finding] = [f for f in grading_findings() if not f.ok]
    assert finding.name in guide, "the guide names doctor's row"
    assert "setting up uid map: Permission denied" in " ".join(str(v) for v in vars(finding).values()), finding
    assert "setting up uid map: Permission denied" in guide, "the guide quotes bubblewrap's own message"
    for needed in ('pip install "jupyterhub==$(', "jupyterhub-singleuser", "kernel.apparmor_restrict_unprivileged_userns",
                   "userns,", "ReadWriteMany", "The Littlest JupyterHub", "Zero to JupyterHub",
                   "tail -n +2 students.csv", "nbgrader db student import students.csv"):
        assert needed in guide, needed


def test_timeouts_count_cells_and_notebooks():
    from autograder.grading.jobs import Outcome
    from autograder.grading.runner import _timeouts

    cell = {"cell_type": "code", "outputs": [{"output_type": "error", "ename": "CellTimeout", "evalue": "", "traceback": []}]}
    other = {"cell_type": "code", "outputs": [{"output_type": "error", "ename": "CellTimeoutX", "evalue": "", "traceback": []}]}
    nb = {"cells": [cell, dict(cell), other]}
    assert _timeouts(Outcome("s", "n", nb, problems=["the notebook ran past its 600 s limit"])) == 3
    assert _timeouts(Outcome("s", "n", {"cells": [other]}, problems=["the kernel died"])) == 0


def test_without_a_terminal_progress_is_logged_every_few_seconds(capsys):
    from autograder.grading.progress_view import ProgressView

    with ProgressView("a1_views", every=1) as progress:
        assert not progress.terminal
        progress.event("preparing", 0, 150)
        progress.event("preparing", 5, 150)        # not a tenth yet: no line
        progress.event("preparing", 10, 150)
        time.sleep(2.3)                            # nothing happens: a line a second anyway
    lines = capsys.readouterr().out.splitlines()
    assert [line[8:] for line in lines[:2]] == ["a1_views: preparing 0/150", "a1_views: preparing 10/150"]
    assert 1 <= len(lines[2:]) <= 3 and all(line.endswith("preparing 10/150") for line in lines[2:]), lines
