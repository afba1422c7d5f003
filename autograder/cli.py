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
    if instructor_tools() and not in_learner_lab():
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
    from .grading.bwrap import probe
    from .learner.doctor import Finding

    problem = probe()
    version, sentence = available()
    return [Finding("grading sandbox (started now)", "works" if problem is None else problem, problem is None,
                    "instructors: grading would run student code unsandboxed (see the README's grading section)"),
            Finding("grading limits", sentence, version is not None,
                    "run the grader as root (cgroup v1) or in a delegated cgroup v2 to sum limits per submission")]


def cmd_build(args: argparse.Namespace) -> int:
    from .course.build import build, check, editions
    from .course.layout import SOURCE_DIR, find_root
    from .grading.authoring import check_course
    from .learner.editions import folder

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
    from .course.predictions import AuthoringError, write_predictions

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


def _lang(args: argparse.Namespace, notebook: Path | None = None) -> str:
    """--lang, else $COPY_THAT_LANG, else the notebook's own language (its metadata), else English."""
    from .kernel.i18n import DEFAULT, choose_for

    try:
        return choose_for(getattr(args, "lang", None), notebook)
    except ValueError as exc:
        console.print(f"[yellow]{exc}[/]")
        return DEFAULT


def cmd_check(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from .kernel.i18n import say, tr
    from .learner.cells import find_notebook
    from .learner.finish import source_notebook

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
        from .learner.watch import watch_check

        return watch_check(path, lambda: _check_once(path, args.timeout, args.full, lang), console, lang=lang)
    return 0 if _check_once(path, args.timeout, args.full, lang).all_passed else 1


def _check_once(path: Path, timeout: int, full: bool = False, lang: str = "en"):
    """Run the notebook once and print what check prints; return the CheckReport."""
    from .kernel.i18n import say
    from .learner.selfcheck import check_notebook
    from .learner.view import print_check

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

    from .kernel.i18n import say, tr
    from .learner.cells import find_notebook
    from .learner.finish import model_answers, source_notebook
    from .learner.view import print_model_answers

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
    from .kernel.i18n import tr
    from .learner.lab import run_lab
    from .learner.progress import learner_root

    lang = _lang(args)
    try:
        root = learner_root(args.root)
    except FileNotFoundError as exc:
        console.print(f"[red]{tr(str(exc), lang)}[/]")
        return 2
    return run_lab(root, instructor=args.instructor, ip=args.ip, port=args.port, open_browser=args.browser,
                   lang=getattr(args, "lang", None))


def cmd_progress(args: argparse.Namespace) -> int:
    from .kernel.i18n import say, tr
    from .learner.progress import course_lang, learner_root, progress, summary, table

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
    pages = [p for p in written if p.name != "index.html"]
    chinese = [p for p in pages if p.parent != out]
    print(f"site: {len(pages) - len(chinese)} lecture page(s) and an index in {out}"
          + (f", {len(chinese)} in Chinese in {out / 'zh'}" if chinese else "") + f"\nopen {out / 'index.html'}")
    return 0


def _size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = text.strip().lower().removesuffix("b").removesuffix("i")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def _grading_config(args: argparse.Namespace):
    """(course root, configuration) as nbgrader builds them, the command line's flags on top."""
    from .course.layout import find_root
    from .grading.config import ALIASES, command_line, course_root, load_config, user_config

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


class _ProgressReport:
    """Progress of a grading run: a bar on a terminal; elsewhere (nohup, a log file, CI) a line
    every ``every`` seconds or every 10 submissions, the preparation included."""

    def __init__(self, assignment: str, every: float):
        import threading
        import time

        self.assignment, self.every = assignment, every
        self.phase, self.done, self.total = "starting", 0, 0
        self.start = self.last = time.monotonic()
        self.last_count = -1
        self.terminal = console.is_terminal
        self.bar = self.task = None
        self.lock = threading.Lock()
        self.finished = threading.Event()
        self.thread = None

    def __enter__(self):
        import threading

        if self.terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=console, transient=True)
            self.bar.__enter__()
            self.task = self.bar.add_task(f"{self.assignment}: starting", total=None)
        else:
            self.thread = threading.Thread(target=self._tick, daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc):
        self.finished.set()
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def _line(self) -> None:
        import time

        elapsed = time.monotonic() - self.start
        print(f"[{int(elapsed) // 60:02d}:{int(elapsed) % 60:02d}] {self.assignment}: {self.phase} "
              f"{self.done}/{self.total}", flush=True)
        self.last = time.monotonic()

    def _tick(self) -> None:
        import time

        while not self.finished.wait(min(1.0, self.every / 4)):
            with self.lock:
                if time.monotonic() - self.last >= self.every and self.total:
                    self._line()

    def event(self, phase: str, done: int, total: int) -> None:
        if not total:
            return
        with self.lock:
            changed = phase != self.phase
            self.phase, self.done, self.total = phase, done, total
            if self.bar is not None:
                self.bar.update(self.task, description=f"{self.assignment}: {phase}", completed=done, total=total)
            elif changed or done == total or done - self.last_count >= 10:
                self._line()
                self.last_count = done


