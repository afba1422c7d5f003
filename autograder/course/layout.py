"""Where things are in the course: the root, the assignments, the lectures, and the solution
regions of the instructor's notebooks."""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..learner.cells import LECTURE_DIR, SOLUTION_MARKERS, SOURCE_DIR, nearest_folder, notebooks, role  # noqa: F401
from ..learner.editions import ZH_DIR

if TYPE_CHECKING:      # nbformat loads where a notebook is made: `grade` starts its slots first
    import nbformat


def find_root(start: str | os.PathLike | None = None) -> Path:
    """The course root: the nearest folder above ``start`` holding ``nbgrader_config.py`` and ``solutions/``."""
    root = nearest_folder(start, lambda f: (f / "nbgrader_config.py").is_file() and (f / SOURCE_DIR).is_dir())
    if root is None:
        raise FileNotFoundError(f"no course root found above {Path(start or os.getcwd()).resolve()}: "
                                f"expected a folder with nbgrader_config.py and {SOURCE_DIR}/")
    return root


def assignments(root: Path) -> list[str]:
    """Assignment ids: the folders of ``solutions/``, in teaching order (a folder named like an
    edition, ``zh``, is never an assignment: the Chinese edition lives in ``zh/`` of the root)."""
    src = root / SOURCE_DIR
    return sorted(p.name for p in src.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name != ZH_DIR)


def lectures(root: Path) -> list[Path]:
    return notebooks(root / LECTURE_DIR)


def solution_sources(nb: nbformat.NotebookNode) -> dict[str, str]:
    """grade_id -> source of every solution cell, with the ``### BEGIN/END SOLUTION`` lines removed."""
    out = {}
    for cell in nb.cells:
        r = role(cell)
        if r.solution and r.grade_id:
            out[r.grade_id] = SOLUTION_MARKERS.sub("", cell.source)
    return out


def fill_answers(release: nbformat.NotebookNode, answers: dict[str, str]) -> nbformat.NotebookNode:
    """A copy of the released notebook with the solution cells named in ``answers`` filled in."""
    import nbformat

    nb = nbformat.from_dict(release)
    unknown = set(answers) - {role(c).grade_id for c in nb.cells if role(c).solution}
    if unknown:
        raise KeyError(f"no solution cell with grade_id {sorted(unknown)}")
    for cell in nb.cells:
        r = role(cell)
        if r.solution and r.grade_id in answers:
            cell.source = answers[r.grade_id]
    return nb


def region_lines(nb: nbformat.NotebookNode, kinds: tuple[str, ...] = ("SOLUTION", "HIDDEN TESTS"),
                 min_length: int = 12) -> set[str]:
    """Lines that appear only inside ``### BEGIN <kind>`` regions of an instructor's notebook.

    Lines that also appear outside the regions (a repeated setup line) are not secrets; what is
    left must never reach a learner's notebook or feedback.
    """
    inside_lines: set[str] = set()
    outside_lines: set[str] = set()
    for cell in nb.cells:
        inside = False
        for line in cell.source.splitlines():
            if any(f"BEGIN {k}" in line for k in kinds):
                inside = True
            elif any(f"END {k}" in line for k in kinds):
                inside = False
            elif len(line.strip()) > min_length:
                (inside_lines if inside else outside_lines).add(line.strip())
    return inside_lines - outside_lines
