"""The gradebook follows the source folder: after an edit of ``solutions/`` (and ``build``), ``grade``
grades with the new tests.

nbgrader keeps an assignment's cells in the gradebook (points, the locked and test cells' sources,
hidden tests included) from ``generate_assignment``, and grades with those.  Run again with
``--force``, it updates points and sources in place, hand grades kept; but once submissions exist
it refuses to add or remove a cell or a notebook ("Cannot add or remove cells ... because there
are submissions associated with it"), so a new exercise could only reach the gradebook by
deleting every submission.

Here: :func:`from_source` derives the cells nbgrader would save from the source notebooks (its own
preprocessors up to ``SaveCells``, in process), :func:`compare` says what differs from the
gradebook, :func:`make_room` does what nbgrader refuses (removes the cells and notebooks that are
gone with their grades, adds the new ones), then ``generate_assignment --force`` saves the rest
as usual, and :func:`complete_submissions` gives existing submissions the grade and comment rows
of the new cells (as ``Gradebook.add_submission`` makes them for a new one).  Hand grades of the
cells that remain are kept; those of a removed cell go with it.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from traitlets.config import Config

from ..learner.cells import notebooks

KINDS = ("grade", "solution", "task", "source")


@dataclass
class Cells:
    """What nbgrader saves of one notebook, by kind and cell name."""

    grade: dict[str, tuple] = field(default_factory=dict)      # name -> (max_score, cell_type)
    solution: dict[str, tuple] = field(default_factory=dict)   # name -> ()
    task: dict[str, tuple] = field(default_factory=dict)       # name -> (max_score, cell_type)
    source: dict[str, tuple] = field(default_factory=dict)     # name -> (cell_type, locked, source, checksum)


@dataclass
class Changes:
    """How the gradebook's assignment differs from its source folder."""

    added_notebooks: list[str] = field(default_factory=list)
    removed_notebooks: list[str] = field(default_factory=list)
    added: list[tuple[str, str, str]] = field(default_factory=list)     # (notebook, kind, cell)
    removed: list[tuple[str, str, str]] = field(default_factory=list)
    changed: list[tuple[str, str]] = field(default_factory=list)        # (notebook, cell): points or source

    @property
    def none(self) -> bool:
        return not (self.added_notebooks or self.removed_notebooks or self.added or self.removed or self.changed)

    def describe(self) -> str:
        def cells(items) -> str:
            names = sorted({name for *_, name in items})
            return f"{len(names)} cell{'s' if len(names) != 1 else ''} ({', '.join(names)})"

        parts = []
        if self.added_notebooks:
            parts.append(f"notebooks added: {', '.join(self.added_notebooks)}")
        if self.removed_notebooks:
            parts.append(f"notebooks removed: {', '.join(self.removed_notebooks)}")
        if self.added:
            parts.append(f"{cells(self.added)} added")
        if self.removed:
            parts.append(f"{cells(self.removed)} removed")
        if self.changed:
            parts.append(f"{cells(self.changed)} changed")
        return "; ".join(parts)


def generate_steps(config: Config) -> list[type]:
    """nbgrader's ``GenerateAssignment`` preprocessors, as configured, before ``SaveCells``."""
    from nbgrader.converters import GenerateAssignment
    from nbgrader.preprocessors import SaveCells
    from traitlets.utils.importstring import import_item

    configured = config.GenerateAssignment.get("preprocessors") if "GenerateAssignment" in config else None
    classes = configured if configured is not None else GenerateAssignment.class_traits()["preprocessors"].default()
    steps = []
    for cls in classes:
        cls = import_item(cls) if isinstance(cls, str) else cls
        if issubclass(cls, SaveCells):
            return steps
        steps.append(cls)
    return steps


