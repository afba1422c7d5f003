"""nbgrader's ``OverwriteCells``, with missing cells put back wherever they went missing from.

With ``add_missing_cells``, nbgrader 0.9's ``OverwriteCells`` puts a deleted grade cell back after
the cell that precedes it in the instructor's notebook, and looks that cell up in the submission.
When that one is gone too (a learner deleted an answer and its test, or worked from an older
copy of the notebook) it raises ``KeyError`` and the student is not graded at all.

:class:`RestoreMissingCells` puts each missing grade cell after the nearest earlier cell of the
instructor's notebook that the submission still has (at the top when none is left), so the
tests run and the missing answers score zero.  Task cells go at the end, as nbgrader does.
It also reads the instructor's cells of the notebook in a few queries, where nbgrader asks the
gradebook once or twice per cell (``find_source_cell``, ``find_graded_cell``).
"""
from __future__ import annotations

from nbgrader import utils
from nbgrader.preprocessors import OverwriteCells


class RestoreMissingCells(OverwriteCells):
    """``OverwriteCells`` that grades a submission whatever cells it lost."""

    def preprocess_cell(self, cell, resources, cell_index):
        if getattr(self.gradebook, "_cells_read_at_once", None) is not self:
            self._read_cells_at_once()
        return super().preprocess_cell(cell, resources, cell_index)

    def _read_cells_at_once(self) -> None:
        """nbgrader's lookups of this notebook's source and graded cells, answered from the
        instructor's notebook read once; a name not there falls back to nbgrader's own query."""
        from nbgrader.api import GradeCell, MissingEntry, TaskCell

        gb = self.gradebook
        gb._cells_read_at_once = self
        try:
            source_nb = gb.find_notebook(self.notebook_id, self.assignment_id)
        except MissingEntry:
            return
        ours = (self.notebook_id, self.assignment_id)
        source = {c.name: c for c in source_nb.source_cells}
        # one query per kind (the notebook's own lists load each cell's points with a query of its own)
        graded = {c.name: c for kind in (TaskCell, GradeCell)
                  for c in gb.db.query(kind).filter(kind.notebook_id == source_nb.id)}
        find_source_cell, find_graded_cell = gb.find_source_cell, gb.find_graded_cell

        def source_cell(name, notebook, assignment):
            if (notebook, assignment) == ours and name in source:
                return source[name]
            return find_source_cell(name, notebook, assignment)

        def graded_cell(name, notebook, assignment):
            if (notebook, assignment) == ours and name in graded:
                return graded[name]
            return find_graded_cell(name, notebook, assignment)

        gb.find_source_cell, gb.find_graded_cell = source_cell, graded_cell

    def add_missing_grade_cells(self, nb, resources):
        source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        grade_cells = {cell.name: cell for cell in source_nb.grade_cells}
        solution_ids = {cell.name for cell in source_nb.solution_cells}

        def positions() -> dict[str, int]:
            return {cell.metadata["nbgrader"]["grade_id"]: i for i, cell in enumerate(nb.cells)
                    if (utils.is_grade(cell) or utils.is_solution(cell) or utils.is_locked(cell))
                    and "grade_id" in cell.metadata.get("nbgrader", {})}

        where = positions()
        after = -1                      # index in ``nb`` of the last instructor's cell seen
        for source_cell in source_nb.source_cells:
            name = source_cell.name
            if name in where:
                after = where[name]
                continue
            if name not in grade_cells:
                continue               # a missing answer or locked cell: its tests score zero
            self.log.warning(f"Missing grade cell {name} encountered, adding to notebook")
            cell = self.missing_cell_transform(source_cell, grade_cells[name].max_score,
                                               is_solution=name in solution_ids)
            nb.cells.insert(after + 1, cell)
            where = positions()
            after = where[name]
        return nb, resources
