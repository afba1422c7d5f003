"""One grading job: run one prepared submission notebook in a slot and return what it printed.

A job reads nothing from the course and writes nothing to it: it gets the sanitized notebook and
the submission's files, and returns the executed notebook with problems and flags.  That makes
it safe to run on a Dask worker as well as in a local thread.

Whatever goes wrong, the job returns a notebook in which every test cell that did not finish
carries an error output, so it scores zero and the cells that ran keep their score:
a dead kernel (``os._exit``, the memory limit, the CPU-time limit), a cell past its time limit,
an output flood (the kernel is killed when the notebook's output passes its limit), or a
notebook past its wall-clock limit.  The judged tests run in the slot's judge (``judgebox``), one
process per submission; when it stops (a crash, a limit, a stall, garbage on its pipe) the test
it was running and the judged tests after it fail, the submission is flagged, and the other cells
keep their scores.
"""
from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import run_sync

from ..kernel import guard
from ..learner.cells import role
from .files import kernel_output_files
from .judgepipe import JudgeChannel, JudgeStopped
from .sandbox import Limits, Slot, SlotError, calls_gradients, uses_gradients, uses_optimizer
from .transport import AGENT, KernelTransport

GUARD_KEY = "copy_that_guard"
# the first cell of every graded notebook, before any learner code: the guard, and the judge's agent
INSTALL_SOURCE = guard.INSTALL_SOURCE + f"\nimport autograder.judge.agent as {AGENT}"
JUDGE_STOPPED = "the judge stopped while grading this notebook"
LEFT_BEHIND = "left objects behind in the slot after its end"
DIRTY_BYTES = 64 << 20     # memory a slot may hold beyond its clean state before it is restarted


@dataclass
class Job:
    student: str
    notebook: str                    # notebook id (file name without .ipynb)
    nb: dict                         # sanitized notebook, guard cells included
    files: dict[str, bytes] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    require_sandbox: bool = False    # a worker that cannot sandbox refuses the job
    judged: dict[str, str] = field(default_factory=dict)   # grade_id -> hidden test run by the judge
                                                           # (the gradebook's source, never the notebook's)
    fixtures: dict[str, str] = field(default_factory=dict)  # module name -> the instructor's fixtures file,
                                                            # which judged tests import (see judged.py)


@dataclass
class Outcome:
    student: str
    notebook: str
    nb: dict                         # executed notebook, guard cells removed
    problems: list[str] = field(default_factory=list)   # what went wrong while running
    flags: list[str] = field(default_factory=list)      # reasons for a manual review
    seconds: float = 0.0
    files: dict[str, bytes] = field(default_factory=dict)   # what the kernel wrote beside the notebook
    peak_memory: int | None = None   # bytes its processes held together at most (the cgroup's count)
    slot_left: int | None = None     # bytes the slot held over the clean state it first had once
                                     # this one was cleared (restarted if need be): the next one's start


class _Stop(Exception):
    pass


