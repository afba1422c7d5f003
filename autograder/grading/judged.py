"""Which hidden tests are judged outside the kernel: the gradebook's cells marked for it.

Kept apart from ``judge.py`` so that finding out costs no ``import torch``: the grader loads
torch (and the judge) only for a notebook that has judged tests.
"""
from __future__ import annotations

MARKER = "# graded outside your kernel"


def judged_sources(db_url: str, assignment: str, notebook: str) -> dict[str, str]:
    """grade_id -> source of every judged hidden test of ``notebook``, from the gradebook: the
    instructor's cells as ``generate_assignment`` saved them, never a submission's."""
    from nbgrader.api import Gradebook, MissingEntry

    try:
        with Gradebook(db_url) as gb:
            nb = gb.find_notebook(notebook, assignment)
            graded = {c.name for c in nb.grade_cells}
            return {c.name: c.source for c in nb.source_cells if c.name in graded and is_judged(c.source)}
    except MissingEntry:
        return {}
    except Exception:   # no readable gradebook: nothing is judged, the tests run in the kernel as before
        return {}


def is_judged(source: str) -> bool:
    """A test cell that the judge runs: its source, as the gradebook holds it, has the marker line."""
    return any(line.strip() == MARKER for line in source.splitlines())
