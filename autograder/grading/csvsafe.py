"""CSV cells a spreadsheet shows as text, never runs as a formula, for every CSV the course writes
(report.csv, cells.csv, similarity.csv, canvas.csv, and nbgrader's grades.csv through
``exports.GradesExportPlugin``)."""
from __future__ import annotations

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
