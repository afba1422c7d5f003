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

Around it: the configuration is nbgrader's (``config.load_config``); an assignment missing from
the gradebook is added from ``solutions/``, and one that differs from ``solutions/`` is brought in
line with it (``follow_source``, ``sync.py``); with ``only_changed`` a submission whose folder
hashes as at its last complete grading, under the same tests, is left alone (``GradingState``);
``stop()`` ends a run within seconds, keeping what finished; ``write_report`` puts the run's
report in the course.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import pickle
import queue
import shutil
import stat
import tempfile
import threading
import time
import zlib
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import nbformat
from traitlets.config import Config

from ..learner.cells import role
from .execute import NO_SANDBOX, flag_in_gradebook, require_python_kernel
from .files import remove_trees, submission_files, write_files
from .jobs import Job, Outcome, add_guards, execute, settle_memory
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
    auto_score: float = 0.0          # ``score`` is the gradebook's total: manual grades where given
    seconds: float = 0.0             # time its notebooks ran in a slot
    timeouts: int = 0                # cells stopped at the cell limit, notebooks at theirs
    failed: bool = False    # True: grading went wrong on the grader's side (the run failed for it);
                            # a broken notebook is graded=False, failed=False: the student's problem
    hash: str = ""                   # the submitted folder's content hash (``submission_hash``)


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
        slot.busy = job          # the job it runs, for _interrupt
        try:
            return execute(job, slot)
        finally:
            slot.busy = None
            self.slots.put(slot)

    def map(self, jobs, stop: threading.Event | None = None):
        """``(job, outcome, error)`` as the jobs finish.  Once ``stop`` is set, jobs not started
        are cancelled, the kernels of running ones killed, and the generator ends within seconds.

        ``jobs`` is any iterable, taken a few at a time (twice as many as there are slots), and a
        finished job is let go once yielded: a class of any size holds a bounded number of
        notebooks in the grader's memory."""
        jobs = iter(jobs)
        futures: dict[Future, Job] = {}

        def top_up() -> None:
            while len(futures) < 2 * self.size:
                job = next(jobs, None)
                if job is None:
                    return
                futures[self.threads.submit(self._run, job)] = job

        top_up()
        try:
            while futures:
                done, running = wait(set(futures), timeout=0.25, return_when=FIRST_COMPLETED)
                for item in _as_results(futures, done):
                    yield item
                for fut in done:
                    del futures[fut]
                if stop is not None and stop.is_set():
                    self._interrupt(futures, running)
                    return
                top_up()
        finally:
            for fut in futures:
                fut.cancel()

    def _interrupt(self, futures: dict, running: set, grace: float = 5.0) -> None:
        for fut in running:
            fut.cancel()
        mine = {id(job) for job in futures.values()}     # (a pool may serve other runs at the same time)
        busy = [slot for slot in self.started if id(getattr(slot, "busy", None)) in mine]
        for slot in busy:      # the kernel dies; its job ends as after a crash (and is not recorded)
            try:
                slot.request({"op": "signal", "signum": 9}, timeout=2)
            except Exception:
                pass
        wait([f for f in running if not f.cancelled()], timeout=grace)


class GradingError(RuntimeError):
    """The grading run cannot start (no such assignment, no sandbox when one is required...)."""


def load_config(root: Path) -> Config:
    """The configuration for a course root, loaded as nbgrader loads it (see ``config.py``)."""
    from .config import load_config as load

    return load(root, cwd=root)


