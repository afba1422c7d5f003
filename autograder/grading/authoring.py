"""What ``build`` checks in the instructor's notebooks before it writes a release: mistakes that
would only show at grading, where correct students would pay for them.  Reading the notebooks is
enough (no kernel, no torch):

- a hidden test that asks to run in the learner's kernel (its lines would be there to read);
- a class defined inside a judged test: it exists only in the grader, so the judge cannot hand
  an instance of it to the learner's function; it belongs in the assignment's fixtures;
- a fixtures file whose name would hide a module the kernel imports;
- a prediction set whose released half is stale (`predictions` not run again after an edit).

The judge's rule itself (which test cells are judged) is ``judged.py``'s.
"""
from __future__ import annotations

import ast
import importlib.machinery
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import nbformat

from ..learner.cells import notebooks, role
from .judged import IN_KERNEL, fixture_files, is_hidden, is_judged, runs_in_kernel


@dataclass(frozen=True)
class Problem:
    """One mistake in the course's source, said as the author needs it: where, what, and the fix."""

    where: str        # "solutions/a2_clone/a2_clone.ipynb, cell test_edit_copy_hidden"
    what: str
    fix: str

    def describe(self) -> str:
        return f"{self.where}: {self.what}\n  fix: {self.fix}"


def installed_module(name: str) -> bool:
    """Whether the kernel's Python has a module of that name of its own (built in, standard library
    or installed), whatever this process has imported or put on its path."""
    if name in sys.builtin_module_names or name == __package__.partition(".")[0]:
        return True
    where = sysconfig.get_paths()
    roots = [where[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    roots += [str(Path(where[k]) / "lib-dynload") for k in ("stdlib", "platstdlib")]
    return importlib.machinery.PathFinder.find_spec(name, list(dict.fromkeys(roots))) is not None


def check_assignment(folder: Path, shown: str) -> list[Problem]:
    """The problems of one assignment folder of the source directory; ``shown`` is how to name it."""
    problems: list[Problem] = []
    for path in notebooks(folder):
        nb = nbformat.read(path, as_version=4)
        problems += check_notebook(nb, f"{shown}/{path.name}", f"{shown}/fixtures.py")
        problems += stale_predictions(nb, folder.name, f"{shown}/{path.name}")
    for path in fixture_files(folder):
        name = path.stem
        if not name.isidentifier():
            problems.append(Problem(f"{shown}/{path.name}", "a fixtures file whose name is not a module name, "
                                    "so no test can import it", f"rename it, e.g. {shown}/fixtures.py"))
        elif installed_module(name):
            problems.append(Problem(f"{shown}/{path.name}", f"a fixtures file named like the module {name!r}: "
                                    f"in the learner's kernel it would be imported in place of that module",
                                    f"rename it, e.g. {shown}/fixtures.py"))
    return problems


def stale_predictions(nb: nbformat.NotebookNode, assignment: str, shown: str) -> list[Problem]:
    """Prediction sets whose visible half is not the one their hidden part makes (the key or a
    diagnosis changed since `predictions` last wrote it), or whose hidden part cannot be read."""
    from ..course.predictions import AuthoringError, rewrite

    problems = []
    for cell in nb.cells:
        r = role(cell)
        if cell.cell_type != "code" or not r.is_test:
            continue
        where = f"{shown}, cell {r.grade_id}"
        try:
            source, _ = rewrite(cell.source, assignment, where)
        except (AuthoringError, SyntaxError) as exc:
            problems.append(Problem(where, f"its prediction set cannot be read: {exc}",
                                    "see docs/predictions.md, 'What the author writes'"))
            continue
        if source != cell.source:
            problems.append(Problem(where, "the release's half of this prediction set is not the one its hidden "
                                    "part makes (the key, the choices or a diagnosis changed since it was written)",
                                    f"python -m autograder predictions {shown}"))
    return problems


def check_notebook(nb: nbformat.NotebookNode, shown: str, fixtures: str = "fixtures.py") -> list[Problem]:
    """The problems of the test cells of one instructor's notebook."""
    problems: list[Problem] = []
    for cell in nb.cells:
        r = role(cell)
        if cell.cell_type != "code" or not r.is_test:
            continue
        where = f"{shown}, cell {r.grade_id}"
        if is_hidden(cell.source) and runs_in_kernel(cell.source):
            problems.append(Problem(
                where, f"a hidden test marked {IN_KERNEL!r}: its hidden lines would be in the learner's kernel, "
                       "where an answer that reads its caller can print them",
                f"delete the line {IN_KERNEL!r} (hidden tests always run in the judge, outside the kernel), "
                f"or move what must run in the kernel to a visible test"))
        if not is_judged(cell.source):
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError as exc:
            problems.append(Problem(where, f"the test does not parse: {exc.msg} (line {exc.lineno})",
                                    "correct the cell's Python"))
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                problems.append(Problem(
                    where, f"the class {node.name} is defined inside a judged test: the judge runs the test "
                           f"outside the learner's kernel, and a class's source never goes there, so the judge "
                           f"cannot hand a {node.name} to the learner's function",
                    f"move `class {node.name}` to {fixtures} (the assignment's fixtures, a file learners "
                    f"see) and write `from fixtures import {node.name}` in the test"
                    + ("" if is_hidden(cell.source) else f"; or, for a visible test, add the line {IN_KERNEL!r}")))
    return problems


def check_course(root: Path, source_directory: str = "solutions", assignment: str | None = None) -> list[Problem]:
    """The problems of every assignment of the course's source directory (or of one)."""
    source = root / source_directory
    names = [assignment] if assignment else sorted(p.name for p in source.iterdir()
                                                  if p.is_dir() and not p.name.startswith("."))
    problems: list[Problem] = []
    for name in names:
        problems += check_assignment(source / name, f"{source_directory}/{name}")
    return problems
