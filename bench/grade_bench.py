"""Benchmark: plain `nbgrader autograde` against `copy-that grade`, one call per assignment (``make bench``).

An instructor grades week by week: one assignment a call.  For each class size (``--per``:
submissions per call, 4 and 16 by default) the same correct submissions of every assignment (the
reference answers and the answer corpus's right answers, in turn) are graded in one run, each way
in its own scratch course, one call per assignment, the two ways taking turns assignment by
assignment (so that both see the same load on a shared machine):

- the baseline: plain ``nbgrader autograde <assignment>`` with nbgrader's stock ``Execute`` (its
  own configuration, no sandbox: one fresh kernel per notebook, one after another);
- ``copy-that grade <assignment>`` as an instructor types it: sandboxed fork-server slots, as many
  at once as its default (one more than the cores), or ``--jobs``;
- the cells alone: the same notebooks run by ``tests/inprocess.py`` (torch loaded once, one
  forked IPython shell per notebook, no kernel, no gradebook): a floor for any grader.

Per-cell scores of the baseline and ``grade`` must be identical.  Printed: ratios, never a bare
time alone (the machine may be shared and noisy): the baseline over ``grade`` for the whole run
(the speed-up) and the spread of that ratio over the calls, ``grade`` over the cells alone, and,
from the two sizes, each way's fixed cost of a call and its time per submission (a straight line
through the two sizes' times per call; medians over the assignments).

``--formgrader`` times the formgrader's Autograde button for one student: nbgrader's
``NbGraderAPI.autograde`` in a process that has nbgrader loaded, as a Jupyter server does, with
the course's configuration (``SandboxedExecute``) and with nbgrader's own (stock ``Execute``).

    PYTHONPATH=tests .venv/bin/python bench/grade_bench.py --per 4 16 --formgrader
"""
from __future__ import annotations

import argparse
import importlib
import os
import statistics
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

STOCK = "\nc.Autograde.pop('autograde_preprocessors', None)\n"   # nbgrader's own Execute again


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


def courses(tmp: Path, label: str, subs: dict, stock: bool) -> Path:
    root = scratch_course(tmp / label)
    for assignment, students in subs.items():
        for student, nb in students.items():
            submit(root, assignment, student, nb)
    if stock:
        with open(root / "nbgrader_config.py", "a") as config:
            config.write(STOCK)
    return root


def one_size(per: int, names: list[str], jobs: int, tmp: Path) -> dict:
    """Each way's time per call (one call per assignment, the two ways in turn), the cells alone,
    and the per-cell comparison of scores."""
    subs = {a: correct_submissions(a, per) for a in names}
    plain, ours = courses(tmp, f"plain-{per}", subs, True), courses(tmp, f"ours-{per}", subs, False)
    grade = [sys.executable, "-m", "autograder", "grade"]
    figures = {"plain": {}, "ours": {}}
    for assignment in names:
        figures["plain"][assignment] = timed(lambda: must(run_nbgrader("autograde", assignment, cwd=plain),
                                                          f"nbgrader autograde {assignment}"))
        argv = grade + [assignment] + (["--jobs", str(jobs)] if jobs else [])
        figures["ours"][assignment] = timed(lambda: must(subprocess.run(argv, cwd=ours, capture_output=True, text=True),
                                                         f"copy-that grade {assignment}"))
    cells = tmp / f"cells-{per}"
    cells.mkdir()
    for assignment, students in subs.items():
        for student, nb in students.items():
            nbformat.write(graded_notebook(assignment, nb), cells / f"{assignment}--{student}.ipynb")
    figures["cells"] = timed(lambda: must(subprocess.run([sys.executable, str(ROOT / "tests" / "inprocess.py"),
                                                          str(cells)], capture_output=True, text=True),
                                          "the cells alone"))
    a, b = cell_scores(plain, subs), cell_scores(ours, subs)
    figures["cells_compared"] = len(a)
    figures["differ"] = sorted(k for k in a if a[k] != b.get(k))
    figures["notebooks"] = per * len(names)
    return figures


FORMGRADER = """
import sys, time
from pathlib import Path
from nbgrader.apps.api import NbGraderAPI          # loaded when a Jupyter server starts
from autograder.grading.config import load_config

root, assignment, student = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
api = NbGraderAPI(config=load_config(root, cwd=root))
for click in ("first", "second"):
    start = time.perf_counter()
    result = api.autograde(assignment, student)
    assert result["success"], result.get("error") or result.get("log")
    print(click, time.perf_counter() - start, flush=True)
"""