def cmd_grade(args: argparse.Namespace) -> int:
    """Grade one assignment, or several one after another on one pool of started slots (the
    fork servers start once for the whole call); the exit status is the worst of them."""
    import contextlib

    from .grading.config import GradeOptions
    from .grading.pool import SlotPool, slots_worth_starting
    from .grading.source import GradingError    # (not runner: nbgrader loads after the slots start)

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
        early = _early_slots(root, cfg, options, args, assignments[0])
        if early is not None:
            shared["pool"] = stack.enter_context(early)

        def pool_for(grader):
            if grader.scheduler:
                return None
            if "pool" in shared or len(assignments) == 1:
                return shared.get("pool")
            if "pool" not in shared:
                shared["pool"] = stack.enter_context(SlotPool(max(1, grader.jobs), grader.sandboxed, background=True,
                                                             initial=slots_worth_starting(len(grader.students), grader.jobs)))
            return shared["pool"]

        for assignment in assignments:
            code = _grade_one(args, root, cfg, options, assignment, pool_for)
            rank = {0: 0, 1: 1, 2: 2, 130: 3}     # interrupted, then could not start, then failed
            worst = max(worst, code, key=lambda c: rank.get(c, 2))
            if code == 130:       # stopped: the assignments after it are not started
                break
    return worst


def _early_slots(root: Path, cfg, options, args, assignment: str):
    """The grading slots, started now (in the background) when the first assignment surely has
    submissions to grade: their fork servers load torch while this process loads nbgrader.  None
    when that cannot be told cheaply (another folder layout, Dask, no sandbox): the run starts
    them itself."""
    from .grading.bwrap import probe
    from .grading.config import default_jobs
    from .grading.state import GradingState, submission_hash, surely_graded

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
    from .grading.pool import SlotPool, slots_worth_starting

    jobs = max(1, options.jobs or default_jobs())
    return SlotPool(jobs, True, background=True, initial=slots_worth_starting(n, jobs))


def _grade_one(args, root, cfg, options, assignment: str, pool_for) -> int:
    import signal
    import time

    from .grading.runner import Grader, GradingError

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
        with _ProgressReport(assignment, options.progress_seconds) as report:
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
        from .grading.misconception_counts import misconception_counts
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


def cmd_check_assignment(args: argparse.Namespace) -> int:
    """The authoring check of each assignment named: exit 1 when anything is off."""
    from .grading.assignment_check import check_assignment
    from .grading.pool import SlotPool
    from .grading.runner import GradingError

    try:
        root, cfg = _grading_config(args)
    except (GradingError, FileNotFoundError) as exc:
        console.print(f"[red]{_plain(exc, 4000, True)}[/]")
        return 2
    from nbgrader.coursedir import CourseDirectory

    source = root / CourseDirectory(config=cfg).source_directory
    known = sorted(p.name for p in source.iterdir() if p.is_dir()) if source.is_dir() else []
    names = known if args.all else list(args.assignment or [])
    unknown = [a for a in names if a not in known]
    if not names or unknown:
        console.print(f"[red]{'no assignment ' + repr(unknown[0]) if unknown else 'name an assignment (or --all)'}; "
                      f"there are: {_plain(', '.join(known) or 'none')}[/]")
        return 2
    import contextlib

    from .grading.config import GradeOptions, default_jobs
    from .grading.bwrap import probe

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
    from .grading.similarity_report import run

    try:
        result = run(root, assignment, cfg)
    except Exception as exc:    # the grades are untouched whatever happens here
        console.print(f"[red]{_plain(assignment)}: no similarity report: {type(exc).__name__}: {_plain(exc)}[/]")
        return 1
    console.print(_plain(result.summary(Path.cwd()), 2000), soft_wrap=True)
    return 0