class LimitedClient(NotebookClient):
    """nbclient that believes little of what the kernel sends.

    - Every IOPub message counts against the output budget, whatever its type (streams,
      displays, display updates, comms), and the kernel is killed when the budget is spent.
    - The execute reply's status is kept per cell: a cell whose reply is not ``ok`` fails even
      when no error output reached the notebook (a custom exception handler, a replaced
      ``showtraceback``, a forged ``idle`` that ended the cell early).
    - An IOPub timeout is an error, not the end of a cell.
    - No frontend mimicry: comms are ignored, so no Output widget can swallow a cell's outputs.
    """

    def __init__(self, nb, *, output_limit: int, on_flood, **kw):
        kw.setdefault("raise_on_iopub_timeout", True)
        # how long after a cell's reply its last outputs may take: generous, since a timeout now
        # stops the notebook (nbclient's 4 s could cut off an honest cell on a loaded machine)
        kw.setdefault("iopub_timeout", 30)
        super().__init__(nb, **kw)
        self.failed_replies: dict[int, str] = {}
        self.output_limit = output_limit
        self.output_total = 0
        self.flooded = False
        self.on_flood = on_flood
        self.current: int | None = None
        self.timed_out: set[int] = set()
        self.started_kc = None
        self.judged: dict[str, str] = {}
        self.judge_socket = None     # the grader's end of this submission's judge (judgebox.fork)
        self.judge: JudgeChannel | None = None
        self.judge_stopped: str | None = None   # why the judge stopped, in words (on_judge_stop)
        self.on_judge_stop = lambda stop: str(stop)
        self.transport = KernelTransport(self)
        self.judge_flags: list[str] = []
        self.restore_pending = None  # a restore cell waiting for the next request to the kernel
        self.kernel_died = False     # found dead while the judge waited for an answer

    async def _async_cleanup_kernel(self) -> None:
        # nbclient registers this with atexit while a kernel starts, and unregisters it only when
        # the notebook ends normally; a run stopped in between (Ctrl-C) left it to fail at exit
        # ("Exception ignored in atexit callback ... AssertionError") on a kernel already gone
        if self.km is None:
            return
        await super()._async_cleanup_kernel()

    _cleanup_kernel = run_sync(_async_cleanup_kernel)

    async def async_start_new_kernel_client(self):
        kc = await super().async_start_new_kernel_client()
        self.started_kc = kc   # nbclient forgets it at the end; the job closes it
        return kc

    async def async_execute_cell(self, cell, cell_index, *args, **kwargs):
        self.current = cell_index
        gid = role(cell).grade_id
        if cell.cell_type == "code" and role(cell).is_test and gid in self.judged:
            return await self._judge_cell(cell, cell_index, self.judged[gid])
        if self._before_a_judged_test(cell, cell_index):
            self.restore_pending = cell      # it runs with the judged test's first request to the kernel
            return cell
        return await super().async_execute_cell(cell, cell_index, *args, **kwargs)

    def _before_a_judged_test(self, cell, index: int) -> bool:
        """A guard's restore cell right before a judged test: the kernel runs no learner code between
        the two, so the restore can travel with the test's first request (one round trip less)."""
        if not (cell.metadata.get(GUARD_KEY) and cell.source == guard.RESTORE_SOURCE):
            return False
        after = self.nb.cells[index + 1] if index + 1 < len(self.nb.cells) else None
        return (after is not None and after.cell_type == "code" and role(after).is_test
                and role(after).grade_id in self.judged)

    # -- hidden tests run by the judge, outside the kernel -----------------------------------------
    async def _judge_cell(self, cell, cell_index: int, source: str):
        """Run a judged hidden test in the submission's judge, which calls the learner's functions
        in the kernel through this client (``transport``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.timeout or 60)
        if self.judge_stopped is not None:
            outputs = [_error_output("JudgeStopped", f"the judge stopped at an earlier test: {self.judge_stopped}")]
        else:
            try:
                if self.judge is None:
                    self.judge = await JudgeChannel.open(self.judge_socket, self.output_limit)
                outputs = await self.judge.run_cell(source, deadline, self.transport.request)
            except JudgeStopped as stop:
                self.judge_stopped = self.on_judge_stop(stop)
                outputs = [_error_output("JudgeStopped", f"{JUDGE_STOPPED}: {self.judge_stopped}")]
        if self.restore_pending is not None:   # the test sent nothing to the kernel: restore on its own
            pending, self.restore_pending = self.restore_pending, None
            await super().async_execute_cell(pending, cell_index - 1)
        if loop.time() > deadline:
            self.timed_out.add(cell_index)
        self.code_cells_executed += 1
        cell.execution_count = self.code_cells_executed
        cell.outputs = [nbformat.from_dict(o) for o in outputs]
        if self.kernel_died:       # the notebook ends here, as when nbclient finds the kernel dead
            raise DeadKernelError("the kernel died while the judge waited for its answer")
        for o in outputs:
            if o.get("ename") == "JudgeError":
                text = f"the judge got no usable answer from the kernel: {o.get('evalue', '')}"
                if text not in self.judge_flags:
                    self.judge_flags.append(text)
        return cell

    def restored(self, cell, printed: list[str]) -> None:
        """The guard's report, from the lines a request with the restore in front of it printed."""
        lines = "".join(printed).splitlines(keepends=True)
        report = "".join(line for line in lines if line.startswith(guard.MARK))
        printed[:] = [line for line in lines if not line.startswith(guard.MARK)]
        self.code_cells_executed += 1
        cell.execution_count = self.code_cells_executed
        cell.outputs = [nbformat.from_dict({"output_type": "stream", "name": "stdout", "text": report})] if report else []

    async def _async_handle_timeout(self, timeout, cell=None):
        if self.current is not None:
            self.timed_out.add(self.current)
        return await super()._async_handle_timeout(timeout, cell)

    def process_message(self, msg, cell, cell_index):
        if self.flooded:
            return None
        self.output_total += len(json.dumps(msg.get("content", {}), default=str))
        for buffer in msg.get("buffers") or []:
            self.output_total += len(buffer)
        if self.output_total > self.output_limit:
            self.flooded = True
            self.on_flood()
            return None
        return super().process_message(msg, cell, cell_index)

    def handle_comm_msg(self, outs, msg, cell_index):
        return None

    async def _check_raise_for_error(self, cell, cell_index, exec_reply):
        status = (exec_reply or {}).get("content", {}).get("status", "missing")
        if status != "ok":
            self.failed_replies[cell_index] = status
        return await super()._check_raise_for_error(cell, cell_index, exec_reply)


