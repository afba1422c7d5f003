"""Benchmark: plain `nbgrader autograde` against `copy-that grade`, side by side (``make bench``).

For each class size (``--per``: submissions per assignment, 4 and 16 by default) the same correct
submissions of every assignment (the reference answers and the answer corpus's right answers, in
turn) are graded in one run, each way in its own scratch course:

- the baseline: plain ``nbgrader autograde "*"`` with nbgrader's stock ``Execute`` (one fresh
  kernel per notebook, one after another), as one command;
- ``copy-that grade --all`` as an instructor types it: one command, sandboxed fork-server slots,
  as many at once as its default (one more than the cores), or ``--jobs``;
- the cells alone: the same notebooks run by ``tests/inprocess.py`` (torch loaded once, one
  forked IPython shell per notebook, no kernel, no gradebook): a floor for any grader.

Per-cell scores of the baseline and ``grade`` must be identical.  Printed: ratios, never a bare
time (the machine is shared and noisy): the baseline over ``grade`` (the speed-up), and ``grade``
over the cells alone.  ``--course-config`` adds plain nbgrader with the course's configuration
(its ``SandboxedExecute``, one slot).

    PYTHONPATH=tests .venv/bin/python bench/grade_bench.py --per 4 16
"""
from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from corpus import graded_notebook   # tests/ is on PYTHONPATH (make bench sets it)
from harness import ROOT, scratch_course, submission, submit

from autograder.course.build import run_nbgrader
from autograder.course.layout import assignments
from autograder.grading.config import default_jobs


def correct_submissions(assignment: str, n: int) -> dict:
    """n correct submissions: the reference answers and each right answer of the corpus, in turn."""
    answers = importlib.import_module(f"answers.{assignment}")
    variants = [submission(assignment)] + [submission(assignment, {a.cell: a.source}) for a in answers.RIGHT]
    return {f"student{i:03d}": variants[i % len(variants)] for i in range(n)}


def cell_scores(root: Path, subs: dict) -> dict:
    from nbgrader.api import Gradebook

    out = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for assignment, students in subs.items():
            for s in students:
                for nb in gb.find_submission(assignment, s).notebooks:
                    for g in nb.grades:
                        out[(assignment, s, g.name)] = g.auto_score
    return out


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def must(proc: subprocess.CompletedProcess, what: str) -> None:
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed:\n{(proc.stdout or '')[-2000:]}\n{(proc.stderr or '')[-3000:]}")


def one_size(per: int, names: list[str], jobs: int, course_config: bool, tmp: Path) -> dict:
    subs = {a: correct_submissions(a, per) for a in names}
    roots = {}
    for label in ("plain", "ours") + (("course",) if course_config else ()):
        root = roots[label] = scratch_course(tmp / f"{label}-{per}")
        for assignment, students in subs.items():
            for student, nb in students.items():
                submit(root, assignment, student, nb)
    with open(roots["plain"] / "nbgrader_config.py", "a") as config:   # nbgrader's own Execute again
        config.write("\nc.Autograde.pop('autograde_preprocessors', None)\n")

    figures = {}
    figures["plain"] = timed(lambda: must(run_nbgrader("autograde", "*", cwd=roots["plain"]), "nbgrader autograde"))
    if course_config:
        figures["course"] = timed(lambda: must(run_nbgrader("autograde", "*", cwd=roots["course"]),
                                               "nbgrader autograde (course config)"))
    grade = [sys.executable, "-m", "autograder", "grade", "--all"] + (["--jobs", str(jobs)] if jobs else [])
    figures["ours"] = timed(lambda: must(subprocess.run(grade, cwd=roots["ours"], capture_output=True, text=True),
                                         "copy-that grade"))
    cells = tmp / f"cells-{per}"
    cells.mkdir()
    for assignment, students in subs.items():
        for student, nb in students.items():
            nbformat.write(graded_notebook(assignment, nb), cells / f"{assignment}--{student}.ipynb")
    figures["cells"] = timed(lambda: must(subprocess.run([sys.executable, str(ROOT / "tests" / "inprocess.py"),
                                                          str(cells)], capture_output=True, text=True),
                                          "the cells alone"))
    a, b = cell_scores(roots["plain"], subs), cell_scores(roots["ours"], subs)
    figures["cells_compared"] = len(a)
    figures["differ"] = sorted(k for k in a if a[k] != b.get(k))
    if course_config:
        c = cell_scores(roots["course"], subs)
        figures["differ"] += sorted(k for k in a if a[k] != c.get(k))
    figures["notebooks"] = per * len(names)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per", type=int, nargs="+", default=[4, 16], help="submissions per assignment")
    parser.add_argument("--assignment", action="append", help="only this assignment (repeatable; default all)")
    parser.add_argument("--jobs", type=int, default=0, help="grade's --jobs (default: grade's own default)")
    parser.add_argument("--course-config", action="store_true",
                        help="also time plain nbgrader with the course configuration")
    args = parser.parse_args()
    names = args.assignment or assignments(ROOT)
    ok = True
    jobs = args.jobs or default_jobs()
    print(f"{len(names)} assignments, {os.cpu_count()} cores, grade --jobs {jobs}"
          f"{'' if args.jobs else ' (its default)'}; correct submissions")
    print(f"{'per assignment':>14} {'notebooks':>9} {'plain / grade':>14} {'grade / cells alone':>20} "
          + (f"{'plain / course config':>22} " if args.course_config else "") + "scores")
    with tempfile.TemporaryDirectory(prefix="copy-that-bench-") as tmp:
        for per in args.per:
            f = one_size(per, names, args.jobs, args.course_config, Path(tmp))
            same = not f["differ"]
            ok &= same
            print(f"{per:>14} {f['notebooks']:>9} {f['plain'] / f['ours']:>13.1f}x {f['ours'] / f['cells']:>19.1f}x "
                  + (f"{f['plain'] / f['course']:>21.1f}x " if args.course_config else "")
                  + (f"identical in all {f['cells_compared']} cells" if same else f"DIFFER: {f['differ'][:5]}"),
                  flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