def from_source(folder: Path, assignment: str, config: Config) -> dict[str, Cells]:
    """notebook name -> the cells ``nbgrader generate_assignment`` would save from ``folder``."""
    from nbgrader import utils

    steps = generate_steps(config)
    out = {}
    for path in notebooks(folder):
        nb = nbformat.read(path, as_version=4)
        resources = {"unique_key": path.stem, "output_files_dir": f"{path.stem}_files",
                     "metadata": {"name": path.stem, "path": str(folder)},
                     "nbgrader": {"student": ".", "assignment": assignment, "notebook": path.stem, "db_url": ""}}
        for cls in steps:
            nb, resources = cls(config=config)(nb, resources)
        cells = out[path.stem] = Cells()
        for cell in nb.cells:      # SaveCells.preprocess_cell's rules
            name = cell.metadata.get("nbgrader", {}).get("grade_id")
            if utils.is_grade(cell):
                cells.grade[name] = (float(cell.metadata.nbgrader["points"]), cell.cell_type)
            if utils.is_solution(cell):
                cells.solution[name] = ()
            if utils.is_task(cell):
                cells.task[name] = (float(cell.metadata.nbgrader["points"]), cell.cell_type)
            if utils.is_grade(cell) or utils.is_solution(cell) or utils.is_locked(cell) or utils.is_task(cell):
                cells.source[name] = (cell.cell_type, bool(utils.is_locked(cell)), cell.source,
                                      cell.metadata.nbgrader.get("checksum"))
    return out


def from_gradebook(gb, assignment: str) -> dict[str, Cells]:
    """notebook name -> the cells the gradebook holds for the assignment (empty if it has none)."""
    from nbgrader.api import GradeCell, MissingEntry, SolutionCell, SourceCell, TaskCell

    try:
        found = gb.find_assignment(assignment)
    except MissingEntry:
        return {}
    out = {}
    for nb in found.notebooks:
        cells = out[nb.name] = Cells()
        for c in gb.db.query(GradeCell).filter(GradeCell.notebook_id == nb.id):
            cells.grade[c.name] = (float(c.max_score), c.cell_type)
        for c in gb.db.query(SolutionCell).filter(SolutionCell.notebook_id == nb.id):
            cells.solution[c.name] = ()
        for c in gb.db.query(TaskCell).filter(TaskCell.notebook_id == nb.id):
            cells.task[c.name] = (float(c.max_score), c.cell_type)
        for c in gb.db.query(SourceCell).filter(SourceCell.notebook_id == nb.id):
            cells.source[c.name] = (c.cell_type, bool(c.locked), c.source, c.checksum)
    return out


def graded_view(cells: Cells) -> Cells:
    """The cells as grading sees them: an answer cell that is neither graded nor locked keeps its
    kind, not its handed-out text (nbgrader grades nothing with it; the course's Chinese edition
    translates its docstring), so either edition's notebooks make the same gradebook."""
    source = {name: (entry[:2] + (None, None) if name in cells.solution and name not in cells.grade
                     and not entry[1] else entry) for name, entry in cells.source.items()}
    return Cells(cells.grade, cells.solution, cells.task, source)


def compare(source: dict[str, Cells], gradebook: dict[str, Cells]) -> Changes:
    """What ``generate_assignment`` would change in the gradebook (answer cells' handed-out text aside)."""
    changes = Changes(added_notebooks=sorted(set(source) - set(gradebook)),
                      removed_notebooks=sorted(set(gradebook) - set(source)))
    for name in sorted(set(source) & set(gradebook)):
        new, old = graded_view(source[name]), graded_view(gradebook[name])
        changed = set()
        for kind in KINDS:
            a, b = getattr(new, kind), getattr(old, kind)
            changes.added += [(name, kind, cell) for cell in sorted(set(a) - set(b))]
            changes.removed += [(name, kind, cell) for cell in sorted(set(b) - set(a))]
            changed |= {cell for cell in set(a) & set(b) if a[cell] != b[cell]}
        changes.changed += [(name, cell) for cell in sorted(changed)]
    return changes