def cmd_similarity(args: argparse.Namespace) -> int:
    """Pairs of submissions whose answers are unusually alike, read from submitted/ (never run)."""
    from nbgrader.coursedir import CourseDirectory

    try:
        root, cfg = _grading_config(args)
    except FileNotFoundError as exc:
        console.print(f"[red]{_plain(exc, 4000, True)}[/]")
        return 2
    source = root / CourseDirectory(config=cfg).source_directory
    known = sorted(p.name for p in source.iterdir() if p.is_dir()) if source.is_dir() else []
    assignments = known if args.all else list(args.assignment or [])
    unknown = [a for a in assignments if a not in known]
    if unknown or not assignments:
        console.print(f"[red]name an assignment (or --all); there are: {', '.join(known)}[/]")
        return 2
    return max(_similarity_one(root, cfg, a) for a in assignments)


def _nbgrader(*argv: str, root: Path | None = None) -> int:
    from .course.build import run_nbgrader
    from .course.layout import find_root

    return run_nbgrader(*argv, cwd=root or find_root(), capture=False).returncode


def _nbgrader_root(args: argparse.Namespace) -> tuple[Path, list[str]]:
    """Where nbgrader runs (the course root the configuration names, else the nearest one) and
    the command line's options as nbgrader's own."""
    from .course.layout import find_root
    from .grading.config import course_root, user_config

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

    from .grading.config import load_config
    from .grading.exports import export_warnings

    try:
        db_url = args.db or CourseDirectory(config=load_config(root, cwd=root)).db_url
        lines = export_warnings(db_url, args.assignment or None)
    except Exception as exc:     # the export itself says what is wrong with the gradebook
        lines = [f"could not check for answers not yet graded by hand: {type(exc).__name__}: {exc}"]
    for line in lines:
        console.print(f"[yellow]warning: {_plain(line, 2000)}[/]", soft_wrap=True)


def instructor_tools() -> bool:
    """Whether this copy of the package has the instructor's side (a student handout does not)."""
    return all((Path(__file__).parent / part / "__init__.py").is_file() for part in ("course", "grading"))


LEARNER_COMMANDS = ("doctor", "check", "answers", "lab", "progress")
LANGS = ("en", "zh")
LANG_HELP = ("the language to speak: en or zh (default: $COPY_THAT_LANG, else the notebook's own language; "
             "the Chinese edition's notebooks are in Chinese)")


