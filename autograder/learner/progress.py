"""Every exercise of the course in one table, from the learner's own notebooks in ``exercises/``.

Each notebook is run with :func:`autograder.learner.selfcheck.check_notebook` (visible tests only, as
``autograder check`` does).  Results are cached on disk, keyed by the sha256 of the notebook's
bytes and the package version (plus the test helpers' source), so a second ``progress`` only
runs the notebooks that changed.  A notebook whose answer cells are all still as handed out
(nbgrader's checksum of each) is "not started" without running it.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import nbformat

from .. import __version__
from ..kernel.i18n import DEFAULT, N_, choose_for, say, tr
from .cells import RELEASE_DIR, nearest_folder, notebooks, role
from .selfcheck import CELL_TIMEOUT, CheckReport, TestResult, check_notebook

CACHE_ENV = "COPY_THAT_CACHE"
CACHE_FORMAT = 3


@dataclass
class ExerciseProgress:
    """Where a learner stands on one exercise notebook."""

    assignment: str
    notebook: Path | None
    status: str              # "done", "failing", "not started", "missing"
    passed: int              # visible tests passing
    tests: int               # visible tests
    points: float            # points earned on the visible tests
    visible_points: float    # points the visible tests are worth
    total_points: float      # what the whole assignment is worth when graded (hidden tests, manual answers)
    diagnostic: str          # the first failing test and its message, or a problem running the notebook
    cached: bool = False


def learner_root(start: str | os.PathLike | None = None) -> Path:
    """The nearest folder above ``start`` holding ``exercises/`` (a course checkout or a student
    handout); else ``start`` itself when it holds assignment folders (what JupyterHub's
    Assignments tab fetches: ``~/copy-that/a1_views/a1_views.ipynb``)."""
    found = nearest_folder(start, lambda f: (f / RELEASE_DIR).is_dir())
    if found is not None:
        return found
    here = Path(start or os.getcwd()).resolve()
    if any(here.glob("*/*.ipynb")):
        return here
    raise FileNotFoundError(N_(f"no {RELEASE_DIR}/ folder in {here} or above, and no assignment folders in it: "
                               "run this in the course folder, or pass --root"))


def exercises_folder(root: Path) -> Path:
    """``root/exercises`` when there is one, else ``root`` (a folder of fetched assignments)."""
    return root / RELEASE_DIR if (root / RELEASE_DIR).is_dir() else root


def default_cache_dir(root: Path) -> Path:
    """``$COPY_THAT_CACHE`` when set, else ``<root>/.cache/copy-that/progress``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else root / ".cache" / "copy-that" / "progress"


def _helpers_digest() -> str:
    # Test cells call autograder.kernel.checks: a changed helper may change a result.
    return hashlib.sha256((Path(__file__).parent.parent / "kernel" / "checks.py").read_bytes()).hexdigest()[:16]


def cache_key(path: Path) -> str:
    """sha256 of the notebook's bytes, the package version and the test helpers."""
    h = hashlib.sha256(path.read_bytes())
    h.update(f"\0{__version__}\0{_helpers_digest()}\0{CACHE_FORMAT}".encode())
    return h.hexdigest()