_settled = threading.Lock()
_settled_modules = -1


def settle_memory() -> None:
    """Exempt what the grader has loaded so far (nbgrader, SQLAlchemy, jupyter_client) from the
    garbage collector's full passes: those modules live as long as the process, and every full
    pass walked all of them again.  Done again only when modules were loaded since."""
    import gc
    import sys

    global _settled_modules
    with _settled:
        if len(sys.modules) == _settled_modules:
            return
        gc.collect()
        gc.freeze()
        _settled_modules = len(sys.modules)


def add_guards(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Insert the guard's install cell first and a restore cell before every test cell."""

    def guard_cell(source: str) -> nbformat.NotebookNode:
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata[GUARD_KEY] = True
        return cell

    cells = [guard_cell(INSTALL_SOURCE)]
    for cell in nb.cells:
        if cell.cell_type == "code" and role(cell).is_test:
            cells.append(guard_cell(guard.RESTORE_SOURCE))
        cells.append(cell)
    nb.cells = cells
    return nb


def _error(ename: str, evalue: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


def _error_output(ename: str, evalue: str) -> dict:
    return {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": [f"{ename}: {evalue}"]}


def _finish(nb: nbformat.NotebookNode, client: LimitedClient | None, stop_reason: str | None,
            problems: list[str], flags: list[str]) -> None:
    """Mark failed and unfinished cells, read and drop the guard cells."""
    guards_seen = 0      # restore cells that reported (each counts once, however often it printed)
    guard_cells = 0

    def flag(text: str) -> None:
        if text not in flags:
            flags.append(text)

    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if cell.metadata.get(GUARD_KEY):
            guard_cells += cell.source == guard.RESTORE_SOURCE
            reports = [line[len(guard.MARK):] for o in cell.get("outputs", [])
                       if o.output_type == "stream" and o.get("name") == "stdout"
                       for line in o.get("text", "").splitlines() if line.startswith(guard.MARK)]
            guards_seen += bool(reports)
            for report in reports:
                try:
                    names = json.loads(report)
                except ValueError:
                    names = None
                if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                    flag("the guard's report was garbled")
                    continue
                for name in names:
                    flag(f"changed {name}")
            continue
        ran = cell.get("execution_count") is not None or cell.get("outputs")
        outputs = cell.get("outputs", [])
        if client is not None and index in client.failed_replies and role(cell).is_test \
                and not any(o.output_type == "error" for o in outputs):
            outputs.append(_error("FailedWithoutError", f"the kernel replied {client.failed_replies[index]!r} "
                                  "to this test cell but showed no error (the error display was tampered with)"))
            if "error display tampered with" not in flags:
                flags.append("error display tampered with")
        if role(cell).is_test and any(o.output_type == "error" for o in outputs):
            # nbgrader scores the first result or error it meets: a result shown before the error
            # must not turn a failed test into points
            cell.outputs = sorted(outputs, key=lambda o: o.output_type != "error")
        if client is not None and index in client.timed_out:
            cell.outputs.append(_error("CellTimeout", "the cell ran past its time limit and was interrupted"))
        if stop_reason and (not ran or index == (client.current if client else None)):
            if not any(o.output_type == "error" for o in cell.get("outputs", [])):
                cell.outputs.append(_error("NotRun" if not ran else "Stopped", stop_reason))
    if guard_cells and guards_seen < guard_cells and not stop_reason:
        flags.append("the grader's guard cells did not report (output suppressed or guard replaced)")
    nb.cells = [c for c in nb.cells if not c.metadata.get(GUARD_KEY)]


def execute(job: Job, slot: Slot) -> Outcome:
    """Run one job in a slot; the slot is clean for the next job afterwards.

    Each job has an event loop of its own, closed at the end with everything the kernel's
    manager and client opened, so a grader that runs thousands of jobs keeps its fds and memory.
    """
    return asyncio.run(_execute(job, slot))


async def _execute(job: Job, slot: Slot) -> Outcome:
    start = time.monotonic()
    nb = nbformat.from_dict(job.nb)
    problems: list[str] = []
    flags: list[str] = []
    stop_reason: str | None = None
    client: LimitedClient | None = None
    km = None
    killed = threading.Event()
    why_killed: list[str] = []

    def kill(reason: str) -> None:
        if not killed.is_set():
            why_killed.append(reason)
            killed.set()
            try:
                slot.request({"op": "signal", "signum": 9})
            except SlotError:
                pass

    oom_before = 0
    peak: int | None = None
    slot_left: int | None = None
    judge_socket = None
    watchdog = threading.Timer(job.limits.notebook_timeout,
                               lambda: kill(f"the notebook ran past its {job.limits.notebook_timeout} s limit"))
    finished = threading.Event()

    def watch_cpu(baseline: float) -> None:
        # RLIMIT_CPU caps each process; this caps them all together (polled once a second)
        while not finished.wait(1.0):
            if slot.cpu_seconds() - baseline > job.limits.cpu_seconds:
                kill(f"the submission's processes together used more than {job.limits.cpu_seconds} s of CPU time")
                return
    try:
        if not slot.alive():
            slot.restart()
        slot.clear()
        slot.put_files(job.files)
        judge_warm = any("optim" in s for s in job.judged.values())
        if uses_optimizer(nb):   # before the limits: the servers' own memory, not the submission's
            slot.warm_up(judge_too=judge_warm)
        elif uses_gradients(nb):
            slot.load_grads(judge_too=any(map(calls_gradients, job.judged.values())))
        oom_before = slot.limit_submission(job.limits)
        if job.judged:
            judge_socket = _fork_judge(slot, job.limits, warm=judge_warm, fixtures=job.fixtures)
        km = slot.kernel_manager(job.limits)
        client = LimitedClient(
            nb, km=km, timeout=job.limits.cell_timeout, allow_errors=True, interrupt_on_timeout=True,
            output_limit=job.limits.output_bytes, startup_timeout=120,
            on_flood=lambda: kill(f"the output passed its limit of {job.limits.output_bytes} bytes"),
            resources={"metadata": {"path": str(slot.dir)}},
        )
        client.judged = dict(job.judged)
        client.judge_socket = judge_socket
        client.on_judge_stop = lambda stop: _stop_judge(slot, job.limits, stop)
        watchdog.start()
        if job.limits.cpu_seconds:
            threading.Thread(target=watch_cpu, args=(slot.cpu_seconds(),), daemon=True).start()
        await client.async_execute()
    except (DeadKernelError, CellTimeoutError, RuntimeError, asyncio.TimeoutError, SlotError) as exc:
        stop_reason = why_killed[0] if why_killed else (
            "the kernel died (memory or CPU-time limit, a crash, or the code ended the process)"
            if isinstance(exc, (DeadKernelError, RuntimeError)) else f"{type(exc).__name__}: {exc}")
        problems.append(stop_reason)
    finally:
        watchdog.cancel()
        finished.set()
        if km is not None:
            try:
                if km.has_kernel:
                    await km.shutdown_kernel(now=True)
            except Exception:
                pass
            kc = client.started_kc if client is not None else None
            if kc is not None:
                kc.stop_channels()   # the heartbeat thread first, then the sockets under it
            for owner in (kc, km):
                if owner is not None and not owner.context.closed:
                    owner.context.destroy(linger=0)
        try:
            left = slot.request({"op": "reap"}, timeout=30).get("leftovers") or []
            if left:
                shown = "; ".join(str(x) for x in left[:4]) + (f"; {len(left) - 4} more" if len(left) > 4 else "")
                flags.append(f"{LEFT_BEHIND} (removed): {shown}")
            held = slot.held_since_clean()
            if held > DIRTY_BYTES:      # something the reap cannot see: a fresh sandbox for the next one
                flags.append(f"{LEFT_BEHIND}: the slot held {held >> 20} MiB more after its end; it was restarted")
                slot.restart()
        except SlotError:
            problems.append("the slot's fork server died; it was restarted")
            slot.restart()
        if judge_socket is not None:
            if client is not None and client.judge is not None:
                client.judge.close()
            judge_socket.close()
            try:
                slot.judge.end()
                if getattr(slot.judge, "leftovers", None):
                    flags.append(f"{LEFT_BEHIND} (the judge's, removed): {'; '.join(slot.judge.leftovers[:4])}")
            except SlotError:
                problems.append("the judge's server died; it was restarted")
                slot.judge.restart()
        written = kernel_output_files(slot.dir, job.files, problems)
        peak = slot.submission_peak_memory()
        slot.clear()
        slot_left = slot.held_since_first_clean()    # what the next submission starts with
    if why_killed and not stop_reason:
        stop_reason = why_killed[0]
        problems.append(stop_reason)
    if slot.cgroup is not None and slot.cgroup.oom_kills() > oom_before:
        passed = (f"the submission's processes together passed its memory limit of "
                  f"{job.limits.memory_bytes >> 20} MiB; the biggest was killed")
        if stop_reason in problems:    # the kernel itself was the one killed: say why
            problems[problems.index(stop_reason)] = passed
            stop_reason = passed
        else:                          # another of its processes: the notebook went on
            problems.append(passed)
    _finish(nb, client, stop_reason, problems, flags)
    if client is not None:
        flags += [f for f in client.judge_flags if f not in flags]
        if client.judge_stopped is not None:
            problems.append(f"{JUDGE_STOPPED}: {client.judge_stopped}")
            flags.append(JUDGE_STOPPED)
    return Outcome(job.student, job.notebook, dict(nb), problems, flags, time.monotonic() - start, written,
                   peak, slot_left)


class JudgeUnavailable(Exception):
    """The slot's judge could not be started: the grader's fault, never the submission's, so the
    job fails (and the student's earlier results stay) rather than scoring its judged tests zero."""


def _fork_judge(slot: Slot, limits: Limits, warm: bool, fixtures: dict[str, str] | None = None):
    try:
        return slot.judge.fork(limits, warm, fixtures)
    except SlotError as exc:
        raise JudgeUnavailable(f"the judge could not be started: {exc}") from None


def _stop_judge(slot: Slot, limits: Limits, stop: JudgeStopped) -> str:
    """End a judge that stopped answering as a judge does; why it stopped, in words."""
    why = str(stop)
    try:
        status = slot.judge.end()
    except SlotError:
        slot.judge.restart()
        return "its server died"
    ended = slot.judge.why_stopped(status, limits)
    return ended if why == "it ended" or "memory limit" in ended else why
