"""Started grading slots, shared by runs (``SlotPool``).

A pool starts its slots side by side, each with a thread of its own for the pool's whole life,
and runs one job at a time in each.  It takes its jobs a few ahead of its slots from an iterable
that prepares each as it is taken: a class of a thousand submissions never holds more than those
notebooks prepared in the grader's memory, and the first is graded while the rest are read.
"""
from __future__ import annotations

import os
import queue
import tempfile
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING

from .files import remove_trees
from .bwrap import SlotError
from .sandbox import Slot

if TYPE_CHECKING:
    from .jobs import Job, Outcome


def execute(job: "Job", slot: Slot) -> "Outcome":
    """``jobs.execute``, loaded on first use: a pool starts its slots before nbclient is loaded."""
    from .jobs import execute as run

    return run(job, slot)


def slots_worth_starting(submissions: int, jobs: int, cores: int | None = None) -> int:
    """How many slots a call with ``submissions`` to grade starts (at most ``jobs``, at most one
    a core).  A slot's start costs the CPU of some four to eight notebooks (two servers, each
    loading torch: about 5 s of CPU), so where the cores cannot start them all side by side (two
    servers each), a slot is started for every six submissions.  Measured on 2 cores, one call
    of a1, a6 and a7: 4 submissions took 8.5, 10.4 and 11.5 s on one slot against 10.4-11.7,
    11.7 and 11.6 s on two; 16 took 17.5, 19.3 and 23.7 s on two slots against 17.6, 23.1 and
    27.6 s on three."""
    cores = cores or os.cpu_count() or 1
    return max(1, min(jobs, submissions, cores, max(-(-submissions // 6), cores // 2)))


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

    ``map(jobs)`` yields ``(job, outcome, error)`` as the jobs finish.  By default ``__enter__``
    starts every slot and waits; with ``background`` it starts ``initial`` of them (all: None)
    without waiting, the jobs taking each slot as it becomes ready, and ``grow(n)`` starts more,
    up to ``size``: a run starts its slots while it prepares its submissions, and only as many as
    it has submissions to grade.  With ``warm``, each slot runs its servers' warm-up as it starts
    (the call grades an assignment that uses an optimizer).
    """

    def __init__(self, size: int, sandboxed: bool, background: bool = False, initial: int | None = None,
                 warm: bool = False):
        self.size = size
        self.warm = warm          # each slot warms both servers up as it starts (Slot.warm_start)
        self.sandboxed = sandboxed
        self.background = background
        self.initial = size if initial is None else min(initial, size)
        self.base: Path | None = None
        self.slots: queue.Queue[Slot] = queue.Queue()
        self.started: list[Slot] = []
        self.threads: ThreadPoolExecutor | None = None
        self.launched: list[Slot] = []         # slots asked to start (background), started or not
        self.starters: list[threading.Thread] = []
        self.failures: list[BaseException] = []
        self.lock = threading.Lock()
        self.closing = False
        self.closed = threading.Event()     # the starting threads' signal to end

    def __enter__(self) -> "SlotPool":
        self.base = Path(tempfile.mkdtemp(prefix="copy-that-grade-"))
        # one thread per slot for the pool's whole life: each keeps its event loop
        self.threads = ThreadPoolExecutor(self.size, thread_name_prefix="slot")
        if self.background:
            self.grow(self.initial)
            return self

        def start(i: int) -> Slot:
            slot = Slot(i, self.base, self.sandboxed)
            slot.warm_start = self.warm
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

    def grow(self, n: int) -> None:
        """Start slots, without waiting, until ``n`` (at most ``size``) are started or starting
        (a pool that started them all in ``__enter__`` has nothing to add)."""
        if not self.background:
            return
        with self.lock:
            while len(self.launched) < min(n, self.size) and not self.closing:
                slot = Slot(len(self.launched), self.base, self.sandboxed)
                slot.warm_start = self.warm
                self.launched.append(slot)
                thread = threading.Thread(target=self._start, args=(slot,), daemon=True,
                                          name=f"slot-start-{slot.index}")
                self.starters.append(thread)
                thread.start()

    def _start(self, slot: Slot) -> None:
        """Start a slot, then stay until the pool closes: bubblewrap's --die-with-parent follows
        the thread that started it, which must outlive the slot."""
        try:
            slot.start()
        except BaseException as exc:
            with self.lock:
                self.failures.append(exc)
            slot.release()
            return
        with self.lock:
            closing = self.closing
            if not closing:
                self.started.append(slot)
                self.slots.put(slot)
        if closing:
            slot.release()        # the pool closed while it started
            return
        self.closed.wait()

    def _take(self) -> Slot:
        """A ready slot, waiting for one to start; the first start's error if none ever can."""
        while True:
            try:
                return self.slots.get(timeout=0.25)
            except queue.Empty:
                with self.lock:
                    if self.closing:
                        raise SlotError("the slots were closed")
                    if self._none_can_start():
                        raise self.failures[0]

    def failed(self) -> bool:
        """Whether every slot the pool started failed to start."""
        with self.lock:
            return self._none_can_start()

    def _none_can_start(self) -> bool:
        return bool(self.launched) and len(self.failures) == len(self.launched)

    def __exit__(self, *exc) -> None:
        with self.lock:
            self.closing = True
            starting = [slot for slot in self.launched if slot not in self.started]
        for slot in starting:     # still loading torch: not needed any more
            slot.abandon()
        for slot in self.started:       # every server told to exit first: they end side by side
            slot.ask_to_exit()
        for slot in self.started:
            slot.release()
        self.started.clear()
        self.closed.set()
        for thread in self.starters:
            thread.join()
        if self.threads is not None:
            self.threads.shutdown(cancel_futures=True)
            self.threads = None
        if self.base is not None:
            remove_trees(self.base)

    def _run(self, job: Job) -> Outcome:
        slot = self._take()
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
                with self.lock:
                    if self._none_can_start():     # as when __enter__ starts them and waits
                        raise self.failures[0]
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
