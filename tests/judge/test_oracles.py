"""Answers that read the test calling them (its frames, its next instructions): next to the tests
they pass everything; judged, their caller is the agent, and they score like their wrong twin."""
from __future__ import annotations

from harness import reference_answers
from judge_corpus import (A7_ORACLE, A7_TWIN, COPY_TO_ORACLE, COPY_TO_TWIN, SNAPSHOT_ORACLE, SNAPSHOT_OPTIMIZER_ORACLE,
                          SNAPSHOT_OPTIMIZER_TWIN, in_kernel_cells, judged_cells, only_exercise, source_cells)

def _like_its_twin(assignment: str, exercise: str, oracle: str, twin: str) -> None:
    cells = only_exercise(source_cells(assignment), exercise)
    answers = reference_answers(assignment)
    assert all(v is None for v in in_kernel_cells(cells, answers | {exercise: oracle}).values())
    judged_oracle = judged_cells(cells, answers | {exercise: oracle})
    judged_twin = judged_cells(cells, answers | {exercise: twin})
    assert judged_oracle == judged_twin, (judged_oracle, judged_twin)
    assert judged_oracle[f"test_{exercise}"] and judged_oracle[f"test_{exercise}_hidden"], judged_oracle


def test_an_oracle_that_reads_its_caller_scores_like_its_wrong_twin_when_judged():
    _like_its_twin("a8_devices", "copy_to", COPY_TO_ORACLE, COPY_TO_TWIN)


def test_an_oracle_of_assignment_7_scores_like_its_wrong_twin_when_judged():
    _like_its_twin("a7_graphs", "reaches", A7_ORACLE, A7_TWIN)


def test_an_oracle_of_assignment_6b_scores_like_its_wrong_twin_when_judged():
    _like_its_twin("a6b_boundaries", "snapshot_optimizer", SNAPSHOT_OPTIMIZER_ORACLE, SNAPSHOT_OPTIMIZER_TWIN)


def test_an_oracle_of_assignment_3_scores_like_its_wrong_twin_when_judged():
    _like_its_twin("a3_detach", "snapshot", SNAPSHOT_ORACLE, "def snapshot(t):\n    return t.detach()\n")