def formgrader(assignment: str, tmp: Path, rounds: int) -> dict:
    """The Autograde button for one student, twice in one server process, each configuration;
    ``rounds`` fresh processes each, taking turns."""
    subs = {assignment: correct_submissions(assignment, 1)}
    roots = {"plain": courses(tmp, "fg-plain", subs, True), "ours": courses(tmp, "fg-ours", subs, False)}
    times: dict = {(way, click): [] for way in roots for click in ("first", "second")}
    for _ in range(rounds):
        for way, root in roots.items():
            proc = subprocess.run([sys.executable, "-c", FORMGRADER, str(root), assignment, "student000"],
                                  cwd=root, capture_output=True, text=True)
            must(proc, f"the Autograde button ({way})")
            for line in proc.stdout.splitlines():
                click, seconds = line.split()
                times[(way, click)].append(float(seconds))
    same = cell_scores(roots["plain"], subs) == cell_scores(roots["ours"], subs)
    return {"times": times, "same": same}


def fit(t4: float, t16: float, n4: int, n16: int) -> tuple[float, float]:
    """(fixed cost of a call, time per submission): the line through two calls' times."""
    per = (t16 - t4) / (n16 - n4)
    return t4 - n4 * per, per


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per", type=int, nargs="+", default=[4, 16], help="submissions per call")
    parser.add_argument("--assignment", action="append", help="only this assignment (repeatable; default all)")
    parser.add_argument("--jobs", type=int, default=0, help="grade's --jobs (default: grade's own default)")
    parser.add_argument("--formgrader", action="store_true", help="also time the Autograde button for one student")
    parser.add_argument("--rounds", type=int, default=3, help="fresh server processes per way for --formgrader")
    args = parser.parse_args()
    names = args.assignment or assignments(ROOT)
    ok = True
    jobs = args.jobs or default_jobs()
    print(f"{len(names)} assignments, one call per assignment each way, {os.cpu_count()} cores, "
          f"grade --jobs {jobs}{'' if args.jobs else ' (its default)'}; correct submissions")
    print(f"{'per call':>8} {'notebooks':>9} {'plain / grade':>14} {'per call: median (min-max)':>27} "
          f"{'grade / cells alone':>20} scores")
    sizes = {}
    with tempfile.TemporaryDirectory(prefix="copy-that-bench-") as tmp:
        for per in args.per:
            f = sizes[per] = one_size(per, names, args.jobs, Path(tmp))
            same = not f["differ"]
            ok &= same
            plain, ours = sum(f["plain"].values()), sum(f["ours"].values())
            ratios = [f["plain"][a] / f["ours"][a] for a in names]
            print(f"{per:>8} {f['notebooks']:>9} {plain / ours:>13.2f}x "
                  f"{statistics.median(ratios):>14.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) "
                  f"{ours / f['cells']:>19.1f}x "
                  + (f"identical in all {f['cells_compared']} cells" if same else f"DIFFER: {f['differ'][:5]}"),
                  flush=True)
        if len(args.per) >= 2:
            small, large = args.per[0], args.per[-1]
            for way, label in (("plain", "plain nbgrader"), ("ours", "grade")):
                lines = [fit(sizes[small][way][a], sizes[large][way][a], small, large) for a in names]
                print(f"{label:>14}: fixed cost of a call {statistics.median(l[0] for l in lines):.2f} s, "
                      f"{statistics.median(l[1] for l in lines):.2f} s per submission "
                      f"(medians over the assignments, from {small} and {large} a call)")
        if args.formgrader:
            fg = formgrader(names[0], Path(tmp), args.rounds)
            ok &= fg["same"]
            med = {k: statistics.median(v) for k, v in fg["times"].items()}
            spread = {k: f"{min(v):.2f}-{max(v):.2f}" for k, v in fg["times"].items()}
            for click in ("first", "second"):
                print(f"Autograde button, one student of {names[0]}, {click} click in a server: plain nbgrader "
                      f"{med[('plain', click)]:.2f} s ({spread[('plain', click)]}), the course's configuration "
                      f"{med[('ours', click)]:.2f} s ({spread[('ours', click)]}): "
                      f"{med[('plain', click)] / med[('ours', click)]:.2f}x")
            print(f"Autograde button scores: {'identical' if fg['same'] else 'DIFFER'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