def in_learner_lab() -> bool:
    """Whether this runs in a terminal of the learner's lab (``copy-that lab`` without --instructor)."""
    import os

    from .learner.lab import ROLE_ENV

    return os.environ.get(ROLE_ENV) == "learner"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="copy-that", description="Copy That course tools")
    # In the learner's lab the instructor's commands still run (`make site` calls one) but are not
    # offered: a parser added without help= is left out of the list.
    offer = not in_learner_lab()
    sub = parser.add_subparsers(dest="command", required=True,
                                metavar=None if offer else "{" + ",".join(LEARNER_COMMANDS) + "}")

    def instructor(name: str, help: str, **kwargs) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, **kwargs) if offer else sub.add_parser(name, **kwargs)

    p = sub.add_parser("doctor", help="check versions, Graphviz and accelerators, and say what to fix")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("check", help="run a notebook and show its tests: pass/fail, points, diagnostics")
    p.add_argument("notebook", nargs="?",
                   help="the exercise notebook (from here or from the course folder; default: the one notebook here)")
    p.add_argument("--timeout", type=int, default=60, help="seconds per cell (default 60)")
    p.add_argument("--watch", action="store_true", help="check again every time the notebook is saved; hints after a failure")
    p.add_argument("--full", action="store_true",
                   help="also run the hidden tests, from the course's solutions/ (a clone of the course, not a class's copy)")
    p.add_argument("--lang", choices=LANGS, help=LANG_HELP)
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("answers", help="show an assignment's model answers (from the course's solutions/), after asking")
    p.add_argument("notebook", nargs="?", help="the exercise notebook (default: the one notebook here)")
    p.add_argument("--yes", action="store_true", help="do not ask first")
    p.add_argument("--lang", choices=LANGS, help=LANG_HELP)
    p.set_defaults(func=cmd_answers)

    p = sub.add_parser("lab", help="JupyterLab for the course: its terminals run copy-that; nbgrader's instructor tools hidden")
    p.add_argument("--root", help="the course folder (default: the nearest one holding exercises/)")
    p.add_argument("--lang", choices=LANGS, help="zh: open the Chinese edition (zh/ of the course), its terminals and "
                                                 "kernels speaking Chinese; en: the English one (the default)")
    p.add_argument("--ip", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8888)
    p.add_argument("--browser", action=argparse.BooleanOptionalAction, default=None,
                   help="open a browser tab (default: where there is a graphical browser)")
    p.add_argument("--instructor", action="store_true",
                   help="show nbgrader's instructor tools (formgrader, Create Assignment, Validate)")
    p.set_defaults(func=cmd_lab)

    p = sub.add_parser("progress", help="every exercise in one table: done, failing, not started, points")
    p.add_argument("--root", help="the course folder (default: the nearest one holding exercises/)")
    p.add_argument("--jobs", type=int, default=2, help="notebooks checked side by side (default 2)")
    p.add_argument("--timeout", type=int, default=60, help="seconds per cell (default 60)")
    p.add_argument("--no-cache", action="store_true", help="re-run every notebook, even unchanged ones")
    p.add_argument("--lang", choices=LANGS, help=LANG_HELP)
    p.set_defaults(func=cmd_progress)

    if instructor_tools():
        p = instructor("build", help="regenerate exercises/ from solutions/ with nbgrader (and zh/exercises/ from zh/solutions/)")
        p.add_argument("--check", action="store_true", help="only compare; exit 1 when exercises/ is stale")
        p.add_argument("--only", metavar="ASSIGNMENT", help="regenerate one assignment only")
        p.set_defaults(func=cmd_build)

        p = instructor("predictions", help="write the release's half of prediction sets from the hidden part "
                                                "(sealed diagnoses; no right letter)")
        p.add_argument("notebook", nargs="+", help="instructor notebooks, e.g. solutions/a1_views/a1_views.ipynb")
        p.add_argument("--check", action="store_true", help="only compare; exit 1 when a visible check is stale")
        p.set_defaults(func=cmd_predictions)

        p = instructor("handout", help="the student folder and zip: course/, exercises/, README; no solutions")
        p.add_argument("--out", help="where to write copy-that/ and copy-that.zip (default: build/handout)")
        p.add_argument("--no-zip", action="store_true", help="write the folder only")
        p.set_defaults(func=cmd_handout)

        p = instructor("site", help="render the lectures with their outputs to static HTML (build/site)")
        p.add_argument("--out", help="output folder (default: build/site)")
        p.set_defaults(func=cmd_site)
        p = instructor("grade", help="grade submitted/<student>/ASSIGNMENT in sandboxes, in parallel, into the gradebook",
                           description="Every option is also a configuration option, read from the files nbgrader "
                                       "reads (the Jupyter config folder's nbgrader_config.py, then the course's); "
                                       "a flag overrides the file. Unchanged submissions are not graded again "
                                       "(--force: all). A report goes to reports/ASSIGNMENT/.")
        p.add_argument("assignment", nargs="*",
                       help="one or more assignments, graded one after another on the same started slots")
        p.add_argument("--all", action="store_true", help="every assignment in the course's source folder")
        p.add_argument("--student", action="append", metavar="ID",
                       help="grade only this student, changed or not (repeatable)")
        p.add_argument("--force", action="store_true", default=None,
                       help="grade every submission again, changed or not (c.GradeOptions.force)")
        p.add_argument("--jobs", type=int, help="submissions graded at once (c.GradeOptions.jobs; 0: one more than the cores)")
        p.add_argument("--scheduler", metavar="ADDRESS",
                       help="run the jobs on a Dask cluster, e.g. tcp://127.0.0.1:8786 (c.GradeOptions.scheduler)")
        p.add_argument("--require-sandbox", action="store_true", default=None,
                       help="refuse to grade without bubblewrap (c.SandboxedExecute.require_sandbox)")
        p.add_argument("--memory", help="memory limit per submission, e.g. 4G (c.SandboxedExecute.memory_bytes)")
        p.add_argument("--cell-timeout", type=int,
                       help="wall-clock seconds per cell (c.Execute.timeout; the course sets it)")
        p.add_argument("--notebook-timeout", type=int,
                       help="wall-clock seconds per notebook (c.SandboxedExecute.notebook_timeout)")
        p.add_argument("--cpu-seconds", type=int, help="CPU seconds per notebook (c.SandboxedExecute.cpu_seconds)")
        p.add_argument("--processes", type=int, help="processes and threads per submission (c.SandboxedExecute.processes)")
        p.add_argument("--max-output", help="output a notebook may print, e.g. 2M (c.SandboxedExecute.output_bytes)")
        p.add_argument("--judge-memory", help="memory of the judge that runs a submission's hidden tests, e.g. 2G "
                                              "(c.SandboxedExecute.judge_memory_bytes)")
        p.add_argument("--judge-cpu-seconds", type=int,
                       help="CPU seconds of that judge per notebook (c.SandboxedExecute.judge_cpu_seconds)")
        p.add_argument("--db", metavar="URL", help="the gradebook (c.CourseDirectory.db_url)")
        p.add_argument("--similarity", action="store_true", default=None,
                       help="also write the similarity report of each assignment (c.GradeOptions.similarity)")
        p.set_defaults(func=cmd_grade)

        p = instructor("check-assignment",
                           help="the authoring check: grade an assignment's reference (full marks), blank release "
                                "(zero) and answer corpus on a scratch copy of the course, as grade would",
                           description="Grades, in the sandbox and the judge, on a scratch copy of the course (your "
                                       "gradebook and folders are not touched): the reference solution, which must "
                                       "get full marks with no flag; the blank release, which must score zero; and "
                                       "the answer corpus tests/answers/ASSIGNMENT.py where it exists. Says what is "
                                       "off, in words, and exits 1 if anything is.")
        p.add_argument("assignment", nargs="*")
        p.add_argument("--all", action="store_true", help="every assignment of the course's source folder")
        p.add_argument("--jobs", type=int, help="submissions graded at once (default: as grade)")
        p.set_defaults(func=cmd_check_assignment)

        p = instructor("similarity", help="pairs of submissions whose answers are unusually alike "
                                              "(evidence for a person, never a grade)",
                           description="Reads submitted/<student>/ASSIGNMENT/ (never runs it) and writes "
                                       "reports/ASSIGNMENT/similarity.html and similarity.csv. Options: "
                                       "c.SimilarityOptions in nbgrader_config.py.")
        p.add_argument("assignment", nargs="*", help="one or more assignments")
        p.add_argument("--all", action="store_true", help="every assignment in the course's source folder")
        p.set_defaults(func=cmd_similarity)

        p = instructor("feedback", help="per-student HTML feedback (no hidden tests, no solutions)")
        p.add_argument("assignment")
        p.add_argument("--student", action="append", metavar="ID")
        p.add_argument("--db", metavar="URL", help="the gradebook (c.CourseDirectory.db_url)")
        p.add_argument("--verbose", action="store_true", help="nbgrader's log in full (default: warnings and a summary)")
        p.set_defaults(func=cmd_feedback)

        from .cli_zh import add_commands as add_zh_commands

        add_zh_commands(sub, instructor)

        p = instructor("export", help="write the grades CSV (nbgrader export), or one for Canvas's import")
        p.add_argument("--format", choices=("nbgrader", "canvas"), default="nbgrader",
                       help="nbgrader's grades.csv (default) or Canvas's gradebook import (canvas.csv)")
        p.add_argument("--to", help="output file (default grades.csv, or canvas.csv)")
        p.add_argument("--assignment", action="append", metavar="ID", help="only this assignment (repeatable)")
        p.add_argument("--db", metavar="URL", help="the gradebook (c.CourseDirectory.db_url)")
        p.set_defaults(func=cmd_export)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
