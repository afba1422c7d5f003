"""Started grading slots, shared by runs (``SlotPool``), and the jobs waiting for one.

A pool starts its slots side by side, each with a thread of its own for the pool's whole life,
and runs one job at a time in each.  The jobs waiting for a slot are kept compressed
(``PackedJob``, ``PendingJobs``): a class of a thousand submissions is prepared before the first
runs.
"""
from __future__ import annotations

import pickle
import queue
import tempfile
import threading
import zlib
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path

from .files import remove_trees
from .jobs import Job, Outcome, execute
from .sandbox import Slot


def as_results(futures: dict, completed):
    """(job, outcome, error) for each future of ``futures`` as ``completed`` yields it."""
    for fut in completed:
        job = futures[fut]
        try:
            yield job, fut.result(), None
        except Exception as exc:
            yield job, None, f"{type(exc).__name__}: {exc}"



class SlotPool:
    """Started slots, each running one job at a time; a pool can serve several grading runs.

    ``map(jobs)`` yields ``(job, outcome, error)`` as the jobs finish.
    """

    def __init__(self, size: int, sandboxed: bool):
        self.size = size
        self.sandboxed = sandboxed
        self.base: Path | None = None
        self.slots: queue.Queue[Slot] = queue.Queue()
        self.started: list[Slot] = []
        self.threads: ThreadPoolExecutor | None = None

    def __enter__(self) -> "SlotPool":
        self.base = Path(tempfile.mkdtemp(prefix="copy-that-grade-"))
        # one thread per slot for the pool's whole life: each keeps its event loop
        self.threads = ThreadPoolExecutor(self.size, thread_name_prefix="slot")

        def start(i: int) -> Slot:
            slot = Slot(i, self.base, self.sandboxed)
            slot.start()
            return slot

        try:
            for slot in self.threads.map(start, range(self.size)):
                self.started.append(slot)
                self.slots.put(slot)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for slot in self.started:
            slot.release()
        self.started.clear()
        if self.threads is not None:
            self.threads.shutdown(cancel_futures=True)
            self.threads = None
        if self.base is not None:
            remove_trees(self.base)

    def _run(self, job: Job) -> Outcome:
        slot = self.slots.get()
        slot.busy = job          # the job it runs, for _interrupt
        try:
            return execute(job, slot)
        finally:
            slot.busy = None
            self.slots.put(slot)

    def map(self, jobs, stop: threading.Event | None = None):
        """``(job, outcome, error)`` as the jobs finish.  Once ``stop`` is set, jobs not started
        are cancelled, the kernels of running ones killed, and the generator ends within seconds.

        ``jobs`` is any iterable, taken a few at a time (twice as many as there are slots), and a
        finished job is let go once yielded: a class of any size holds a bounded number of
        notebooks in the grader's memory."""
        jobs = iter(jobs)
        futures: dict[Future, Job] = {}

        def top_up() -> None:
            while len(futures) < 2 * self.size:
                job = next(jobs, None)
                if job is None:
                    return
                futures[self.threads.submit(self._run, job)] = job

        top_up()
        try:
            while futures:
                done, running = wait(set(futures), timeout=0.25, return_when=FIRST_COMPLETED)
                for item in as_results(futures, done):
                    yield item
                for fut in done:
                    del futures[fut]
                if stop is not None and stop.is_set():
                    self._interrupt(futures, running)
                    return
                top_up()
        finally:
            for fut in futures:
                fut.cancel()

    def _interrupt(self, futures: dict, running: set, grace: float = 5.0) -> None:
        for fut in running:
            fut.cancel()
        mine = {id(job) for job in futures.values()}     # (a pool may serve other runs at the same time)
        busy = [slot for slot in self.started if id(getattr(slot, "busy", None)) in mine]
        for slot in busy:      # the kernel dies; its job ends as after a crash (and is not recorded)
            try:
                slot.request({"op": "signal", "signum": 9}, timeout=2)
            except Exception:
                pass
        wait([f for f in running if not f.cancelled()], timeout=grace)


class PackedJob:
    """A prepared job waiting for a slot, kept compressed: a class of a thousand submissions is
    prepared before the first runs, and its notebooks as Python objects would fill the grader."""

    __slots__ = ("student", "data")

    def __init__(self, job: Job):
        self.student = job.student
        self.data = zlib.compress(pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL), 1)

    def unpack(self) -> Job:
        return pickle.loads(zlib.decompress(self.data))   # the grader's own data, packed above


class PendingJobs:
    """The pending jobs, unpacked one at a time as the pool takes them, and let go after."""

    def __init__(self, pending: list[PackedJob]):
        self.pending = deque(pending)
        pending.clear()

    def __len__(self) -> int:
        return len(self.pending)

    def __iter__(self):
        while self.pending:
            yield self.pending.popleft().unpack()
