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

import itertools
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

import nbformat
from traitlets.config import Config

from .execute import NO_SANDBOX, require_python_kernel
from .ids import unsafe_id
from .files import remove_trees, submission_files
from .intake import find_submitted, read_notebook, repair
from .jobs import Job, Outcome, add_guards, settle_memory
from .pool import SlotPool, as_results, slots_worth_starting
from .history import RunHistory
from .record import Recording
from .source import FollowsSource, GradingError
from .bwrap import probe
from .sandbox import Limits, folders_use_optimizer
from .state import GradingState, Result, surely_graded


def load_config(root: Path) -> Config:
    """The configuration for a course root, loaded as nbgrader loads it (see ``config.py``)."""
    from .config import load_config as load

    return load(root, cwd=root)



class Grader(Recording, FollowsSource, RunHistory):
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
        self._own: SlotPool | None = None      # the run's own slots, when no pool is given
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
        self._given = bool(students)

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
        folder = self._path(self.coursedir.submitted_directory, student)
        found = find_submitted(folder, notebook, self._release(notebook))
        result.flags += found.flags
        result.problems += found.problems
        if found.path is None:
            return None  # nbgrader's rule: a missing notebook scores zero (see record_missing)
        path = found.path
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
        files = submission_files(folder, result.problems)
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
        self._require_submissions()
        settle_memory()
        self.started_at = time.monotonic()
        hashes = self._hashes()
        # the slots start now, in the background, while the gradebook follows solutions/ and the
        # submissions are prepared: as many as there are submissions surely to grade (more later)
        self._start_slots(self._surely_graded(hashes))
        try:
            return self._follow_and_run(progress, hashes)
        finally:
            self._close_slots()

    def _require_submissions(self) -> None:
        """Students named (``--student``) must each have a submission when the run starts: nothing
        is graded otherwise (no gradebook entry, no 0 in the exports)."""
        if not self._given:
            return
        found = set(self._find_students())
        missing = [s for s in self.students if s not in found]
        if missing:
            where = self.coursedir.format_path(self.coursedir.submitted_directory, "STUDENT", self.assignment)
            raise GradingError(f"no submission of {self.assignment} for {', '.join(missing)} "
                               f"(looked in {Path(where).relative_to(self.root)}/): nothing was graded")

    def _follow_and_run(self, progress, hashes: dict[str, str]) -> list[Result]:
        notebooks = self._notebook_ids()
        self.tests_key()
        self.unchanged, self.interrupted = [], []
        self._previous = self.state.read()
        if self.only_changed:
            self.unchanged = self._unchanged(hashes)
            owed = [s for s in self.state.owed() if s in self.unchanged]
            if owed:
                self.unchanged = [s for s in self.unchanged if s not in owed]
                self.log(f"an earlier run that was to grade every submission again (--force or --student) "
                         f"stopped before {len(owed)} of them: they are graded now, changed or not")
        students = [s for s in self.students if s not in self.unchanged]
        forced = students if not self.only_changed else [s for s in students if s in self.named]
        if forced:
            try:
                self.state.owe(forced)
            except OSError as exc:
                self.log(f"could not save the grading state ({exc}): an interrupted run cannot be resumed")
        results = {s: Result(s, hash=hashes.get(s, "")) for s in students}
        self.staging = Path(tempfile.mkdtemp(prefix=f".copy-that-staging-{self.assignment}-", dir=self.root))
        finished: list[Result] = []
        try:
            return self._run(notebooks, students, results, progress, finished)
        finally:
            remove_trees(self.staging)   # what was not published: an interrupted or failed run
            self._save_state(finished)

    def _surely_graded(self, hashes: dict[str, str]) -> int:
        """How many students this run grades whatever the gradebook says (``_unchanged`` may find
        more to grade once the tests are known, never fewer)."""
        if not self.only_changed:
            return len(self.students)
        return surely_graded({s: hashes.get(s, "") for s in self.students}, self.state.read(), self.named,
                             lambda s: self._path(self.coursedir.autograded_directory, s).is_dir())

    def _start_slots(self, n: int) -> None:
        """Start (without waiting) this run's own slots, ``n`` at most ``jobs``; more with ``grow``."""
        if n and self.pool is None and not self.scheduler and self._own is None:
            source = self.root / self.coursedir.source_directory / self.assignment
            self._own = SlotPool(max(1, self.jobs), self.sandboxed, background=True,
                                 initial=slots_worth_starting(n, self.jobs), warm=folders_use_optimizer([source]))
            self._own_pool = self._own.__enter__()

    def _close_slots(self) -> None:
        own, self._own = self._own, None
        if own is not None:
            own.__exit__(None, None, None)

    def _event(self, phase: str, done: int, total: int) -> None:
        if self.events is not None:
            self.events(phase, done, total)

    def _run(self, notebooks: list[str], students: list[str], results: dict[str, Result], progress,
             finished: list[Result]) -> list[Result]:
        """Prepare the students one after another and grade each one's notebooks as soon as they are
        prepared: the slots take the first submission while the others are still being read (the
        pool takes a few jobs ahead of its slots, so no more than those are held prepared)."""
        failed: set[str] = set()         # students whose grading went wrong on the grader's side
        opened: list[str] = []
        remaining: dict[str, int] = {}   # a prepared student's jobs not yet finished

        def fail(student: str, text: str) -> None:
            results[student].problems.append(text)
            results[student].graded = False
            results[student].failed = True
            failed.add(student)

        def done(student: str) -> None:
            r = results[student]
            if remaining.get(student) != 0:
                return
            try:
                self.totals(r)
            except Exception as exc:
                if student not in failed:    # (one that failed to open may have no submission)
                    fail(student, f"no totals: {exc}")
            if student not in failed:
                try:
                    self.publish(student)
                    self._mark_flags(r, notebooks)
                except Exception as exc:
                    fail(student, f"could not publish the results: {type(exc).__name__}: {exc}")
            finished.append(r)
            self._event("grading", len(finished), len(students))
            if progress:
                progress(r)

        def prepared():
            for i, student in enumerate(students):
                if self.stopping.is_set():
                    return            # stopped while preparing: nothing of the unprepared is run
                if not finished:      # (once students finish, the bar counts those)
                    self._event("preparing", i, len(students))
                opened.append(student)
                jobs = self._prepare_student(student, notebooks, results[student], fail, failed)
                remaining[student] = len(jobs)
                if not jobs:
                    done(student)     # nothing to run: no notebook submitted, refused or failed
                yield from jobs
            if not finished:
                self._event("preparing", len(opened), len(students))

        for job, outcome, error in self._execute_all(prepared(), len(students) * len(notebooks)):
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
                if outcome.slot_left is not None:
                    r.slot_left = max(r.slot_left or 0, outcome.slot_left)
                try:
                    r.flags += [f for f in self.record(outcome) or [] if f not in r.flags]
                except Exception as exc:
                    fail(job.student, f"{job.notebook}: could not record grades: {type(exc).__name__}: {exc}")
            remaining[job.student] -= 1
            done(job.student)
        done_names = {r.student for r in finished}
        self.interrupted = [s for s in students if s not in done_names]
        return [results[s] for s in students if s in done_names]

    def _prepare_student(self, student: str, notebooks: list[str], result: Result, fail, failed: set) -> list[Job]:
        """One student's jobs, one per submitted notebook; none for a refused or unopenable
        submission (reported in ``result``)."""
        refused = unsafe_id(student)
        if refused:          # a broken submission, never written to the gradebook or the formgrader
            result.problems.append(refused)
            result.graded = False
            failed.add(student)          # (nothing to total or publish)
            return []
        try:
            self.open_submission(student, result)
        except Exception as exc:
            fail(student, f"could not open the submission: {type(exc).__name__}: {exc}")
            return []
        jobs = []
        for notebook in notebooks:
            try:
                job = self.prepare(student, notebook, result)
            except Exception as exc:
                fail(student, f"could not prepare {notebook}: {type(exc).__name__}: {exc}")
                continue
            if job is None:
                self.record_missing(student, notebook)
            else:
                jobs.append(job)
        return jobs

    def _execute_all(self, jobs, expected: int):
        """Run ``jobs`` (any iterable, prepared as it is taken) where the run's options say: Dask,
        the pool given, or the run's own slots, grown for ``expected`` jobs at most.  Nothing is
        started when there is nothing to run."""
        jobs = iter(jobs)
        first = next(jobs, None)
        if first is None:
            return
        jobs = itertools.chain([first], jobs)
        if self.scheduler:
            yield from self._execute_dask(jobs)
            return
        if self.pool is not None:
            if getattr(self.pool, "background", False):      # started before the run knew its size
                self.pool.grow(slots_worth_starting(expected, self.jobs))
            yield from self.pool.map(jobs, self.stopping)
            return
        self._start_slots(expected)
        self._own_pool.grow(slots_worth_starting(expected, self.jobs))
        yield from self._own_pool.map(jobs, self.stopping)

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
