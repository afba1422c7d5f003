"""nbgrader's ``OverwriteCells``, with missing cells put back wherever they went missing from.

With ``add_missing_cells``, nbgrader 0.9's ``OverwriteCells`` puts a deleted grade cell back after
the cell that precedes it in the instructor's notebook, and looks that cell up in the submission.
When that one is gone too (a learner deleted an answer and its test, or worked from an older
copy of the notebook) it raises ``KeyError`` and the student is not graded at all.

:class:`RestoreMissingCells` puts each missing grade cell after the nearest earlier cell of the
instructor's notebook that the submission still has (at the top when none is left), so the
tests run and the missing answers score zero.  Task cells go at the end, as nbgrader does.
"""
from __future__ import annotations

from nbgrader import utils
from nbgrader.preprocessors import OverwriteCells


class RestoreMissingCells(OverwriteCells):
    """``OverwriteCells`` that grades a submission whatever cells it lost."""

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
