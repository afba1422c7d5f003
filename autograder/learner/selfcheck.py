"""Run one learner notebook and read its test cells: the engine behind ``autograder check``.

The notebook runs top to bottom in a fresh kernel, errors and all; every auto-graded test cell
is then scored exactly as ``nbgrader autograde`` scores it (``nbgrader.utils.determine_grade``,
after dropping warnings as the course's configuration does).  Only the tests present in the
notebook run: in ``exercises/`` those are the visible ones.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

from ..kernel.misconceptions import BY_ID, Misconception, ids_in
from ..kernel.predictions import NO_DIAGNOSIS
from .cells import WARNING_PATTERN, role

ANSI = re.compile(r"\x1b\[[0-9;]*m")
CELL_TIMEOUT = 60


@dataclass
class TestResult:
    grade_id: str
    points: float
    max_points: float
    status: str        # "passed", "failed", "not started", "partial", "not checked"
    message: str       # the diagnostic: the ✓ lines when passed, the error when not

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def misconceptions(self) -> list[Misconception]:
        """The misconceptions the failure's diagnosis names (none when it passed)."""
        return [] if self.passed else [BY_ID[i] for i in dict.fromkeys(ids_in(self.message))]


@dataclass
class CheckReport:
    notebook: Path
    results: list[TestResult]
    problems: list[str]   # cells outside the tests that failed (syntax errors in answers, ...)
    hidden: list[str]     # test cells whose tests are hidden until grading
    unwritten: list[str] = field(default_factory=list)   # hand-graded answers still empty
    written: list[str] = field(default_factory=list)     # every hand-graded answer

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
    def all_passed(self) -> bool:
        """Everything ``check`` can see is done: every visible test it can judge passes, no cell
        fails and no hand-graded answer is left empty."""
        return all(r.passed for r in self.checked) and not self.problems and not self.unwritten


def _drop_warnings(cell: nbformat.NotebookNode) -> None:
    cell.outputs = [
        o for o in cell.get("outputs", [])
        if not (o.output_type == "stream" and o.name == "stderr" and re.search(WARNING_PATTERN, o.text))
    ]


def _error_text(cell: nbformat.NotebookNode) -> str | None:
    for o in cell.get("outputs", []):
        if o.output_type == "error":
            value = ANSI.sub("", o.get("evalue", "")).strip()
            return f"{o.ename}: {value}" if value else o.ename
        if o.output_type == "stream" and o.name == "stderr":
            return "wrote to stderr: " + o.text.strip().splitlines()[-1][:200]
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
            return TestResult(r.grade_id or "?", 0.0, max_points, "not checked",
                              "not checked here: " + unjudged[0][len("\u00b7 "):])
        return TestResult(r.grade_id or "?", points, max_points, "passed", _stdout(cell))
    if error and "NotImplementedError" in error:
        return TestResult(r.grade_id or "?", points, max_points, "not started",
                          "the function still raises NotImplementedError: write its body")
    status = "partial" if points > 0 else "failed"
    return TestResult(r.grade_id or "?", points, max_points, status, error or "scored below full points")


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


def run_notebook(path: Path, timeout: int = CELL_TIMEOUT) -> nbformat.NotebookNode:
    """Execute a copy of the notebook in a fresh kernel, in the notebook's folder; errors stay in outputs."""
    from jupyter_client import AsyncKernelManager
    from jupyter_core.utils import run_sync

    nb = nbformat.read(path, as_version=4)
    # Unix sockets, not TCP: nothing listens on the network while a learner's code runs.
    # The socket path must be absolute: the kernel starts in the notebook's folder.
    sockets = tempfile.mkdtemp(prefix="copy-that-ipc-")
    km = AsyncKernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(sockets, "kernel"))
    client = NotebookClient(nb, km=km, timeout=timeout, allow_errors=True,
                            resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute()
    except (CellTimeoutError, DeadKernelError) as exc:
        # Later cells stay unexecuted: they are reported as failed below.
        nb.metadata["copy_that_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    finally:
        if km.has_kernel:  # nbclient leaves a kernel it did not create running
            run_sync(km.shutdown_kernel)(now=True)
        shutil.rmtree(sockets, ignore_errors=True)
    return nb


def check_notebook(path: str | Path, timeout: int = CELL_TIMEOUT) -> CheckReport:
    """Run the notebook and score its test cells."""
    path = Path(path)
    nb = run_notebook(path, timeout)
    results, problems, hidden, unwritten, written = [], [], [], [], []
    fatal = nb.metadata.pop("copy_that_error", None)
    if fatal:
        problems.append(f"the run stopped: {fatal}")
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
            elif cell.get("execution_count") is None and not cell.get("outputs"):
                results.append(TestResult(r.grade_id or "?", 0.0, r.points, "failed",
                                          "did not run (the notebook stopped before this cell)"))
            else:
                results.append(score_cell(cell))
        elif r.solution or r.locked:
            _drop_warnings(cell)
            error = _error_text(cell)
            if error:
                where = f"answer cell {r.grade_id}" if r.solution else f"cell {r.grade_id}"
                problems.append(f"{where}: {error}")
    return CheckReport(path, results, problems, hidden, unwritten, written)
