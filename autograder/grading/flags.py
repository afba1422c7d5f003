"""The grader's flags where graders work: nbgrader's ``flagged`` mark on a submitted notebook (the
formgrader's flag column) and the reasons, as the automatic comment of the notebook's first answer
cell (the formgrader shows it in that cell's comment box, and the feedback under that answer).

A clean re-grade takes back what an earlier grading put there: the comment always, the mark when
the grader had set it (the grading state remembers that), so a flag a person set stays."""
from __future__ import annotations

import html
import re

HEADING = "Flagged by the grader for a look:"
_MARKDOWN = re.compile(r"([\\`*\[\]!])")      # what makes code, emphasis, links or images


def comment_text(flags: list[str]) -> str:
    """The reasons as a comment: each one escaped (HTML and Markdown: the feedback page renders
    comments as Markdown, and a reason can quote a file name the student chose)."""
    lines = ["- " + _MARKDOWN.sub(r"\\\1", html.escape(flag, quote=True)) for flag in flags]
    return "\n".join([HEADING, *lines])


def without_flags(comment: str | None) -> str | None:
    """An automatic comment with an earlier grading's reasons taken out (None if nothing is left)."""
    if not comment:
        return comment
    kept = comment.split(HEADING, 1)[0].rstrip()
    return kept or None


def mark(gradebook, assignment: str, student: str, notebook: str, flags: list[str],
         answer_cells: list[str], unflag: bool) -> None:
    """Set the flagged mark and the reasons of one submitted notebook (``answer_cells``: its answer
    cells' grade ids in notebook order); with no flags, take the reasons out, and the mark too
    when ``unflag`` (the grader had set it)."""
    submitted = gradebook.find_submission_notebook(notebook, assignment, student)
    if flags:
        submitted.flagged = True
    elif unflag:
        submitted.flagged = False
    comments = {c.name: c for c in submitted.comments}
    for comment in comments.values():
        comment.auto_comment = without_flags(comment.auto_comment)
    first = next((comments[name] for name in answer_cells if name in comments), None)
    if flags and first is not None:
        first.auto_comment = "\n\n".join(filter(None, [first.auto_comment, comment_text(flags)]))
    gradebook.db.commit()
