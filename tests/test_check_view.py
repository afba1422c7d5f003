"""What ``copy-that check`` prints (autograder.learner.view) and the learner's commands around it:
myths labelled as myths with a link to read again, the way on once the visible tests pass, the
hidden tests (--full in a clone, the instructor's grading in a handout), the model answers."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from rich.console import Console

from autograder.kernel.misconceptions import BY_ID
from autograder.learner.cells import LECTURE_DIR, RELEASE_DIR, SOURCE_DIR
from autograder.learner.selfcheck import CheckReport
from autograder.learner.selfcheck import TestResult as Result
from autograder.learner.view import lecture_url, print_check, table
from harness import ROOT

PY = sys.executable


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("clone")
    for part in (LECTURE_DIR, RELEASE_DIR, SOURCE_DIR):
        shutil.copytree(ROOT / part, root / part)
    return root


def shown(report: CheckReport) -> str:
    console = Console(record=True, width=200)
    print_check(report, console)
    return console.export_text(styles=False)


def tagged(mid: str) -> str:
    m = BY_ID[mid]
    return f"x is 1; expected 2. Likely mistake: add .clone(). Myth: {m.myth} [{m.id}: {m.link}]"


def test_a_failure_shows_its_myth_labelled_as_a_myth_and_where_to_read_again(clone):
    nb = clone / RELEASE_DIR / "a3_detach" / "a3_detach.ipynb"
    m = BY_ID["M-detach-copies"]
    report = CheckReport(nb, [Result("test_snapshot", 0, 1, "failed", tagged(m.id))], [], ["test_snapshot_hidden"])
    text = " ".join(shown(report).split())
    assert f"snapshot: Myth: {m.myth} read again: {m.link}" in text
    assert "misconception" not in text and "test_snapshot" not in text
    assert "snapshot (hidden tests)" in text
    # the table's row keeps the diagnosis and leaves the myth to the labelled line below it
    row = [line for line in shown(report).splitlines() if "Likely mistake" in line][0]
    assert "Myth" not in row and "[M-" not in row


def test_the_link_to_read_again_is_a_terminal_link_to_the_lecture_in_the_lab_or_the_file(clone):
    nb = clone / RELEASE_DIR / "a3_detach" / "a3_detach.ipynb"
    m = BY_ID["M-detach-copies"]
    lab = {"JUPYTER_SERVER_URL": "http://127.0.0.1:8888/", "JUPYTER_SERVER_ROOT": str(clone)}
    assert lecture_url(m, nb, lab) == f"http://127.0.0.1:8888/lab/tree/{m.lecture}"
    assert lecture_url(m, nb, {}).startswith((clone / m.lecture).resolve().as_uri() + "#")
    report = CheckReport(nb, [Result("test_snapshot", 0, 1, "failed", tagged(m.id))], [], [])
    console = Console(record=True, width=200, force_terminal=True)
    print_check(report, console)
    raw = console.export_text(styles=True)
    assert "\x1b]8;" in raw and (clone / m.lecture).resolve().as_uri() in raw   # OSC 8, where the terminal has them
    plain = Console(record=True, width=200)         # not a terminal: plain text
    print_check(report, plain)
    assert "\x1b]8;" not in plain.export_text(styles=False)


def test_once_the_visible_tests_pass_check_shows_the_hidden_tests_the_model_answers_and_the_next_steps(clone, tmp_path):
    nb = clone / RELEASE_DIR / "a1_views" / "a1_views.ipynb"
    done = CheckReport(nb, [Result("test_f", 1, 1, "passed", "\u2713 f")], [], ["test_f_hidden"], [], ["why"])
    text = " ".join(shown(done).split())
    assert "copy-that check --full" in text and "copy-that answers" in text and "(it asks first)" in text
    assert "Next: read course/02_clone.ipynb, then do exercises/a2_clone/a2_clone.ipynb." in text
    assert "Not done yet" not in text
    # a class handout: no solutions/, the instructor's grading runs the hidden tests
    handout = tmp_path / "copy-that"
    shutil.copytree(clone / RELEASE_DIR / "a1_views", handout / RELEASE_DIR / "a1_views")
    shutil.copytree(clone / RELEASE_DIR / "a2_clone", handout / RELEASE_DIR / "a2_clone")
    theirs = CheckReport(handout / RELEASE_DIR / "a1_views" / "a1_views.ipynb", done.results, [], done.hidden)
    text = " ".join(shown(theirs).split())
    assert "The hidden tests run when your instructor grades it" in text and "Your instructor's grading runs" in text
    assert "--full" not in text and "copy-that answers" not in text
    # not done: what is left, in words that agree in number
    left = CheckReport(nb, [Result("test_f", 0, 1, "failed", "x")], ["answer cell f: SyntaxError"], [])
    text = " ".join(shown(left).split())
    assert "Not done yet: 1 test to fix, 1 cell that fails." in text and "Next:" not in text


def test_check_full_says_what_it_ran(clone):
    nb = clone / RELEASE_DIR / "a1_views" / "a1_views.ipynb"
    full = CheckReport(nb, [Result("test_f", 1, 1, "passed", ""), Result("test_f_hidden", 2, 2, "passed", "",
                                                                                hidden=True)], [], [], full=True)
    text = " ".join(shown(full).split())
    assert "check --full ran the instructor's tests from solutions/, hidden tests included: 2/2 tests pass, 3/3 points" in text
    assert "f (hidden tests)" in table(full).columns[0]._cells


def run(args: list[str], cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "COPY_THAT_LAB"}
    return subprocess.run([PY, "-m", "autograder", *args], cwd=cwd, capture_output=True, text=True, input=stdin,
                          env=dict(env, COLUMNS="200"), timeout=300)


def test_the_model_answers_come_after_a_confirmation_and_only_in_a_clone(clone, tmp_path):
    folder = clone / RELEASE_DIR / "a2_clone"
    out = run(["answers"], folder, stdin="")            # no terminal to ask in: nothing shown
    assert out.returncode == 2 and "--yes" in out.stdout and "def graph_copy" not in out.stdout
    out = run(["answers", "--yes"], folder)
    assert out.returncode == 0 and "def graph_copy" in out.stdout and "model written answer" in out.stdout
    assert "BEGIN SOLUTION" not in out.stdout and f"{SOURCE_DIR}/a2_clone/a2_clone.ipynb" in out.stdout
    handout = tmp_path / "copy-that"
    shutil.copytree(folder, handout / RELEASE_DIR / "a2_clone")
    out = run(["answers", "--yes"], handout / RELEASE_DIR / "a2_clone")
    assert out.returncode == 2 and "No model answers" in out.stdout and "def graph_copy" not in out.stdout
    out = run(["check", "--full"], handout / RELEASE_DIR / "a2_clone")
    assert out.returncode == 2 and "your instructor's grading runs the hidden tests" in " ".join(out.stdout.split())


def test_check_typed_as_printed_inside_the_exercise_folder_checks_that_notebook(clone):
    out = run(["check", f"{RELEASE_DIR}/a1_views/a1_views.ipynb"], clone / RELEASE_DIR / "a1_views")
    text = " ".join(out.stdout.split())
    assert out.returncode == 1 and "0/5 visible tests pass" in text, out.stdout + out.stderr
    assert "checking exercises/a1_views/a1_views.ipynb of the course folder" in text
    # a blank release: not started, nothing that reads like a failure of the learner's
    assert "cell that fails" not in text and "Ctrl-S" in text
