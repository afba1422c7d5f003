"""What a grading run leaves for the graders, as data: the rows of ``report.csv`` (one per student)
and ``cells.csv`` (one per test cell), read from the gradebook, ``autograded/`` and the grading
state, and the Canvas export plugin for nbgrader's ``export``.  The page is ``report_page.py``.

Everything a student controls (ids, flags naming grade ids, problems naming files, the error
messages their code raised) is hostile: the CSV files neutralise spreadsheet formulas.
"""
from __future__ import annotations

import csv
import json
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from nbgrader.plugins.export import ExportPlugin
from traitlets import Dict, Enum

from .exports import waiting_cells
from .csvsafe import safe_cell, safe_row

# the hook for per-misconception counts: a function of the autograded notebooks (nbformat nodes)
MisconceptionCounter = Callable[[list], "dict[str, int]"]

STATUS_GRADED = "graded"
STATUS_BROKEN = "broken submission"
STATUS_FAILED = "grading failed"
STATUS_UNCHANGED = "unchanged"
STATUS_INTERRUPTED = "not graded (interrupted)"
STATUS_EARLIER = "graded earlier"

# the policy of a page with no script (the similarity page); the report's allows its one script
_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

# the first line of a test's error where the answer was left as handed out (the skeleton raises it)
NOT_ATTEMPTED = "NotImplementedError"


@dataclass
class StudentRow:
    student: str
    status: str
    score: float | None = None          # the gradebook's total: manual grades where given, else auto
    auto_score: float | None = None
    max_score: float | None = None
    flags: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    timeouts: int = 0
    seconds: float | None = None
    raw_score: float | None = None      # before nbgrader's late penalty (``score`` is after it, as exported)
    late_penalty: float = 0.0
    seconds_late: float = 0.0
    pending: int = 0                    # cells waiting for a person's grade (they count 0 until then)
    links: list[tuple[str, str]] = field(default_factory=list)   # (label, href relative to the report)


@dataclass
class CellRow:
    notebook: str
    cell: str
    points: float
    students: int = 0
    passed: int = 0
    diagnosis: str = ""                 # the most common first line of a failing cell's error, work attempted
    diagnosis_count: int = 0
    not_attempted: int = 0              # failed with the skeleton's NotImplementedError: left as handed out

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.students if self.students else None


@dataclass
class Report:
    assignment: str
    students: list[StudentRow]
    cells: list[CellRow]
    counts: dict[str, int]
    mean: float | None
    median: float | None
    max_score: float | None
    wall_seconds: float
    misconceptions: dict[str, int] | None = None
    similarity_page: str | None = None    # similarity.html beside the report, when there is one
    runs: list[dict] = field(default_factory=list)   # the runs that graded something, oldest first


def _first_line(text: str, limit: int = 200) -> str:
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ""


def diagnosis(cell: dict) -> str:
    """The first line of what a failing cell printed as its error: the error output, else stderr."""
    for out in cell.get("outputs", []) or []:
        if isinstance(out, dict) and out.get("output_type") == "error":
            line = _first_line(f"{out.get('ename', '')}: {out.get('evalue', '')}")
            if line:
                return line
    for out in cell.get("outputs", []) or []:
        if isinstance(out, dict) and out.get("output_type") == "stream" and out.get("name") == "stderr":
            text = out.get("text", "")
            line = _first_line("".join(text) if isinstance(text, list) else text)
            if line:
                return line
    return "(no error shown)"