def make_room(gb, assignment: str, source: dict[str, Cells], changes: Changes) -> list[str]:
    """What nbgrader refuses once there are submissions: remove the notebooks and cells that are
    gone (with their grades and comments) and add the new ones, so that ``generate_assignment
    --force`` then only updates.  Returns the cells whose hand grades went with them."""
    from nbgrader.api import GradeCell, SolutionCell, SourceCell, TaskCell

    kinds = {"grade": GradeCell, "solution": SolutionCell, "task": TaskCell, "source": SourceCell}
    dropped: list[str] = []
    for name in changes.removed_notebooks:
        nb = gb.find_notebook(name, assignment)
        if any(g.manual_score is not None for s in nb.submissions for g in s.grades):
            dropped.append(f"{name} (the whole notebook)")
        gb.remove_notebook(name, assignment)
    for name in changes.added_notebooks:   # empty: nbgrader makes it again with its cells
        gb.add_notebook(name, assignment)
    for notebook, kind, cell in changes.removed:
        nb = gb.find_notebook(notebook, assignment)
        model = kinds[kind]
        for row in gb.db.query(model).filter(model.notebook_id == nb.id, model.name == cell):
            if kind != "source":
                grades, comments = row.grades or [], row.comments or []   # (nbgrader sets one of them None per kind)
                if any(g.manual_score is not None for g in grades):
                    dropped.append(cell)
                for dependent in [*grades, *comments]:
                    gb.db.delete(dependent)
            gb.db.delete(row)
    for notebook, kind, cell in changes.added:
        nb = gb.find_notebook(notebook, assignment)
        cells = source[notebook]
        if kind in ("grade", "task"):
            max_score, cell_type = getattr(cells, kind)[cell]
            gb.db.add(kinds[kind](name=cell, notebook=nb, max_score=max_score, cell_type=cell_type))
        elif kind == "solution":
            gb.db.add(SolutionCell(name=cell, notebook=nb))
        else:
            cell_type, locked, text, checksum = cells.source[cell]
            gb.db.add(SourceCell(name=cell, notebook=nb, cell_type=cell_type, locked=locked, source=text,
                                 checksum=checksum))
    gb.db.commit()
    return sorted(set(dropped))


def complete_submissions(gb, assignment: str) -> int:
    """Give every submission of the assignment a submitted notebook per notebook, a grade row per
    grade and task cell and a comment row per solution and task cell, where it lacks one (as
    ``Gradebook.add_submission`` makes them); returns the rows added."""
    from nbgrader.api import Comment, Grade, SubmittedNotebook

    added = 0
    found = gb.find_assignment(assignment)
    for submission in found.submissions:
        have = {snb.notebook_id: snb for snb in submission.notebooks}
        for nb in found.notebooks:
            snb = have.get(nb.id)
            if snb is None:
                snb = SubmittedNotebook(notebook=nb, assignment=submission)
                gb.db.add(snb)
                added += 1
            graded = {g.cell_id for g in snb.grades}
            commented = {c.cell_id for c in snb.comments}
            for cell in [*nb.grade_cells, *nb.task_cells]:
                if cell.id not in graded:
                    gb.db.add(Grade(cell=cell, notebook=snb))
                    added += 1
            for cell in [*nb.solution_cells, *nb.task_cells]:
                if cell.id not in commented:
                    gb.db.add(Comment(cell=cell, notebook=snb))
                    added += 1
    gb.db.commit()
    return added


def tests_key(cells: dict[str, Cells], fixtures: dict[str, str]) -> str:
    """A hash of what grades a submission: every cell the gradebook keeps (points, sources, the
    hidden tests) and the fixtures files.  A submission graded under another key is graded again."""
    data = {"notebooks": {name: {kind: sorted([k, list(v)] for k, v in getattr(graded_view(c), kind).items())
                                 for kind in KINDS} for name, c in sorted(cells.items())},
            "fixtures": sorted(fixtures.items())}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