def submission_hash(folder: Path, big: int = 256 << 20) -> str:
    """A hash of everything in a submitted folder: names, kinds, link targets and contents (files
    over ``big`` bytes by size and modification time).  Links are never followed, nothing but a
    regular file is opened (a FIFO would block), and the walk keeps its own stack (a tree deeper
    than Python's recursion limit is hashed like any other)."""
    h = hashlib.sha256()
    stack = [Path(folder)]
    while stack:
        current = stack.pop()
        try:
            names = sorted(os.listdir(current))
        except OSError as exc:
            h.update(f"unlistable {exc.errno}".encode())
            continue
        for name in reversed(names):      # children pushed so they pop in name order
            path = current / name
            rel = os.fsencode(str(path.relative_to(folder)))
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                h.update(b"D\0" + rel + b"\0")
                stack.append(path)
            elif stat.S_ISLNK(st.st_mode):
                try:
                    h.update(b"L\0" + rel + b"\0" + os.fsencode(os.readlink(path)) + b"\0")
                except OSError:
                    h.update(b"L\0" + rel + b"\0")
            elif stat.S_ISREG(st.st_mode):
                h.update(b"F\0" + rel + b"\0" + str(st.st_size).encode() + b"\0")
                if st.st_size > big:
                    h.update(str(st.st_mtime_ns).encode())
                    continue
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                except OSError as exc:
                    h.update(f"unreadable {exc.errno}".encode())
                    continue
                with os.fdopen(fd, "rb", buffering=0) as f:
                    if stat.S_ISREG(os.fstat(fd).st_mode):
                        while chunk := f.read(1 << 20):
                            h.update(chunk)
            else:
                h.update(b"O\0" + rel + b"\0")
    return h.hexdigest()


class GradingState:
    """What the last complete grading of each student found, in a small JSON file in the course
    (``<report_directory>/<assignment>/grading-state.json``): the submitted folder's hash, the
    tests it was graded with (``Grader.tests_key``), and the flags, problems, timeouts and time
    the report shows for students not graded again.

    It lives beside the report, not in the gradebook, because nbgrader's schema has no place
    for it (and a PostgreSQL gradebook is shared by checkouts that each have their own
    ``autograded/``).  A student counts as unchanged only when the hash matches *and* the
    gradebook and ``autograded/`` still hold the results, so a lost file or a new gradebook
    means grading again, never a skipped student.  Concurrent runs merge under a file lock."""

    VERSION = 1

    def __init__(self, path: Path):
        self.path = path

    def read(self) -> dict[str, dict]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != self.VERSION:
            return {}
        students = data.get("students")
        return students if isinstance(students, dict) else {}

    def update(self, entries: dict[str, dict]) -> None:
        import fcntl

        if not entries:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            students = self.read()
            students.update(entries)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
            tmp.write_text(json.dumps({"version": self.VERSION, "students": students}, indent=1, sort_keys=True))
            os.replace(tmp, self.path)


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