def _load(cache: Path, key: str, path: Path) -> CheckReport | None:
    try:
        data = json.loads((cache / f"{key}.json").read_text())
        return CheckReport(path, [TestResult(**r) for r in data["results"]], data["problems"], data["hidden"],
                           data["unwritten"], data["written"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _store(cache: Path, key: str, report: CheckReport) -> None:
    cache.mkdir(parents=True, exist_ok=True)
    data = {"results": [asdict(r) for r in report.results], "problems": report.problems, "hidden": report.hidden,
            "unwritten": report.unwritten, "written": report.written}
    tmp = cache / f"{key}.json.{os.getpid()}.{threading.get_ident()}.tmp"
    tmp.write_text(json.dumps(data))
    tmp.replace(cache / f"{key}.json")  # atomic: a second progress running alongside never reads half a file


def untouched(nb: nbformat.NotebookNode) -> bool:
    """Every answer cell is still as handed out: nbgrader's checksum of it is the one stored at release."""
    from nbgrader.utils import compute_checksum

    answers = [c for c in nb.cells if role(c).solution]
    return bool(answers) and all(c.metadata.get("nbgrader", {}).get("checksum") == compute_checksum(c) for c in answers)


def unstarted_report(path: Path, nb: nbformat.NotebookNode) -> CheckReport:
    """What ``check`` would say of an untouched notebook, without running it: every visible test not
    started, every written answer empty."""
    results, hidden, written = [], [], []
    for cell in nb.cells:
        r = role(cell)
        if r.is_manual:
            written.append(r.grade_id or "?")
        if cell.cell_type == "code" and r.is_test:
            if all(not line.strip() or line.lstrip().startswith("#") for line in cell.source.splitlines()):
                hidden.append(r.grade_id or "?")
            else:
                results.append(TestResult(r.grade_id or "?", 0.0, r.points, "not started", N_("not started yet")))
    return CheckReport(path, results, [], hidden, list(written), written)


def cached_check(path: Path, cache: Path | None, timeout: int = CELL_TIMEOUT) -> tuple[CheckReport, bool]:
    """The notebook's check report, from the cache when its content was checked before; an
    untouched notebook's without running it."""
    nb = nbformat.read(path, as_version=4)
    if untouched(nb):
        return unstarted_report(path, nb), False
    key = cache_key(path) if cache else ""
    if cache:
        hit = _load(cache, key, path)
        if hit is not None:
            return hit, True
    report = check_notebook(path, timeout=timeout)
    if cache:
        _store(cache, key, report)
    return report, False


def _total_points(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    return sum(role(c).points for c in nb.cells if role(c).grade)


def summarize(assignment: str, path: Path, report: CheckReport, cached: bool = False) -> ExerciseProgress:
    """One table row from a check report."""
    results = report.checked      # a letter check cannot judge is left to the grading
    passed = sum(r.passed for r in results)
    first_bad = next((r for r in results if r.status not in ("passed", "not started")), None)
    # An untouched answer cell raises NotImplementedError: not started, not a problem.
    problems = [p for p in report.problems if "NotImplementedError" not in p]
    if results and passed == len(results) and not report.problems and report.unwritten:
        n, names = len(report.unwritten), ", ".join(report.unwritten)
        status = "failing"
        diagnostic = N_(f"{n} written answer still empty: {names}") if n == 1 else \
            N_(f"{n} written answers still empty: {names}")
    elif results and passed == len(results) and not report.problems:
        status, diagnostic = "done", ""
    elif results and all(r.status == "not started" for r in results) and not problems:
        status, diagnostic = "not started", ""
    else:
        status = "failing"
        if first_bad is not None:
            label, message = first_bad.label, first_bad.message or first_bad.status
            diagnostic = N_(f"{label}: {message}")
        elif problems:
            diagnostic = problems[0]
        elif not results:
            diagnostic = N_("no visible tests ran")
        else:  # some tests pass, the others still raise NotImplementedError
            todo = next(r for r in results if not r.passed)
            label, message = todo.label, todo.message
            diagnostic = N_(f"{label}: {message}")
    return ExerciseProgress(
        assignment=assignment, notebook=path, status=status, passed=passed, tests=len(results),
        points=report.score, visible_points=report.max_score, total_points=_total_points(path),
        diagnostic=diagnostic, cached=cached,
    )


def exercise_notebooks(root: Path) -> list[tuple[str, Path | None]]:
    """(assignment, notebook) for every assignment folder of ``exercises/`` (or of ``root``), in order."""
    out = []
    release = exercises_folder(root)
    for folder in sorted(p for p in release.iterdir() if p.is_dir() and not p.name.startswith(".")):
        found = notebooks(folder)
        if release == root and not found:
            continue  # not an assignment folder (a .cache, an outbound folder)
        preferred = [p for p in found if p.stem == folder.name]
        out.append((folder.name, (preferred or found or [None])[0]))
    return out


def progress(root: Path, cache: Path | None = None, use_cache: bool = True, jobs: int = 2,
             timeout: int = CELL_TIMEOUT,
             on_done: Callable[[ExerciseProgress], None] | None = None) -> list[ExerciseProgress]:
    """Check every exercise notebook under ``root/exercises`` (cached by content), one row each."""
    cache = (cache or default_cache_dir(root)) if use_cache else None
    items = exercise_notebooks(root)

    def one(item: tuple[str, Path | None]) -> ExerciseProgress:
        assignment, path = item
        if path is None:
            row = ExerciseProgress(assignment, None, "missing", 0, 0, 0.0, 0.0, 0.0,
                                   N_(f"no notebook in {RELEASE_DIR}/{assignment}/"))
        else:
            report, hit = cached_check(path, cache, timeout)
            row = summarize(assignment, path, report, hit)
        if on_done:
            on_done(row)
        return row

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, items))


STATUS_MARKS = {"done": ("green", "\u2713", N_("done")), "failing": ("red", "\u2717", N_("failing")),
                "not started": ("dim", "\u00b7", N_("not started")), "missing": ("yellow", "?", N_("missing"))}


def course_lang(root: Path, option: str | None = None) -> str:
    """The language ``progress`` speaks: ``--lang``, ``$COPY_THAT_LANG``, else the exercises' own (the
    Chinese edition's notebooks say they are Chinese), else English."""
    return choose_for(option, next((path for _, path in exercise_notebooks(root) if path is not None), None))


def table(rows: list[ExerciseProgress], lang: str = DEFAULT):
    """The progress table (a rich Table): one row per exercise."""
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=say(lang, "Copy That: your progress (visible tests)"), show_lines=False)
    t.add_column(say(lang, "exercise"))
    t.add_column(say(lang, "status"))
    t.add_column(say(lang, "tests"), justify="right")
    t.add_column(say(lang, "points"), justify="right")
    t.add_column(say(lang, "first diagnostic"), overflow="fold")
    for r in rows:
        colour, mark, word = STATUS_MARKS.get(r.status, ("", "", r.status))
        t.add_row(r.assignment, f"[{colour}]{mark} {tr(word, lang)}[/]" if colour else r.status,
                  f"{r.passed}/{r.tests}", f"{r.points:g}/{r.visible_points:g}", escape(tr(r.diagnostic, lang)))
    return t


def summary(rows: list[ExerciseProgress], lang: str = DEFAULT) -> str:
    """One line under the table: exercises done, points so far, what grading adds."""
    done = sum(r.status == "done" for r in rows)
    points = f"{sum(r.points for r in rows):g}"
    visible = f"{sum(r.visible_points for r in rows):g}"
    total = f"{sum(r.total_points for r in rows):g}"
    cached = sum(r.cached for r in rows)
    line = say(lang, "{done}/{n} exercises done. Visible tests: {points} of their {visible} points; grading counts "
                     "{total} points in all, the hidden tests and the written answers included.",
               done=done, n=len(rows), points=points, visible=visible, total=total)
    if cached:
        line += say(lang, " ({cached} unchanged notebook(s) taken from the cache.)", cached=cached)
    return line
