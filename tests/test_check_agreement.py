"""``copy-that check`` tells the learner what the grader will say, test by test, over the answer corpus.

- Every corpus submission (the reference, the blank release, every wrong and right answer of
  ``tests/answers/``) is checked as a learner checks it: ``check`` on the learner's copy (visible
  tests), and ``check --full`` (the instructor's tests from ``solutions/``, hidden ones included)
  on the reference and every wrong answer.  The kernels are forked from a started slot, as the
  grader's are (that is the only difference from the command, and it lets the corpus fit the
  suite's time).  Each row's points equal the grader's score of that cell: the corpus's fast path
  (``corpus.fast_path``), which ``tests/test_grader_agreement.py`` and
  ``tests/test_nbgrader_plain.py`` prove equal to ``python -m autograder grade`` and to plain
  ``nbgrader autograde`` cell for cell.
- The answers that never return (``LOOPS`` in the corpus) go through the course's grader itself and
  through ``check``, with the same short time limit: both stop the same cells and fail the same tests.
"""
from __future__ import annotations

import dataclasses
import importlib
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

from autograder.course.layout import LECTURE_DIR, SOURCE_DIR
from autograder.grading.config import limits as configured_limits, load_config
from autograder.grading.pool import SlotPool
from autograder.grading.runner import Grader
from autograder.grading.bwrap import bwrap_path
from autograder.grading.sandbox import Limits
from autograder.learner.cells import RELEASE_DIR, role
from autograder.learner.selfcheck import CheckReport, check_notebook
from corpus import ASSIGNMENTS, auto_cells, corpus_submissions, fast_path, per_assignment, release
from harness import ROOT, read_grades, scratch_course, submission, submit

# the kernels' limits in the check runs: none beyond check's own per-cell time limit
NO_LIMITS = Limits(memory_bytes=0, cpu_seconds=0, cell_timeout=60, notebook_timeout=1800, processes=0,
                   output_bytes=64 << 20, file_bytes=0)
SLOTS = 2
LOOP_LIMIT = 8     # seconds per cell for the answers that never return, in check and in the grader


