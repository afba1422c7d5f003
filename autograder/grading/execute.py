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

import functools

import atexit
import threading
from pathlib import Path

from nbformat import from_dict
from nbgrader.preprocessors import Execute
from traitlets import Bool, Integer

from .ids import unsafe_id
from .files import submission_files, write_files
from .jobs import Job, add_guards
from .bwrap import probe
from .sandbox import Limits

NO_SANDBOX = ("bubblewrap (bwrap) is not installed: student code runs WITHOUT a sandbox. It can read "
              "the solutions and the gradebook and reach the network. Install bubblewrap "
              "(sudo apt-get install bubblewrap) before grading real submissions.")


def flag_in_gradebook(db_url: str, assignment: str, student: str, notebook: str) -> None:
    """Set nbgrader's own ``flagged`` mark on a submitted notebook, which the formgrader shows.
    Only ever set: a flag a human grader put there is never cleared by a re-grade."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        gb.find_submission_notebook(notebook, assignment, student).flagged = True
        gb.db.commit()


def require_python_kernel(nb) -> None:
    """A slot forks Python kernels only.  A notebook that asks for a kernel this machine does not
    have, or for another language, fails as it does under nbgrader's own Execute
    (``NoSuchKernel``), rather than being run in Python anyway."""
    name = (nb.metadata.get("kernelspec") or {}).get("name")
    if not name:
        return
    language = _kernel_language(name)
    if language.lower() != "python":
        raise RuntimeError(f"the notebook asks for the {language} kernel {name!r}; the sandbox runs Python only")


@functools.lru_cache(maxsize=32)
def _kernel_language(name: str) -> str:
    """The language of the kernel ``name``, as nbclient resolves it (NoSuchKernel if none), looked
    up once a process: the search of Jupyter's folders took some 40 ms a notebook."""
    from jupyter_client.manager import KernelManager

    return KernelManager(kernel_name=name).kernel_spec.language or ""


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
        from .pool import SlotPool

        with cls.lock:
            if cls.pool is None or cls.pool.sandboxed != sandboxed or cls.pool.failed():   # (a failed start: again)
                cls.close()
                cls.pool = SlotPool(1, sandboxed, background=True).__enter__()   # the job waits for it
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
    processes = Integer(Limits.processes, help="Processes and threads of one submission (0: no limit).").tag(config=True)
    file_bytes = Integer(Limits.file_bytes, help="The largest file the kernel may write, in bytes.").tag(config=True)
    judge_memory_bytes = Integer(
        Limits.judge_memory_bytes,
        help="Memory of the judge that runs a submission's hidden tests, in bytes, past what its server holds "
             "(torch): 2 GiB holds the worst a notebook's answers can make it hold (one answer of 64 MiB is "
             "about four copies while it is read; the notebook's requests and answers together stop at "
             "256 MiB) beside the tests' own tensors, with room to spare.").tag(config=True)
    judge_cpu_seconds = Integer(Limits.judge_cpu_seconds,
                                help="CPU time of that judge per notebook, in seconds.").tag(config=True)

    def limits(self) -> Limits:
        return Limits(memory_bytes=self.memory_bytes, cpu_seconds=self.cpu_seconds,
                      cell_timeout=self.timeout or Limits.cell_timeout, notebook_timeout=self.notebook_timeout,
                      output_bytes=self.output_bytes, processes=self.processes, file_bytes=self.file_bytes,
                      judge_memory_bytes=self.judge_memory_bytes, judge_cpu_seconds=self.judge_cpu_seconds)

    def _fixtures(self, assignment: str | None) -> dict[str, str]:
        """The assignment's fixtures, from the course's source folder (nbgrader has copied them
        beside the notebook for the kernel already)."""
        from nbgrader.coursedir import CourseDirectory

        from .judged import fixture_sources

        if not assignment:
            return {}
        coursedir = CourseDirectory(config=self.config)
        return fixture_sources(Path(coursedir.format_path(coursedir.source_directory, ".", assignment)))

    def preprocess(self, nb, resources, km=None):
        from .gradebook import share_engines
        from .judged import judged_sources

        share_engines()

        problem = _SharedPool.sandbox_problem()
        sandboxed = problem is None
        if not sandboxed:
            if self.require_sandbox:
                raise RuntimeError(f"no sandbox and SandboxedExecute.require_sandbox is set: {problem}")
            self.log.warning("%s. %s", problem, NO_SANDBOX)
        require_python_kernel(nb)
        info = resources.get("nbgrader", {})
        student, notebook = info.get("student", "?"), info.get("notebook", "?")
        refused = unsafe_id(str(student))
        if refused:
            raise RuntimeError(refused)
        problems: list[str] = []
        folder = resources.get("metadata", {}).get("path") or "."
        files = submission_files(Path(folder), problems)
        judged = judged_sources(info["db_url"], info["assignment"], notebook) if info.get("db_url") else {}
        job = Job(student, notebook, dict(add_guards(nb)), files, self.limits(), self.require_sandbox, judged,
                  fixtures=self._fixtures(info.get("assignment")))
        pool = _SharedPool.get(sandboxed)
        [(_, outcome, error)] = list(pool.map([job]))
        if error is not None:
            raise RuntimeError(f"{student}/{notebook}: grading failed: {error}")
        for text in problems + outcome.problems:
            self.log.warning("%s/%s: %s", student, notebook, text)
        for text in outcome.flags:
            self.log.warning("%s/%s: FLAGGED for a manual look: %s", student, notebook, text)
        if outcome.flags and info.get("db_url"):
            flag_in_gradebook(info["db_url"], info["assignment"], student, notebook)
        write_files(Path(folder), outcome.files)
        return from_dict(outcome.nb), resources
