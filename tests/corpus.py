"""Helpers for the answer-corpus tests (test_corpus.py) and the plain-nbgrader tests
(test_nbgrader_plain.py).

- The corpus (``tests/answers/<assignment>.py``: every wrong answer, every differently written
  right answer) takes the fast path: the instructor's notebook (hidden tests included, as
  nbgrader restores them) with the answer in its cell, run without a kernel by
  ``tests/inprocess.py`` and scored by nbgrader's own ``IgnorePattern`` and ``determine_grade``.
  Each wrong answer loses points on its own exercise, with its diagnosis, and nothing
  elsewhere; each right answer scores full marks.
- The fast path runs once per test run (``fast_path``) over the corpus and the samples together.
- Plain ``nbgrader autograde`` grades, in one run over every assignment, the reference solution
  (full marks), the blank release (zero, its hidden tests restored and failing) and a sample of
  the corpus (one submission per assignment holding a wrong answer and a right one).  The fast
  path and the course's grader (``autograder.grading``) give that sample the same score in
  every cell, and nbgrader's feedback shows no hidden test.
"""
from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from functools import lru_cache

import nbformat
import pytest

from autograder.course.layout import SOURCE_DIR, assignments
from autograder.grading.bwrap import bwrap_path
from autograder.grading.judged import fixture_files
from autograder.grading.pool import SlotPool
from autograder.grading.runner import Grader
from autograder.learner.cells import WARNING_PATTERN, role
from harness import (ROOT, Answer, Graded, cells_testing, made_once, read_grades, release_notebook,  # noqa: F401
                     source_notebook, submission, submit)

ASSIGNMENTS = assignments(ROOT)


def answers_for(assignment: str) -> tuple[list[Answer], list[Answer]]:
    module = importlib.import_module(f"answers.{assignment}")
    return module.WRONG, module.RIGHT


def student_id(kind: str, index: int, answer: Answer) -> str:
    return f"{kind}_{index:02d}_{answer.cell}".replace("-", "_")


def corpus_submissions(assignment: str) -> dict[str, nbformat.NotebookNode]:
    """The reference, the blank release, and one submission per corpus answer."""
    subs = {"reference": submission(assignment), "blank": submission(assignment, blank=True)}
    wrong, right = answers_for(assignment)
    for kind, items in (("wrong", wrong), ("right", right)):
        for i, a in enumerate(items):
            subs[student_id(kind, i, a)] = submission(assignment, {a.cell: a.source})
    return subs


def sample_submissions(assignment: str) -> dict[str, nbformat.NotebookNode]:
    """The reference, the blank release, and one submission with the first wrong answer of one
    exercise and the first right answer of another (or of the same one, if there is only one)."""
    wrong, right = answers_for(assignment)
    other = next((a for a in right if a.cell != wrong[0].cell), right[0])
    answers = {other.cell: other.source, wrong[0].cell: wrong[0].source}
    return {"reference": submission(assignment), "blank": submission(assignment, blank=True),
            "sample": submission(assignment, answers)}


