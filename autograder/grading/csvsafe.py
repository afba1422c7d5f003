"""CSV cells a spreadsheet shows as text, never runs as a formula, for every CSV the course writes
(report.csv, cells.csv, similarity.csv, canvas.csv, and nbgrader's grades.csv through
:class:`SafeCsvExportPlugin`)."""
from __future__ import annotations

import csv

from nbgrader.api import MissingEntry
from nbgrader.plugins.export import CsvExportPlugin

FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n", "|", "%")


def safe_cell(value) -> str:
    """``value`` as a CSV cell: numbers as numbers, text with a leading ``'`` where a spreadsheet
    would read a formula (leading spaces do not hide one)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if text.lstrip(" ")[:1] in FORMULA_START or text[:1] in FORMULA_START:
        return "'" + text
    return text


def safe_row(values) -> list[str]:
    """Every cell of a row through :func:`safe_cell`."""
    return [safe_cell(v) for v in values]


class SafeCsvExportPlugin(CsvExportPlugin):
    """nbgrader's ``grades.csv`` (the same columns and rows), written by ``csv`` with every cell
    through :func:`safe_cell`: nbgrader's own joins the cells with commas, unquoted and unguarded."""

    KEYS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
            "raw_score", "late_submission_penalty", "score", "max_score"]

    def export(self, gradebook) -> None:
        dest = self.to or "grades.csv"
        wanted = {str(a) for a in self.assignment}
        only = {str(s) for s in self.student}
        self.log.info("Exporting grades to %s", dest)
        with open(dest, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(self.KEYS)
            for assignment in gradebook.assignments:
                if wanted and assignment.name not in wanted:
                    continue
                for student in gradebook.students:
                    if only and student.id not in only:
                        continue
                    row = {"assignment": assignment.name, "duedate": assignment.duedate, "student_id": student.id,
                           "last_name": student.last_name, "first_name": student.first_name,
                           "email": student.email, "max_score": assignment.max_score}
                    try:
                        sub = gradebook.find_submission(assignment.name, student.id)
                    except MissingEntry:
                        row.update(timestamp="", raw_score=0.0, late_submission_penalty=0.0, score=0.0)
                    else:
                        penalty = sub.late_submission_penalty or 0.0
                        row.update(timestamp=sub.timestamp, raw_score=sub.score, late_submission_penalty=penalty,
                                   score=max(0.0, sub.score - penalty))
                    w.writerow(safe_row(row[k] for k in self.KEYS))
