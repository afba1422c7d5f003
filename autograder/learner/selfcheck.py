"""Run one learner notebook and read its test cells: the engine behind ``autograder check``.

The notebook runs top to bottom in a fresh kernel, errors and all, as the grader runs it: a cell
that passes its time limit is interrupted and the run goes on, a dead kernel ends it.  Every
auto-graded test cell is then scored exactly as ``nbgrader autograde`` scores it
(``nbgrader.utils.determine_grade``, after dropping warnings as the course's configuration does),
except that a cell cut off by the time limit fails, as the grader fails it, whatever its outputs.
Only the tests present in the notebook run: in ``exercises/`` those are the visible ones;
``full=True`` first puts in the instructor's test cells from the course's ``solutions/``
(:mod:`autograder.learner.finish`), hidden tests included.

A row's message says what the learner can act on: the diagnosis; "timed out"; which answer cell
failed when a test only saw the function missing; that ``check`` reads the file as saved.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

from ..kernel.i18n import LANG_ENV, N_
from ..kernel.misconceptions import BY_ID, Misconception, ids_in
from ..kernel.predictions import NO_DIAGNOSIS
from .cells import WARNING_PATTERN, role

ANSI = re.compile(r"\x1b\[[0-9;]*m")
CELL_TIMEOUT = 60
SAVE_FIRST = N_("check reads the notebook as saved on disk: if you wrote it in JupyterLab, save first (Ctrl-S)")
HIDDEN_SUFFIX = "_hidden"
HIDDEN_KEY = "copy_that_hidden"   # cell metadata: a hidden test put in by check --full


def timed_out_message(seconds: float) -> str:
    return N_(f"timed out after {seconds:g} s \u2014 a loop that never ends? The cell was stopped there.")


@dataclass
class TestResult:
    grade_id: str
    points: float
    max_points: float
    status: str        # "passed", "failed", "not started", "partial", "not checked"
    message: str       # the diagnostic: the ✓ lines when passed, the error when not
    hidden: bool = False   # hidden tests, which the learner's copy holds as comments (run by check --full)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def label(self) -> str:
        """What the learner reads for this test: the name it tests, ``hidden tests`` for a hidden one."""
        return test_label(self.grade_id, self.hidden)

    @property
    def misconceptions(self) -> list[Misconception]:
        """The misconceptions the failure's diagnosis names (none when it passed)."""
        return [] if self.passed else [BY_ID[i] for i in dict.fromkeys(ids_in(self.message))]


def test_label(grade_id: str, hidden: bool = False) -> str:
    """``test_add_one_`` -> ``add_one_``; the hidden ``test_add_one__hidden`` -> ``add_one_ (hidden tests)``;
    the hidden ``test_fit_2`` -> ``fit_2 (hidden tests)``."""
    name = grade_id[len("test_"):] if grade_id.startswith("test_") else grade_id
    if hidden:
        return N_(f"{name.removesuffix(HIDDEN_SUFFIX)} (hidden tests)")
    return name


@dataclass
class CheckReport:
    notebook: Path
    results: list[TestResult]
    problems: list[str]   # cells outside the tests that failed (syntax errors in answers, ...)
    hidden: list[str]     # test cells whose tests are hidden until grading
    unwritten: list[str] = field(default_factory=list)   # hand-graded answers still empty
    written: list[str] = field(default_factory=list)     # every hand-graded answer
    full: bool = False    # the instructor's hidden tests ran too (check --full)

    @property
    def checked(self) -> list[TestResult]:
        """The tests ``check`` can judge: all but questions whose letter it cannot know is right."""
        return [r for r in self.results if r.status != "not checked"]

    @property
    def score(self) -> float:
        return sum(r.points for r in self.checked)

    @property
    def max_score(self) -> float:
        return sum(r.max_points for r in self.checked)

    @property
    def visible(self) -> list[TestResult]:
        return [r for r in self.results if not r.hidden]

    @property
    def all_passed(self) -> bool:
        """Everything ``check`` can see is done: every visible test it can judge passes, no cell
        fails and no hand-graded answer is left empty."""
        return all(r.passed for r in self.checked) and not self.problems and not self.unwritten


def _drop_warnings(cell: nbformat.NotebookNode) -> None:
    cell.outputs = [
        o for o in cell.get("outputs", [])
        if not (o.output_type == "stream" and o.name == "stderr" and re.search(WARNING_PATTERN, o.text))
    ]


# an exception's place in a cell as IPython names it: "(3154171744.py, line 2)" or "(<string>, line 2)"
_WHERE = re.compile(r"\s*\((?:[^()]*\.py|<[^>]+>), line (\d+)\)$")


