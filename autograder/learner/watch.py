"""``autograder check NOTEBOOK --watch``: re-check a notebook every time it is saved.

The file's modification time and size are polled (no extra dependency, works on every file
system).  After a failing run the hint for each failing function is printed: the docstring of
that function as it stands in the learner's own notebook, never anything from ``solutions/``.
"""
from __future__ import annotations

import ast
import re
import time
from pathlib import Path
from typing import Callable

import nbformat

from ..kernel.i18n import DEFAULT, say
from .cells import SOLUTION_MARKERS, role
from .selfcheck import CheckReport

POLL_SECONDS = 1.0
SETTLE_SECONDS = 0.3   # a save in progress: wait until the file stops changing


def fingerprint(path: Path) -> tuple[int, int] | None:
    """(mtime in ns, size) of the file, or None while it does not exist (an editor's atomic save)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size


def watch(path: Path, on_change: Callable[[], object], interval: float = POLL_SECONDS,
          settle: float = SETTLE_SECONDS, max_runs: int | None = None,
          sleep: Callable[[float], None] = time.sleep) -> int:
    """Call ``on_change`` now and after every save of ``path``; return after ``max_runs`` calls
    (never, when None: stop with Ctrl-C).  Returns the number of calls."""
    last = None
    runs = 0
    while True:
        current = fingerprint(path)
        if current is not None and current != last:
            sleep(settle)
            if fingerprint(path) == current:  # the save is complete
                last = current
                on_change()
                runs += 1
                if max_runs is not None and runs >= max_runs:
                    return runs
                continue
        sleep(interval)


def function_name(test_id: str) -> str:
    """``test_graph_copy`` and ``test_graph_copy_hidden`` test the function ``graph_copy``."""
    name = test_id[len("test_"):] if test_id.startswith("test_") else test_id
    return name[: -len("_hidden")] if name.endswith("_hidden") else name


def _docstrings(source: str) -> dict[str, str]:
    """function name -> docstring, for the functions defined in one cell."""
    source = SOLUTION_MARKERS.sub("", source)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        # Half-written code: take the docstring straight after each ``def``.
        found = re.finditer(r'def\s+(\w+)\s*\(.*?\).*?:\s*(?:"""|\'\'\')(.*?)(?:"""|\'\'\')', source, re.S)
        return {m.group(1): _clean(m.group(2)) for m in found}
    return {node.name: ast.get_docstring(node) or "" for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _clean(doc: str) -> str:
    import inspect

    return inspect.cleandoc(doc)


def hint_text(docstring: str) -> str:
    """The "Hint: ..." paragraph of a docstring without its label (the caller prints "hint for
    f():"), or the whole docstring when it has none."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", docstring) if p.strip()]
    hints = [re.sub(r"(?i)^hints?\s*:\s*", "", p) for p in paragraphs if p.lower().startswith("hint")]
    return "\n\n".join(hints) if hints else docstring.strip()


def hints(path: Path, report: CheckReport) -> list[tuple[str, str]]:
    """(function, hint) for each function whose visible test failed, read from the learner's notebook."""
    nb = nbformat.read(path, as_version=4)
    by_cell: dict[str, dict[str, str]] = {}
    for cell in nb.cells:
        r = role(cell)
        if cell.cell_type == "code" and r.solution:
            by_cell[r.grade_id or ""] = _docstrings(cell.source)
    out = []
    for result in report.results:
        if result.passed or result.status in ("not started", "not checked"):
            continue
        name = function_name(result.grade_id)
        doc = by_cell.get(name, {}).get(name) or next((d[name] for d in by_cell.values() if d.get(name)), "")
        if doc and (name, hint_text(doc)) not in out:
            out.append((name, hint_text(doc)))
    return out


def watch_check(path: Path, run_once: Callable[[], CheckReport], console, interval: float = POLL_SECONDS,
                max_runs: int | None = None, lang: str = DEFAULT) -> int:
    """Run ``run_once`` (which prints the check table) on every save; print hints after a failure.

    Returns 0 when the last check passed, 1 otherwise (after Ctrl-C or ``max_runs`` checks).
    """
    state = {"ok": False}

    def once() -> None:
        from rich.markup import escape

        console.rule(f"{path.name}  {time.strftime('%H:%M:%S')}")
        try:
            report = run_once()
        except Exception as exc:  # a half-saved or broken file: say so and keep watching
            console.print(f"[red]{say(lang, 'could not check {name}:', name=path.name)}[/] "
                          f"{escape(f'{type(exc).__name__}: {exc}')}")
            state["ok"] = False
        else:
            state["ok"] = report.all_passed
            for name, text in hints(path, report):
                console.print(f"[yellow]{say(lang, 'hint for {name}():', name=name)}[/] {escape(text)}")
        console.print(f"[dim]{say(lang, 'watching {name}: save it to check again; Ctrl-C to stop.', name=path.name)}[/]")

    try:
        watch(path, once, interval=interval, max_runs=max_runs)
    except KeyboardInterrupt:
        console.print(say(lang, "stopped watching."))
    return 0 if state["ok"] else 1
