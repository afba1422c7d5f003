"""What ``copy-that check`` prints: the table of tests, the myths behind the failures with a link
to read again, what is left, and once the visible tests pass, where to go next; in the learner's
language (``lang``: English, or Chinese from the catalog, the report's English messages translated)."""
from __future__ import annotations

import os
import time
from pathlib import Path
from urllib.parse import quote

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..kernel.diagnosis import heading_cell_id, heading_of_cell, lecture_cell
from ..kernel.i18n import DEFAULT, N_, say, tr
from ..kernel.misconceptions import Misconception, anchor_of
from .finish import ModelAnswer, course_root, next_steps, source_notebook
from .selfcheck import CheckReport, test_label

MARKS = {"passed": "[green]\u2713[/]", "partial": "[yellow]~[/]", "not started": "[dim]\u00b7[/]",
         "failed": "[red]\u2717[/]", "not checked": "[yellow]?[/]"}
# what check's table shows of a failure whose myth is printed below it
SHORT = N_("{observed}; expected {expected}. Likely mistake: {text}")


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
    return target.as_uri() + "#" + quote(read_again(m, notebook).partition("#")[2], safe="")


def read_again(m: Misconception, notebook: Path) -> str:
    """The lecture and heading to read again, as shown: the heading as the notebook's own course has
    it (the Chinese edition's lecture has it translated, in the cell with the English heading's id)."""
    root = course_root(notebook)
    path = root / m.lecture if root is not None else None
    if path is None or not path.is_file() or heading_cell_id(str(path), m.heading):
        return m.link
    cell = lecture_cell(str(path), m.heading)
    heading = heading_of_cell(str(path), cell) if cell else None
    return f"{m.lecture}#{anchor_of(heading)}" if heading else m.link


def _message(r, lang: str) -> str:
    """A row's message in the learner's language; the myth and its link are left for below the table."""
    message = r.message or r.status
    if r.passed:                   # the ✓ lines the test printed, each translated
        return "\n".join(f"\u2713 {tr(line[2:], lang)}" if line.startswith("\u2713 ") else tr(line, lang)
                         for line in message.splitlines())
    if r.misconceptions:
        message = message.split(" Myth: ")[0].rsplit(" [M-", 1)[0]
    return tr(message, lang)


def _points(n: float) -> str:
    return f"{n:g}"


def table(report: CheckReport, lang: str = DEFAULT) -> Table:
    """One row per test: ✓/✗, points, what went wrong (the myth and the link come below the table)."""
    kind = say(lang, "visible and hidden tests") if report.full else say(lang, "visible tests")
    saved = time.strftime("%H:%M:%S", time.localtime(report.notebook.stat().st_mtime)) if report.notebook.exists() else "?"
    t = Table(title=say(lang, "{name} as saved at {saved}: {kind}", name=report.notebook.name, saved=saved, kind=kind),
              show_lines=True)
    t.add_column(say(lang, "test"))
    t.add_column("", justify="center")
    t.add_column(say(lang, "points"), justify="right")
    t.add_column(say(lang, "message"))
    for r in report.results:
        points = f"?/{r.max_points:g}" if r.status == "not checked" else f"{r.points:g}/{r.max_points:g}"
        t.add_row(escape(tr(r.label, lang)), MARKS[r.status], points, escape(_message(r, lang)))
    for gid in report.hidden:
        t.add_row(escape(tr(test_label(gid, hidden=True), lang)), "[dim]?[/]", "",
                  say(lang, "run when the assignment is graded"))
    return t


def print_check(report: CheckReport, console: Console, lang: str = DEFAULT) -> None:
    """The whole of ``check``'s output for one run."""
    console.print(table(report, lang))
    for r in report.results:
        for m in r.misconceptions:
            url = lecture_url(m, report.notebook)
            shown = read_again(m, report.notebook)
            link = f"[link={url}]{escape(shown)}[/link]" if url else escape(shown)
            console.print(f"[yellow]{escape(tr(r.label, lang))}[/]: [bold]{say(lang, 'Myth')}:[/] "
                          f"{escape(tr(m.myth, lang))}\n  {say(lang, 'read again')}: {link}", soft_wrap=True)
    for p in report.problems:
        console.print(f"[red]{say(lang, 'problem')}:[/] {escape(tr(p, lang))}", soft_wrap=True)
    if report.unwritten:
        n, names = len(report.unwritten), ", ".join(report.unwritten)
        text = say(lang, "{n} written answer is still empty", n=n) if n == 1 else \
            say(lang, "{n} written answers are still empty", n=n)
        console.print(f"[yellow]{text}[/] " + say(lang, "(graded by hand): {names}", names=names))
    console.print(summary(report, lang), soft_wrap=True)
    if not report.all_passed:
        console.print(f"[yellow]{say(lang, 'Not done yet')}[/]: " + what_is_left(report, lang), soft_wrap=True)
    elif report.visible:
        for line in way_on(report, lang):
            console.print(line, soft_wrap=True)


