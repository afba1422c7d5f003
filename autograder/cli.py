"""``python -m autograder``: parse the command line, call the modules, print the result."""
from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.table import Table

from .learner.commands import cmd_answers, cmd_check, cmd_lab, cmd_progress

console = Console()


def later(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """An instructor's command, imported when it runs: a student's copy of the package has no
    course/ or grading/ (see ``instructor_tools``)."""
    def run(args: argparse.Namespace) -> int:
        return getattr(importlib.import_module(f".{module}", __package__), name)(args)
    return run


def cmd_doctor(args: argparse.Namespace) -> int:
    from .learner.doctor import diagnose

    table = Table(title="Copy That: environment check")
    for col in ("", "what", "found", "what to do"):
        table.add_column(col)
    findings = diagnose()
    if instructor_tools() and not in_learner_lab():
        from .grading.commands import grading_findings

        findings += grading_findings()
    for f in findings:
        table.add_row("[green]\u2713[/]" if f.ok else "[red]\u2717[/]", f.name, f.value, "" if f.ok else f.fix)
    console.print(table)
    bad = [f for f in findings if not f.ok]
    if bad:
        console.print(f"[yellow]{len(bad)} thing(s) to fix; the course still runs, see the last column.[/]")
    return 0


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
        p.set_defaults(func=later("course.commands", "cmd_build"))

        p = instructor("predictions", help="write the release's half of prediction sets from the hidden part "
                                                "(sealed diagnoses; no right letter)")
        p.add_argument("notebook", nargs="+", help="instructor notebooks, e.g. solutions/a1_views/a1_views.ipynb")
        p.add_argument("--check", action="store_true", help="only compare; exit 1 when a visible check is stale")
        p.set_defaults(func=later("course.commands", "cmd_predictions"))

        p = instructor("handout", help="the student folder and zip: course/, exercises/, README; no solutions")
        p.add_argument("--out", help="where to write copy-that/ and copy-that.zip (default: build/handout)")
        p.add_argument("--no-zip", action="store_true", help="write the folder only")
        p.set_defaults(func=later("course.commands", "cmd_handout"))

        p = instructor("site", help="render the lectures with their outputs to static HTML (build/site)")
        p.add_argument("--out", help="output folder (default: build/site)")
        p.set_defaults(func=later("course.commands", "cmd_site"))
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
        p.set_defaults(func=later("grading.commands", "cmd_grade"))

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
        p.set_defaults(func=later("grading.commands", "cmd_check_assignment"))

        p = instructor("similarity", help="pairs of submissions whose answers are unusually alike "
                                              "(evidence for a person, never a grade)",
                           description="Reads submitted/<student>/ASSIGNMENT/ (never runs it) and writes "
                                       "reports/ASSIGNMENT/similarity.html and similarity.csv. Options: "
                                       "c.SimilarityOptions in nbgrader_config.py.")
        p.add_argument("assignment", nargs="*", help="one or more assignments")
        p.add_argument("--all", action="store_true", help="every assignment in the course's source folder")
        p.set_defaults(func=later("grading.nbgrader_commands", "cmd_similarity"))

        p = instructor("feedback", help="per-student HTML feedback (no hidden tests, no solutions)")
        p.add_argument("assignment")
        p.add_argument("--student", action="append", metavar="ID")
        p.add_argument("--db", metavar="URL", help="the gradebook (c.CourseDirectory.db_url)")
        p.add_argument("--verbose", action="store_true", help="nbgrader's log in full (default: warnings and a summary)")
        p.set_defaults(func=later("grading.nbgrader_commands", "cmd_feedback"))

        from .cli_zh import add_commands as add_zh_commands

        add_zh_commands(sub, instructor)

        p = instructor("export", help="write the grades CSV (nbgrader export), or one for Canvas's import")
        p.add_argument("--format", choices=("nbgrader", "canvas"), default="nbgrader",
                       help="nbgrader's grades.csv (default) or Canvas's gradebook import (canvas.csv)")
        p.add_argument("--to", help="output file (default grades.csv, or canvas.csv)")
        p.add_argument("--assignment", action="append", metavar="ID", help="only this assignment (repeatable)")
        p.add_argument("--db", metavar="URL", help="the gradebook (c.CourseDirectory.db_url)")
        p.set_defaults(func=later("grading.nbgrader_commands", "cmd_export"))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
