"""Plain ``nbgrader autograde``, in one run over every assignment, where it proves something of
nbgrader's own: the reference solution scores full marks, the blank release zero (its hidden tests
restored and failing), and a sample of the corpus gets the same score in every auto-graded cell
from plain nbgrader and the corpus's fast path (``tests/test_grader_agreement.py`` shows the same
of the course's grader, so all three agree).  nbgrader's feedback shows no hidden test.
"""
from __future__ import annotations

import html

import nbformat
import pytest

from autograder.course.layout import region_lines
from corpus import (ASSIGNMENTS, Graded, auto_cells, fast_path, lost, manual_cells_ungraded, per_assignment,
                    sample_scores, sample_submissions, source_notebook)
from harness import plain_autograde, read_grades, scratch_course, submit


@pytest.fixture(scope="session")
def plain(tmp_path_factory) -> tuple[dict[str, Graded], None, dict[str, Graded], str]:
    """The sample graded by plain nbgrader (with feedback) and by the fast path."""
    samples = {a: sample_submissions(a) for a in ASSIGNMENTS}
    root = scratch_course(tmp_path_factory.mktemp("plain"))
    for assignment, subs in samples.items():
        for student, nb in subs.items():
            submit(root, assignment, student, nb)
    log = plain_autograde(root, feedback=True)
    by_nbgrader = {a: read_grades(root, a, subs) for a, subs in samples.items()}
    return by_nbgrader, None, fast_path(), log


# --- plain nbgrader ------------------------------------------------------------------------------

@pytest.mark.parametrize("assignment", per_assignment())
def test_reference_solution_scores_full_marks_under_plain_nbgrader(assignment, plain):
    g = plain[0][assignment]
    assert "reference" in g.scores, plain[3][-3000:]
    score, maximum = g.total("reference", auto_cells(assignment))
    assert maximum > 0
    assert score == maximum, lost(g, "reference", auto_cells(assignment))


@pytest.mark.parametrize("assignment", per_assignment())
def test_blank_release_scores_zero_under_plain_nbgrader(assignment, plain):
    g = plain[0][assignment]
    assert "blank" in g.scores, plain[3][-3000:]
    score, maximum = g.total("blank", auto_cells(assignment))
    assert maximum > 0 and score == 0, g.scores["blank"]


@pytest.mark.parametrize("assignment", per_assignment())
def test_hidden_tests_run_at_grading(assignment, plain):
    """Hidden test cells are restored from the gradebook: the blank release fails them too."""
    g = plain[0][assignment]
    hidden = {gid for gid in auto_cells(assignment) if gid.endswith("_hidden")}
    assert hidden, "every assignment has hidden tests"
    for gid in hidden:
        assert "NotImplementedError" in g.outputs_of("blank", gid), gid


@pytest.mark.parametrize("assignment", per_assignment())
def test_hand_graded_cells_wait_for_the_instructor_under_plain_nbgrader(assignment, plain):
    by_nbgrader, _, _, log = plain
    assert set(by_nbgrader[assignment].scores) == set(sample_submissions(assignment)), log[-3000:]
    manual_cells_ungraded(by_nbgrader[assignment], assignment)


@pytest.mark.parametrize("assignment", per_assignment())
def test_the_fast_path_agrees_with_plain_nbgrader_in_every_auto_graded_cell(assignment, plain):
    by_nbgrader, _, fast, log = plain
    auto = auto_cells(assignment)
    expected = {s: {k: v for k, v in cells.items() if k in auto} for s, cells in by_nbgrader[assignment].scores.items()}
    assert set(expected) == set(sample_submissions(assignment)), log[-3000:]
    assert sample_scores(fast, assignment) == expected
    sample = expected["sample"]
    assert any(v[0] < v[1] for v in sample.values()), "the sample's wrong answer loses points"


def hidden_test_lines(assignment: str) -> list[str]:
    """The substantial lines that exist only in hidden-test regions of the instructor's notebook."""
    nb = nbformat.read(source_notebook(assignment), as_version=4)
    return sorted(region_lines(nb, kinds=("HIDDEN TESTS",), min_length=25))


@pytest.mark.parametrize("assignment", per_assignment())
def test_feedback_shows_scores_but_no_hidden_tests(assignment, plain):
    g = plain[0][assignment]
    lines = hidden_test_lines(assignment)
    assert lines, "the instructor's notebook has hidden tests to look for"
    for student in sample_submissions(assignment):
        assert student in g.feedback, plain[3][-3000:]
        page = html.unescape(g.feedback[student])
        assert "BEGIN HIDDEN TESTS" not in page
        leaked = [line for line in lines if line in page]
        assert not leaked, f"feedback for {student} shows hidden test lines: {leaked[:3]}"
        score, maximum = g.total(student)
        header = f"{assignment} (Score: {round(score, 2):.1f} / {round(maximum, 2):.1f})"
        assert header in page, f"feedback for {student} does not show {header!r}"
    assert "NotImplementedError" in html.unescape(g.feedback["blank"]), "the diagnosis stays in the feedback"


