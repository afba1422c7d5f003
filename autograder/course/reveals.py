"""How a lecture keeps the answer to a prediction hidden until the reader asks for it.

The convention, in the notebook's own metadata (what JupyterLab honours and the site reads):

- the code cell whose stored output answers a "Predict" question is collapsed
  (``metadata.jupyter.outputs_hidden``);
- the markdown cells that explain that answer, and so give it away, follow it directly, carry the
  tag ``answer`` and are collapsed too (``metadata.jupyter.source_hidden``);
- a visible markdown cell that directly follows a collapsed output was read and gives nothing away:
  it carries the tag ``no-spoiler``.

:func:`spoiler_problems` states the rule; ``tests/test_lectures.py`` applies it to every lecture.
:func:`answer_cells` groups each collapsed output with its explanation, for the site's reveal.
"""
from __future__ import annotations

from typing import Mapping

ANSWER_TAG = "answer"
NO_SPOILER_TAG = "no-spoiler"


def tags(cell: Mapping) -> set[str]:
    """The cell's tags."""
    return set(cell.get("metadata", {}).get("tags", []) or [])


def outputs_collapsed(cell: Mapping) -> bool:
    """A code cell whose outputs are stored collapsed (JupyterLab's ``outputs_hidden``, or the
    older ``collapsed``)."""
    meta = cell.get("metadata", {})
    return cell.get("cell_type") == "code" and bool(meta.get("jupyter", {}).get("outputs_hidden")
                                                     or meta.get("collapsed"))


def source_hidden(cell: Mapping) -> bool:
    """A cell whose source is stored collapsed (JupyterLab's ``source_hidden``)."""
    return bool(cell.get("metadata", {}).get("jupyter", {}).get("source_hidden"))


def is_answer(cell: Mapping) -> bool:
    """A cell tagged as the explanation of a collapsed answer."""
    return ANSWER_TAG in tags(cell)


def spoiler_problems(nb: Mapping) -> list[str]:
    """Every place where the notebook could show an answer before the reader asks for it, one
    sentence each; empty when it follows the convention.

    The rule: the cell after a collapsed output is a code cell, an ``answer`` cell or a
    ``no-spoiler`` cell; every ``answer`` cell is source-hidden and follows a collapsed output or
    another ``answer`` cell."""
    cells = nb.get("cells", [])
    problems = []
    for i, cell in enumerate(cells):
        before = cells[i - 1] if i > 0 else None
        if before is not None and outputs_collapsed(before) and cell.get("cell_type") != "code" \
                and not is_answer(cell) and NO_SPOILER_TAG not in tags(cell):
            problems.append(f"cell {i} is in view right after the collapsed answer of cell {i - 1}: tag it "
                            f"'{ANSWER_TAG}' and hide its source if it explains the answer, or tag it "
                            f"'{NO_SPOILER_TAG}' once read and found to give nothing away")
        if is_answer(cell):
            if not source_hidden(cell):
                problems.append(f"cell {i} is an '{ANSWER_TAG}' cell shown in full: set its metadata "
                                '"jupyter": {"source_hidden": true}')
            if before is None or not (outputs_collapsed(before) or is_answer(before)):
                problems.append(f"cell {i} is an '{ANSWER_TAG}' cell that follows no collapsed output: "
                                "put it right after the cell whose answer it explains")
    return problems


def answer_cells(nb: Mapping) -> dict[int, list[int]]:
    """Each collapsed code cell -> the markdown ``answer`` cells right after it, in order (the
    explanation that goes behind the same reveal as its output)."""
    cells = nb.get("cells", [])
    groups: dict[int, list[int]] = {}
    for i, cell in enumerate(cells):
        if not outputs_collapsed(cell):
            continue
        group = groups[i] = []
        j = i + 1
        while j < len(cells) and is_answer(cells[j]) and cells[j].get("cell_type") == "markdown":
            group.append(j)
            j += 1
    return groups
