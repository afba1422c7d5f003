"""``autograder grade``: grade every submission of an assignment, in parallel, safely.

The flow per submission, on nbgrader's own machinery:

1. *prepare* (here, one at a time): read the notebook, repair what a learner's editing broke
   (duplicated cells, edited nbgrader metadata, foreign graded cells: ``intake.py``), then nbgrader's sanitize
   preprocessors (``ClearOutput``, ``DeduplicateIds``, ``OverwriteKernelspec``,
   ``OverwriteCells`` with missing test cells put back, ``CheckCellMetadata``);
2. *execute* (a job, in a sandboxed slot of a ``pool.SlotPool``, or on a Dask worker);
3. *record* (here, one at a time: the only writer of the gradebook, ``record.py``): nbgrader's autograde
   preprocessors after ``Execute`` (``IgnorePattern``, ``ClearMetadataPreprocessor``,
   ``LimitOutput``, ``SaveAutoGrades``, ``AssignLatePenalties``, ``CheckCellMetadata``), and the
   notebook written to ``autograded/`` — so formgrader, ``generate_feedback`` and ``export``
   work as after ``nbgrader autograde``, and honest submissions get the same scores.

Around it: the configuration is nbgrader's (``config.load_config``); an assignment missing from
the gradebook is added from ``solutions/``, and one that differs from ``solutions/`` is brought in
line with it (``source.py``, ``sync.py``); with ``only_changed`` a submission whose folder hashes
as at its last complete grading, under the same tests, is left alone (``state.GradingState``);
``stop()`` ends a run within seconds, keeping what finished; ``write_report`` puts the run's
report in the course.
"""
from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

import nbformat
from traitlets.config import Config

from .ids import unsafe_id
from .execute import NO_SANDBOX, flag_in_gradebook, require_python_kernel
from .files import remove_trees, submission_files
from .intake import read_notebook, repair
from .jobs import Job, Outcome, add_guards, settle_memory
from .pool import PackedJob, PendingJobs, SlotPool, as_results
from .record import Recording
from .source import FollowsSource, GradingError
from .bwrap import probe
from .sandbox import Limits
from .state import GradingState, Result, submission_hash


def load_config(root: Path) -> Config:
    """The configuration for a course root, loaded as nbgrader loads it (see ``config.py``)."""
    from .config import load_config as load

    return load(root, cwd=root)



