"""The commands that are nbgrader's own, run on the course (``feedback``, ``export``), and the
similarity report of a class (``similarity``).  cli.py parses and calls these."""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

console = Console()
from .commands import _grading_config, _plain, _plural, _similarity_one, named_assignments


def cmd_similarity(args: argparse.Namespace) -> int:
    """Pairs of submissions whose answers are unusually alike, read from submitted/ (never run)."""
    try:
        root, cfg = _grading_config(args)
    except FileNotFoundError as exc:
        console.print(f"[red]{_plain(exc, 4000, True)}[/]")
        return 2
    assignments = named_assignments(args, root, cfg)
    if assignments is None:
        return 2
    return max(_similarity_one(root, cfg, a) for a in assignments)


def _nbgrader(*argv: str, root: Path | None = None) -> int:
    from ..course.build import run_nbgrader
    from ..course.layout import find_root

    return run_nbgrader(*argv, cwd=root or find_root(), capture=False).returncode


def _nbgrader_root(args: argparse.Namespace) -> tuple[Path, list[str]]:
    """Where nbgrader runs (the course root the configuration names, else the nearest one) and
    the command line's options as nbgrader's own."""
    from ..course.layout import find_root
    from .config import course_root, user_config

    extra = [f"--CourseDirectory.db_url={args.db}"] if getattr(args, "db", None) else []
    return course_root(user_config()) or find_root(), extra


def cmd_feedback(args: argparse.Namespace) -> int:
    root, extra = _nbgrader_root(args)
    extra += [f"--student={s}" for s in args.student or []]
    if not args.verbose:      # nbgrader's INFO lines, several per student: --verbose shows them
        extra.append("--log-level=WARN")
    code = _nbgrader("generate_feedback", args.assignment, "--force", *extra, root=root)
    if code == 0 and not args.verbose:
        pages = list((root / "feedback").glob(f"*/{args.assignment}/*.html"))
        students = len({p.parent.parent.name for p in pages})
        console.print(f"feedback of {_plain(args.assignment)} for {_plural(students, 'student')}: "
                      f"feedback/<student>/{_plain(args.assignment)}/ (--verbose: nbgrader's log)", soft_wrap=True)
    return code


def cmd_export(args: argparse.Namespace) -> int:
    root, extra = _nbgrader_root(args)
    plugin = "report.CanvasExportPlugin" if args.format == "canvas" else "exports.GradesExportPlugin"
    extra += [f"--exporter=autograder.grading.{plugin}"]
    to = args.to or ("canvas.csv" if args.format == "canvas" else "grades.csv")
    extra += [f"--assignment={a}" for a in args.assignment or []]
    _export_warnings(root, args)
    return _nbgrader("export", f"--to={to}", *extra, root=root)


def _export_warnings(root: Path, args: argparse.Namespace) -> None:
    """Say what the export leaves unsaid (answers not yet graded by hand); never stops it."""
    from nbgrader.coursedir import CourseDirectory

    from .config import load_config
    from .exports import export_warnings

    try:
        db_url = args.db or CourseDirectory(config=load_config(root, cwd=root)).db_url
        lines = export_warnings(db_url, args.assignment or None)
    except Exception as exc:     # the export itself says what is wrong with the gradebook
        lines = [f"could not check for answers not yet graded by hand: {type(exc).__name__}: {exc}"]
    for line in lines:
        console.print(f"[yellow]warning: {_plain(line, 2000)}[/]", soft_wrap=True)
