"""``python -m autograder``: parse the command line, call the modules, print the result."""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table

console = Console()


def cmd_doctor(args: argparse.Namespace) -> int:
    from .learner.doctor import diagnose

    table = Table(title="Copy That: environment check")
    for col in ("", "what", "found", "what to do"):
        table.add_column(col)
    findings = diagnose()
    if instructor_tools():
        findings += grading_findings()
    for f in findings:
        table.add_row("[green]\u2713[/]" if f.ok else "[red]\u2717[/]", f.name, f.value, "" if f.ok else f.fix)
    console.print(table)
    bad = [f for f in findings if not f.ok]
    if bad:
        console.print(f"[yellow]{len(bad)} thing(s) to fix; the course still runs, see the last column.[/]")
    return 0


def grading_findings():
    """What grading would run with here: a real sandbox started now, and which limits hold."""
    from .grading.cgroups import available
    from .grading.sandbox import probe
    from .learner.doctor import Finding

    problem = probe()
    version, sentence = available()
    return [Finding("grading sandbox (started now)", "works" if problem is None else problem, problem is None,
                    "instructors: grading would run student code unsandboxed (see the README's grading section)"),
            Finding("grading limits", sentence, version is not None,
                    "run the grader as root (cgroup v1) or in a delegated cgroup v2 to sum limits per submission")]


def cmd_build(args: argparse.Namespace) -> int:
    from .course.build import build, check
    from .course.layout import find_root

    root = find_root()
    if args.check:
        report = check(root)
        print(report.describe())
        return 0 if report.in_sync else 1
    report = build(root, args.only)
    print("regenerated exercises/ from solutions/" + ("" if report.in_sync else ":\n" + report.describe()))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    path = Path(args.notebook)
    if not path.is_file():
        console.print(f"[red]no such notebook: {path}[/]")
        return 2
    if getattr(args, "watch", False):
        from .learner.watch import watch_check

        return watch_check(path, lambda: _check_once(path, args.timeout), console)
    return 0 if _check_once(path, args.timeout).all_passed else 1


def _check_once(path: Path, timeout: int):
    """Run the notebook once and print its table; return the CheckReport."""
    from rich.markup import escape

    from .learner.selfcheck import check_notebook

    with console.status(f"running {path.name} ..."):
        report = check_notebook(path, timeout=timeout)
    table = Table(title=f"{path.name}: visible tests", show_lines=True)
    table.add_column("test")
    table.add_column("", justify="center")
    table.add_column("points", justify="right")
    table.add_column("message")
    marks = {"passed": "[green]\u2713[/]", "partial": "[yellow]~[/]", "not started": "[dim]\u00b7[/]", "failed": "[red]\u2717[/]"}
    for r in report.results:
        table.add_row(r.grade_id, marks[r.status], f"{r.points:g}/{r.max_points:g}", escape(r.message or r.status))
    for gid in report.hidden:
        table.add_row(gid, "[dim]?[/]", "", "hidden tests: they run when the assignment is graded")
    console.print(table)
    for r in report.results:
        for m in r.misconceptions:
            console.print(f"[yellow]{escape(r.grade_id)}[/]: misconception {m.id}: {escape(m.myth)}\n"
                          f"  read again: {escape(m.link)}", soft_wrap=True)
    for p in report.problems:
        console.print(f"[red]problem:[/] {p}")
    if report.unwritten:
        n = len(report.unwritten)
        console.print(f"[yellow]{n} written answer{'s are' if n != 1 else ' is'} still empty[/] "
                      f"(graded by hand): {', '.join(report.unwritten)}")
    passed = sum(r.passed for r in report.results)
    console.print(f"{passed}/{len(report.results)} visible tests pass, {report.score:g}/{report.max_score:g} points. "
                  "Hidden tests run when the assignment is graded"
                  + ("; written answers are read by hand." if report.written else "."))
    if not report.all_passed:
        console.print("[yellow]Not done yet[/]: " + _what_is_left(report))
    return report


def _what_is_left(report) -> str:
    parts = []
    failing = [r for r in report.results if not r.passed]
    if failing:
        parts.append(f"{len(failing)} visible test{'s' if len(failing) != 1 else ''} to fix")
    if report.problems:
        parts.append(f"{len(report.problems)} cell{'s' if len(report.problems) != 1 else ''} that fail")
    if report.unwritten:
        parts.append(f"{len(report.unwritten)} written answer{'s' if len(report.unwritten) != 1 else ''} to write")
    return ", ".join(parts) + "."


