"""nbgrader's ``Execute`` step, run in a grading slot: the course's one way to run student code.

The course configuration (``nbgrader_config.py``) puts :class:`SandboxedExecute` in the place of
nbgrader's ``Execute`` in ``Autograde.autograde_preprocessors``.  So plain ``nbgrader autograde``
run from the course root, and the formgrader's Autograde button, run each submission the way
``python -m autograder grade`` does:

- in a bubblewrap sandbox, in a kernel forked from the slot's fork server (the guard cells in
  place, limits on memory, CPU time, processes, output and wall clock);
- with none of the course's files visible: the kernel gets the submission's own regular files,
  never a notebook (the notebook nbgrader is grading holds the hidden tests);
- scored on the execute replies as well as the outputs (see ``jobs.LimitedClient``).

One slot serves every notebook of the process (an ``nbgrader autograde`` run, or a formgrader
server); it is started on first use and closed when the process exits.
"""
from __future__ import annotations

import atexit
import os
import stat
import threading
from pathlib import Path

from nbgrader.preprocessors import Execute
from traitlets import Bool, Integer

from .jobs import Job, add_guards
from .sandbox import Limits, probe

MAX_FILE_BYTES = 20 << 20     # one file a submission brings besides its notebooks
MAX_TOTAL_BYTES = 64 << 20    # all of them together
MAX_FILES = 200

NO_SANDBOX = ("bubblewrap (bwrap) is not installed: student code runs WITHOUT a sandbox. It can read "
              "the solutions and the gradebook and reach the network. Install bubblewrap "
              "(sudo apt-get install bubblewrap) before grading real submissions.")


def submission_files(folder: Path, problems: list[str] | None = None) -> dict[str, bytes]:
    """The regular files under ``folder`` but notebooks, as relative path -> bytes.

    The folder is hostile data: no link is followed (a link, device or pipe is left out), and the
    files are capped one by one, in number and in total bytes (counted at their full length, so
    a sparse file counts as what it would become).  What was left out is said in ``problems``.
    """
    problems = problems if problems is not None else []
    files: dict[str, bytes] = {}
    total = 0

    def skip(text: str) -> None:
        if text not in problems:
            problems.append(text)

    def walk(directory: Path, rel: str, depth: int) -> None:
        nonlocal total
        if depth > 16:
            skip(f"{rel}: folders nested too deep; left out")
            return
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            skip(f"{rel or '.'}: cannot be listed ({exc.strerror}); left out")
            return
        for entry in entries:
            name = f"{rel}/{entry.name}" if rel else entry.name
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                walk(Path(entry.path), name, depth + 1)
            elif not stat.S_ISREG(info.st_mode):
                skip(f"{name}: not a regular file (a link, device or pipe); left out")
            elif entry.name.endswith(".ipynb"):
                continue
            elif info.st_size > MAX_FILE_BYTES:
                skip(f"{name}: {info.st_size} bytes, over the {MAX_FILE_BYTES} bytes a file may have; left out")
            elif len(files) >= MAX_FILES:
                skip(f"more than {MAX_FILES} files besides the notebooks; the rest left out")
            elif total + info.st_size > MAX_TOTAL_BYTES:
                skip(f"{name}: the files besides the notebooks pass {MAX_TOTAL_BYTES} bytes in all; left out")
            else:
                try:
                    fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW)
                except OSError as exc:
                    skip(f"{name}: cannot be read ({exc.strerror}); left out")
                    continue
                with os.fdopen(fd, "rb") as f:
                    data = f.read(MAX_FILE_BYTES + 1)
                if len(data) > MAX_FILE_BYTES:   # grew since it was listed
                    skip(f"{name}: over the {MAX_FILE_BYTES} bytes a file may have; left out")
                    continue
                files[name] = data
                total += len(data)

    walk(Path(folder), "", 0)
    return files


class _SharedPool:
    """The process's one slot, started on first use, closed at exit."""

    lock = threading.Lock()
    pool = None
    probed: list[str | None] = []

    @classmethod
    def sandbox_problem(cls) -> str | None:
        """Why no sandbox can be made here (None: it can), found once per process."""
        with cls.lock:
            if not cls.probed:
                cls.probed.append(probe())
            return cls.probed[0]

    @classmethod
    def get(cls, sandboxed: bool):
        from .runner import SlotPool

        with cls.lock:
            if cls.pool is None or cls.pool.sandboxed != sandboxed:
                cls.close()
                cls.pool = SlotPool(1, sandboxed).__enter__()
            return cls.pool

    @classmethod
    def close(cls) -> None:
        if cls.pool is not None:
            cls.pool.__exit__(None, None, None)
            cls.pool = None


atexit.register(_SharedPool.close)


class SandboxedExecute(Execute):
    """nbgrader's ``Execute``, with the notebook run in a sandboxed grading slot."""

    require_sandbox = Bool(
        False, help="Refuse to run student code when bubblewrap cannot be used (instead of a warning)."
    ).tag(config=True)
    memory_bytes = Integer(Limits.memory_bytes, help="Address space of the kernel, in bytes.").tag(config=True)
    cpu_seconds = Integer(Limits.cpu_seconds, help="CPU time of the whole notebook.").tag(config=True)
    notebook_timeout = Integer(Limits.notebook_timeout, help="Wall clock of the whole notebook, in seconds.").tag(config=True)
    output_bytes = Integer(Limits.output_bytes, help="All the output a notebook may send, in bytes.").tag(config=True)

    def limits(self) -> Limits:
        return Limits(memory_bytes=self.memory_bytes, cpu_seconds=self.cpu_seconds,
                      cell_timeout=self.timeout or Limits.cell_timeout, notebook_timeout=self.notebook_timeout,
                      output_bytes=self.output_bytes)

        return Path(CourseDirectory(config=self.config).root).resolve()

    def preprocess(self, nb, resources, km=None):
        problem = _SharedPool.sandbox_problem()
        sandboxed = problem is None
        if not sandboxed:
            if self.require_sandbox:
                raise RuntimeError(f"no sandbox and SandboxedExecute.require_sandbox is set: {problem}")
            self.log.warning("%s. %s", problem, NO_SANDBOX)
        info = resources.get("nbgrader", {})
        student, notebook = info.get("student", "?"), info.get("notebook", "?")
        problems: list[str] = []
        folder = resources.get("metadata", {}).get("path") or "."
        files = submission_files(Path(folder), problems)
        job = Job(student, notebook, dict(add_guards(nb)), files, self.limits(), self.require_sandbox)
        pool = _SharedPool.get(sandboxed)
        [(_, outcome, error)] = list(pool.map([job]))
        if error is not None:
            raise RuntimeError(f"{student}/{notebook}: grading failed: {error}")
        for text in problems + outcome.problems:
            self.log.warning("%s/%s: %s", student, notebook, text)
        for text in outcome.flags:
            self.log.warning("%s/%s: FLAGGED for a manual look: %s", student, notebook, text)
        from nbformat import from_dict

        return from_dict(outcome.nb), resources
