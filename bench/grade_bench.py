"""Benchmark: plain `nbgrader autograde` against `python -m autograder grade`, side by side.

The same N honest submissions of one assignment (the reference answers and the answer corpus's
right and wrong answers, in turn) are graded three times in one run, each in its own scratch
course: by plain nbgrader with its stock ``Execute`` (one fresh kernel per notebook, one after
another: the baseline), by plain nbgrader with the course configuration (its ``SandboxedExecute``:
one slot), and by `grade` (sandboxed fork-server slots, --jobs in parallel).  Per-cell scores must
agree; the wall-time ratios against the baseline are printed.  Run with `make bench` (N=40 by default) or
`.venv/bin/python bench/grade_bench.py --n 40 --assignment a1_views`.
"""
from __future__ import annotations

import argparse
import importlib
import os
import shutil
import tempfile
import time
from pathlib import Path

from harness import scratch_course, submission, submit  # tests/ is on PYTHONPATH (make bench sets it)

from autograder.course.build import run_nbgrader
from autograder.grading.runner import Grader


def honest_submissions(assignment: str, n: int) -> dict:
    answers = importlib.import_module(f"answers.{assignment}")
    variants = [submission(assignment)]
    variants += [submission(assignment, {a.cell: a.source}) for a in answers.RIGHT + answers.WRONG]
    return {f"student{i:03d}": variants[i % len(variants)] for i in range(n)}


def cell_scores(root: Path, assignment: str, students) -> dict:
    from nbgrader.api import Gradebook

    out = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for s in students:
            for nb in gb.find_submission(assignment, s).notebooks:
                for g in nb.grades:
                    out[(s, g.name)] = g.auto_score
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40)
    parser.add_argument("--assignment", default="a1_views")
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    args = parser.parse_args()

    subs = honest_submissions(args.assignment, args.n)
    with tempfile.TemporaryDirectory(prefix="copy-that-bench-") as tmp:
        plain = scratch_course(Path(tmp) / "plain", args.assignment)
        with open(plain / "nbgrader_config.py", "a") as config:   # nbgrader's own Execute again
            config.write("\nc.Autograde.pop('autograde_preprocessors', None)\n")
        course = scratch_course(Path(tmp) / "course", args.assignment)
        ours = scratch_course(Path(tmp) / "ours", args.assignment)
        for student, nb in subs.items():
            for root in (plain, course, ours):
                submit(root, args.assignment, student, nb)

        t0 = time.perf_counter()
        proc = run_nbgrader("autograde", args.assignment, cwd=plain)
        plain_s = time.perf_counter() - t0
        if proc.returncode != 0:
            print(proc.stderr[-3000:])
            return 1

        t0 = time.perf_counter()
        proc = run_nbgrader("autograde", args.assignment, cwd=course)
        course_s = time.perf_counter() - t0
        if proc.returncode != 0 or "SandboxedExecute" in proc.stderr and "Traceback" in proc.stderr:
            print(proc.stderr[-3000:])
            return 1

        t0 = time.perf_counter()
        results = Grader(ours, args.assignment, jobs=args.jobs, log=print).run()
        ours_s = time.perf_counter() - t0

        a = cell_scores(plain, args.assignment, subs)
        b, c = cell_scores(ours, args.assignment, subs), cell_scores(course, args.assignment, subs)
        differ = sorted(k for k in a if a[k] != b.get(k) or a[k] != c.get(k))
        flagged = [r.student for r in results if r.flags or r.problems]
    print(f"submissions: {args.n} of {args.assignment} ({len(a)} graded cells), machine: {os.cpu_count()} cores")
    print(f"plain nbgrader autograde, stock Execute: {plain_s:7.1f} s  ({plain_s / args.n:.2f} s per submission)")
    print(f"plain nbgrader autograde, course config (sandboxed, one slot): {course_s:7.1f} s  "
          f"({course_s / args.n:.2f} s per submission, {plain_s / course_s:.1f}x)")
    print(f"autograder grade --jobs {args.jobs}: {ours_s:7.1f} s  ({ours_s / args.n:.2f} s per submission, "
          f"sandboxed: {'yes' if shutil.which('bwrap') else 'no'})")
    print(f"speed-up: {plain_s / ours_s:.1f}x")
    print(f"scores identical in every cell: {not differ}" + (f"  (differ: {differ[:5]})" if differ else ""))
    print(f"flagged or with problems: {len(flagged)}")
    return 0 if not differ and not flagged else 1


if __name__ == "__main__":
    raise SystemExit(main())