def cmd_lab(args: argparse.Namespace) -> int:
    from .learner.lab import run_lab
    from .learner.progress import learner_root

    root = learner_root(args.root)
    return run_lab(root, instructor=args.instructor, ip=args.ip, port=args.port, open_browser=args.browser)


def cmd_progress(args: argparse.Namespace) -> int:
    from .learner.progress import learner_root, progress, summary, table

    root = learner_root(args.root)
    seen = []
    with console.status("checking the exercises (unchanged notebooks come from the cache) ...") as status:
        def done(row):
            seen.append(row)
            status.update(f"checked {len(seen)} exercise(s), last: {row.assignment} ...")

        rows = progress(root, use_cache=not args.no_cache, jobs=args.jobs, timeout=args.timeout, on_done=done)
    console.print(table(rows))
    console.print(summary(rows))
    return 0


def cmd_handout(args: argparse.Namespace) -> int:
    from .course.layout import find_root
    from .course.handout import HandoutError, make_handout

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
    from .course.layout import find_root
    from .course.site import build_site

    root = find_root()
    out = Path(args.out) if args.out else root / "build" / "site"
    with console.status("rendering the lectures ..."):
        written = build_site(root, out)
    print(f"site: {len(written) - 1} lecture page(s) and an index in {out}\nopen {out / 'index.html'}")
    return 0


