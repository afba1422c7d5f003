"""The course's grader (``python -m autograder grade``) scores the sample of the corpus exactly as
the fast path does in every auto-graded cell, and leaves the hand-graded cells to the instructor.

``tests/test_nbgrader_plain.py`` shows the same of plain ``nbgrader autograde``, so the three
agree cell for cell; the two runs are separate files so that they run side by side.
"""
from __future__ import annotations

import pytest

from corpus import (ASSIGNMENTS, Graded, auto_cells, fast_path, grade_with_the_course_grader, manual_cells_ungraded,
                    per_assignment, sample_scores, sample_submissions)
from harness import scratch_course


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> tuple[dict[str, Graded], dict[str, Graded]]:
    samples = {a: sample_submissions(a) for a in ASSIGNMENTS}
    ours = grade_with_the_course_grader(scratch_course(tmp_path_factory.mktemp("ours")), samples)
    return ours, fast_path()


@pytest.mark.parametrize("assignment", per_assignment())
def test_the_course_grader_agrees_with_the_fast_path_in_every_auto_graded_cell(assignment, graded):
    ours, fast = graded
    auto = auto_cells(assignment)
    scores = {s: {k: v for k, v in cells.items() if k in auto} for s, cells in ours[assignment].scores.items()}
    assert set(scores) == set(sample_submissions(assignment))
    assert scores == sample_scores(fast, assignment)
    assert any(v[0] < v[1] for v in scores["sample"].values()), "the sample's wrong answer loses points"
    assert all(v[0] == v[1] for v in scores["reference"].values())


@pytest.mark.parametrize("assignment", per_assignment())
def test_the_course_grader_leaves_hand_graded_cells_to_the_instructor(assignment, graded):
    manual_cells_ungraded(graded[0][assignment], assignment)