def _error_text(cell: nbformat.NotebookNode) -> str | None:
    for o in cell.get("outputs", []):
        if o.output_type == "error":
            value = _WHERE.sub(r" (line \1)", ANSI.sub("", o.get("evalue", "")).strip())
            return f"{o.ename}: {value}" if value else o.ename
        if o.output_type == "stream" and o.name == "stderr":
            last = o.text.strip().splitlines()[-1][:200]
            return N_(f"wrote to stderr: {last}")
    return None


def _stdout(cell: nbformat.NotebookNode) -> str:
    return "".join(o.text for o in cell.get("outputs", []) if o.output_type == "stream" and o.name == "stdout").strip()


def score_cell(cell: nbformat.NotebookNode) -> TestResult:
    """Score one executed test cell as nbgrader would."""
    from nbgrader.utils import determine_grade  # grading side only; learners' kernels never import this

    r = role(cell)
    _drop_warnings(cell)
    points, max_points = determine_grade(cell)
    points = float(points or 0)
    error = _error_text(cell)
    if error is None and points >= max_points:
        shown = _stdout(cell).splitlines()
        unjudged = [line for line in shown if line.startswith(NO_DIAGNOSIS)]
        if unjudged and not any(line.startswith("\u2713") for line in shown):
            # a question with a right letter: the release stores no right letter, only the
            # diagnoses of wrong ones, so a letter without one may be right or wrong
            rest = unjudged[0][len("\u00b7 "):]
            return TestResult(r.grade_id or "?", 0.0, max_points, "not checked", N_(f"not checked here: {rest}"))
        return TestResult(r.grade_id or "?", points, max_points, "passed", _stdout(cell))
    if error and error.split(":")[0] == "NotImplementedError":
        said = error.partition(":")[2].strip()
        return TestResult(r.grade_id or "?", points, max_points, "not started",
                          said or N_("the function still raises NotImplementedError: write its body"))
    status = "partial" if points > 0 else "failed"
    return TestResult(r.grade_id or "?", points, max_points, status, error or N_("scored below full points"))


# what nbgrader leaves in a solution cell it hands out (ClearSolutions' default texts)
PLACEHOLDERS = ("YOUR ANSWER HERE", "# YOUR CODE HERE", "raise NotImplementedError()")


def is_unwritten(source: str) -> bool:
    """A hand-graded answer that holds nothing but nbgrader's placeholder (or nothing at all)."""
    text = source
    for placeholder in PLACEHOLDERS:
        text = text.replace(placeholder, "")
    return not text.strip()


def _only_comments(source: str) -> bool:
    return all(not line.strip() or line.lstrip().startswith("#") for line in source.splitlines())


class _CheckClient(NotebookClient):
    """nbclient as the grader runs a notebook: a cell past its time limit is interrupted and the
    run goes on (``interrupt_on_timeout``); one that ignores the interrupt for another time limit
    ends the run.  Remembers which cells timed out."""

    def __init__(self, nb, **kw):
        super().__init__(nb, interrupt_on_timeout=True, allow_errors=True, **kw)
        self.current: int | None = None
        self.timed_out: set[int] = set()

    async def async_execute_cell(self, cell, cell_index, *args, **kwargs):
        self.current = cell_index
        return await super().async_execute_cell(cell, cell_index, *args, **kwargs)

    async def _async_handle_timeout(self, timeout, cell=None):
        if self.current in self.timed_out:     # the interrupt did not end it: stop here
            raise CellTimeoutError.error_from_timeout_and_cell("Cell execution timed out", timeout, cell)
        self.timed_out.add(self.current)
        return await super()._async_handle_timeout(timeout, cell)


@dataclass
class Run:
    """An executed notebook: which cells were cut off, and why the run stopped early (if it did)."""

    nb: nbformat.NotebookNode
    timed_out: set[int]
    stopped: str | None


_QUIET = logging.getLogger("copy-that.check")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def run_notebook(nb: nbformat.NotebookNode, folder: Path, timeout: int = CELL_TIMEOUT,
                 kernel_manager: Callable[[], object] | None = None) -> Run:
    """Execute ``nb`` in a fresh kernel started in ``folder``; errors stay in the outputs.

    ``kernel_manager`` makes the kernel's manager (default: a local kernel on Unix sockets); the
    kernel is shut down at the end either way."""
    from jupyter_client import AsyncKernelManager
    from jupyter_core.utils import run_sync

    sockets = None
    if kernel_manager is None:
        # Unix sockets, not TCP: nothing listens on the network while a learner's code runs.
        # The socket path must be absolute: the kernel starts in the notebook's folder.
        sockets = tempfile.mkdtemp(prefix="copy-that-ipc-")
        km = AsyncKernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(sockets, "kernel"))
    else:
        km = kernel_manager()
    client = _CheckClient(nb, km=km, timeout=timeout, log=_QUIET, resources={"metadata": {"path": str(folder)}})
    stopped = None
    try:
        # the kernel speaks English, whatever the learner's language: check reads what it prints
        client.execute(env={**os.environ, LANG_ENV: "en"})
    except CellTimeoutError:
        stopped = N_(f"cell {client.current} ignored the interrupt after its time limit")
    except DeadKernelError:
        stopped = N_("the kernel died (your code ended the process, or it ran out of memory)")
    finally:
        if km.has_kernel:  # nbclient leaves a kernel it did not create running
            run_sync(km.shutdown_kernel)(now=True)
        # and the client it made, channels running: each one left holds a zmq context and three
        # threads, which add up in a process that checks again and again (--watch)
        kc = getattr(client, "kc", None)
        if kc is not None:
            kc.stop_channels()
        for owner in (kc, km):
            context = getattr(owner, "context", None)
            if context is not None and not context.closed:
                context.destroy(linger=0)
        if sockets:
            shutil.rmtree(sockets, ignore_errors=True)
    return Run(nb, client.timed_out, stopped)


