"""What a self-learner needs to finish an assignment without an instructor: the hidden tests, the
way on, and the model answers.

In a clone of the course repository the instructor's notebooks are in ``solutions/``, beside
``exercises/``: ``check --full`` runs the learner's answers with the instructor's test cells, hidden
tests included, and ``copy-that answers`` shows the model answers (after asking).  A class handout
has no ``solutions/``: there the instructor's grading runs the hidden tests.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .cells import LECTURE_DIR, RELEASE_DIR, SOLUTION_MARKERS, SOURCE_DIR, nearest_folder, notebooks, role


def _only_comments(source: str) -> bool:
    return all(not line.strip() or line.lstrip().startswith("#") for line in source.splitlines())


HIDDEN_KEY = "copy_that_hidden"   # as selfcheck reads it


def course_root(notebook: Path) -> Path | None:
    """The course folder above an exercise notebook (the one holding ``exercises/``), if any."""
    return nearest_folder(notebook.resolve().parent, lambda f: (f / RELEASE_DIR).is_dir())


def source_notebook(notebook: Path) -> Path | None:
    """The instructor's notebook of an exercise notebook: ``solutions/<a>/<name>`` of its course
    (or the one notebook there), or None (a class handout, or a notebook outside ``exercises/<a>/``)."""
    root = course_root(notebook)
    if root is None:
        return None
    folder = root / SOURCE_DIR / notebook.resolve().parent.name
    if (folder / notebook.name).is_file():
        return folder / notebook.name
    found = notebooks(folder) if folder.is_dir() else []
    return found[0] if len(found) == 1 else None   # the learner's copy was renamed


def with_instructor_tests(learner: nbformat.NotebookNode, source: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The learner's notebook as the grader runs it: every test and locked cell as the instructor
    wrote it (hidden tests included), the learner's answers and their own cells as they are; a
    test cell the learner deleted is put back where the instructor's notebook has it."""
    nb = nbformat.from_dict(learner)
    theirs = {role(c).grade_id: c for c in source.cells if role(c).grade_id}
    have = set()
    for cell in nb.cells:
        gid = role(cell).grade_id
        mine = theirs.get(gid)
        if mine is not None and (role(mine).is_test or (role(mine).locked and not role(mine).solution)):
            if role(mine).is_test and _only_comments(cell.source) and not _only_comments(mine.source):
                cell.metadata[HIDDEN_KEY] = True      # the learner's copy holds these tests as comments
            cell.source = mine.source
            cell.metadata["nbgrader"] = dict(mine.metadata["nbgrader"])
        have.add(gid)
    order = [role(c).grade_id for c in source.cells]
    for i, cell in enumerate(source.cells):
        gid = role(cell).grade_id
        if gid and role(cell).is_test and gid not in have:
            before = next((g for g in reversed(order[:i]) if g in have), None)
            at = next((j + 1 for j, c in enumerate(nb.cells) if role(c).grade_id == before), len(nb.cells))
            restored = nbformat.from_dict(cell)
            restored.metadata[HIDDEN_KEY] = "BEGIN HIDDEN TESTS" in cell.source
            nb.cells.insert(at, restored)
            have.add(gid)
    return nb


def _number(name: str) -> tuple[int, str]:
    """``a6b_boundaries`` -> (6, "b"); ``06b_boundaries`` -> (6, "b"); (0, "") for anything else."""
    m = re.match(r"^a?(\d+)([a-z]?)_", name)
    return (int(m.group(1)), m.group(2)) if m else (0, "")


@dataclass
class NextSteps:
    """Where to go after an assignment: the next lecture and assignment, and what else is left to read."""

    lecture: Path | None
    assignment: Path | None
    other_lectures: list[Path]


def next_steps(notebook: Path) -> NextSteps | None:
    """The lecture and assignment after the one ``notebook`` belongs to (None outside a course)."""
    root = course_root(notebook)
    if root is None:
        return None
    folders = sorted((p for p in (root / RELEASE_DIR).iterdir() if p.is_dir() and notebooks(p)),
                     key=lambda p: (_number(p.name), p.name))
    lectures = notebooks(root / LECTURE_DIR) if (root / LECTURE_DIR).is_dir() else []
    here = notebook.resolve().parent.name
    names = [p.name for p in folders]
    after = folders[names.index(here) + 1] if here in names and names.index(here) + 1 < len(folders) else None
    if after is None:
        mine = _number(here)
        rest = [p for p in lectures if _number(p.name) > mine]
        return NextSteps(None, None, rest)
    lecture = next((p for p in lectures if _number(p.name) == _number(after.name)), None)
    return NextSteps(lecture, notebooks(after)[0], [])


@dataclass
class ModelAnswer:
    grade_id: str
    kind: str          # "code" (a function, the prediction letters) or "written" (a hand-graded answer)
    text: str


def model_answers(source: nbformat.NotebookNode) -> list[ModelAnswer]:
    """The instructor's answers of an assignment, in order: each solution cell without its
    ``### BEGIN/END SOLUTION`` lines."""
    out = []
    for cell in source.cells:
        r = role(cell)
        if r.solution and r.grade_id:
            text = SOLUTION_MARKERS.sub("", cell.source).strip()
            out.append(ModelAnswer(r.grade_id, "code" if cell.cell_type == "code" else "written", text))
    return out
