"""Every assignment, graded by the real ``nbgrader autograde``.

For each assignment one scratch course grades, in one nbgrader run: the reference solution
(full marks), the blank release (zero), every wrong answer in ``tests/answers/<assignment>.py``
(each loses points on its own exercise) and every differently written right answer (full marks).
"""
from __future__ import annotations

import html
import importlib
from functools import lru_cache

import nbformat
import pytest

from autograder.learner.cells import role
from autograder.course.layout import assignments, region_lines
from harness import (ROOT, Answer, Graded, autograde, cells_testing, release_notebook, source_notebook,
                     submission)

ASSIGNMENTS = assignments(ROOT)


def answers_for(assignment: str) -> tuple[list[Answer], list[Answer]]:
    module = importlib.import_module(f"answers.{assignment}")
    return module.WRONG, module.RIGHT


def student_id(kind: str, index: int, answer: Answer) -> str:
    return f"{kind}_{index:02d}_{answer.cell}".replace("-", "_")


_cache: dict[str, Graded] = {}


def graded(assignment: str, tmp_path_factory: pytest.TempPathFactory) -> Graded:
    if assignment not in _cache:
        wrong, right = answers_for(assignment)
        subs = {"reference": submission(assignment), "blank": submission(assignment, blank=True)}
        for kind, items in (("wrong", wrong), ("right", right)):
            for i, a in enumerate(items):
                subs[student_id(kind, i, a)] = submission(assignment, {a.cell: a.source})
        _cache[assignment] = autograde(assignment, subs, tmp_path_factory.mktemp(f"grade-{assignment}"),
                                       feedback_for=("blank", "reference"))
    return _cache[assignment]


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
            params.append(pytest.param(assignment, i, a, id=f"{assignment}-{a.cell}-{a.why}",
                                       marks=pytest.mark.xdist_group(assignment)))
    return params


def per_assignment() -> list:
    return [pytest.param(a, id=a, marks=pytest.mark.xdist_group(a)) for a in ASSIGNMENTS]


@pytest.mark.parametrize("assignment", per_assignment())
def test_reference_solution_scores_full_marks(assignment, tmp_path_factory):
    g = graded(assignment, tmp_path_factory)
    assert "reference" in g.scores, g.log[-3000:]
    score, maximum = g.total("reference", auto_cells(assignment))
    assert maximum > 0
    assert score == maximum, {k: v for k, v in g.scores["reference"].items() if v[0] < v[1]}


@pytest.mark.parametrize("assignment", per_assignment())
def test_blank_release_scores_zero(assignment, tmp_path_factory):
    g = graded(assignment, tmp_path_factory)
    assert "blank" in g.scores, g.log[-3000:]
    score, maximum = g.total("blank", auto_cells(assignment))
    assert maximum > 0 and score == 0, g.scores["blank"]


@pytest.mark.parametrize("assignment", per_assignment())
def test_hidden_tests_run_at_grading(assignment, tmp_path_factory):
    """Hidden test cells are restored from the gradebook: the blank release fails them too."""
    g = graded(assignment, tmp_path_factory)
    hidden = {gid for gid in auto_cells(assignment) if gid.endswith("_hidden")}
    assert hidden, "every assignment has hidden tests"
    for gid in hidden:
        assert "NotImplementedError" in g.outputs_of("blank", gid), gid


def hidden_test_lines(assignment: str) -> list[str]:
    """The substantial lines that exist only in hidden-test regions of the instructor's notebook."""
    nb = nbformat.read(source_notebook(assignment), as_version=4)
    return sorted(region_lines(nb, kinds=("HIDDEN TESTS",), min_length=25))


@pytest.mark.parametrize("assignment", per_assignment())
def test_feedback_shows_scores_but_no_hidden_tests(assignment, tmp_path_factory):
    g = graded(assignment, tmp_path_factory)
    for student in ("blank", "reference"):
        assert student in g.feedback, g.log[-3000:]
        page = html.unescape(g.feedback[student])
        assert "BEGIN HIDDEN TESTS" not in page
        leaked = [line for line in hidden_test_lines(assignment) if line in page]
        assert not leaked, f"feedback for {student} shows hidden test lines: {leaked[:3]}"
    assert "NotImplementedError" in html.unescape(g.feedback["blank"]), "the diagnosis stays in the feedback"


@pytest.mark.parametrize("assignment", per_assignment())
def test_every_exercise_has_two_wrong_answers_and_a_right_one(assignment):
    wrong, right = answers_for(assignment)
    solutions = {role(c).grade_id for c in release(assignment).cells
                 if role(c).solution and not role(c).grade}
    for cell in solutions:
        assert sum(a.cell == cell for a in wrong) >= 2, f"{cell}: fewer than two wrong answers"
        assert sum(a.cell == cell for a in right) >= 1, f"{cell}: no alternative right answer"
        assert cells_testing(release(assignment), cell), f"{cell}: no test cells named test_{cell}"


@pytest.mark.parametrize("assignment, index, answer", cases("wrong"))
def test_wrong_answer_loses_points(assignment, index, answer, tmp_path_factory):
    g = graded(assignment, tmp_path_factory)
    student = student_id("wrong", index, answer)
    assert student in g.scores, g.log[-3000:]
    own = cells_testing(release(assignment), answer.cell)
    score, maximum = g.total(student, own)
    assert score < maximum, f"{answer.why!r} got full marks on {sorted(own)}"
    if answer.message:
        failing = [gid for gid in own if g.scores[student][gid][0] < g.scores[student][gid][1]]
        shown = "\n".join(g.outputs_of(student, gid) for gid in failing)
        assert answer.message in shown, f"the failure does not say {answer.message!r}:\n{shown}"
    others = auto_cells(assignment) - own
    assert g.total(student, others) == g.total("reference", others), "a wrong answer changed other exercises' scores"


@pytest.mark.parametrize("assignment, index, answer", cases("right"))
def test_right_answer_gets_full_marks(assignment, index, answer, tmp_path_factory):
    g = graded(assignment, tmp_path_factory)
    student = student_id("right", index, answer)
    assert student in g.scores, g.log[-3000:]
    score, maximum = g.total(student, auto_cells(assignment))
    lost = {k: v for k, v in g.scores[student].items() if k in auto_cells(assignment) and v[0] < v[1]}
    assert score == maximum, f"{answer.why!r} lost points: {lost}\n" + "\n".join(
        g.outputs_of(student, k) for k in lost)
