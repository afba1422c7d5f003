"""What ``copy-that check`` prints: the table of tests, the myths behind the failures with a link
to read again, what is left, and once the visible tests pass, where to go next."""
from __future__ import annotations

import os
import time
from pathlib import Path
from urllib.parse import quote

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..kernel.misconceptions import Misconception
from .finish import ModelAnswer, course_root, next_steps, source_notebook
from .selfcheck import CheckReport, test_label

MARKS = {"passed": "[green]\u2713[/]", "partial": "[yellow]~[/]", "not started": "[dim]\u00b7[/]",
         "failed": "[red]\u2717[/]", "not checked": "[yellow]?[/]"}


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def lecture_url(m: Misconception, notebook: Path, environ: dict | None = None) -> str | None:
    """Where a terminal link to the lecture's heading points: in a JupyterLab terminal the lab's
    own page for the lecture, elsewhere the file; None when the lecture is not found."""
    env = os.environ if environ is None else environ
    root = course_root(notebook)
    if root is None or not (root / m.lecture).is_file():
        return None
    target = (root / m.lecture).resolve()
    server, served = env.get("JUPYTER_SERVER_URL"), env.get("JUPYTER_SERVER_ROOT")
    if server and served:
        try:
            rel = target.relative_to(Path(served).resolve())
            return f"{server.rstrip('/')}/lab/tree/{quote(rel.as_posix())}"
        except ValueError:
            pass
    return target.as_uri() + "#" + quote(m.link.partition("#")[2], safe="")


def table(report: CheckReport) -> Table:
    """One row per test: ✓/✗, points, what went wrong (the myth and the link come below the table)."""
    kind = "visible and hidden tests" if report.full else "visible tests"
    saved = time.strftime("%H:%M:%S", time.localtime(report.notebook.stat().st_mtime)) if report.notebook.exists() else "?"
    t = Table(title=f"{report.notebook.name} as saved at {saved}: {kind}", show_lines=True)
    t.add_column("test")
    t.add_column("", justify="center")
    t.add_column("points", justify="right")
    t.add_column("message")
    for r in report.results:
        message = r.message or r.status
        if r.misconceptions:   # the myth and its link are printed below, with a label
            message = message.split(" Myth: ")[0].rsplit(" [M-", 1)[0]
        points = f"?/{r.max_points:g}" if r.status == "not checked" else f"{r.points:g}/{r.max_points:g}"
        t.add_row(escape(r.label), MARKS[r.status], points, escape(message))
    for gid in report.hidden:
        t.add_row(escape(test_label(gid, hidden=True)), "[dim]?[/]", "", "run when the assignment is graded")
    return t


def print_check(report: CheckReport, console: Console) -> None:
    """The whole of ``check``'s output for one run."""
    console.print(table(report))
    for r in report.results:
        for m in r.misconceptions:
            url = lecture_url(m, report.notebook)
            link = f"[link={url}]{escape(m.link)}[/link]" if url else escape(m.link)
            console.print(f"[yellow]{escape(r.label)}[/]: [bold]Myth:[/] {escape(m.myth)}\n  read again: {link}",
                          soft_wrap=True)
    for p in report.problems:
        console.print(f"[red]problem:[/] {escape(p)}", soft_wrap=True)
    if report.unwritten:
        n = len(report.unwritten)
        console.print(f"[yellow]{_plural(n, 'written answer is', 'written answers are')} still empty[/] "
                      f"(graded by hand): {', '.join(report.unwritten)}")
    console.print(summary(report), soft_wrap=True)
    if not report.all_passed:
        console.print("[yellow]Not done yet[/]: " + what_is_left(report), soft_wrap=True)
    elif report.visible:
        for line in way_on(report):
            console.print(line, soft_wrap=True)


def summary(report: CheckReport) -> str:
    """The counts, and who runs the hidden tests."""
    passed = sum(r.passed for r in report.results)
    counts = f"{passed}/{len(report.checked)}"
    written = "; written answers are read by hand" if report.written else ""
    unchecked = [r.label for r in report.results if r.status == "not checked"]
    if unchecked:   # a letter the release cannot judge: no right letter is stored in it
        written += f"; not checked here: {', '.join(unchecked)} (the grading tells)"
    if report.full:
        return (f"check --full ran the instructor's tests from solutions/, hidden tests included: {counts} tests pass, "
                f"{report.score:g}/{report.max_score:g} points{written}.")
    line = f"{counts} visible tests pass, {report.score:g}/{report.max_score:g} points. "
    if source_notebook(report.notebook) is not None:
        return line + (f"Hidden tests run when the assignment is graded; to run them now: "
                       f"copy-that check --full {_shown(report.notebook)}{written}.")
    return line + f"Your instructor's grading runs the hidden tests (other cases, the lecture's traps){written}."


def what_is_left(report: CheckReport) -> str:
    parts = []
    failing = [r for r in report.checked if not r.passed]
    if failing:
        parts.append(f"{_plural(len(failing), 'test')} to fix")
    if report.problems:
        parts.append(f"{_plural(len(report.problems), 'cell that fails', 'cells that fail')}")
    if report.unwritten:
        parts.append(f"{_plural(len(report.unwritten), 'written answer')} to write")
    return ", ".join(parts) + "."


def way_on(report: CheckReport) -> list[str]:
    """After the visible tests pass: the hidden tests (or who runs them), the model answers, and the
    next lecture and assignment."""
    lines = []
    nb = _shown(report.notebook)
    has_source = source_notebook(report.notebook) is not None
    if has_source:
        if not report.full:
            lines.append(f"[green]Every visible test passes.[/] The hidden tests: copy-that check --full {nb}")
        lines.append(f"Model answers (functions and written answers), when you want to compare: "
                     f"copy-that answers {nb} (it asks first).")
    else:
        lines.append("[green]Every visible test passes.[/] The hidden tests run when your instructor grades it.")
    steps = next_steps(report.notebook)
    if steps is not None:
        root = course_root(report.notebook)
        rel = lambda p: str(p.relative_to(root))
        if steps.assignment is not None:
            read = f"read {rel(steps.lecture)}, then " if steps.lecture is not None else ""
            lines.append(f"Next: {read}do {rel(steps.assignment)}.")
        elif steps.other_lectures:
            lines.append("That was the last assignment. Still to read: "
                         + ", ".join(rel(p) for p in steps.other_lectures) + ".")
        else:
            lines.append("That was the last assignment of the course.")
    return lines


def print_model_answers(answers: list[ModelAnswer], source: Path, console: Console) -> None:
    """The model answers, each under a rule with its cell's name, and where the notebook is."""
    from rich.markdown import Markdown
    from rich.syntax import Syntax

    for answer in answers:
        console.rule(f"{answer.grade_id} ({'model answer' if answer.kind == 'code' else 'model written answer'})")
        console.print(Syntax(answer.text, "python") if answer.kind == "code" else Markdown(answer.text))
    console.print(f"They are also in {escape(str(source))}: open it in JupyterLab to read them beside the tests.",
                  soft_wrap=True)