_DEFINES = re.compile(r"^(?:def\s+(\w+)|class\s+(\w+)|(\w+)\s*(?::[^=]*)?=(?!=))", re.M)
_UNDEFINED = re.compile(r"^NameError: name '(\w+)' is not defined")


def _names_defined(source: str) -> set[str]:
    """Top-level names a cell defines, read from its text (it may not parse)."""
    return {next(g for g in m.groups() if g) for m in _DEFINES.finditer(source)}


def report_from(run: Run, path: Path, timeout: float, full: bool = False) -> CheckReport:
    """The check report of an executed notebook."""
    nb = run.nb
    results, problems, hidden, unwritten, written = [], [], [], [], []
    if run.stopped:
        problems.append(N_(f"the run stopped: {run.stopped}"))
    failed_answers: dict[str, str] = {}    # a name an answer cell defines -> why that cell failed
    for index, cell in enumerate(nb.cells):
        r = role(cell)
        if r.is_manual:
            written.append(r.grade_id or "?")
            if is_unwritten(cell.source):
                unwritten.append(r.grade_id or "?")
        if cell.cell_type != "code":
            continue
        if r.is_test:
            if _only_comments(cell.source):
                hidden.append(r.grade_id or "?")
                continue
            if index in run.timed_out:
                result = TestResult(r.grade_id or "?", 0.0, r.points, "failed", timed_out_message(timeout))
            elif cell.get("execution_count") is None and not cell.get("outputs"):
                result = TestResult(r.grade_id or "?", 0.0, r.points, "failed",
                                    N_("did not run: the notebook stopped before this cell"))
            else:
                result = _explained(score_cell(cell), failed_answers)
            result.hidden = bool(cell.metadata.get(HIDDEN_KEY))
            results.append(result)
        elif r.solution or r.locked:
            _drop_warnings(cell)
            error = timed_out_message(timeout) if index in run.timed_out else _error_text(cell)
            if error and error.split(":")[0] == "NotImplementedError":
                continue           # an answer still as handed out: its tests say "not started"
            if error:
                where = N_(f"answer cell {r.grade_id}") if r.solution else N_(f"cell {r.grade_id}")
                problems.append(N_(f"{where}: {error}"))
                for name in _names_defined(cell.source) | ({r.grade_id} if r.grade_id else set()):
                    failed_answers.setdefault(name, N_(f"{where} failed ({error})"))
    return CheckReport(path, results, problems, hidden, unwritten, written, full)


def _explained(result: TestResult, failed_answers: dict[str, str]) -> TestResult:
    """A row's message in the learner's terms: a name missing because its answer cell failed says
    so; a function still raising NotImplementedError reminds that check reads the saved file."""
    if result.status == "not started":
        result.message = N_(f"{result.message} ({SAVE_FIRST})")
        return result
    missing = _UNDEFINED.match(result.message)
    if missing and missing.group(1) in failed_answers:
        name, why = missing.group(1), failed_answers[missing.group(1)]
        result.message = N_(f"{name} is not defined: its {why}; fix that cell")
    return result


def check_notebook(path: str | Path, timeout: int = CELL_TIMEOUT, full: bool = False,
                   kernel_manager: Callable[[], object] | None = None) -> CheckReport:
    """Run the notebook as saved and score its test cells; ``full``: with the instructor's test
    cells from the course's ``solutions/`` (hidden tests included)."""
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    if full:
        from .finish import source_notebook, with_instructor_tests

        source = source_notebook(path)
        if source is None:
            raise FileNotFoundError(f"no instructor's notebook for {path.name}: --full needs the course's solutions/")
        nb = with_instructor_tests(nb, nbformat.read(source, as_version=4))
    run = run_notebook(nb, path.parent.resolve(), timeout, kernel_manager)
    return report_from(run, path, timeout, full)
