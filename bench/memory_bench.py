"""Benchmark: the grader's memory over a large class (``make bench-memory``).

Grades N honest submissions of one assignment (1,000 by default) in one ``Grader`` run, the way
``copy-that grade`` does, and samples the grader process's resident memory (RSS) every half
second.  Prints the RSS before grading, after the first tenth of the class and at the end, the
peak, and the growth per submission over the last nine tenths: the figure that says whether
memory grows with the class.  Kernels run in the slots' own processes and are not counted here.

    .venv/bin/python bench/memory_bench.py --n 1000 --assignment a1_views
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import psutil

from harness import scratch_course, submission, submit  # tests/ is on PYTHONPATH (make bench-memory sets it)

from autograder.grading.runner import Grader


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--assignment", default="a1_views")
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    args = parser.parse_args()

    me = psutil.Process()
    samples: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.5):
            samples.append(me.memory_info().rss)

    work = Path(tempfile.mkdtemp(prefix="copy-that-memory-"))
    try:
        root = scratch_course(work / "course", args.assignment)
        nb = submission(args.assignment)
        for i in range(args.n):
            submit(root, args.assignment, f"student{i:04d}", nb)
        at_tenth: list[int] = []
        done = [0]

        def progress(result) -> None:
            done[0] += 1
            if done[0] == max(1, args.n // 10):
                at_tenth.append(me.memory_info().rss)

        before = me.memory_info().rss
        threading.Thread(target=sample, daemon=True).start()
        start = time.perf_counter()
        results = Grader(root, args.assignment, jobs=args.jobs, log=lambda m: None).run(progress=progress)
        seconds = time.perf_counter() - start
        stop.set()
        end = me.memory_info().rss
    finally:
        shutil.rmtree(work, ignore_errors=True)
    mib = 1 << 20
    scores = sorted({r.score for r in results})
    tenth = at_tenth[0] if at_tenth else before
    rest = max(1, args.n - max(1, args.n // 10))
    print(f"{args.n} submissions of {args.assignment}, --jobs {args.jobs}: {seconds:.0f} s, scores {scores}, "
          f"graded {sum(r.graded for r in results)}")
    print(f"grader RSS: before {before / mib:.0f} MiB, after a tenth {tenth / mib:.0f} MiB, "
          f"end {end / mib:.0f} MiB, peak {max(samples + [end]) / mib:.0f} MiB")
    print(f"growth after the first tenth: {(end - tenth) / rest / 1024:.1f} KiB per submission")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
