"""nbgrader preprocessors for the feedback learners receive.

``ClearHiddenTests`` removes the hidden tests' source from the feedback, but a failing hidden
test still shows its own lines in the traceback.  ``StripHiddenTracebacks`` runs first and
keeps only the diagnosis (``CheckFailed: ... Likely mistake: ...``) of those cells.
"""
from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

HIDDEN_MARK = "BEGIN HIDDEN TESTS"


class StripHiddenTracebacks(NbGraderPreprocessor):
    """Replace the traceback of a cell holding hidden tests by its last line (name and message)."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and HIDDEN_MARK in cell.source:
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    output.traceback = [f"{output.ename}: {output.evalue}"]
        return cell, resources
