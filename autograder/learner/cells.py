"""What the learner's tools and the grader both read from a course notebook: the nbgrader role
of each cell, the warning filter and where the exercises are."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

RELEASE_DIR = "exercises"

# A stderr stream holding a Python warning ("file.py:12: UserWarning: ...").  nbgrader scores any
# stderr output as a failed test; the course drops warnings first (nbgrader_config.py).
WARNING_PATTERN = r"(?m)^.*:\d+: \w*Warning: "

SOLUTION_MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)


def nearest_folder(start: str | Path | None, holds: Callable[[Path], bool]) -> Path | None:
    """The first of ``start`` and its parents for which ``holds(folder)`` is true (None if none is)."""
    here = Path(start or Path.cwd()).resolve()
    return next((f for f in (here, *here.parents) if holds(f)), None)


def notebooks(folder: Path) -> list[Path]:
    """The notebooks of one folder, hidden files left out, in name order."""
    return sorted(p for p in folder.glob("*.ipynb") if not p.name.startswith("."))


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


def role(cell: Mapping) -> CellRole:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return CellRole(
        grade_id=meta.get("grade_id"),
        solution=bool(meta.get("solution", False)),
        grade=bool(meta.get("grade", False)),
        locked=bool(meta.get("locked", False)),
        points=float(meta.get("points", 0) or 0),
    )
