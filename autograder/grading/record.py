"""Step 3 of grading, recording: the gradebook and ``autograded/`` (the grader is their one writer).

:class:`Recording` is the part of :class:`~autograder.grading.runner.Grader` that writes: a
submission opened as nbgrader's autograde opens it, the results staged and then published in one
rename, nbgrader's autograde steps after ``Execute``, and the manual grades kept across a re-grade.
"""
from __future__ import annotations

import os
from pathlib import Path

import nbformat

from ..learner.cells import role
from .files import remove_trees, submission_files, write_files
from .jobs import Outcome
from .state import Result


class Recording:
    """The writing half of a grader: needs ``assignment``, ``coursedir``, ``staging`` and the
    grader's ``_path``, ``_gradebook``, ``_configured``, ``_run_preprocessors`` and ``_resources``."""

    def _staged(self, student: str) -> Path:
        """Where a student's results are written while they are graded (see ``publish``)."""
        return self.staging / student / self.assignment

    def open_submission(self, student: str, result: Result) -> None:
        """As nbgrader's autograde does before converting: student, submission, timestamp, files.

        The files go to a staging folder: the student's earlier ``autograded/`` results stay
        until this grading is complete (``publish``)."""
        src = self._path(self.coursedir.submitted_directory, student)
        timestamp = None
        try:
            timestamp = self.coursedir.get_existing_timestamp(str(src))
        except Exception as exc:   # not a date, a folder, not UTF-8: that student's problem only
            result.problems.append(f"timestamp.txt is unreadable ({type(exc).__name__}); graded without a timestamp")
        with self._gradebook() as gb:
            gb.update_or_create_student(student)
            if timestamp:
                gb.update_or_create_submission(self.assignment, student, timestamp=timestamp)
            else:
                gb.update_or_create_submission(self.assignment, student)
        staged = self._staged(student)
        staged.mkdir(parents=True)
        source = submission_files(self._path(self.coursedir.source_directory))
        for rel, data in {**submission_files(src, result.problems), **source}.items():
            target = staged / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        if not (staged / "timestamp.txt").is_file():
            # copied into submitted/ by hand: nbgrader's release_feedback needs a timestamp.txt
            # beside the feedback.  The grading time stands in; the gradebook keeps none, so no
            # late penalty follows from it.
            from datetime import datetime, timezone

            (staged / "timestamp.txt").write_text(datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f %Z"))

    def publish(self, student: str) -> None:
        """Put a student's staged results in ``autograded/`` in place of the earlier ones."""
        staged = self._staged(student)
        if not staged.exists():
            return
        dest = self._path(self.coursedir.autograded_directory, student)
        dest.parent.mkdir(parents=True, exist_ok=True)
        old = dest.with_name(f".{dest.name}.replaced-{os.getpid()}")
        if dest.exists() or dest.is_symlink():
            os.rename(dest, old)
        os.rename(staged, dest)
        if old.exists() or old.is_symlink():
            remove_trees(old)

    def record(self, outcome: Outcome) -> list[str]:
        """Save an executed notebook's grades and files; the flags that making it inert raised."""
        from nbgrader.preprocessors import Execute

        after_execute = [cls for cls in self._configured("autograde_preprocessors") if not issubclass(cls, Execute)]
        nb = nbformat.from_dict(outcome.nb)
        graded_by_hand = self._graded_by_hand(outcome.student, outcome.notebook)
        nb, resources = self._run_preprocessors(after_execute, nb, self._resources(outcome.student, outcome.notebook))
        if graded_by_hand:
            self._keep_graded_by_hand(outcome.student, outcome.notebook, nb, graded_by_hand)
        staged = self._staged(outcome.student)
        write_files(staged, outcome.files)
        nbformat.write(nb, staged / f"{outcome.notebook}.ipynb")
        return list(resources.get("inert_flags", []))

    # -- manual grades across a re-grade ---------------------------------------------------------
    def _graded_by_hand(self, student: str, notebook: str) -> dict[str, tuple]:
        """Cells a person has graded (a manual score, no longer "needs manual grade"), with the
        source the person saw (the published ``autograded/`` notebook) and the auto score then."""
        from nbgrader.api import MissingEntry

        try:
            with self._gradebook() as gb:
                grades = gb.find_submission_notebook(notebook, self.assignment, student).grades
                done = {g.name: g.auto_score for g in grades
                        if g.manual_score is not None and not g.needs_manual_grade}
        except MissingEntry:
            return {}
        if not done:
            return {}
        seen = _graded_sources(self._path(self.coursedir.autograded_directory, student) / f"{notebook}.ipynb")
        return {gid: (seen[gid], auto) for gid, auto in done.items() if gid in seen}

    def _keep_graded_by_hand(self, student: str, notebook: str, nb, before: dict[str, tuple]) -> None:
        """nbgrader's SaveAutoGrades marks every cell with a manual score "needs manual grade" again;
        where the graded cell is unchanged (same source, same auto score), the person's "graded"
        stands.  The manual score itself is never touched."""
        now = {role(c).grade_id: c.source for c in nb.cells if role(c).grade_id}
        with self._gradebook() as gb:
            for grade in gb.find_submission_notebook(notebook, self.assignment, student).grades:
                if grade.name in before and grade.manual_score is not None:
                    source, auto = before[grade.name]
                    if now.get(grade.name) == source and grade.auto_score == auto:
                        grade.needs_manual_grade = False
            gb.db.commit()


    def record_missing(self, student: str, notebook: str) -> None:
        with self._gradebook() as gb:
            sub = gb.find_submission_notebook(notebook, self.assignment, student)
            for grade in sub.grades:
                grade.auto_score = 0
                grade.needs_manual_grade = False
            gb.db.commit()

    def totals(self, result: Result) -> None:
        """The gradebook's scores: ``score`` the total (a manual grade where one was given, else
        the auto score), ``auto_score`` the auto-graded points alone."""
        with self._gradebook() as gb:
            sub = gb.find_submission(self.assignment, result.student)
            result.max_score = float(sub.max_score)
            result.score = float(sub.score or 0)
            result.auto_score = float(sum(g.auto_score or 0 for nb in sub.notebooks for g in nb.grades))


def _graded_sources(path: Path) -> dict[str, str]:
    """grade_id -> source of the graded cells in a notebook the grader wrote (empty if none)."""
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:
        return {}
    return {role(c).grade_id: c.source for c in nb.cells if role(c).grade_id}