def _read_json(path: Path) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def build_report(grader, results: Iterable, wall_seconds: float,
                 misconception_counts: MisconceptionCounter | None = None) -> Report:
    """The report of a run of ``grader`` (a runner.Grader) that returned ``results``: every student
    the gradebook has a submission of this assignment for, with this run's results where it
    graded them, and the last complete grading's (the grading state) otherwise.

    ``misconception_counts``: where per-misconception counts come from, given the autograded
    notebooks; ``None`` leaves that section out."""
    from nbgrader.api import MissingEntry

    results = {r.student: r for r in results}
    state = grader.state.read()
    rows: list[StudentRow] = []
    cells: dict[tuple[str, str], CellRow] = {}
    reasons: dict[tuple[str, str], Counter] = {}
    notebooks_read: list = []
    with grader._gradebook() as gb:
        try:
            assignment = gb.find_assignment(grader.assignment)
        except MissingEntry:
            assignment = None
        tests: dict[str, dict[str, float]] = {}
        if assignment is not None:
            for nb in assignment.notebooks:
                answers = {c.name for c in nb.solution_cells}
                tests[nb.name] = {c.name: float(c.max_score) for c in nb.grade_cells
                                  if c.name not in answers and c.cell_type == "code"}
                for name, points in tests[nb.name].items():
                    cells[(nb.name, name)] = CellRow(nb.name, name, points)
            submissions = {s.student.id: s for s in assignment.submissions}
        else:
            submissions = {}
        names = sorted(set(submissions) | set(results) | set(grader.interrupted))
        for student in names:
            sub = submissions.get(student)
            row = _student_row(student, results.get(student), state.get(student), grader)
            if sub is not None:          # the gradebook's scores: manual grades included
                row.raw_score = float(sub.score or 0)
                row.late_penalty = float(sub.late_submission_penalty or 0)
                row.seconds_late = float(sub.total_seconds_late or 0)
                row.score = max(0.0, row.raw_score - row.late_penalty)     # as nbgrader's export gives it
                row.pending = waiting_cells(sub)
                row.max_score = float(sub.max_score)
                row.auto_score = float(sum(g.auto_score or 0 for nb in sub.notebooks for g in nb.grades))
            rows.append(row)
            if sub is None:
                continue
            row.links = _links(grader, student, [nb.name for nb in sub.notebooks])
            for nb in sub.notebooks:
                graded = {g.name: g for g in nb.grades}
                autograded = _read_json(grader._path(grader.coursedir.autograded_directory, student)
                                        / f"{nb.name}.ipynb")
                if autograded is None:    # never graded (interrupted before its first grading)
                    continue
                if misconception_counts is not None:
                    import nbformat

                    notebooks_read.append(nbformat.from_dict(autograded))
                by_id = {}
                for cell in autograded.get("cells", []) or []:
                    meta = (cell.get("metadata") or {}).get("nbgrader") if isinstance(cell, dict) else None
                    if isinstance(meta, dict) and isinstance(meta.get("grade_id"), str):
                        by_id[meta["grade_id"]] = cell
                for name in tests.get(nb.name, {}):
                    g = graded.get(name)
                    if g is None:
                        continue
                    c = cells[(nb.name, name)]
                    c.students += 1
                    if g.auto_score is not None and g.auto_score >= g.max_score:
                        c.passed += 1
                    elif name in by_id:
                        why = diagnosis(by_id[name])
                        if why.startswith(NOT_ATTEMPTED):
                            c.not_attempted += 1
                        else:
                            reasons.setdefault((nb.name, name), Counter())[why] += 1
    for key, counter in reasons.items():
        cells[key].diagnosis, cells[key].diagnosis_count = counter.most_common(1)[0]
    totals = [r.score for r in rows if r.score is not None and r.status != STATUS_INTERRUPTED]
    maxima = [r.max_score for r in rows if r.max_score]
    counts = {
        "submissions": len(rows),
        "graded this run": sum(r.status in (STATUS_GRADED, STATUS_BROKEN) and r.student in results for r in rows),
        "unchanged (not graded again)": sum(r.status == STATUS_UNCHANGED for r in rows),
        "broken submissions": sum(r.status == STATUS_BROKEN for r in rows),
        "grading failed": sum(r.status == STATUS_FAILED for r in rows),
        "not graded (interrupted)": sum(r.status == STATUS_INTERRUPTED for r in rows),
        "flagged for a manual look": sum(bool(r.flags) for r in rows),
        "waiting for hand grading": sum(bool(r.pending) for r in rows),
        "late": sum(r.seconds_late > 0 for r in rows),
        "with problems": sum(bool(r.problems) for r in rows),
        "cells or notebooks timed out": sum(r.timeouts for r in rows),
    }
    return Report(
        assignment=grader.assignment, students=rows,
        cells=sorted(cells.values(), key=lambda c: (c.notebook, c.cell)), counts=counts,
        mean=statistics.fmean(totals) if totals else None, median=statistics.median(totals) if totals else None,
        max_score=max(maxima) if maxima else None, wall_seconds=wall_seconds,
        misconceptions=misconception_counts(notebooks_read) if misconception_counts is not None else None,
        runs=grader.state.runs())


def _links(grader, student: str, notebooks: list[str]) -> list[tuple[str, str]]:
    """The student's graded notebooks and feedback pages, as links relative to the report's folder
    (each path segment percent-encoded: a student id is any text)."""
    import os
    from urllib.parse import quote

    out = []
    for label, step, suffix in (("notebook", grader.coursedir.autograded_directory, ".ipynb"),
                                ("feedback", grader.coursedir.feedback_directory, ".html")):
        for name in sorted(notebooks):
            rel = os.path.relpath(grader._path(step, student) / f"{name}{suffix}", grader.report_dir)
            href = "/".join(quote(part, safe="") for part in Path(rel).parts)
            out.append((label if len(notebooks) == 1 else f"{name} {label}", href))
    return out


