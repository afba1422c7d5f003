"""Which test cells the judge runs outside the kernel: every one, unless the author says otherwise.

A test cell (an nbgrader grade cell that is not a solution cell) is judged by default: at grading
its source, read from the gradebook, runs in the grader's judge and only calls the learner's
functions in the kernel.  A *visible* test may run in the learner's kernel instead when its
source holds the line ``# runs in your kernel``; a hidden test (one with ``### BEGIN HIDDEN
TESTS``) never does, whatever it says: its source must not reach the kernel (``build`` refuses
such a cell, see ``authoring.py``).  The line ``# graded outside your kernel`` is no longer
needed; the course keeps it where it tells learners the truth.

An assignment's *fixtures* are the Python files beside its notebook in the source directory
(``solutions/aN_slug/fixtures.py``): nbgrader releases them as they are, so learners see them.
A judged test imports them by name (``from fixtures import TinyNet``), and the judge sends their
``nn.Module`` classes to the kernel by value: the judge loads the instructor's copy, and the
kernel imports the released copy from its working folder.

Kept apart from ``judge.py`` so that finding out costs no ``import torch``: the grader loads
torch (and the judge) only for a notebook that has judged tests.
"""
from __future__ import annotations

import types
from pathlib import Path

from ..learner.cells import IN_KERNEL_MARKER as IN_KERNEL, JUDGED_MARKER as MARKER

HIDDEN = "BEGIN HIDDEN TESTS"               # nbgrader's delimiter (ClearHiddenTests.begin_test_delimeter)


def judged_sources(db_url: str, assignment: str, notebook: str) -> dict[str, str]:
    """grade_id -> source of every judged test cell of ``notebook``, from the gradebook: the
    instructor's cells as ``generate_assignment`` saved them, never a submission's.

    A notebook missing from the gradebook has none; a gradebook that cannot be read raises,
    so that a hidden test never runs in the kernel because of it."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url) as gb:
        try:
            nb = gb.find_notebook(notebook, assignment)
        except MissingEntry:
            return {}
        tests = {c.name for c in nb.grade_cells if c.cell_type == "code"} - {c.name for c in nb.solution_cells}
        return {c.name: c.source for c in nb.source_cells if c.name in tests and is_judged(c.source)}


def is_judged(source: str) -> bool:
    """A test cell with this source runs in the judge: always when it holds hidden tests, else
    unless a line of it is exactly the opt-out ``# runs in your kernel``, or it deletes a name
    (``del f``: the judge reads the kernel's names, it cannot take one away from the learner's
    code, so such a visible test runs where it means what it says)."""
    return is_hidden(source) or not (runs_in_kernel(source) or deletes_a_name(source))


def deletes_a_name(source: str) -> bool:
    """The cell deletes a name (``del squares``), to test that the learner's code depends on it."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    return any(isinstance(n, ast.Delete) and any(isinstance(t, ast.Name) for t in n.targets)
               for n in ast.walk(tree))


def runs_in_kernel(source: str) -> bool:
    """The author asked for this test to run in the learner's kernel (the opt-out line)."""
    return any(line.strip() == IN_KERNEL for line in source.splitlines())


def is_hidden(source: str) -> bool:
    """The cell holds hidden tests (nbgrader removes them from the release by this delimiter)."""
    return HIDDEN in source


def fixture_files(folder: Path) -> list[Path]:
    """An assignment's fixtures: the Python files beside its notebooks in the source directory."""
    return sorted(p for p in Path(folder).glob("*.py") if p.is_file() and not p.name.startswith("."))


def fixture_sources(folder: Path) -> dict[str, str]:
    """module name -> source of each fixtures file of an assignment's folder."""
    return {p.stem: p.read_text(encoding="utf-8") for p in fixture_files(folder) if p.stem.isidentifier()}


def fixture_modules(sources: dict[str, str]) -> dict[str, types.ModuleType]:
    """The fixtures as module objects for the judge (the instructor's code, run in the judge's
    process); a fixtures file that fails to load raises, naming the file."""
    modules = {}
    for name, source in sorted(sources.items()):
        module = types.ModuleType(name)
        module.__file__ = f"{name}.py"
        try:
            exec(compile(source, f"{name}.py", "exec"), module.__dict__)
        except Exception as exc:
            raise RuntimeError(f"the course's fixtures file {name}.py failed to load: "
                               f"{type(exc).__name__}: {exc}") from None
        modules[name] = module
    return modules
