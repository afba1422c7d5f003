"""docs/authoring.md, run as written: its worked example (a new exercise with a model of its own in
the assignment's fixtures) goes into a copy of the course whose gradebook was made before it, then
every command of the guide runs, line by line, as an instructor types it. The new tests are used,
the submissions whose tests changed are graded again, and the example's answers score as the guide
says."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

import guide
from autograder.course.layout import SOURCE_DIR, fill_answers, solution_sources
from autograder.learner.cells import RELEASE_DIR
from harness import ROOT, SANDBOX, submission, submit

A = "a8_devices"
SHALLOW = "import copy\n\ndef frozen_copy(model, device):\n    frozen = copy.copy(model)\n" \
          "    for p in frozen.parameters():\n        p.requires_grad_(False)\n    return frozen\n"


def scratch(base: Path) -> tuple[Path, dict]:
    """A copy of one assignment of the course, its corpus, and the environment's ``python`` first on PATH."""
    course = base / "course"
    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    for folder in (SOURCE_DIR, RELEASE_DIR):
        shutil.copytree(ROOT / folder / A, course / folder / A)
    (course / "tests" / "answers").mkdir(parents=True)
    shutil.copy2(ROOT / "tests" / "answers" / f"{A}.py", course / "tests" / "answers" / f"{A}.py")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               JUPYTER_CONFIG_DIR=str(base / "jupyter"))
    (base / "jupyter").mkdir()
    (base / "jupyter" / "nbgrader_config.py").write_text("c = get_config()\nc.GradeOptions.jobs = 2\n")
    return course, env


def run(line: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def new_release_submission(course: Path, answers: dict[str, str]) -> nbformat.NotebookNode:
    """The rebuilt release, filled with the reference answers (and ``answers`` in their place)."""
    release = nbformat.read(course / RELEASE_DIR / A / f"{A}.ipynb", as_version=4)
    source = nbformat.read(course / SOURCE_DIR / A / f"{A}.ipynb", as_version=4)
    return fill_answers(release, {**solution_sources(source), **answers})


@pytest.fixture(scope="module")
def flow(tmp_path_factory):
    course, env = scratch(tmp_path_factory.mktemp("guide"))
    # a class graded before the exercise existed
    submit(course, A, "alice", submission(A))
    submit(course, A, "bob", submission(A, {"copy_to": "def copy_to(t, device):\n    return t.to(device)\n"}))
    before = run("python -m autograder grade a8_devices", course, env)
    guide.add_example(course, A)
    runs = []
    for line in guide.commands():
        runs.append((line, run(line, course, env)))
        if " build --only " in line:      # learners who got the new release
            submit(course, A, "carol", new_release_submission(course, {}))
            submit(course, A, "dave", new_release_submission(course, {"frozen_copy": SHALLOW}))
    return SimpleNamespace(course=course, before=before, runs=runs)


def scores(course: Path, student: str) -> dict[str, tuple[float, float]]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {g.name: (g.auto_score, g.max_score) for g in gb.find_submission_notebook(A, A, student).grades
                if g.auto_score is not None}


def test_every_command_of_the_guide_is_in_a_block_the_tests_run():
    lines = guide.commands()
    assert len(lines) >= 4
    missing = [c for c in guide.inline_commands() if c not in lines]
    assert not missing, f"commands in the guide's prose that no test runs: {missing}"
    assert set(guide.examples()) >= {f"solutions/{A}/fixtures.py", "solution frozen_copy",
                                     "tests test_frozen_copy 1", "tests test_frozen_copy_hidden 2", f"corpus {A}"}
    assert "http" not in guide.text().replace("](architecture.md)", ""), "a link leads outside the repository"


@SANDBOX
def test_the_guides_commands_run_as_written_after_its_example_is_added(flow):
    assert flow.before.returncode == 0, flow.before.stdout + flow.before.stderr
    for line, proc in flow.runs:
        assert proc.returncode == 0, f"{line}\n{proc.stdout[-4000:]}\n{proc.stderr[-3000:]}"
    out = {line: " ".join(proc.stdout.split()) for line, proc in flow.runs}
    said = out["python -m autograder check-assignment a8_devices"]
    corpus = re.search(r"blank release and (\d+) corpus answers", said)
    assert corpus and f"a8_devices: {int(corpus[1]) + 2} submissions graded in" in said, said
    assert "nothing off" in out["python -m autograder check-assignment a8_devices"]
    assert (flow.course / RELEASE_DIR / A / "fixtures.py").read_text() == \
        (flow.course / SOURCE_DIR / A / "fixtures.py").read_text(), "the release carries the fixtures as they are"


@SANDBOX
def test_grade_follows_the_source_and_the_examples_answers_score_as_the_guide_says(flow):
    graded = " ".join(dict(flow.runs)["python -m autograder grade a8_devices"].stdout.split())
    assert "solutions/a8_devices changed since the gradebook took it" in graded
    assert "the tests of a8_devices changed since the last grading: 2 submissions re-graded" in graded
    assert "4 submissions: 4 graded, 0 unchanged" in graded
    carol, dave, alice = (scores(flow.course, s) for s in ("carol", "dave", "alice"))
    assert carol["test_frozen_copy"] == (1, 1) and carol["test_frozen_copy_hidden"] == (2, 2)
    assert all(score == top for score, top in carol.values()), carol
    assert dave["test_frozen_copy"] == (0, 1) and dave["test_copy_to"] == (1, 1)
    assert alice["test_frozen_copy"] == (0, 1), "a notebook without frozen_copy scores zero on its tests"
    assert alice["test_copy_to_hidden"] == (2, 2)