def _size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = text.strip().lower().removesuffix("b").removesuffix("i")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def cmd_grade(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .course.layout import find_root
    from .grading.runner import Grader, GradingError
    from .grading.sandbox import Limits

    limits = Limits(memory_bytes=_size(args.memory), cell_timeout=args.cell_timeout,
                    notebook_timeout=args.notebook_timeout, cpu_seconds=args.cpu_seconds,
                    processes=args.processes, output_bytes=_size(args.max_output))
    try:
        grader = Grader(find_root(), args.assignment, students=args.student or None, jobs=args.jobs,
                        limits=limits, scheduler=args.scheduler, require_sandbox=args.require_sandbox,
                        log=lambda m: console.print(f"[bold red]{m}[/]"))
    except (GradingError, FileNotFoundError) as exc:
        console.print(f"[red]{exc}[/]")
        return 2
    if not grader.students:
        known = sorted(p.name for p in (grader.root / grader.coursedir.source_directory).iterdir() if p.is_dir()) \
            if (grader.root / grader.coursedir.source_directory).is_dir() else []
        if args.assignment not in known:
            console.print(f"[red]no assignment {args.assignment!r} in {grader.coursedir.source_directory}/; "
                          f"there are: {', '.join(known) or 'none'}[/]")
            return 2
        console.print(f"[yellow]no submissions found in submitted/*/{args.assignment}/[/]")
        return 0
    with Progress(TextColumn("grading {task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task(args.assignment, total=len(grader.students))
        try:
            results = grader.run(progress=lambda r: bar.advance(task))
        except GradingError as exc:
            console.print(f"[red]{exc}[/]")
            return 2
    table = Table(title=f"{args.assignment}: {len(results)} submission{'' if len(results) == 1 else 's'}")
    for col, justify in (("student", "left"), ("score", "right"), ("max", "right"), ("flags", "left"), ("problems", "left")):
        table.add_column(col, justify=justify)
    for r in results:
        table.add_row(r.student, f"{r.score:g}", f"{r.max_score:g}", "\n".join(r.flags), "\n".join(r.problems),
                      style=None if r.graded else "red")
    console.print(table)
    failed = [r.student for r in results if not r.graded]
    flagged = [r.student for r in results if r.flags]
    if flagged:
        console.print(f"[yellow]flagged for manual review: {', '.join(flagged)}[/]")
    if failed:
        console.print(f"[red]could not be graded: {', '.join(failed)}[/]")
        return 1
    return 0


def _nbgrader(*argv: str) -> int:
    from .course.build import run_nbgrader
    from .course.layout import find_root

    return run_nbgrader(*argv, cwd=find_root(), capture=False).returncode


def cmd_feedback(args: argparse.Namespace) -> int:
    extra = [f"--student={s}" for s in args.student or []]
    return _nbgrader("generate_feedback", args.assignment, "--force", *extra)


def cmd_export(args: argparse.Namespace) -> int:
    return _nbgrader("export", f"--to={args.to}")


def instructor_tools() -> bool:
    """Whether this copy of the package has the instructor's side (a student handout does not)."""
    return all((Path(__file__).parent / part / "__init__.py").is_file() for part in ("course", "grading"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="copy-that", description="Copy That course tools")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("doctor", help="check versions, Graphviz and accelerators, and say what to fix")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("check", help="run a notebook and show its tests: pass/fail, points, diagnostics")
    p.add_argument("notebook")
    p.add_argument("--timeout", type=int, default=60, help="seconds per cell (default 60)")
    p.add_argument("--watch", action="store_true", help="check again every time the notebook is saved; hints after a failure")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("lab", help="JupyterLab for the course: its terminals run copy-that; nbgrader's instructor tools hidden")
    p.add_argument("--root", help="the course folder (default: the nearest one holding exercises/)")
    p.add_argument("--ip", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8888)
    p.add_argument("--browser", action="store_true", help="open a browser tab")
    p.add_argument("--instructor", action="store_true",
                   help="show nbgrader's instructor tools (formgrader, Create Assignment, Validate)")
    p.set_defaults(func=cmd_lab)

    p = sub.add_parser("progress", help="every exercise in one table: done, failing, not started, points")
    p.add_argument("--root", help="the course folder (default: the nearest one holding exercises/)")
    p.add_argument("--jobs", type=int, default=2, help="notebooks checked side by side (default 2)")
    p.add_argument("--timeout", type=int, default=60, help="seconds per cell (default 60)")
    p.add_argument("--no-cache", action="store_true", help="re-run every notebook, even unchanged ones")
    p.set_defaults(func=cmd_progress)

    if instructor_tools():
        p = sub.add_parser("build", help="regenerate exercises/ from solutions/ with nbgrader")
        p.add_argument("--check", action="store_true", help="only compare; exit 1 when exercises/ is stale")
        p.add_argument("--only", metavar="ASSIGNMENT", help="regenerate one assignment only")
        p.set_defaults(func=cmd_build)

        p = sub.add_parser("handout", help="the student folder and zip: course/, exercises/, README; no solutions")
        p.add_argument("--out", help="where to write copy-that/ and copy-that.zip (default: build/handout)")
        p.add_argument("--no-zip", action="store_true", help="write the folder only")
        p.set_defaults(func=cmd_handout)

        p = sub.add_parser("site", help="render the lectures with their outputs to static HTML (build/site)")
        p.add_argument("--out", help="output folder (default: build/site)")
        p.set_defaults(func=cmd_site)
        p = sub.add_parser("grade", help="grade submitted/<student>/ASSIGNMENT in sandboxes, in parallel, into the gradebook")
        p.add_argument("assignment")
        p.add_argument("--student", action="append", metavar="ID", help="grade only this student (repeatable)")
        p.add_argument("--jobs", type=int, default=None, help="submissions graded at once (default: number of cores)")
        p.add_argument("--scheduler", metavar="ADDRESS", help="run the jobs on a Dask cluster, e.g. tcp://127.0.0.1:8786")
        p.add_argument("--require-sandbox", action="store_true", help="refuse to grade without bubblewrap")
        p.add_argument("--memory", default="4G", help="memory limit per submission (default 4G)")
        p.add_argument("--cell-timeout", type=int, default=60, help="wall-clock seconds per cell (default 60)")
        p.add_argument("--notebook-timeout", type=int, default=600, help="wall-clock seconds per notebook (default 600)")
        p.add_argument("--cpu-seconds", type=int, default=300, help="CPU seconds per notebook (default 300)")
        p.add_argument("--processes", type=int, default=64, help="processes and threads per submission (default 64)")
        p.add_argument("--max-output", default="2M", help="output a notebook may print (default 2M)")
        p.set_defaults(func=cmd_grade)

        p = sub.add_parser("feedback", help="per-student HTML feedback (no hidden tests, no solutions)")
        p.add_argument("assignment")
        p.add_argument("--student", action="append", metavar="ID")
        p.set_defaults(func=cmd_feedback)

        p = sub.add_parser("export", help="write the grades CSV (nbgrader export)")
        p.add_argument("--to", default="grades.csv", help="output file (default grades.csv)")
        p.set_defaults(func=cmd_export)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
