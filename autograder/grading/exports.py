"""Exports that say what they do not know: ``grades.csv`` with nbgrader's columns plus the cells
still waiting for a person's grade and the time past the due date, and the warning ``export``
prints before it exports an assignment whose written answers are not all graded by hand."""
from __future__ import annotations

import csv

from nbgrader.api import MissingEntry
from nbgrader.plugins.export import CsvExportPlugin

from .csvsafe import safe_row

NBGRADER_COLUMNS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
                    "raw_score", "late_submission_penalty", "score", "max_score"]
COLUMNS = NBGRADER_COLUMNS + ["needs_manual_grade", "seconds_late"]


def waiting_cells(submission) -> int:
    """Cells of a submission that wait for a person's grade (nbgrader's "needs manual grade")."""
    return sum(bool(g.needs_manual_grade) for nb in submission.notebooks for g in nb.grades)


class GradesExportPlugin(CsvExportPlugin):
    """nbgrader's ``grades.csv``, the same columns and rows (0 where nothing was submitted), with two
    more: ``needs_manual_grade`` (cells waiting for a person's grade: the score counts them as 0
    until then) and ``seconds_late`` (past the due date, as nbgrader's late penalty saw it)."""

    def export(self, gradebook) -> None:
        dest = self.to or "grades.csv"
        wanted = {str(a) for a in self.assignment}
        only = {str(s) for s in self.student}
        self.log.info("Exporting grades to %s", dest)
        with open(dest, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(COLUMNS)
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
                        row.update(timestamp="", raw_score=0.0, late_submission_penalty=0.0, score=0.0,
                                   needs_manual_grade=0, seconds_late=0)
                    else:
                        penalty = float(sub.late_submission_penalty or 0)
                        row.update(timestamp=sub.timestamp, raw_score=float(sub.score or 0),
                                   late_submission_penalty=penalty, score=max(0.0, float(sub.score or 0) - penalty),
                                   needs_manual_grade=waiting_cells(sub),
                                   seconds_late=round(float(sub.total_seconds_late or 0)))
                    w.writerow(safe_row(row[k] for k in COLUMNS))


def pending_hand_grading(gradebook, assignments: list[str] | None = None) -> dict[str, list[str]]:
    """assignment -> the students whose submission still has a cell waiting for a person's grade."""
    out: dict[str, list[str]] = {}
    for assignment in gradebook.assignments:
        if assignments and assignment.name not in assignments:
            continue
        waiting = sorted(s.student.id for s in assignment.submissions if waiting_cells(s))
        if waiting:
            out[assignment.name] = waiting
    return out


def export_warnings(db_url: str, assignments: list[str] | None = None) -> list[str]:
    """What an export is about to leave unsaid: written answers not yet graded by hand, and the
    late submissions whose exported score is after nbgrader's late penalty."""
    import os

    from nbgrader.api import Gradebook

    if db_url.startswith("sqlite:///") and not os.path.isfile(db_url[len("sqlite:///"):]):
        return []           # no gradebook yet: nothing to say, and none made here
    lines = []
    with Gradebook(db_url) as gb:
        for name, students in pending_hand_grading(gb, assignments).items():
            shown = ", ".join(students[:10]) + (f" and {len(students) - 10} more" if len(students) > 10 else "")
            lines.append(f"{name}: {len(students)} submission{'s' if len(students) != 1 else ''} with answers "
                         f"not yet graded by hand ({shown}): they count 0 in this export until graded "
                         "(the formgrader's Manual Grading)")
        for assignment in gb.assignments:
            if assignments and assignment.name not in assignments:
                continue
            late = sorted((s.student.id, float(s.late_submission_penalty or 0)) for s in assignment.submissions
                          if (s.total_seconds_late or 0) > 0)
            if late:
                shown = ", ".join(f"{student} (-{penalty:g})" for student, penalty in late[:10]) \
                    + (f" and {len(late) - 10} more" if len(late) > 10 else "")
                lines.append(f"{assignment.name}: {len(late)} late submission{'s' if len(late) != 1 else ''}, "
                             f"exported after nbgrader's late penalty: {shown}")
    return lines
