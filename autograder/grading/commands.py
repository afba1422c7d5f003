"""The grading commands (``grade``, ``check-assignment``) and what ``doctor`` asks of grading: the
configuration as the command line overrides it, the run, and its summary.  cli.py parses and
calls these."""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

console = Console()
from .progress_view import ProgressView


def grading_findings():
    """What grading would run with here: a real sandbox started now, and which limits hold."""
    from .cgroups import available
    from .bwrap import probe
    from ..learner.doctor import Finding

    import subprocess
    import sys

    problem = probe()
    version, sentence = available()
    keys = subprocess.run([sys.executable, "-c", "from autograder.grading.nokeys import deny_keyrings; "
                           "print(deny_keyrings() or '')"], capture_output=True, text=True)
    refused = keys.stdout.strip() if keys.returncode == 0 else (keys.stderr.strip().splitlines() or ["failed"])[-1]
    return [Finding("grading sandbox (started now)", "works" if problem is None else problem, problem is None,
                    "instructors: grading would run student code unsandboxed (see the README's grading section)"),
            Finding("grading limits", sentence, version is not None,
                    "run the grader as root (cgroup v1) or in a delegated cgroup v2 to sum limits per submission"),
            Finding("keyrings (grading sandbox)", refused or "refused (seccomp)", not refused,
                    "a submission could leave a key for a later one: run on x86_64 or aarch64 Linux with seccomp")]


def _size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = text.strip().lower().removesuffix("b").removesuffix("i")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def _grading_config(args: argparse.Namespace):
    """(course root, configuration) as nbgrader builds them, the command line's flags on top."""
    from ..course.layout import find_root
    from .config import ALIASES, command_line, course_root, load_config, user_config

    given = {name: getattr(args, name) for name in ALIASES if getattr(args, name, None) is not None}
    for name in ("memory", "max_output", "judge_memory"):
        if name in given:
            given[name] = _size(given[name])
    overrides = command_line(given)
    seen = user_config()
    seen.merge(overrides)
    root = course_root(seen) or find_root()
    return root, load_config(root, overrides)


def _plain(text: str, limit: int = 300, newlines: bool = False) -> str:
    """Text made safe for the terminal: no control characters (no line breaks either, unless
    ``newlines``: a student's text cannot print a line of its own), no rich markup."""
    from rich.markup import escape

    text = "".join(ch if ch.isprintable() or (newlines and ch == "\n") else "?" for ch in str(text))
    return escape(text[:limit] + ("…" if len(text) > limit else ""))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def cmd_grade(args: argparse.Namespace) -> int:
    """Grade one assignment, or several one after another on one pool of started slots (the
    fork servers start once for the whole call); the exit status is the worst of them."""
    import contextlib

    from .config import GradeOptions
    from .pool import SlotPool, slots_worth_starting
    from .source import GradingError    # (not runner: nbgrader loads after the slots start)

    try:
        root, cfg = _grading_config(args)
        options = GradeOptions(config=cfg)
    except (GradingError, FileNotFoundError) as exc:
        console.print(f"[red]{_plain(exc, 4000, True)}[/]")
        return 2
    assignments = list(args.assignment or [])
    if args.all:
        from nbgrader.coursedir import CourseDirectory

        source = root / CourseDirectory(config=cfg).source_directory
        assignments += sorted(p.name for p in source.iterdir() if p.is_dir() and p.name not in assignments) \
            if source.is_dir() else []
    if not assignments:
        console.print("[red]name an assignment to grade (or --all)[/]")
        return 2
    shared: dict = {}      # the slot pool, started by the first assignment that has work
    worst = 0
    with contextlib.ExitStack() as stack:
        warm = _optimizers(root, cfg, assignments)
        early = _early_slots(root, cfg, options, args, assignments[0], warm)
        if early is not None:
            shared["pool"] = stack.enter_context(early)

        def pool_for(grader):
            if grader.scheduler:
                return None
            if "pool" in shared or len(assignments) == 1:
                return shared.get("pool")
            if "pool" not in shared:
                shared["pool"] = stack.enter_context(SlotPool(max(1, grader.jobs), grader.sandboxed, background=True,
                                                             initial=slots_worth_starting(len(grader.students), grader.jobs),
                                                             warm=warm))
            return shared["pool"]

        for assignment in assignments:
            code = _grade_one(args, root, cfg, options, assignment, pool_for)
            rank = {0: 0, 1: 1, 2: 2, 130: 3}     # interrupted, then could not start, then failed
            worst = max(worst, code, key=lambda c: rank.get(c, 2))
            if code == 130:       # stopped: the assignments after it are not started
                break
    return worst