def graded_notebook(assignment: str, nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """What nbgrader runs for a submission: the instructor's notebook (locked and test cells,
    hidden tests included), with the submission's answer cells."""
    answers = {role(c).grade_id: c.source for c in nb.cells if role(c).solution and role(c).grade_id}
    graded = nbformat.read(source_notebook(assignment), as_version=4)
    for cell in graded.cells:
        if role(cell).solution and role(cell).grade_id in answers:
            cell.source = answers[role(cell).grade_id]
    return graded


def grade_in_process(subs_by_assignment, workdir) -> dict[str, Graded]:
    """The fast path: every notebook run by tests/inprocess.py, scored as nbgrader scores."""
    from nbgrader.preprocessors import IgnorePattern
    from nbgrader.utils import determine_grade
    from traitlets.config import Config

    config = Config()
    config.IgnorePattern.pattern = WARNING_PATTERN
    ignore = IgnorePattern(config=config)
    for assignment, subs in subs_by_assignment.items():
        for student, nb in subs.items():
            nbformat.write(graded_notebook(assignment, nb), workdir / f"{assignment}--{student}.ipynb")
            cwd = workdir / f"{assignment}--{student}.cwd"     # where inprocess.py runs it: the fixtures too
            for fixture in fixture_files(ROOT / SOURCE_DIR / assignment):
                cwd.mkdir(exist_ok=True)
                shutil.copy2(fixture, cwd / fixture.name)
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "inprocess.py"), str(workdir)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out: dict[str, Graded] = {}
    for assignment, subs in subs_by_assignment.items():
        g = out[assignment] = Graded()
        for student in subs:
            path = workdir / f"{assignment}--{student}.out.ipynb"
            if not path.exists():
                continue  # the notebook did not finish: the tests that look for it say so
            nb, _ = ignore.preprocess(nbformat.v4.reads(path.read_text()), {})
            g.notebooks[student] = nb
            g.scores[student] = {}
            for cell in nb.cells:
                if role(cell).grade and not role(cell).solution:
                    score, maximum = determine_grade(cell)
                    g.scores[student][role(cell).grade_id] = (float(score or 0), float(maximum))
    return out


def fast_path() -> dict[str, Graded]:
    """Every assignment's corpus, and its sample (student ``sample``), through the fast path: one
    run for the whole test run, which the corpus, plain-nbgrader and agreement tests all read."""
    import pickle

    def make(folder):
        subs = {a: {**corpus_submissions(a), "sample": sample_submissions(a)["sample"]} for a in ASSIGNMENTS}
        (folder / "graded.pickle").write_bytes(pickle.dumps(grade_in_process(subs, folder)))

    return pickle.loads((made_once("fast-path", make) / "graded.pickle").read_bytes())


def sample_scores(graded: dict[str, Graded], assignment: str) -> dict[str, dict[str, tuple[float, float]]]:
    """The scores of the sample's three students (reference, blank, sample) that were graded."""
    scores = graded[assignment].scores
    return {s: scores[s] for s in sample_submissions(assignment) if s in scores}


def grade_with_the_course_grader(root, subs_by_assignment) -> dict[str, Graded]:
    for assignment, subs in subs_by_assignment.items():
        for student, nb in subs.items():
            submit(root, assignment, student, nb)
    with SlotPool(1, sandboxed=bwrap_path() is not None) as pool:
        for assignment in subs_by_assignment:
            Grader(root, assignment, jobs=1, pool=pool, log=lambda m: None).run()
    return {a: read_grades(root, a, subs) for a, subs in subs_by_assignment.items()}


def manual_cells_ungraded(graded: Graded, assignment: str) -> None:
    """Every cell that is not auto-graded scores 0 of its points, as before any manual grading."""
    auto = auto_cells(assignment)
    for student, cells in graded.scores.items():
        manual = {gid: v for gid, v in cells.items() if gid not in auto}
        assert manual, f"{assignment} has hand-graded cells"
        assert all(score == 0 and maximum > 0 for score, maximum in manual.values()), (student, manual)


@lru_cache(maxsize=None)
def release(assignment: str) -> nbformat.NotebookNode:
    return nbformat.read(release_notebook(assignment), as_version=4)


def auto_cells(assignment: str) -> set[str]:
    return {role(c).grade_id for c in release(assignment).cells if role(c).is_test}


def cases(kind: str) -> list:
    params = []
    for assignment in ASSIGNMENTS:
        wrong, right = answers_for(assignment)
        for i, a in enumerate(wrong if kind == "wrong" else right):
            params.append(pytest.param(assignment, i, a, id=f"{assignment}-{a.cell}-{a.why}"))
    return params


def per_assignment() -> list:
    return [pytest.param(a, id=a) for a in ASSIGNMENTS]


def lost(g: Graded, student: str, cells: set[str]) -> dict:
    return {k: v for k, v in g.scores[student].items() if k in cells and v[0] < v[1]}


