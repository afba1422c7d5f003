"""Every answer of the corpus of every judged assignment scores the same judged and run next to the
answer in the kernel: the same cells pass, and a failed check says the same thing."""
from __future__ import annotations

import importlib

import pytest
import torch

from autograder.grading.judged import is_judged
from harness import reference_answers
from judge_corpus import JUDGED_ASSIGNMENTS, in_kernel_cells, judged_cells, only_exercise, same_verdicts, source_cells


@pytest.mark.parametrize("assignment", JUDGED_ASSIGNMENTS)
def test_every_test_cell_of_a_judged_assignment_is_judged(assignment):
    tests = [(gid, src) for gid, is_test, src in source_cells(assignment) if is_test]
    assert tests and all(is_judged(src) for _, src in tests), [gid for gid, src in tests if not is_judged(src)]


@pytest.mark.parametrize("assignment", JUDGED_ASSIGNMENTS)
def test_the_judge_scores_every_answer_of_the_corpus_as_the_kernel_does(assignment):
    """Every wrong and right answer of tests/answers/<assignment>.py (and the reference): the same
    cells pass, and a failed check says the same thing, judged or run next to the answer."""
    cells = source_cells(assignment)
    module = importlib.import_module(f"answers.{assignment}")
    submissions = {"reference": {}}
    for kind, items in (("wrong", module.WRONG), ("right", module.RIGHT)):
        for i, a in enumerate(items):
            submissions[f"{kind}_{i}_{a.why}"] = {a.cell: a.source}
    failures = {}
    reference = reference_answers(assignment)
    for name, replace in submissions.items():
        answers = dict(reference) | replace
        only = only_exercise(cells, next(iter(replace), None))   # an answer's own tests; all for the reference
        torch.manual_seed(0)
        judged = judged_cells(only, answers)
        if name.startswith("right"):      # next to the answer they pass: tests/test_corpus.py shows it
            assert all(v is None for v in judged.values()), (name, judged)
            continue
        torch.manual_seed(0)
        bad = same_verdicts(in_kernel_cells(only, answers), judged)
        if bad:
            failures[name] = bad
        if name.startswith("wrong"):
            assert any(v is not None for v in judged.values()), f"{name} lost no point when judged"
        else:
            assert all(v is None for v in judged.values()), (name, judged)
    assert not failures, failures
