"""The answer corpus through the fast path (see corpus.py): each wrong answer loses points on its
own exercise, with its diagnosis, and nowhere else; each right answer scores full marks."""
from __future__ import annotations


import pytest

from corpus import (Graded, answers_for, auto_cells, cases, cells_testing, fast_path, lost,
                    per_assignment, release, student_id)
from autograder.learner.cells import role


@pytest.fixture(scope="session")
def corpus() -> dict[str, Graded]:
    """Every corpus answer of every assignment, through the fast path."""
    return fast_path()


# --- the corpus, through the course's grader --------------------------------------------------------

@pytest.mark.parametrize("assignment", per_assignment())
def test_every_exercise_has_two_wrong_answers_and_a_right_one(assignment):
    wrong, right = answers_for(assignment)
    solutions = {role(c).grade_id for c in release(assignment).cells
                 if role(c).solution and not role(c).grade}
    for cell in solutions:
        assert sum(a.cell == cell for a in wrong) >= 2, f"{cell}: fewer than two wrong answers"
        assert sum(a.cell == cell for a in right) >= 1, f"{cell}: no alternative right answer"
        assert cells_testing(release(assignment), cell), f"{cell}: no test cells named test_{cell}"


@pytest.mark.parametrize("assignment", per_assignment())
def test_reference_full_and_blank_zero_in_the_corpus_run(assignment, corpus):
    g, cells = corpus[assignment], auto_cells(assignment)
    assert g.total("reference", cells)[0] == g.total("reference", cells)[1] > 0, lost(g, "reference", cells)
    assert g.total("blank", cells)[0] == 0


@pytest.mark.parametrize("assignment, index, answer", cases("wrong"))
def test_wrong_answer_loses_points(assignment, index, answer, corpus):
    g = corpus[assignment]
    student = student_id("wrong", index, answer)
    assert student in g.scores, f"{student} was not graded"
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
def test_right_answer_gets_full_marks(assignment, index, answer, corpus):
    g = corpus[assignment]
    student = student_id("right", index, answer)
    assert student in g.scores, f"{student} was not graded"
    score, maximum = g.total(student, auto_cells(assignment))
    missed = lost(g, student, auto_cells(assignment))
    assert score == maximum, f"{answer.why!r} lost points: {missed}\n" + "\n".join(
        g.outputs_of(student, k) for k in missed)