def _student_row(student: str, result, saved: dict | None, grader) -> StudentRow:
    if result is not None:
        status = STATUS_FAILED if result.failed else STATUS_GRADED if result.graded else STATUS_BROKEN
        return StudentRow(student, status, result.score, result.auto_score, result.max_score, list(result.flags),
                          list(result.problems), result.timeouts, result.seconds)
    if student in grader.interrupted:
        status = STATUS_INTERRUPTED
    elif student in grader.unchanged:
        status = STATUS_UNCHANGED
    else:
        status = STATUS_EARLIER
    row = StudentRow(student, status)
    if isinstance(saved, dict):
        row.flags = [str(x) for x in saved.get("flags", []) if isinstance(x, str)]
        row.problems = [str(x) for x in saved.get("problems", []) if isinstance(x, str)]
        row.timeouts = int(saved.get("timeouts") or 0)
        row.seconds = float(saved["seconds"]) if isinstance(saved.get("seconds"), (int, float)) else None
        if status == STATUS_UNCHANGED and saved.get("graded") is False:
            row.status = STATUS_BROKEN if not saved.get("failed") else STATUS_FAILED
    return row


# ---------------------------------------------------------------------------------------------
# writing it

def _cell(value) -> str:
    """A CSV cell that a spreadsheet shows as text, never runs as a formula."""
    return safe_cell(value)


def write_csv(report: Report, folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    students, cells = folder / "report.csv", folder / "cells.csv"
    with open(students, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["student", "status", "score", "auto_score", "max_score", "flags", "problems", "timeouts", "seconds",
                    "raw_score", "late_submission_penalty", "seconds_late", "needs_manual_grade"])
        for r in report.students:
            w.writerow([_cell(x) for x in (r.student, r.status, r.score, r.auto_score, r.max_score,
                                           "; ".join(r.flags), "; ".join(r.problems), r.timeouts,
                                           None if r.seconds is None else round(r.seconds, 2),
                                           r.raw_score, r.late_penalty, round(r.seconds_late), r.pending)])
    with open(cells, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["notebook", "cell", "points", "students", "passed", "pass_rate", "most_common_diagnosis",
                    "diagnosis_count", "not_attempted"])
        for c in report.cells:
            w.writerow([_cell(x) for x in (c.notebook, c.cell, c.points, c.students, c.passed,
                                           None if c.pass_rate is None else round(c.pass_rate, 4),
                                           c.diagnosis, c.diagnosis_count, c.not_attempted)])
    return students, cells


# ---------------------------------------------------------------------------------------------
# Canvas

CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


class CanvasExportPlugin(ExportPlugin):
    """A CSV for Canvas's gradebook import: its columns ``Student, ID, SIS User ID, SIS Login ID,
    Section``, a ``Points Possible`` row, then one column per assignment (score after nbgrader's
    late penalty; blank where there is no submission, so the import changes nothing there).

    Canvas matches rows to students by ``ID`` (its user id: nbgrader's ``lms_user_id`` where the
    gradebook has one), else by the SIS columns: nbgrader's student id goes in ``student_id_column``.
    """

    student_id_column = Enum(["SIS Login ID", "SIS User ID", "ID"], default_value="SIS Login ID",
                             help="The Canvas column that holds nbgrader's student id.").tag(config=True)
    assignment_columns = Dict(
        {}, help="nbgrader assignment -> Canvas column header (an existing Canvas assignment is "
                 "'Name (canvas id)', as in Canvas's own export); unlisted ones keep their name, "
                 "which Canvas imports as a new assignment.").tag(config=True)
    sections = Dict({}, help="nbgrader student id -> Canvas section name (optional).").tag(config=True)

    def export(self, gradebook) -> None:
        dest = self.to or "canvas.csv"
        wanted = {str(a) for a in self.assignment}
        only = {str(s) for s in self.student}
        assignments = [a for a in gradebook.assignments if not wanted or a.name in wanted]
        students = [s for s in gradebook.students if not only or s.id in only]
        self.log.info("Exporting grades for Canvas to %s", dest)
        with open(dest, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(safe_row(CANVAS_COLUMNS + [str(self.assignment_columns.get(a.name, a.name)) for a in assignments]))
            w.writerow(["Points Possible", "", "", "", ""] + [f"{float(a.max_score):g}" for a in assignments])
            for s in students:
                name = f"{s.last_name}, {s.first_name}" if s.last_name and s.first_name else \
                    (s.last_name or s.first_name or s.id)
                ids = {"ID": s.lms_user_id or "", "SIS User ID": "", "SIS Login ID": ""}
                ids[self.student_id_column] = s.id
                row = [name, ids["ID"], ids["SIS User ID"], ids["SIS Login ID"], self.sections.get(s.id, "")]
                for a in assignments:
                    try:
                        sub = gradebook.find_submission(a.name, s.id)
                    except Exception:
                        row.append("")
                        continue
                    score = float(sub.score or 0) - float(sub.late_submission_penalty or 0)
                    row.append(f"{score:g}")
                w.writerow(safe_row(row))
