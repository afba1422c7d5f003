"""The instructor's commands on the course's files (``build``, ``predictions``, ``handout``,
``site``): call the modules of course/ and print what they did.  cli.py parses and calls these."""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

console = Console()


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def cmd_build(args: argparse.Namespace) -> int:
    from .build import build, check, editions
    from .layout import SOURCE_DIR, find_root
    from ..grading.authoring import check_course
    from ..learner.editions import folder

    root = find_root()
    if args.only and not (root / SOURCE_DIR / args.only).is_dir():
        print(f"no assignment {args.only!r} in {SOURCE_DIR}/")
        return 2
    status = 0
    for edition in editions(root):      # English, then the Chinese edition where zh/solutions/ exists
        source, release = folder(edition, "source"), folder(edition, "release")
        only = args.only if not args.only or (root / source / args.only).is_dir() else None
        if args.only and only is None:
            print(f"no assignment {args.only!r} in {source}/: {release}/ left as it was")
            status = max(status, 1)
            continue
        problems = check_course(root, source, only)
        for problem in problems:
            print(problem.describe())
        if problems:
            print(f"{_plural(len(problems), 'problem')} in {source}/: "
                  + (f"{release}/ is not compared" if args.check else f"{release}/ was left as it was"))
            status = 1
            continue
        if args.check:
            report = check(root, edition)
            print(report.describe())
            status = max(status, 0 if report.in_sync else 1)
            continue
        report = build(root, only, edition)
        changed = [f"  changed: {p}" for p in report.stale] + [f"  new: {p}" for p in report.missing] \
            + [f"  removed: {p}" for p in report.extra]
        print(f"regenerated {release}/ from {source}/" + (":\n" + "\n".join(changed) if changed else ": nothing changed"))
    return status


def cmd_predictions(args: argparse.Namespace) -> int:
    from .predictions import AuthoringError, write_predictions

    status = 0
    for path in args.notebook:
        try:
            report = write_predictions(Path(path), check=args.check)
        except (AuthoringError, SyntaxError, OSError) as exc:
            console.print(f"[red]{path}: {exc}[/]")
            status = 2
            continue
        if not report.cells:
            console.print(f"{path}: no test cell calls ck.grade_predictions or ck.grade_choice in its hidden part")
            status = max(status, 1)
        elif report.changed:
            verb = "would rewrite" if args.check else "rewrote"
            console.print(f"{path}: {verb} the visible check of {', '.join(report.changed)}", soft_wrap=True)
            status = max(status, 1 if args.check else 0)
        else:
            console.print(f"{path}: {', '.join(report.cells)} up to date")
        for note in report.notes:
            console.print(f"  [yellow]note[/] {note}", soft_wrap=True)
    return status


def cmd_handout(args: argparse.Namespace) -> int:
    from .layout import find_root
    from .handout import HandoutError, make_handout

    root = find_root()
    try:
        with console.status("generating the student handout ..."):
            made = make_handout(root, Path(args.out) if args.out else root / "build" / "handout", not args.no_zip)
    except HandoutError as exc:
        console.print(f"[red]{exc}[/]")
        return 1
    print(f"handout: {made.folder}" + (f"\nzip:     {made.zip}" if made.zip else ""))
    return 0


def cmd_site(args: argparse.Namespace) -> int:
    from .layout import find_root
    from .site import build_site

    root = find_root()
    out = Path(args.out) if args.out else root / "build" / "site"
    with console.status("rendering the lectures ..."):
        written = build_site(root, out)
    pages = [p for p in written if p.name != "index.html"]
    chinese = [p for p in pages if p.parent != out]
    print(f"site: {len(pages) - len(chinese)} lecture page(s) and an index in {out}"
          + (f", {len(chinese)} in Chinese in {out / 'zh'}" if chinese else "") + f"\nopen {out / 'index.html'}")
    return 0
