"""What the learner's tools and the grader both read from a course notebook: the nbgrader role
of each cell, the warning filter and where the exercises are."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from ..kernel.i18n import N_

RELEASE_DIR = "exercises"      # what learners get (nbgrader's release folder)
SOURCE_DIR = "solutions"       # the instructor's notebooks (nbgrader's source folder), in a clone of the course
LECTURE_DIR = "course"         # the lectures
# a test cell's first lines may say where it runs (grading/judged.py applies the rule)
JUDGED_MARKER = "# graded outside your kernel"    # optional: a word to learners, the default anyway
IN_KERNEL_MARKER = "# runs in your kernel"        # the opt-out, for a visible test

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


def find_notebook(given: str | None, cwd: Path | None = None) -> tuple[Path, str | None]:
    """The notebook ``check`` was asked for, and a note when it was found elsewhere than typed.

    The path may be relative to the current folder, or to the course folder above it (the command
    the notebooks print, typed inside ``exercises/a1_views``); a folder stands for its one notebook;
    nothing at all, for the one notebook here.  Raises ``FileNotFoundError`` saying what to type."""
    here = Path(cwd or Path.cwd()).resolve()

    def only_notebook(folder: Path) -> Path | None:
        found = notebooks(folder)
        return found[0] if len(found) == 1 else None

    if given is None:
        found = only_notebook(here)
        if found is None:
            raise FileNotFoundError(N_(f"name the notebook to check, e.g. copy-that check {RELEASE_DIR}/a1_views/a1_views.ipynb "
                                       "(from the course folder)"))
        return found, None
    path = Path(given)
    target = path if path.is_absolute() else here / path
    if target.is_file():
        return target, None
    if target.is_dir() and only_notebook(target) is not None:
        return only_notebook(target), None
    root = nearest_folder(here, lambda f: (f / RELEASE_DIR).is_dir())
    if root is not None and not path.is_absolute() and (root / path).is_file():
        return root / path, N_(f"checking {path} of the course folder {root}")
    if root is not None and (root / RELEASE_DIR / path.stem / path.name).is_file():
        found = root / RELEASE_DIR / path.stem / path.name
        raise FileNotFoundError(N_(f"no such notebook: {given}: it is {found}"))
    if root is not None:
        raise FileNotFoundError(N_(f"no such notebook: {given}: run it from the course folder ({root}), or give the path from here"))
    raise FileNotFoundError(N_(f"no such notebook: {given}"))
