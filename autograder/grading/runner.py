"""``autograder grade``: grade every submission of an assignment, in parallel, safely.

The flow per submission, on nbgrader's own machinery:

1. *prepare* (here, one at a time): read the notebook, repair what a learner's editing broke
   (duplicated cells, edited nbgrader metadata, foreign graded cells), then nbgrader's sanitize
   preprocessors (``ClearOutput``, ``DeduplicateIds``, ``OverwriteKernelspec``,
   ``OverwriteCells`` with missing test cells put back, ``CheckCellMetadata``);
2. *execute* (a job, in a sandboxed slot, locally or on a Dask worker);
3. *record* (here, one at a time: the only writer of the gradebook): nbgrader's autograde
   preprocessors after ``Execute`` (``IgnorePattern``, ``ClearMetadataPreprocessor``,
   ``LimitOutput``, ``SaveAutoGrades``, ``AssignLatePenalties``, ``CheckCellMetadata``), and the
   notebook written to ``autograded/`` — so formgrader, ``generate_feedback`` and ``export``
   work as after ``nbgrader autograde``, and honest submissions get the same scores.
"""
from __future__ import annotations

import errno
import os
import queue
import stat
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import nbformat
from traitlets.config import Config, PyFileConfigLoader

from ..learner.cells import role
from .execute import NO_SANDBOX, flag_in_gradebook, require_python_kernel
from .files import remove_trees, submission_files, write_files
from .jobs import Job, Outcome, add_guards, execute
from .sandbox import Limits, Slot, probe

MAX_NOTEBOOK_BYTES = 64 << 20   # a submitted notebook; larger ones are reported, not read

@dataclass
class Result:
    student: str
    score: float = 0.0
    max_score: float = 0.0
    flags: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    graded: bool = True     # False: the submission could not be graded at all
    peak_memory: int | None = None   # the most any of its notebooks' processes held together (bytes)


def _as_results(futures: dict, completed):
    """(job, outcome, error) for each future of ``futures`` as ``completed`` yields it."""
    for fut in completed:
        job = futures[fut]
        try:
            yield job, fut.result(), None
        except Exception as exc:
            yield job, None, f"{type(exc).__name__}: {exc}"


class SlotPool:
    """Started slots, each running one job at a time; a pool can serve several grading runs.

    ``map(jobs)`` yields ``(job, outcome, error)`` as the jobs finish.
    """

    def __init__(self, size: int, sandboxed: bool):
        self.size = size
        self.sandboxed = sandboxed
        self.base: Path | None = None
        self.slots: queue.Queue[Slot] = queue.Queue()
        self.started: list[Slot] = []
        self.threads: ThreadPoolExecutor | None = None

    def __enter__(self) -> "SlotPool":
        self.base = Path(tempfile.mkdtemp(prefix="copy-that-grade-"))
        # one thread per slot for the pool's whole life: each keeps its event loop
        self.threads = ThreadPoolExecutor(self.size, thread_name_prefix="slot")

        def start(i: int) -> Slot:
            slot = Slot(i, self.base, self.sandboxed)
            slot.start()
            return slot

        try:
            for slot in self.threads.map(start, range(self.size)):
                self.started.append(slot)
                self.slots.put(slot)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for slot in self.started:
            slot.release()
        self.started.clear()
        if self.threads is not None:
            self.threads.shutdown(cancel_futures=True)
            self.threads = None
        if self.base is not None:
            remove_trees(self.base)

    def _run(self, job: Job) -> Outcome:
        slot = self.slots.get()
        try:
            return execute(job, slot)
        finally:
            self.slots.put(slot)

    def map(self, jobs: list[Job]):
        futures: dict[Future, Job] = {self.threads.submit(self._run, job): job for job in jobs}
        try:
            yield from _as_results(futures, as_completed(futures))
        finally:
            for fut in futures:
                fut.cancel()


class GradingError(RuntimeError):
    """The grading run cannot start (no such assignment, no sandbox when one is required...)."""


