"""Where things are in the course: the root, assignments, notebooks, nbgrader cell roles."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

SOURCE_DIR = "solutions"
RELEASE_DIR = "exercises"
LECTURE_DIR = "course"

# A stderr stream holding a Python warning ("file.py:12: UserWarning: ...").  nbgrader scores any
# stderr output as a failed test; the course drops warnings first (nbgrader_config.py).
WARNING_PATTERN = r"(?m)^.*:\d+: \w*Warning: "

SOLUTION_MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)


def find_root(start: str | os.PathLike | None = None) -> Path:
    """The course root: the nearest folder above ``start`` holding ``nbgrader_config.py`` and ``solutions/``."""
    here = Path(start or os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "nbgrader_config.py").is_file() and (folder / SOURCE_DIR).is_dir():
            return folder
    # Installed (non-editable) package inside a checkout's venv: fall back to the package's parent.
    pkg_parent = Path(__file__).resolve().parent.parent
    if (pkg_parent / "nbgrader_config.py").is_file():
        return pkg_parent
    raise FileNotFoundError(
        f"no course root found above {here}: expected a folder with nbgrader_config.py and {SOURCE_DIR}/"
    )


def assignments(root: Path) -> list[str]:
    """Assignment ids: the folders of ``solutions/``, in teaching order."""
    src = root / SOURCE_DIR
    return sorted(p.name for p in src.iterdir() if p.is_dir() and not p.name.startswith("."))


def notebooks(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.ipynb") if not p.name.startswith("."))


def lectures(root: Path) -> list[Path]:
    return notebooks(root / LECTURE_DIR)


@dataclass(frozen=True)
class CellRole:
    """The nbgrader role of one cell."""

    grade_id: str | None
    solution: bool
    grade: bool
    locked: bool
    points: float

    @property
    def is_test(self) -> bool:
        """An auto-graded test cell (graded code that is not the learner's answer)."""
        return self.grade and not self.solution

    @property
    def is_manual(self) -> bool:
        return self.grade and self.solution


def role(cell: nbformat.NotebookNode) -> CellRole:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return CellRole(
        grade_id=meta.get("grade_id"),
        solution=bool(meta.get("solution", False)),
        grade=bool(meta.get("grade", False)),
        locked=bool(meta.get("locked", False)),
        points=float(meta.get("points", 0) or 0),
    )


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