def learner_course(folder: Path) -> Path:
    """A clone of the course as a self-learner has it: lectures, exercises and solutions."""
    for part in (LECTURE_DIR, RELEASE_DIR, SOURCE_DIR):
        shutil.copytree(ROOT / part, folder / part, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    return folder


def check_all(jobs: list[tuple[Path, bool]], timeout: int = 60) -> dict[tuple[Path, bool], CheckReport]:
    """``check`` (or ``check --full``) on each notebook, kernels forked from started slots."""
    with SlotPool(SLOTS, sandboxed=False) as pool:
        def one(job: tuple[Path, bool]) -> CheckReport:
            path, full = job
            slot = pool.slots.get()
            try:
                return check_notebook(path, timeout=timeout, full=full,
                                      kernel_manager=lambda: slot.kernel_manager(NO_LIMITS))
            finally:
                slot.request({"op": "reap"}, timeout=30)
                slot.clear()
                pool.slots.put(slot)

        with ThreadPoolExecutor(SLOTS) as threads:
            return dict(zip(jobs, threads.map(one, jobs)))


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> dict[str, dict[str, tuple[CheckReport, CheckReport | None]]]:
    """assignment -> student -> (check's report, check --full's report or None)."""
    course = learner_course(tmp_path_factory.mktemp("learner"))
    paths: dict[tuple[str, str], Path] = {}
    jobs: list[tuple[Path, bool]] = []
    for assignment in ASSIGNMENTS:
        for student, nb in corpus_submissions(assignment).items():
            path = course / RELEASE_DIR / assignment / f"{student}.ipynb"
            nbformat.write(nb, path)
            paths[assignment, student] = path
            jobs.append((path, False))
            if student == "reference" or student.startswith("wrong_"):
                jobs.append((path, True))
    reports = check_all(jobs)
    out: dict = {}
    for (assignment, student), path in paths.items():
        out.setdefault(assignment, {})[student] = (reports[path, False], reports.get((path, True)))
    return out


@pytest.fixture(scope="module")
def graded():
    return fast_path()


def visible_cells(assignment: str) -> set[str]:
    """The auto-graded cells a learner's copy runs (the hidden ones are comments there)."""
    return {role(c).grade_id for c in release(assignment).cells if role(c).is_test
            and not all(not line.strip() or line.lstrip().startswith("#") for line in c.source.splitlines())}


def prediction_cells(assignment: str) -> set[str]:
    """The prediction sets of the release (their key is in the hidden part, for the grader only)."""
    return {role(c).grade_id for c in release(assignment).cells if role(c).is_test and "check_predictions(" in c.source}


def rows(report: CheckReport) -> dict[str, tuple[float, float]]:
    """What ``check`` scores: every row but the prediction sets it cannot judge (shown as ?)."""
    return {r.grade_id: (r.points, r.max_points) for r in report.checked}


def unjudged(report: CheckReport) -> set[str]:
    """The rows ``check`` leaves to the grading: prediction sets whose key only the grader has."""
    out = {r.grade_id for r in report.results if r.status == "not checked"}
    for r in report.results:
        if r.status == "not checked":
            assert r.points == 0 and r.message.startswith("not checked here"), r
    return out


@pytest.mark.parametrize("assignment", per_assignment())
def test_checks_rows_score_what_the_grader_scores_on_the_visible_tests(assignment, checked, graded):
    visible = visible_cells(assignment)
    for student, (report, _) in checked[assignment].items():
        skipped = unjudged(report)
        assert skipped <= prediction_cells(assignment), (student, skipped)
        grader = {gid: v for gid, v in graded[assignment].scores[student].items() if gid in visible - skipped}
        assert rows(report) == grader, (student, [r for r in report.checked if
                                                  (r.points, r.max_points) != grader.get(r.grade_id)])
        for r in report.checked:    # ✓ exactly where the grader gives every point
            assert r.passed == (grader[r.grade_id][0] == grader[r.grade_id][1]), (student, r)
        assert set(report.hidden) == auto_cells(assignment) - visible, student


@pytest.mark.parametrize("assignment", per_assignment())
def test_check_full_gives_the_reference_full_marks_and_takes_what_grading_takes(assignment, checked, graded):
    auto = auto_cells(assignment)
    reference = checked[assignment]["reference"][1]
    assert reference.full and reference.score == reference.max_score > checked[assignment]["reference"][0].max_score
    for student, (_, full) in checked[assignment].items():
        if full is None:
            continue
        grader = {gid: v for gid, v in graded[assignment].scores[student].items() if gid in auto}
        assert rows(full) == grader, (student, [r for r in full.results if
                                                (r.points, r.max_points) != grader.get(r.grade_id)])
        assert not full.hidden, "--full runs every hidden test"
        assert {r.grade_id for r in full.results if r.hidden} == auto - visible_cells(assignment)
        if student.startswith("wrong_"):
            assert full.score < full.max_score, f"{student} got full marks from check --full"


def loops() -> list:
    params = []
    for assignment in ASSIGNMENTS:
        module = importlib.import_module(f"answers.{assignment}")
        for i, answer in enumerate(getattr(module, "LOOPS", [])):
            params.append(pytest.param(assignment, i, answer, id=f"{assignment}-{answer.cell}-{answer.why}"))
    return params


LOOPS = loops()


def test_the_corpus_holds_answers_that_never_return():
    assert len(LOOPS) >= 2


@pytest.fixture(scope="module")
def loops_graded(tmp_path_factory):
    """The looping answers through the course's grader (sandboxed where bubblewrap is) and through
    ``check`` and ``check --full``, all with a time limit of LOOP_LIMIT seconds per cell."""
    by_assignment: dict[str, dict[str, nbformat.NotebookNode]] = {}
    for param in LOOPS:
        assignment, i, answer = param.values
        by_assignment.setdefault(assignment, {})[f"loop_{i:02d}"] = submission(assignment, {answer.cell: answer.source})
    grades = {}
    work = tmp_path_factory.mktemp("loops")
    with SlotPool(1, sandboxed=bwrap_path() is not None) as pool:
        for assignment, subs in by_assignment.items():
            root = scratch_course(work / f"course-{assignment}", assignment)
            for student, nb in subs.items():
                submit(root, assignment, student, nb)
            limits = dataclasses.replace(configured_limits(load_config(root)), cell_timeout=LOOP_LIMIT)
            Grader(root, assignment, jobs=1, pool=pool, limits=limits, log=lambda m: None).run()
            grades[assignment] = read_grades(root, assignment, subs)
    course = learner_course(work / "learner")
    paths = {}
    for assignment, subs in by_assignment.items():
        for student, nb in subs.items():
            paths[assignment, student] = path = course / RELEASE_DIR / assignment / f"{student}.ipynb"
            nbformat.write(nb, path)
    reports = check_all([(p, full) for p in paths.values() for full in (False, True)], timeout=LOOP_LIMIT)
    return grades, {key: (reports[p, False], reports[p, True]) for key, p in paths.items()}


@pytest.mark.parametrize("assignment, index, answer", LOOPS)
def test_an_answer_that_never_returns_is_stopped_and_scored_alike_by_check_and_the_grader(
        assignment, index, answer, loops_graded):
    grades, reports = loops_graded
    student = f"loop_{index:02d}"
    grader = grades[assignment]
    scores = grader.scores[student]
    visible, full = reports[assignment, student]
    auto = auto_cells(assignment)
    shown_here = visible_cells(assignment) - unjudged(visible)
    assert rows(visible) == {gid: v for gid, v in scores.items() if gid in shown_here}
    assert rows(full) == {gid: v for gid, v in scores.items() if gid in auto}
    # the grader stopped a cell at its limit, and check says so, on the row or about the answer cell
    stopped = [c for c in grader.notebooks[student].cells
               if any(o.get("ename") == "CellTimeout" for o in c.get("outputs", []))]
    assert stopped, "the grader stopped no cell"
    shown = " ".join([r.message for r in visible.results] + visible.problems)
    assert f"timed out after {LOOP_LIMIT} s" in shown and answer.message in shown, shown
    for report in (visible, full):
        for r in report.results:
            if "timed out" in r.message:
                assert r.status == "failed" and r.points == 0, r