def _optimizers(root: Path, cfg, assignments: list[str]) -> bool:
    """Whether an assignment of the call uses an optimizer (its source notebooks say so): then the
    slots warm their servers up as they start, while this process loads nbgrader."""
    from .sandbox import folders_use_optimizer

    try:
        source = root / cfg.CourseDirectory.get("source_directory", "source")
        return folders_use_optimizer(source / a for a in assignments)
    except Exception:       # a guess that cannot be made: the first submission warms up
        return False


def _early_slots(root: Path, cfg, options, args, assignment: str, warm: bool = False):
    """The grading slots, started now (in the background) when the first assignment surely has
    submissions to grade: their fork servers load torch (and, with ``warm``, warm up) while this
    process loads nbgrader.  None when that cannot be told cheaply (another folder layout, Dask,
    no sandbox): the run starts them itself."""
    from .bwrap import probe
    from .config import default_jobs
    from .state import GradingState, submission_hash, surely_graded

    try:
        dirs = cfg.CourseDirectory
        if options.scheduler or "directory_structure" in dirs or probe() is not None:
            return None
        submitted = root / dirs.get("submitted_directory", "submitted")
        folders = {p.parent.name: p for p in submitted.glob(f"*/{assignment}")
                   if p.is_dir() and not p.is_symlink() and not p.parent.is_symlink()}
        named = list(args.student or [])
        if named:
            folders = {s: f for s, f in folders.items() if s in named}
        if options.force:
            n = len(folders)
        else:
            graded = root / dirs.get("autograded_directory", "autograded")
            state = GradingState(root / options.report_directory / assignment / "grading-state.json").read()
            n = surely_graded({s: submission_hash(f) for s, f in folders.items()}, state, named,
                              lambda s: (graded / s / assignment).is_dir())
    except Exception:       # a guess that cannot be made is left to the run
        return None
    if not n:
        return None
    from .pool import SlotPool, slots_worth_starting

    jobs = max(1, options.jobs or default_jobs())
    return SlotPool(jobs, True, background=True, initial=slots_worth_starting(n, jobs), warm=warm)


def _grade_one(args, root, cfg, options, assignment: str, pool_for) -> int:
    import signal
    import time

    from .runner import Grader, GradingError

    try:
        grader = Grader(root, assignment, students=args.student or None, config=cfg,
                        only_changed=not options.force, log=lambda m: console.print(f"[bold red]{_plain(m, 4000, True)}[/]"))
    except (GradingError, FileNotFoundError) as exc:
        console.print(f"[red]{_plain(exc, 4000, True)}[/]")
        return 2
    source = grader.root / grader.coursedir.source_directory
    known = sorted(p.name for p in source.iterdir() if p.is_dir()) if source.is_dir() else []
    if assignment not in known:
        console.print(f"[red]no assignment {_plain(repr(assignment))} in {grader.coursedir.source_directory}/; "
                      f"there are: {', '.join(known) or 'none'}[/]")
        return 2
    if not grader.students:
        console.print(f"[yellow]no submissions found in submitted/*/{_plain(assignment)}/[/]")
        return 0

    def interrupt(signum, frame):
        if grader.stopping.is_set():
            raise KeyboardInterrupt      # a second Ctrl-C: stop at once
        grader.stop()
        import os

        os.write(2, b"\nstopping: no new submission starts, running ones are ended; finished results are kept "
                    b"(Ctrl-C again to abort at once)\n")

    start = time.monotonic()
    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        grader.pool = pool_for(grader)
        with ProgressView(assignment, options.progress_seconds) as report:
            grader.events = report.event
            results = grader.run()
    except GradingError as exc:
        console.print(f"[red]{_plain(exc, 4000, True)}[/]")
        return 2
    except KeyboardInterrupt:           # the second Ctrl-C: no report, no summary
        console.print("[red]aborted: students graded before the first Ctrl-C kept their results; "
                      "run grade again for the rest (unchanged ones are skipped)[/]")
        return 130
    finally:
        signal.signal(signal.SIGINT, previous)
    wall = time.monotonic() - start
    if options.similarity:
        _similarity_one(grader.root, cfg, assignment)
    try:
        from .misconception_counts import misconception_counts
    except ImportError:        # the report leaves its misconceptions section out
        misconception_counts = None
    try:
        page = grader.write_report(results, wall, misconception_counts=misconception_counts)
    except Exception as exc:   # the grades are in the gradebook whatever happens to the report
        page = None
        console.print(f"[red]could not write the report: {type(exc).__name__}: {_plain(exc)}[/]")
    return _summary(assignment, grader, results, wall, page)