def repair(nb: nbformat.NotebookNode, release: nbformat.NotebookNode, retired=frozenset()) -> list[str]:
    """Give every graded or locked cell the metadata of the release; report what was changed.

    Learners' edits that would make nbgrader fail (or grade the wrong thing) are undone here:
    a cell copy-pasted twice keeps its nbgrader metadata once (the last copy of an answer, the
    first of anything else), edited flags or points go back to the release's, and cells
    claiming a grade id the release does not have lose their metadata.  A locked cell exactly as
    an earlier release made it (its nbgrader checksum holds) is the instructor's change, not the
    learner's, and goes back silently; so do the cells of ``retired`` grade ids (removed from the
    source in this run).
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
            if gid not in retired and not _as_released(cell):
                flags.append(f"cell with unknown grade id {gid!r} is not graded")
            cell.metadata.pop("nbgrader", None)
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
            if changed and not _as_released(cell):
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


def _as_released(cell) -> bool:
    """A locked, non-answer cell whose nbgrader checksum holds: as some release of the instructor's
    made it (an answer's checksum never holds once written, so answers are never taken for one)."""
    from nbgrader.utils import compute_checksum, is_locked, is_solution

    try:
        return (not is_solution(cell) and is_locked(cell)
                and cell.metadata["nbgrader"].get("checksum") == compute_checksum(cell))
    except Exception:       # malformed metadata: not as released
        return False


# ---------------------------------------------------------------------------------------------
# the grader

class Grader:
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

    def follow_source(self) -> None:
        """Bring the gradebook's assignment in line with the source folder when they differ (an
        edit of ``solutions/``): first what nbgrader refuses once there are submissions (cells and
        notebooks added or removed), then ``generate_assignment --force`` (see ``sync.py``)."""
        from . import sync

        source = self._path(self.coursedir.source_directory)
        if not source.is_dir():
            return
        with self._gradebook() as gb:
            current = sync.from_gradebook(gb, self.assignment)
        if not current:
            return           # not in the gradebook yet: add_assignment adds it
        wanted = sync.from_source(source, self.assignment, self.config)
        changes = sync.compare(wanted, current)
        if changes.none:
            return
        with self._gradebook() as gb:
            dropped = sync.make_room(gb, self.assignment, wanted, changes)
        self.add_assignment(f"{self.coursedir.source_directory}/{self.assignment} changed since the gradebook "
                            f"took it ({changes.describe()}): updating the gradebook (nbgrader generate_assignment"
                            f"{', hand grades kept' if not dropped else ''})")
        with self._gradebook() as gb:
            sync.complete_submissions(gb, self.assignment)
        self.retired = {cell for _, _, cell in changes.removed}
        if dropped:
            self.log(f"hand grades dropped with the cells removed from {self.coursedir.source_directory}/: "
                     f"{', '.join(dropped)}; the others are kept")

    def add_assignment(self, why: str | None = None) -> None:
        """Put the assignment in the gradebook from ``solutions/``, as ``nbgrader generate_assignment``
        does, without touching the committed ``exercises/`` (nbgrader itself would skip an
        assignment whose release exists).  nbgrader runs on a copy, writing to this gradebook; the
        release it makes is what this run repairs submissions against (``generated``)."""
        from ..course.build import run_nbgrader

        source = self._path(self.coursedir.source_directory)
        if not source.is_dir():
            raise GradingError(f"no assignment {self.assignment!r} in {self.coursedir.source_directory}/, so "
                               f"nbgrader generate_assignment cannot add it to the gradebook")
        self.log(why or f"adding {self.assignment} to the gradebook from {self.coursedir.source_directory}/ "
                        f"(nbgrader generate_assignment)")
        with tempfile.TemporaryDirectory(prefix="copy-that-release-") as tmp:
            work = Path(tmp)
            if (self.root / "nbgrader_config.py").is_file():
                shutil.copy2(self.root / "nbgrader_config.py", work / "nbgrader_config.py")
            shutil.copytree(source, work / self.coursedir.source_directory / self.assignment,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
            done = run_nbgrader("generate_assignment", self.assignment, "--force",
                                f"--CourseDirectory.root={work}", f"--CourseDirectory.db_url={self.db_url}",
                                f"--CourseDirectory.course_id={self.coursedir.course_id}",
                                f"--CourseDirectory.source_directory={self.coursedir.source_directory}",
                                f"--CourseDirectory.release_directory={self.coursedir.release_directory}",
                                cwd=work)
            if done.returncode != 0:
                raise GradingError(f"nbgrader generate_assignment {self.assignment} failed:\n"
                                   f"{(done.stdout + done.stderr)[-3000:]}")
            release = self._path(self.coursedir.release_directory)
            made = work / self.coursedir.release_directory / self.assignment
            if not release.exists():    # no committed release: nbgrader's own goes in its place
                shutil.copytree(made, release)
            self.generated = {p.stem: nbformat.read(p, as_version=4) for p in sorted(made.glob("*.ipynb"))}
            stale = [p.name for p in made.glob("*.ipynb")
                     if not (release / p.name).is_file() or (release / p.name).read_bytes() != p.read_bytes()]
            if stale:
                self.log(f"{self.coursedir.release_directory}/{self.assignment} is not what "
                         f"{self.coursedir.source_directory}/ makes ({', '.join(sorted(stale))}): this run grades "
                         f"with the new release; give it to learners with `python -m autograder build --only "
                         f"{self.assignment}`")

    def _release(self, notebook: str) -> nbformat.NotebookNode:
        if notebook in self.generated:
            return nbformat.from_dict(self.generated[notebook])
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

    def _fixtures(self) -> tuple[dict[str, str], dict[str, bytes]]:
        """The assignment's fixtures, read once: module name -> the instructor's source (for the
        judge), and file name -> the released copy (for the kernel's folder; the source's copy
        where the release has none)."""
        from .judged import fixture_files, fixture_sources

        if "_fixtures_read" not in self.__dict__:
            source = self._path(self.coursedir.source_directory)
            release = self._path(self.coursedir.release_directory)
            released = {p.name: ((release / p.name) if (release / p.name).is_file() else p).read_bytes()
                        for p in fixture_files(source)}
            self._fixtures_read = (fixture_sources(source), released)
        return self._fixtures_read

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
        graded_by_hand = self._graded_by_hand(outcome.student, outcome.notebook)
        nb, _ = self._run_preprocessors(after_execute, nb, self._resources(outcome.student, outcome.notebook))
        if graded_by_hand:
            self._keep_graded_by_hand(outcome.student, outcome.notebook, nb, graded_by_hand)
        staged = self._staged(outcome.student)
        write_files(staged, outcome.files)
        nbformat.write(nb, staged / f"{outcome.notebook}.ipynb")

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

    def tests_key(self) -> str:
        """A hash of the tests every submission is graded with: the gradebook's cells of the
        assignment and its fixtures (see ``sync.tests_key``), read once a run."""
        import hashlib

        from . import sync

        if "_tests_key" not in self.__dict__:
            with self._gradebook() as gb:
                cells = sync.from_gradebook(gb, self.assignment)
            sources, released = self._fixtures()
            fixtures = {**sources, **{f"released {k}": hashlib.sha256(v).hexdigest() for k, v in released.items()}}
            self._tests_key = sync.tests_key(cells, fixtures)
        return self._tests_key

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
        pending: list[_Packed] = []
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
                    pending.append(_Packed(job))
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
        for job, outcome, error in self._execute_all(_unpacked(pending)):
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
                    self.record(outcome)
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
            for item in _as_results(futures, dask_completed(futures)):
                yield item
                if self.stopping.is_set():
                    client.cancel(list(futures))
                    return


class _Packed:
    """A prepared job waiting for a slot, kept compressed: a class of a thousand submissions is
    prepared before the first runs, and its notebooks as Python objects would fill the grader."""

    __slots__ = ("student", "data")

    def __init__(self, job: Job):
        self.student = job.student
        self.data = zlib.compress(pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL), 1)

    def unpack(self) -> Job:
        return pickle.loads(zlib.decompress(self.data))   # the grader's own data, packed above


class _unpacked:
    """The pending jobs, unpacked one at a time as the pool takes them, and let go after."""

    def __init__(self, pending: list[_Packed]):
        self.pending = deque(pending)
        pending.clear()

    def __len__(self) -> int:
        return len(self.pending)

    def __iter__(self):
        while self.pending:
            yield self.pending.popleft().unpack()


def _timeouts(outcome: Outcome) -> int:
    """Cells stopped at the cell limit, and the notebook if it was stopped at its own."""
    cells = sum(o.get("ename") == "CellTimeout" for c in outcome.nb.get("cells", [])
                for o in c.get("outputs", []) if o.get("output_type") == "error")
    return cells + any("ran past its" in p for p in outcome.problems)


def _graded_sources(path: Path) -> dict[str, str]:
    """grade_id -> source of the graded cells in a notebook the grader wrote (empty if none)."""
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:
        return {}
    return {role(c).grade_id: c.source for c in nb.cells if role(c).grade_id}