def summary(report: CheckReport, lang: str = DEFAULT) -> str:
    """The counts, and who runs the hidden tests."""
    passed = sum(r.passed for r in report.results)
    counts = f"{passed}/{len(report.checked)}"
    score, top = _points(report.score), _points(report.max_score)
    written = say(lang, "; written answers are read by hand") if report.written else ""
    unchecked = [tr(r.label, lang) for r in report.results if r.status == "not checked"]
    if unchecked:   # a letter the release cannot judge: no right letter is stored in it
        written += say(lang, "; not checked here: {names} (the grading tells)", names=", ".join(unchecked))
    if report.full:
        return say(lang, "check --full ran the instructor's tests from solutions/, hidden tests included: {counts} tests "
                         "pass, {score}/{top} points{written}.", counts=counts, score=score, top=top, written=written)
    line = say(lang, "{counts} visible tests pass, {score}/{top} points. ", counts=counts, score=score, top=top)
    if source_notebook(report.notebook) is not None:
        return line + say(lang, "Hidden tests run when the assignment is graded; to run them now: "
                                "copy-that check --full {nb}{written}.", nb=_shown(report.notebook), written=written)
    return line + say(lang, "Your instructor's grading runs the hidden tests (other cases, the lecture's traps){written}.",
                      written=written)


def what_is_left(report: CheckReport, lang: str = DEFAULT) -> str:
    parts = []
    failing = len([r for r in report.checked if not r.passed])
    if failing:
        parts.append(say(lang, "{n} test to fix", n=failing) if failing == 1 else say(lang, "{n} tests to fix", n=failing))
    n = len(report.problems)
    if n:
        parts.append(say(lang, "{n} cell that fails", n=n) if n == 1 else say(lang, "{n} cells that fail", n=n))
    n = len(report.unwritten)
    if n:
        parts.append(say(lang, "{n} written answer to write", n=n) if n == 1 else
                     say(lang, "{n} written answers to write", n=n))
    return ("\uff0c".join(parts) + "\u3002") if lang == "zh" else ", ".join(parts) + "."


def way_on(report: CheckReport, lang: str = DEFAULT) -> list[str]:
    """After the visible tests pass: the hidden tests (or who runs them), the model answers, and the
    next lecture and assignment."""
    lines = []
    nb = _shown(report.notebook)
    has_source = source_notebook(report.notebook) is not None
    passes = f"[green]{say(lang, 'Every visible test passes.')}[/] "
    if has_source:
        if not report.full:
            lines.append(passes + say(lang, "The hidden tests: copy-that check --full {nb}", nb=nb))
        lines.append(say(lang, "Model answers (functions and written answers), when you want to compare: "
                               "copy-that answers {nb} (it asks first).", nb=nb))
    else:
        lines.append(passes + say(lang, "The hidden tests run when your instructor grades it."))
    steps = next_steps(report.notebook)
    if steps is not None:
        root = course_root(report.notebook)
        rel = lambda p: str(p.relative_to(root))
        if steps.assignment is not None and steps.lecture is not None:
            lines.append(say(lang, "Next: read {lecture}, then do {assignment}.", lecture=rel(steps.lecture),
                             assignment=rel(steps.assignment)))
        elif steps.assignment is not None:
            lines.append(say(lang, "Next: do {assignment}.", assignment=rel(steps.assignment)))
        elif steps.other_lectures:
            lines.append(say(lang, "That was the last assignment. Still to read: {lectures}.",
                             lectures=", ".join(rel(p) for p in steps.other_lectures)))
        else:
            lines.append(say(lang, "That was the last assignment of the course."))
    return lines


def print_model_answers(answers: list[ModelAnswer], source: Path, console: Console, lang: str = DEFAULT) -> None:
    """The model answers, each under a rule with its cell's name, and where the notebook is."""
    from rich.markdown import Markdown
    from rich.syntax import Syntax

    for answer in answers:
        kind = say(lang, "model answer") if answer.kind == "code" else say(lang, "model written answer")
        console.rule(f"{answer.grade_id} ({kind})")
        console.print(Syntax(answer.text, "python") if answer.kind == "code" else Markdown(answer.text))
    console.print(say(lang, "They are also in {source}: open it in JupyterLab to read them beside the tests.",
                      source=escape(str(source))), soft_wrap=True)
