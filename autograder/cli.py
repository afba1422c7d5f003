"""``python -m autograder``: parse the command line, call the modules, print the result."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

console = Console()


def cmd_doctor(args: argparse.Namespace) -> int:
    from .doctor import diagnose

    table = Table(title="Copy That: environment check")
    for col in ("", "what", "found", "what to do"):
        table.add_column(col)
    findings = diagnose()
    for f in findings:
        table.add_row("[green]\u2713[/]" if f.ok else "[red]\u2717[/]", f.name, f.value, "" if f.ok else f.fix)
    console.print(table)
    bad = [f for f in findings if not f.ok]
    if bad:
        console.print(f"[yellow]{len(bad)} thing(s) to fix; the course still runs, see the last column.[/]")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    from .build import build, check
    from .course import find_root

    root = find_root()
    if args.check:
        report = check(root)
        print(report.describe())
        return 0 if report.in_sync else 1
    report = build(root, args.only)
    print("regenerated exercises/ from solutions/" + ("" if report.in_sync else ":\n" + report.describe()))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from .selfcheck import check_notebook

    path = Path(args.notebook)
    if not path.is_file():
        console.print(f"[red]no such notebook: {path}[/]")
        return 2
    with console.status(f"running {path.name} ..."):
        report = check_notebook(path, timeout=args.timeout)
    table = Table(title=f"{path.name}: visible tests", show_lines=True)
    table.add_column("test")
    table.add_column("", justify="center")
    table.add_column("points", justify="right")
    table.add_column("message")
    marks = {"passed": "[green]\u2713[/]", "partial": "[yellow]~[/]", "not started": "[dim]\u00b7[/]", "failed": "[red]\u2717[/]"}
    for r in report.results:
        table.add_row(r.grade_id, marks[r.status], f"{r.points:g}/{r.max_points:g}", r.message or r.status)
    for gid in report.hidden:
        table.add_row(gid, "[dim]?[/]", "", "hidden tests: they run when the assignment is graded")
    console.print(table)
    for p in report.problems:
        console.print(f"[red]problem:[/] {p}")
    passed = sum(r.passed for r in report.results)
    console.print(f"{passed}/{len(report.results)} visible tests pass, {report.score:g}/{report.max_score:g} points. "
                  "Hidden tests run when the assignment is graded.")
    return 0 if report.all_passed else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m autograder", description="Copy That course tools")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("doctor", help="check versions, Graphviz and accelerators, and say what to fix")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("build", help="regenerate exercises/ from solutions/ with nbgrader")
    p.add_argument("--check", action="store_true", help="only compare; exit 1 when exercises/ is stale")
    p.add_argument("--only", metavar="ASSIGNMENT", help="regenerate one assignment only")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("check", help="run a notebook and show its tests: pass/fail, points, diagnostics")
    p.add_argument("notebook")
    p.add_argument("--timeout", type=int, default=60, help="seconds per cell (default 60)")
    p.set_defaults(func=cmd_check)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