def load_config(root: Path) -> Config:
    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config() \
        if (root / "nbgrader_config.py").exists() else Config()
    cfg.CourseDirectory.root = str(root)
    return cfg


# ---------------------------------------------------------------------------------------------
# step 1: prepare

def read_notebook(path: Path) -> tuple[nbformat.NotebookNode | None, str | None]:
    """The submission's notebook, or None and what is wrong with the file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None, f"{path.name} is a link, not a file: it was not followed"
        return None, f"cannot read {path.name}: {exc.strerror}"
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None, f"{path.name} is not a regular file"
    with os.fdopen(fd, "rb") as f:
        raw = f.read(MAX_NOTEBOOK_BYTES + 1)
    if len(raw) > MAX_NOTEBOOK_BYTES:
        return None, f"{path.name} is over {MAX_NOTEBOOK_BYTES >> 20} MiB"
    if not raw.strip():
        return None, f"{path.name} is empty"
    try:
        nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
    except UnicodeDecodeError:
        return None, f"{path.name} is not a text file"
    except Exception as exc:  # nbformat raises several kinds on broken JSON
        return None, f"{path.name} is not a notebook ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
    if not isinstance(nb.get("cells"), list):
        return None, f"{path.name} is not a notebook (no cells)"
    for cell in nb.cells:
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw") \
                or not isinstance(cell.get("source"), str):
            return None, f"{path.name} has malformed cells"
        if cell.cell_type == "code":
            cell.setdefault("outputs", [])
            cell.setdefault("execution_count", None)
    return nb, None


def repair(nb: nbformat.NotebookNode, release: nbformat.NotebookNode) -> list[str]:
    """Give every graded or locked cell the metadata of the release; report what was changed.

    Learners' edits that would make nbgrader fail (or grade the wrong thing) are undone here:
    a cell copy-pasted twice keeps its nbgrader metadata once (the last copy of an answer, the
    first of anything else), edited flags or points go back to the release's, and cells
    claiming a grade id the release does not have lose their metadata.
    """
    reference = {role(c).grade_id: c for c in release.cells if role(c).grade_id}
    flags: list[str] = []
    positions: dict[str, list[int]] = {}
    for i, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader")
        if not isinstance(meta, dict):
            cell.metadata.pop("nbgrader", None)
            continue
        gid = meta.get("grade_id")
        if gid not in reference:
            cell.metadata.pop("nbgrader", None)
            flags.append(f"cell with unknown grade id {gid!r} is not graded")
            continue
        positions.setdefault(gid, []).append(i)
    for gid, where in positions.items():
        ref = reference[gid]
        keep = where[-1] if role(ref).solution and not role(ref).grade else where[0]
        if len(where) > 1:
            flags.append(f"cell {gid!r} appears {len(where)} times (copy-paste); one copy is graded")
        for i in where:
            if i != keep:
                nb.cells[i].metadata.pop("nbgrader", None)
        cell = nb.cells[keep]
        if cell.metadata["nbgrader"] != ref.metadata["nbgrader"]:
            changed = [k for k in ("grade", "solution", "locked", "points", "task")
                       if cell.metadata["nbgrader"].get(k) != ref.metadata["nbgrader"].get(k)]
            if changed:
                flags.append(f"nbgrader metadata of {gid!r} was edited ({', '.join(changed)}); restored")
            cell.metadata["nbgrader"] = dict(ref.metadata["nbgrader"])
        if cell.cell_type != ref.cell_type:
            flags.append(f"cell {gid!r} changed type to {cell.cell_type}; restored")
            cell.cell_type = ref.cell_type
            if ref.cell_type == "code":
                cell.setdefault("outputs", [])
                cell.setdefault("execution_count", None)
            else:
                cell.pop("outputs", None)
                cell.pop("execution_count", None)
    return flags


# ---------------------------------------------------------------------------------------------
# the grader

class Grader:
    """Grades one assignment of a course root; the only writer of its gradebook."""

    def __init__(self, root: Path, assignment: str, students: list[str] | None = None,
                 jobs: int | None = None, limits: Limits | None = None, scheduler: str | None = None,
                 require_sandbox: bool = False, log: Callable[[str], None] = print,
                 pool: SlotPool | None = None):
        from nbgrader.coursedir import CourseDirectory

        self.root = root.resolve()
        self.assignment = assignment
        self.config = load_config(self.root)
        self.coursedir = CourseDirectory(config=self.config)
        self.coursedir.root = str(self.root)
        self.db_url = self.coursedir.db_url
        self.limits = limits or Limits()
        self.jobs = jobs or os.cpu_count() or 1
        self.scheduler = scheduler
        self.pool = pool
        self.log = log
        self.require_sandbox = require_sandbox
        self._lists: dict[str, list[type]] = {}   # the configured preprocessor lists, read once
        # a real sandbox is started before anything is graded: bwrap on PATH is not enough
        problem = probe() if pool is None or pool.sandboxed else "the slot pool given runs without a sandbox"
        self.sandboxed = problem is None
        if not self.sandboxed:
            if require_sandbox:
                raise GradingError(f"no sandbox and --require-sandbox was given: {problem}")
            log(f"WARNING: {problem}. {NO_SANDBOX}")
        else:
            from .cgroups import available

            version, sentence = available()
            if version is None:
                log(f"WARNING: {sentence}: six processes of one submission may hold six times its memory.")
        self.students = students or self._find_students()

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

        with self._gradebook() as gb:
            try:
                return [nb.name for nb in gb.find_assignment(self.assignment).notebooks]
            except MissingEntry:
                raise GradingError(f"assignment {self.assignment!r} is not in the gradebook: "
                                   f"run `nbgrader generate_assignment {self.assignment}` first") from None

    def _release(self, notebook: str) -> nbformat.NotebookNode:
        path = self._path(self.coursedir.release_directory) / f"{notebook}.ipynb"
        if not path.exists():
            raise GradingError(f"no released notebook {path}: run `nbgrader generate_assignment {self.assignment}`")
        return nbformat.read(path, as_version=4)

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
            result.flags += repair(nb, self._release(notebook))
        nb, _ = self._run_preprocessors(self._configured("sanitize_preprocessors"), nb,
                                        self._resources(student, notebook))
        require_python_kernel(nb)
        add_guards(nb)
        # the submission's own files; never a notebook: the one being graded holds the hidden tests
        files = submission_files(path.parent, result.problems)
        return Job(student, notebook, dict(nb), files, self.limits, self.require_sandbox,
                   judged=self._judged(notebook))

    def _judged(self, notebook: str) -> dict[str, str]:
        """The notebook's hidden tests that the judge runs, read from the gradebook once."""
        from .judge import judged_sources

        cache = self.__dict__.setdefault("_judged_cache", {})
        if notebook not in cache:
            cache[notebook] = judged_sources(self.db_url, self.assignment, notebook)
        return cache[notebook]

    # -- step 3 ------------------------------------------------------------------------------------
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

    def record(self, outcome: Outcome) -> None:
        from nbgrader.preprocessors import Execute

        after_execute = [cls for cls in self._configured("autograde_preprocessors") if not issubclass(cls, Execute)]
        nb = nbformat.from_dict(outcome.nb)
        nb, _ = self._run_preprocessors(after_execute, nb, self._resources(outcome.student, outcome.notebook))
        staged = self._staged(outcome.student)
        write_files(staged, outcome.files)
        nbformat.write(nb, staged / f"{outcome.notebook}.ipynb")


    def record_missing(self, student: str, notebook: str) -> None:
        with self._gradebook() as gb:
            sub = gb.find_submission_notebook(notebook, self.assignment, student)
            for grade in sub.grades:
                grade.auto_score = 0
                grade.needs_manual_grade = False
            gb.db.commit()

    def totals(self, result: Result) -> None:
        with self._gradebook() as gb:
            sub = gb.find_submission(self.assignment, result.student)
            result.max_score = float(sub.max_score)
            result.score = float(sum(g.auto_score or 0 for nb in sub.notebooks for g in nb.grades))

    # -- the run -----------------------------------------------------------------------------------
    def run(self, progress: Callable[[Result], None] | None = None) -> list[Result]:
        import warnings

        from sqlalchemy.exc import SAWarning

        # nbgrader's gradebook API trips SQLAlchemy's autoflush warnings; they are about nbgrader
        warnings.filterwarnings("ignore", category=SAWarning)
        notebooks = self._notebook_ids()
        results = {s: Result(s) for s in self.students}
        self.staging = Path(tempfile.mkdtemp(prefix=f".copy-that-staging-{self.assignment}-", dir=self.root))
        try:
            return self._run(notebooks, results, progress)
        finally:
            remove_trees(self.staging)   # what was not published: an interrupted or failed run

    def _run(self, notebooks: list[str], results: dict[str, Result], progress) -> list[Result]:
        pending: list[Job] = []
        failed: set[str] = set()         # students whose grading went wrong on the grader's side
        for student in self.students:
            try:
                self.open_submission(student, results[student])
            except Exception as exc:
                results[student].problems.append(f"could not open the submission: {type(exc).__name__}: {exc}")
                results[student].graded = False
                failed.add(student)
                continue
            for notebook in notebooks:
                try:
                    job = self.prepare(student, notebook, results[student])
                except Exception as exc:
                    results[student].problems.append(f"could not prepare {notebook}: {type(exc).__name__}: {exc}")
                    results[student].graded = False
                    failed.add(student)
                    continue
                if job is None:
                    results[student].problems.append(f"{notebook}.ipynb was not submitted (scored zero)")
                    self.record_missing(student, notebook)
                else:
                    pending.append(job)
        remaining = {s: sum(j.student == s for j in pending) for s in self.students}

        def done(student: str) -> None:
            if remaining[student] == 0:
                try:
                    self.totals(results[student])
                    if student not in failed:
                        self.publish(student)
                    if results[student].flags:    # the formgrader's "flagged" column
                        for notebook in notebooks:
                            flag_in_gradebook(self.db_url, self.assignment, student, notebook)
                except Exception as exc:
                    results[student].problems.append(f"no totals: {exc}")
                    results[student].graded = False
                if progress:
                    progress(results[student])

        for s in self.students:
            if remaining[s] == 0 and s not in failed:
                done(s)
            elif remaining[s] == 0 and progress:
                progress(results[s])
        for job, outcome, error in self._execute_all(pending):
            r = results[job.student]
            if error is not None:
                r.problems.append(f"{job.notebook}: grading failed: {error}; earlier results kept")
                r.graded = False
                failed.add(job.student)
            else:
                r.problems += [p for p in outcome.problems if p not in r.problems]
                r.flags += [f for f in outcome.flags if f not in r.flags]
                if outcome.peak_memory is not None:
                    r.peak_memory = max(r.peak_memory or 0, outcome.peak_memory)
                try:
                    self.record(outcome)
                except Exception as exc:
                    r.problems.append(f"{job.notebook}: could not record grades: {type(exc).__name__}: {exc}")
                    r.graded = False
                    failed.add(job.student)
            remaining[job.student] -= 1
            done(job.student)
        return [results[s] for s in self.students]

    def _execute_all(self, pending: list[Job]):
        if not pending:
            return
        if self.scheduler:
            yield from self._execute_dask(pending)
            return
        if self.pool is not None:
            yield from self.pool.map(pending)
            return
        with SlotPool(max(1, min(self.jobs, len(pending))), self.sandboxed) as pool:
            yield from pool.map(pending)

    def _execute_dask(self, pending: list[Job]):
        from distributed import Client, as_completed as dask_completed

        from .remote import run_job

        with Client(self.scheduler, timeout=30) as client:
            futures = {client.submit(run_job, job, pure=False, key=f"grade-{job.student}-{job.notebook}"): job
                       for job in pending}
            yield from _as_results(futures, dask_completed(futures))