class Grader(Recording, FollowsSource):
    """Grades one assignment of a course root; the only writer of its gradebook."""

    def __init__(self, root: Path, assignment: str, students: list[str] | None = None,
                 jobs: int | None = None, limits: Limits | None = None, scheduler: str | None = None,
                 require_sandbox: bool | None = None, log: Callable[[str], None] = print,
                 pool: SlotPool | None = None, config: Config | None = None, only_changed: bool = False):
        """Arguments left as None come from the configuration (``config``, else the course's as
        nbgrader loads it): ``Execute.timeout`` and ``SandboxedExecute``'s limits, ``GradeOptions``.

        ``only_changed``: grade only students whose submitted folder changed since their last
        complete grading (students named in ``students`` are graded whatever their state)."""
        from nbgrader.coursedir import CourseDirectory

        from . import config as configuration

        from .gradebook import share_engines

        share_engines()
        self.root = root.resolve()
        self.assignment = assignment
        self.config = config if config is not None else load_config(self.root)
        self.options = configuration.GradeOptions(config=self.config)
        self.coursedir = CourseDirectory(config=self.config)
        self.coursedir.root = str(self.root)
        self.db_url = self.coursedir.db_url
        self.limits = limits or configuration.limits(self.config)
        self.jobs = jobs or self.options.jobs or configuration.default_jobs()
        self.scheduler = scheduler if scheduler is not None else (self.options.scheduler or None)
        self.pool = pool
        self.log = log
        self.require_sandbox = require_sandbox if require_sandbox is not None \
            else configuration.require_sandbox(self.config)
        self.only_changed = only_changed
        self.named = list(students or [])
        self.stopping = threading.Event()     # stop(): no new work; running kernels killed
        self.interrupted: list[str] = []      # students left ungraded by stop()
        self.unchanged: list[str] = []        # students left alone by only_changed
        self.events: Callable[[str, int, int], None] | None = None   # (phase, done, total)
        self.state = GradingState(self.report_dir / "grading-state.json")
        self._lists: dict[str, list[type]] = {}   # the configured preprocessor lists, read once
        self.generated: dict[str, nbformat.NotebookNode] = {}   # the release nbgrader made in this run, if any
        self.retired: set[str] = set()        # grade ids the source folder no longer has (follow_source)
        # a real sandbox is started before anything is graded: bwrap on PATH is not enough
        problem = probe() if pool is None or pool.sandboxed else "the slot pool given runs without a sandbox"
        self.sandboxed = problem is None
        if not self.sandboxed:
            if self.require_sandbox:
                raise GradingError(f"no sandbox, and --require-sandbox (c.SandboxedExecute.require_sandbox) "
                                   f"says never to grade without one: {problem}")
            log(f"WARNING: {problem}. {NO_SANDBOX}")
        else:
            from .cgroups import available

            version, sentence = available()
            if version is None:
                log(f"WARNING: {sentence}: six processes of one submission may hold six times its memory.")
        self.students = students or self._find_students()

    @property
    def report_dir(self) -> Path:
        return self.root / self.options.report_directory / self.assignment

    def stop(self) -> None:
        """End the run soon (a first Ctrl-C): nothing new starts, running kernels are killed, and
        what finished before stays.  Safe to call from a signal handler."""
        self.stopping.set()

    # -- course layout ---------------------------------------------------------------------------
    def _path(self, step: str, student: str = ".") -> Path:
        return Path(self.coursedir.format_path(step, student, self.assignment))

    def _find_students(self) -> list[str]:
        submitted = Path(self.coursedir.format_path(self.coursedir.submitted_directory, ".", "."))
        return sorted(p.parent.name for p in submitted.glob(f"*/{self.assignment}")
                      if p.is_dir() and not p.is_symlink() and not p.parent.is_symlink())

    def _gradebook(self):
        from nbgrader.api import Gradebook

        return Gradebook(self.db_url, self.coursedir.course_id)

    def _notebook_ids(self) -> list[str]:
        from nbgrader.api import MissingEntry

        self.follow_source()
        for attempt in range(2):
            with self._gradebook() as gb:
                try:
                    names = [nb.name for nb in gb.find_assignment(self.assignment).notebooks]
                except MissingEntry:
                    names = []
            if names or attempt:
                break
            self.add_assignment()
        if not names:
            raise GradingError(f"assignment {self.assignment!r} has no notebooks in the gradebook")
        return names

    def _resources(self, student: str, notebook: str) -> dict:
        return {"unique_key": notebook, "output_files_dir": f"{notebook}_files",
                "nbgrader": {"student": student, "assignment": self.assignment, "notebook": notebook,
                             "db_url": self.db_url}}

    def _configured(self, name: str) -> list[type]:
        """nbgrader's ``Autograde`` preprocessor list ``name``, as the course configuration sets it:
        the steps ``grade`` runs are the ones plain ``nbgrader autograde`` runs (read once)."""
        from nbgrader.converters import Autograde
        from traitlets.utils.importstring import import_item

        if name not in self._lists:
            configured = self.config.Autograde.get(name) if name in self.config.Autograde else None
            classes = configured if configured is not None else Autograde.class_traits()[name].default()
            self._lists[name] = [import_item(c) if isinstance(c, str) else c for c in classes]
        return self._lists[name]

    def _run_preprocessors(self, classes: list, nb, resources):
        for cls in classes:
            pp = cls(config=self.config)
            nb, resources = pp(nb, resources)
        return nb, resources

    # -- step 1 ------------------------------------------------------------------------------------
    def prepare(self, student: str, notebook: str, result: Result) -> Job | None:
        path = self._path(self.coursedir.submitted_directory, student) / f"{notebook}.ipynb"
        if not path.exists() and not path.is_symlink():
            return None  # nbgrader's rule: a missing notebook scores zero (see record_missing)
        nb, problem = read_notebook(path)
        if nb is None:
            result.problems.append(problem)
            result.graded = False
            nb = self._release(notebook)   # graded as the blank release: zero, and formgrader has a page
        else:
            result.flags += repair(nb, self._release(notebook), self.retired)
        nb, _ = self._run_preprocessors(self._configured("sanitize_preprocessors"), nb,
                                        self._resources(student, notebook))
        require_python_kernel(nb)
        add_guards(nb)
        # the submission's own files; never a notebook: the one being graded holds the hidden tests
        files = submission_files(path.parent, result.problems)
        fixtures, released = self._fixtures()
        files.update(released)    # the released fixtures, over whatever the submission holds under their names
        return Job(student, notebook, dict(nb), files, self.limits, self.require_sandbox,
                   judged=self._judged(notebook), fixtures=fixtures)

    def _judged(self, notebook: str) -> dict[str, str]:
        """The notebook's hidden tests that the judge runs, read from the gradebook once."""
        from .judged import judged_sources

        cache = self.__dict__.setdefault("_judged_cache", {})
        if notebook not in cache:
            cache[notebook] = judged_sources(self.db_url, self.assignment, notebook)
        return cache[notebook]


    # -- the run -----------------------------------------------------------------------------------
    def run(self, progress: Callable[[Result], None] | None = None) -> list[Result]:
        """Grade the students; a Result for each one graded (``unchanged`` and ``interrupted``
        name the others).  ``progress`` is called as each student is done; ``events``, if set,
        with (phase, done, total) for the "preparing" and "grading" phases."""
        import warnings

        from sqlalchemy.exc import SAWarning

        # nbgrader's gradebook API trips SQLAlchemy's autoflush warnings; they are about nbgrader
        warnings.filterwarnings("ignore", category=SAWarning)
        settle_memory()
        notebooks = self._notebook_ids()
        self.tests_key()
        self.started_at = time.monotonic()
        self.unchanged, self.interrupted = [], []
        hashes = self._hashes()
        if self.only_changed:
            self.unchanged = self._unchanged(hashes)
        students = [s for s in self.students if s not in self.unchanged]
        results = {s: Result(s, hash=hashes.get(s, "")) for s in students}
        self.staging = Path(tempfile.mkdtemp(prefix=f".copy-that-staging-{self.assignment}-", dir=self.root))
        finished: list[Result] = []
        try:
            return self._run(notebooks, students, results, progress, finished)
        finally:
            remove_trees(self.staging)   # what was not published: an interrupted or failed run
            self._save_state(finished)

    def write_report(self, results: list[Result], wall_seconds: float | None = None,
                     misconception_counts: Callable[[list], dict[str, int]] | None = None) -> Path:
        """The run's report in ``<report_directory>/<assignment>/``: report.html, report.csv,
        cells.csv (see ``report.py``).  ``misconception_counts(notebooks) -> {name: count}``, given
        the autograded notebooks, adds a section of per-misconception counts."""
        from .report import build_report, write_report

        wall = wall_seconds if wall_seconds is not None else time.monotonic() - getattr(self, "started_at", time.monotonic())
        return write_report(build_report(self, results, wall, misconception_counts), self.report_dir)

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
                               "failed": r.failed, "when": when}
                   for r in finished}
        try:
            self.state.update(entries)
        except OSError as exc:
            self.log(f"could not save the grading state ({exc}): the next run grades these students again")

    def _event(self, phase: str, done: int, total: int) -> None:
        if self.events is not None:
            self.events(phase, done, total)

    def _run(self, notebooks: list[str], students: list[str], results: dict[str, Result], progress,
             finished: list[Result]) -> list[Result]:
        pending: list[PackedJob] = []
        failed: set[str] = set()         # students whose grading went wrong on the grader's side
        opened: list[str] = []

        def fail(student: str, text: str) -> None:
            results[student].problems.append(text)
            results[student].graded = False
            results[student].failed = True
            failed.add(student)

        for i, student in enumerate(students):
            if self.stopping.is_set():
                break
            self._event("preparing", i, len(students))
            opened.append(student)
            refused = unsafe_id(student)
            if refused:          # a broken submission, never written to the gradebook or the formgrader
                results[student].problems.append(refused)
                results[student].graded = False
                failed.add(student)          # (nothing to total or publish)
                continue
            try:
                self.open_submission(student, results[student])
            except Exception as exc:
                fail(student, f"could not open the submission: {type(exc).__name__}: {exc}")
                continue
            for notebook in notebooks:
                try:
                    job = self.prepare(student, notebook, results[student])
                except Exception as exc:
                    fail(student, f"could not prepare {notebook}: {type(exc).__name__}: {exc}")
                    continue
                if job is None:
                    results[student].problems.append(f"{notebook}.ipynb was not submitted (scored zero)")
                    self.record_missing(student, notebook)
                else:
                    pending.append(PackedJob(job))
        self._event("preparing", len(opened), len(students))
        if self.stopping.is_set():       # stopped while preparing: nothing of the unfinished is run
            pending = []
        remaining = {s: sum(j.student == s for j in pending) for s in opened}

        def done(student: str) -> None:
            r = results[student]
            if remaining[student] != 0:
                return
            try:
                self.totals(r)
            except Exception as exc:
                if student not in failed:    # (one that failed to open may have no submission)
                    fail(student, f"no totals: {exc}")
            if student not in failed:
                try:
                    self.publish(student)
                    if r.flags:    # the formgrader's "flagged" column
                        for notebook in notebooks:
                            flag_in_gradebook(self.db_url, self.assignment, student, notebook)
                except Exception as exc:
                    fail(student, f"could not publish the results: {type(exc).__name__}: {exc}")
            finished.append(r)
            self._event("grading", len(finished), len(opened))
            if progress:
                progress(r)

        if not self.stopping.is_set():
            for s in opened:
                done(s)      # (only those with nothing to run: no notebook submitted, or failed)
        for job, outcome, error in self._execute_all(PendingJobs(pending)):
            if self.stopping.is_set():
                break                     # what ends after the stop is not recorded
            r = results[job.student]
            if error is not None:
                fail(job.student, f"{job.notebook}: grading failed: {error}; earlier results kept")
            else:
                r.problems += [p for p in outcome.problems if p not in r.problems]
                r.flags += [f for f in outcome.flags if f not in r.flags]
                r.seconds += outcome.seconds
                r.timeouts += _timeouts(outcome)
                if outcome.peak_memory is not None:
                    r.peak_memory = max(r.peak_memory or 0, outcome.peak_memory)
                try:
                    r.flags += [f for f in self.record(outcome) or [] if f not in r.flags]
                except Exception as exc:
                    fail(job.student, f"{job.notebook}: could not record grades: {type(exc).__name__}: {exc}")
            remaining[job.student] -= 1
            done(job.student)
        done_names = {r.student for r in finished}
        self.interrupted = [s for s in students if s not in done_names]
        return [results[s] for s in students if s in done_names]

    def _execute_all(self, pending):
        """``pending`` is a sized iterable of jobs (``_unpacked``), taken as the slots need them."""
        if not len(pending):
            return
        if self.scheduler:
            yield from self._execute_dask(pending)
            return
        if self.pool is not None:
            yield from self.pool.map(pending, self.stopping)
            return
        with SlotPool(max(1, min(self.jobs, len(pending))), self.sandboxed) as pool:
            yield from pool.map(pending, self.stopping)

    def _execute_dask(self, pending):
        from distributed import Client, as_completed as dask_completed

        from .remote import run_job

        with Client(self.scheduler, timeout=30) as client:
            futures = {client.submit(run_job, job, pure=False, key=f"grade-{job.student}-{job.notebook}"): job
                       for job in pending}
            for item in as_results(futures, dask_completed(futures)):
                yield item
                if self.stopping.is_set():
                    client.cancel(list(futures))
                    return


def _timeouts(outcome: Outcome) -> int:
    """Cells stopped at the cell limit, and the notebook if it was stopped at its own."""
    cells = sum(o.get("ename") == "CellTimeout" for c in outcome.nb.get("cells", [])
                for o in c.get("outputs", []) if o.get("output_type") == "error")
    return cells + any("ran past its" in p for p in outcome.problems)
