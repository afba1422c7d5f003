"""An assignment's answer corpus, ``tests/answers/<assignment>.py``: the wrong answers learners
really write (each must lose points on its own exercise, with its diagnosis) and right answers
written differently from the reference (each must get full marks).

A corpus file holds two lists, ``WRONG`` and ``RIGHT``, of :class:`Answer`::

    from autograder.course.answers import Answer

    WRONG = [Answer("snapshot", "detach without clone", '''
    def snapshot(t):
        return t.detach()
    ''', message="shares memory")]
    RIGHT = [Answer("snapshot", "clone then detach", '''
    def snapshot(t):
        return t.clone().detach()
    ''')]
"""
from __future__ import annotations

import importlib.util
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import nbformat

from ..learner.cells import role

CORPUS_DIR = Path("tests") / "answers"


@dataclass(frozen=True)
class Answer:
    """One learner answer for one solution cell.

    ``message`` (wrong answers only): a piece of text the failing test must print, so the
    diagnosis is checked, not only the lost points.
    ``varies`` (wrong answers only): why the check that fails first may differ from run to run
    (say, an answer that compares the ``id()`` of temporaries depends on which addresses Python
    reuses).  Such an answer still loses the same points every run; only its diagnosis may move.
    """

    cell: str          # grade_id of the solution cell
    why: str           # the mistake (wrong) or the way of writing it (right)
    source: str        # the whole cell, as a learner would type it
    message: str | None = None
    varies: str | None = None


def corpus_file(root: Path, assignment: str) -> Path:
    return root / CORPUS_DIR / f"{assignment}.py"


def load_corpus(path: Path) -> tuple[list[Answer], list[Answer]]:
    """(WRONG, RIGHT) of a corpus file.  The course's own files import ``Answer`` from the tests'
    ``harness``, which is this class; outside the test suite that name is given to them."""
    spec = importlib.util.spec_from_file_location(f"_copy_that_corpus_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    previous = sys.modules.get("harness")
    if getattr(previous, "Answer", None) is not Answer:
        shim = types.ModuleType("harness")
        shim.Answer = Answer
        sys.modules["harness"] = shim
    try:
        spec.loader.exec_module(module)
    finally:
        if previous is None:
            sys.modules.pop("harness", None)
        else:
            sys.modules["harness"] = previous
    wrong, right = getattr(module, "WRONG", []), getattr(module, "RIGHT", [])
    for item in [*wrong, *right]:
        if not isinstance(item, Answer):
            raise TypeError(f"{path}: WRONG and RIGHT hold Answer(...) items, not {type(item).__name__}")
    return list(wrong), list(right)


def cells_testing(nb: nbformat.NotebookNode, solution_id: str) -> set[str]:
    """The auto-graded test cells that belong to one solution cell: ``test_<id>`` and ``test_<id>_*``."""
    pattern = re.compile(rf"^test_{re.escape(solution_id)}(_hidden|_\d+)?$")
    return {role(c).grade_id for c in nb.cells if role(c).is_test and pattern.match(role(c).grade_id or "")}
