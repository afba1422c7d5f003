"""The learner's commands (``check``, ``answers``, ``lab``, ``progress``): run the modules of
learner/ and print what they found.  cli.py parses the command line and calls these."""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

console = Console()


def _lang(args: argparse.Namespace, notebook: Path | None = None) -> str:
    """--lang, else $COPY_THAT_LANG, else the notebook's own language (its metadata), else English."""
    from ..kernel.i18n import DEFAULT, choose_for

    try:
        return choose_for(getattr(args, "lang", None), notebook)
    except ValueError as exc:
        console.print(f"[yellow]{exc}[/]")
        return DEFAULT


def cmd_check(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from ..kernel.i18n import say, tr
    from .cells import find_notebook
    from .finish import source_notebook

    try:
        path, note = find_notebook(args.notebook)
    except FileNotFoundError as exc:
        console.print(f"[red]{escape(tr(str(exc), _lang(args)))}[/]")
        return 2
    lang = _lang(args, path)
    if note:
        console.print(f"[dim]{escape(tr(note, lang))}[/]")
    if args.full and source_notebook(path) is None:
        head = say(lang, "--full runs the instructor's tests from the course's solutions/, and there is none here "
                         "for {name}:", name=escape(path.name))
        console.print(f"[yellow]{head}[/] " + say(lang, "in a class's copy of the course, your instructor's grading runs "
                                                        "the hidden tests. Without --full, check runs the visible tests."))
        return 2
    if getattr(args, "watch", False):
        from .watch import watch_check

        return watch_check(path, lambda: _check_once(path, args.timeout, args.full, lang), console, lang=lang)
    return 0 if _check_once(path, args.timeout, args.full, lang).all_passed else 1


def _check_once(path: Path, timeout: int, full: bool = False, lang: str = "en"):
    """Run the notebook once and print what check prints; return the CheckReport."""
    from ..kernel.i18n import say
    from .selfcheck import check_notebook
    from .view import print_check

    doing = say(lang, "running {name} with the instructor's tests ...", name=path.name) if full else \
        say(lang, "running {name} ...", name=path.name)
    with console.status(doing):
        report = check_notebook(path, timeout=timeout, full=full)
    print_check(report, console, lang)
    return report


def cmd_answers(args: argparse.Namespace) -> int:
    import sys

    import nbformat
    from rich.markup import escape
    from rich.prompt import Confirm

    from ..kernel.i18n import say, tr
    from .cells import find_notebook
    from .finish import model_answers, source_notebook
    from .view import print_model_answers

    try:
        path, _ = find_notebook(args.notebook)
    except FileNotFoundError as exc:
        console.print(f"[red]{escape(tr(str(exc), _lang(args)))}[/]")
        return 2
    lang = _lang(args, path)
    source = source_notebook(path)
    if source is None:
        console.print(f"[yellow]{say(lang, 'No model answers for {name} here:', name=escape(path.name))}[/] "
                      + say(lang, "they are in the course's solutions/, which a class's copy does not have; your "
                                  "instructor shares them after grading."))
        return 2
    if not args.yes:
        if not sys.stdin.isatty():
            console.print(f"[yellow]{say(lang, 'The model answers give the solutions away: add --yes to show them.')}[/]")
            return 2
        if not Confirm.ask(say(lang, "The model answers of {name} give its solutions away. Show them?", name=path.stem),
                           console=console, default=False):
            console.print(say(lang, "Not shown."))
            return 1
    print_model_answers(model_answers(nbformat.read(source, as_version=4)), source, console, lang)
    return 0


def cmd_lab(args: argparse.Namespace) -> int:
    from ..kernel.i18n import tr
    from .lab import run_lab
    from .progress import learner_root

    lang = _lang(args)
    try:
        root = learner_root(args.root)
    except FileNotFoundError as exc:
        console.print(f"[red]{tr(str(exc), lang)}[/]")
        return 2
    return run_lab(root, instructor=args.instructor, ip=args.ip, port=args.port, open_browser=args.browser,
                   lang=getattr(args, "lang", None))


def cmd_progress(args: argparse.Namespace) -> int:
    from ..kernel.i18n import say, tr
    from .progress import course_lang, learner_root, progress, summary, table

    try:
        root = learner_root(args.root)
    except FileNotFoundError as exc:
        console.print(f"[red]{tr(str(exc), _lang(args))}[/]")
        return 2
    try:
        lang = course_lang(root, args.lang)
    except ValueError as exc:
        console.print(f"[red]{exc}[/]")
        return 2
    seen = []
    with console.status(say(lang, "checking the exercises (unchanged notebooks come from the cache) ...")) as status:
        def done(row):
            seen.append(row)
            status.update(say(lang, "checked {n} exercise(s), last: {name} ...", n=len(seen), name=row.assignment))

        rows = progress(root, use_cache=not args.no_cache, jobs=args.jobs, timeout=args.timeout, on_done=done)
    console.print(table(rows, lang))
    console.print(summary(rows, lang))
    return 0