def _summary(assignment: str, grader, results, wall: float, page) -> int:
    """Who needs a look (a few lines), where the report is, and the counts, last."""
    import statistics

    attention = [r for r in results if r.flags or r.problems or not r.graded]
    for r in attention[:20]:
        what = "; ".join([*(f"flag: {f}" for f in r.flags), *r.problems])
        colour = "red" if not r.graded else "yellow"
        console.print(f"[{colour}]{_plain(r.student, 80)}[/] {r.score:g}/{r.max_score:g}: {_plain(what)}", soft_wrap=True)
    if len(attention) > 20:
        console.print(f"... and {len(attention) - 20} more: see the report", soft_wrap=True)
    broken = [r.student for r in results if not r.graded and not r.failed]
    failed = [r.student for r in results if r.failed]
    flagged = [r.student for r in results if r.flags]
    if failed:
        console.print(f"[red]grading failed (earlier results kept): {_plain(', '.join(failed), 2000)}[/]", soft_wrap=True)
    if grader.interrupted:
        console.print(f"[red]interrupted: not graded: {_plain(', '.join(grader.interrupted), 4000)}[/]", soft_wrap=True)
    if page is not None:
        try:
            shown = page.relative_to(Path.cwd())
        except ValueError:
            shown = page
        console.print(f"report: {_plain(shown, 1000)} (and report.csv, cells.csv beside it)", soft_wrap=True)
    scores = [r.score for r in results if not r.failed]      # broken ones count, as zero
    top = max((r.max_score for r in results), default=0)
    parts = [f"{len(results)} graded", f"{len(grader.unchanged)} unchanged", f"{len(broken)} broken",
             f"{len(failed)} failed", f"{len(flagged)} flagged"]
    if grader.interrupted:
        parts.append(f"{len(grader.interrupted)} not graded")
    line = f"{_plain(assignment)}: {_plural(len(grader.students), 'submission')}: " + ", ".join(parts)
    if scores:
        line += (f"; this run's mean {statistics.fmean(scores):.2f}, median {statistics.median(scores):g} "
                 f"of {top:g}")
    console.print(line + f"; {wall:.1f} s", soft_wrap=True)
    if grader.interrupted:
        return 130
    return 1 if failed else 0


def named_assignments(args: argparse.Namespace, root: Path, cfg) -> list[str] | None:
    """The assignments the command line names (``--all``: every one of the source folder); None,
    said, when it names none or one the course does not have."""
    from nbgrader.coursedir import CourseDirectory

    source = root / CourseDirectory(config=cfg).source_directory
    known = sorted(p.name for p in source.iterdir() if p.is_dir()) if source.is_dir() else []
    names = known if args.all else list(args.assignment or [])
    unknown = [a for a in names if a not in known]
    if not names or unknown:
        console.print(f"[red]{'no assignment ' + repr(unknown[0]) if unknown else 'name an assignment (or --all)'}; "
                      f"there are: {_plain(', '.join(known) or 'none')}[/]")
        return None
    return names


def cmd_check_assignment(args: argparse.Namespace) -> int:
    """The authoring check of each assignment named: exit 1 when anything is off."""
    from .assignment_check import check_assignment
    from .pool import SlotPool
    from .runner import GradingError

    try:
        root, cfg = _grading_config(args)
    except (GradingError, FileNotFoundError) as exc:
        console.print(f"[red]{_plain(exc, 4000, True)}[/]")
        return 2
    names = named_assignments(args, root, cfg)
    if names is None:
        return 2
    import contextlib

    from .config import GradeOptions, default_jobs
    from .bwrap import probe

    worst = 0
    log = lambda m: console.print(_plain(m, 4000, True), soft_wrap=True)   # noqa: E731
    jobs = args.jobs or GradeOptions(config=cfg).jobs or default_jobs()
    shared = SlotPool(jobs, probe() is None) if len(names) > 1 else contextlib.nullcontext(None)
    with shared as pool:     # several assignments: the slots start once
        for name in names:
            verdict = check_assignment(root, name, cfg, jobs=args.jobs, pool=pool, log=log)
            for line in verdict.passed:
                console.print(f"[green]\u2713[/] {_plain(line, 4000, True)}", soft_wrap=True)
            for line in verdict.refusals + verdict.problems:
                console.print(f"[red]\u2717[/] {_plain(line, 4000, True)}", soft_wrap=True)
            n = len(verdict.refusals) + len(verdict.problems)
            console.print(f"{_plain(name)}: {verdict.submissions} submissions graded in {verdict.seconds:.0f} s: "
                          + ("[green]nothing off[/]" if verdict.ok else f"[red]{_plural(n, 'thing')} off[/]"),
                          soft_wrap=True)
            worst = max(worst, 0 if verdict.ok else 1)
    return worst


def _similarity_one(root: Path, cfg, assignment: str) -> int:
    """Compare one assignment's submitted answers and print where the page is; never raises."""
    from .similarity_report import run

    try:
        result = run(root, assignment, cfg)
    except Exception as exc:    # the grades are untouched whatever happens here
        console.print(f"[red]{_plain(assignment)}: no similarity report: {type(exc).__name__}: {_plain(exc)}[/]")
        return 1
    console.print(_plain(result.summary(Path.cwd()), 2000), soft_wrap=True)
    return 0
