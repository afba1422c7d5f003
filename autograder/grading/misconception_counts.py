"""Per misconception of the course's list, how many students' autograded notebooks hit it.

A failing check names its misconception in its message (``... [M-detach-copies: course/...]``,
see ``autograder.kernel.misconceptions``); this reads those names back from the error outputs of
the auto-graded test cells, hidden tests included, and counts each student once per id.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

import nbformat

from ..kernel.misconceptions import BY_ID, ids_in

Notebook = nbformat.NotebookNode | str | Path


def _is_test(cell: nbformat.NotebookNode) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution") and cell.get("cell_type") == "code"


def misconceptions_in(nb: Notebook) -> set[str]:
    """The misconceptions named by the failing test cells of one executed notebook."""
    if not isinstance(nb, nbformat.NotebookNode):
        nb = nbformat.read(str(nb), as_version=4)
    found: set[str] = set()
    for cell in nb.cells:
        if not _is_test(cell):
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                found.update(ids_in(str(out.get("evalue", ""))))
    return found


def misconception_counts(notebooks: Iterable[Notebook] | Mapping[str, Notebook]) -> dict[str, int]:
    """How many of the notebooks (one per student) hit each misconception, most hit first.

    Accepts notebooks (nbformat nodes or paths), or a mapping student -> notebook; ids that no
    notebook hits are left out (``BY_ID`` lists them all)."""
    items = notebooks.values() if isinstance(notebooks, Mapping) else notebooks
    counts: Counter[str] = Counter()
    for nb in items:
        counts.update(misconceptions_in(nb))
    return {mid: n for mid, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if mid in BY_ID}
