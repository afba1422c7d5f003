"""What a grading run keeps from one run to the next, as a part of the ``Grader``: which
submissions are unchanged since their last grading (``state.GradingState``), the state saved after
a run, the formgrader's flags taken back by a clean re-grade, and the history of runs in the report."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from ..learner.cells import role
from .state import Result, submission_hash


class RunHistory:
    """The ``Grader``'s memory of earlier runs (it provides ``state``, ``students``, ``named``,
    ``_path``, ``_gradebook``, ``tests_key``, ``_release`` and ``log``)."""

    def write_report(self, results: list[Result], wall_seconds: float | None = None,
                     misconception_counts: Callable[[list], dict[str, int]] | None = None) -> Path:
        """The run's report in ``<report_directory>/<assignment>/``: report.html, report.csv,
        cells.csv (see ``report.py``).  ``misconception_counts(notebooks) -> {name: count}``, given
        the autograded notebooks, adds a section of per-misconception counts."""
        from .report import build_report
        from .report_page import write_report

        wall = wall_seconds if wall_seconds is not None else time.monotonic() - getattr(self, "started_at", time.monotonic())
        self._add_run(results, wall)
        return write_report(build_report(self, results, wall, misconception_counts), self.report_dir)

    def _add_run(self, results: list[Result], wall: float) -> None:
        """The run in the state's history, when it graded someone (a run with nothing to grade
        leaves the last one's figures as they were)."""
        import statistics
        from datetime import datetime, timezone

        scores = [r.score for r in results if not r.failed]
        if not results:
            return
        try:
            self.state.add_run({"when": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
                                "graded": len(results), "unchanged": len(self.unchanged),
                                "interrupted": len(self.interrupted), "wall": round(wall, 1),
                                "mean": round(statistics.fmean(scores), 3) if scores else None})
        except OSError as exc:
            self.log(f"could not save the run's figures ({exc})")

    def _hashes(self) -> dict[str, str]:
        out = {}
        for student in self.students:
            try:
                out[student] = submission_hash(self._path(self.coursedir.submitted_directory, student))
            except OSError:
                out[student] = ""
        return out

    def _unchanged(self, hashes: dict[str, str]) -> list[str]:
        """Students whose submitted folder hashes as at their last complete grading, graded with
        the same tests (``tests_key``), whose grades are still in the gradebook and whose results
        are still in ``autograded/``."""
        state = self.state.read()
        with self._gradebook() as gb:
            try:
                in_gradebook = {s.student.id for s in gb.find_assignment(self.assignment).submissions}
            except Exception:
                in_gradebook = set()
        same = [s for s in self.students
                if s not in self.named and hashes.get(s) and isinstance(state.get(s), dict)
                and state[s].get("hash") == hashes[s] and s in in_gradebook
                and self._path(self.coursedir.autograded_directory, s).is_dir()]
        key = self.tests_key()
        retested = [s for s in same if state[s].get("tests") != key]
        if any(state[s].get("tests") for s in retested):
            self.log(f"the tests of {self.assignment} changed since the last grading: "
                     f"{len(retested)} submission{'s' if len(retested) != 1 else ''} re-graded")
        return [s for s in same if s not in retested]

    def _save_state(self, finished: list[Result]) -> None:
        from datetime import datetime, timezone

        when = datetime.now(timezone.utc).isoformat(timespec="seconds")
        tests = self.__dict__.get("_tests_key", "")
        entries = {r.student: {"hash": r.hash if not r.failed else "", "tests": tests, "score": r.score,
                               "auto_score": r.auto_score,
                               "max_score": r.max_score, "flags": r.flags, "problems": r.problems,
                               "timeouts": r.timeouts, "seconds": round(r.seconds, 3), "graded": r.graded,
                               "failed": r.failed, "flagged": bool(r.flags), "when": when}
                   for r in finished}
        try:
            self.state.update(entries)
        except OSError as exc:
            self.log(f"could not save the grading state ({exc}): the next run grades these students again")

    def _mark_flags(self, result: Result, notebooks: list[str]) -> None:
        """The formgrader's flag and its reasons (``flags.mark``); a clean re-grade takes back the
        flag this grader set last time."""
        from . import flags

        before = self._previous.get(result.student)
        unflag = isinstance(before, dict) and bool(before.get("flagged", before.get("flags")))
        with self._gradebook() as gb:
            for notebook in notebooks:
                answers = [role(c).grade_id for c in self._release(notebook).cells if role(c).solution]
                flags.mark(gb, self.assignment, result.student, notebook, result.flags, answers, unflag)
