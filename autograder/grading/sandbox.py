"""Grading slots: a bubblewrap sandbox with a fork server inside, and the kernels it forks.

A slot is one long-lived sandbox that grades submissions one after another:

- it sees the read-only Python environment and system, its own scratch folder and nothing of
  the course (``solutions/``, the gradebook, other submissions), the home folders or ``/tmp``;
- it has no network, its own PID namespace, and (when the grader runs as root) its own user id,
  so process-count limits are per slot and the kernel cannot read root-only files;
- each submission runs in a kernel forked from the slot's fork server, with memory, CPU-time,
  process-count and file-size limits; afterwards every process in the slot is killed and the
  scratch folder emptied before the next submission comes in;
- beside it, a second sandbox runs the slot's judge (``judgebox.JudgeBox``), started at the same
  time: the submission's hidden tests run there, never in the grader.

The command line of both sandboxes is ``bwrap.py``'s; how jupyter_client starts a kernel through
the fork server is ``provisioner.py``'s.  Without bubblewrap the same code runs with the limits but
no isolation, and the grader warns.
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import threading
from dataclasses import dataclass, asdict
from pathlib import Path

from typing import TYPE_CHECKING

from .bwrap import Sandbox, SlotError, forkserver_command
from .judgebox import JudgeBox

if TYPE_CHECKING:
    from jupyter_client import AsyncKernelManager

SERVER_TASKS = 8       # tasks of bwrap and the fork server, besides a submission's own
KERNEL_BASENAME = ".copy-that-kernel"


@dataclass
class Limits:
    """Per-submission limits (the CLI's options)."""

    memory_bytes: int = 4 << 30        # address space of the kernel (RLIMIT_AS)
    cpu_seconds: int = 300             # CPU time of the whole notebook (RLIMIT_CPU)
    cell_timeout: int = 60             # wall clock per cell
    notebook_timeout: int = 600        # wall clock per notebook
    processes: int = 64                # processes and threads in the slot (RLIMIT_NPROC)
    output_bytes: int = 2 << 20        # everything a notebook may print, enforced while it runs
    file_bytes: int = 256 << 20        # largest file the kernel may write (RLIMIT_FSIZE)
    # the judge (the hidden tests, in a process of its own): memory past what its server holds at
    # the fork, summed over its processes, and CPU time, per submission
    judge_memory_bytes: int = 2 << 30
    judge_cpu_seconds: int = 120

    def kernel_limits(self) -> dict:
        d = asdict(self)
        return {k: d[k] for k in ("memory_bytes", "cpu_seconds", "processes", "file_bytes")}


def uses_optimizer(nb) -> bool:
    """Whether a notebook's code mentions an optimizer, whose first step makes torch import more
    (``forkserver._warm_up``); a miss only costs that kernel the import."""
    return any(c.get("cell_type") == "code" and "optim" in _text(c.get("source")) for c in nb.get("cells", []))


def calls_gradients(source) -> bool:
    """Whether code calls ``backward`` or ``torch.autograd.grad``."""
    text = _text(source)
    return "backward(" in text or "autograd.grad(" in text


def uses_gradients(nb) -> bool:
    """Whether a notebook's code calls ``backward`` or ``torch.autograd.grad``, whose first call with
    a gradient tensor makes torch import more (``forkserver.GRAD_MODULE``); a miss only costs that
    kernel and judge the import."""
    return any(c.get("cell_type") == "code" and calls_gradients(c.get("source")) for c in nb.get("cells", []))


def _text(source) -> str:
    return "".join(source) if isinstance(source, list) else str(source or "")


def _quietly(load) -> None:
    try:
        load()
    except SlotError:
        pass      # its fork restarts it, or reports that it cannot


def folders_use_optimizer(folders) -> bool:
    """Whether a notebook in one of ``folders`` (an assignment's source folders) uses an optimizer:
    then a call's slots warm up as they start, beside the grader's own start, rather than in its
    first submission.  A notebook that cannot be read counts as not using one."""
    for folder in folders:
        for path in sorted(Path(folder).glob("*.ipynb")):
            try:
                nb = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(nb, dict) and isinstance(nb.get("cells"), list) and uses_optimizer(nb):
                return True
    return False


class Slot(Sandbox):
    """One sandbox with a fork server, grading one submission at a time, and beside it the
    sandbox of its judge (``judge``)."""

    def __init__(self, index: int, base_dir: Path, sandboxed: bool):
        super().__init__(f"slot{index}", base_dir, sandboxed)
        self.index = index
        self.proc: subprocess.Popen | None = None
        self.warm = False     # whether the fork server ran _warm_up
        self.grads = False    # whether it loaded what a gradient call loads (load_grads)
        self.warm_start = False   # warm both servers up as the slot starts (the call uses an optimizer)
        self.exit_asked = self.abandoned = False
        self.lock = threading.Lock()
        self.judge = JudgeBox(index, base_dir, sandboxed)
        self.clean_resident: int | None = None
        self.first_clean: dict[bool, int] = {}   # the clean state it first had: cold, warmed up

    # -- life cycle ----------------------------------------------------------------------------
    def start(self, timeout: float = 300) -> None:
        """Start the fork server, and the judge's server beside it (whose start is awaited when the
        first submission needs its judge).  With ``warm_start``, both then run their warm-up, side
        by side, before the slot takes its first submission."""
        if not self.judge.alive():
            self.judge.launch()
        self.warm = self.grads = self.exit_asked = False
        argv, env = self.command(forkserver_command())
        with open(self.log_path, "wb") as log:   # bubblewrap's and the server's own messages
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                         cwd="/", env=env, text=True, start_new_session=True)
        if self.abandoned:
            self.abandon()
        try:
            reply = self._read(timeout)
        except SlotError as exc:
            raise SlotError(f"{exc}: {self.log_tail() or 'it printed nothing'}") from None
        if not reply.get("ready"):
            raise SlotError(f"slot {self.index}: fork server did not start")
        self.clean_resident = self.cgroup.resident() if self.cgroup is not None else None
        if self.clean_resident is not None:
            self.first_clean.setdefault(False, self.clean_resident)
        if self.warm_start:
            self.warm_up(judge_too=True)

    def held_since_clean(self) -> int:
        """How much more anonymous and shared memory the slot holds than when its fork server was
        ready (0 without a cgroup): what a finished submission left behind."""
        if self.cgroup is None or self.clean_resident is None:
            return 0
        return max(0, self.cgroup.resident() - self.clean_resident)

    def held_since_first_clean(self) -> int | None:
        """The same against the clean state the slot first had (cold or warmed up, as it is now),
        None without a cgroup: a restart that did not give back what a submission took shows here,
        where ``held_since_clean``, measured from the restart's own clean state, would not."""
        if self.cgroup is None or self.clean_resident is None:
            return None
        return max(0, self.cgroup.resident() - self.first_clean.get(self._loaded(), self.clean_resident))

    def _loaded(self):
        """What the fork server has loaded past its start: the key of ``first_clean``."""
        return True if self.warm else "grads" if self.grads else False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def abandon(self) -> None:
        """Stop a slot that is still starting (its pool closed): both servers killed, so ``start``
        fails at once rather than waiting for torch to load."""
        self.abandoned = True
        for proc in (self.proc, self.judge.proc):
            if proc is not None and proc.poll() is None:
                proc.kill()

    def warm_up(self, judge_too: bool = False) -> None:
        """Have the fork server run once what torch loads lazily (an optimizer's first step), for
        this kernel and every one after it; asked for only by notebooks that use an optimizer.
        ``judge_too``: the judge's server warms up at the same time, in a thread (both are mostly
        CPU in two processes); a judge that cannot is left to its fork, which says so."""
        self._load("warm", 300, self.judge.warm_up if judge_too and not self.judge.warm else None)

    def load_grads(self, judge_too: bool = False) -> None:
        """Have the fork server load what a gradient call loads (``forkserver.GRAD_MODULE``), for
        this kernel and every one after it, as ``warm_up`` does for an optimizer (which loads it
        too); asked for by notebooks that call ``backward`` (``uses_gradients``).  ``judge_too``:
        the judge's server loads it at the same time, in a thread."""
        judge = judge_too and not (self.judge.warm or self.judge.grads)
        self._load("grads", 120, self.judge.load_grads if judge else None)

    def _load(self, op: str, timeout: float, judge_load=None) -> None:
        """Ask the fork server for ``op`` (``warm`` or ``grads``) unless it has loaded that already,
        with ``judge_load`` run beside it in a thread (a judge that cannot is left to its fork)."""
        helper = None
        if judge_load is not None:
            helper = threading.Thread(target=_quietly, args=(judge_load,), daemon=True, name=f"judge-{op}-{self.index}")
            helper.start()
        try:
            if not (self.warm or getattr(self, op)):
                self.request({"op": op}, timeout=timeout)
                setattr(self, op, True)
                # what it loaded stays in the fork server, by design: the clean state is now this
                self.clean_resident = self.cgroup.resident() if self.cgroup is not None else None
                if self.clean_resident is not None:
                    self.first_clean.setdefault(self._loaded(), self.clean_resident)
        finally:
            if helper is not None:
                helper.join()

    def ask_to_exit(self) -> None:
        """Tell the fork server and the judge's server to exit, without waiting (``close`` waits)."""
        for ask in (self._ask_to_exit, self.judge.ask_to_exit):
            try:
                ask()
            except Exception:
                pass     # close() ends it the hard way

    def _ask_to_exit(self) -> None:
        if self.alive() and not self.exit_asked:
            self.exit_asked = True
            self.proc.stdin.write(json.dumps({"op": "exit"}) + "\n")
            self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                self._ask_to_exit()
                self.proc.wait(timeout=5)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def release(self) -> None:
        """Close the slot and its judge, remove their cgroups and give their user ids back."""
        self.close()
        self.judge.release()
        super().release()

    def restart(self) -> None:
        self.kill_server()
        self.proc = None
        self.start()

    def cpu_seconds(self) -> float:
        """CPU time used so far by every process in the slot (its fork server included), with
        what they collected from children that have ended."""
        import psutil

        if self.proc is None:
            return 0.0
        try:
            procs = [psutil.Process(self.proc.pid)]
            procs += procs[0].children(recursive=True)
        except psutil.Error:
            return 0.0
        total = 0.0
        for p in procs:
            try:
                t = p.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
            except psutil.Error:
                pass
        return total

    def limit_submission(self, limits: "Limits") -> int:
        """Set the slot's cgroup limits for the next submission: what the fork server holds now,
        plus the submission's allowance.  Returns the OOM-kill count to compare with afterwards."""
        return self.limit(limits.memory_bytes, SERVER_TASKS + limits.processes if limits.processes else None)

    def submission_peak_memory(self) -> int | None:
        """The most memory the submission's kernel processes held together (``Sandbox.peak_memory``)."""
        return self.peak_memory()

    def put_files(self, files: dict[str, bytes]) -> None:
        for rel, data in files.items():
            target = (self.dir / rel).resolve()
            if self.dir.resolve() not in target.parents:
                continue  # a path that climbs out of the scratch folder is ignored
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        if self.uid is not None:
            for p in [self.dir, *self.dir.rglob("*")]:
                os.chown(p, self.uid, self.uid)

    # -- talking to the fork server ----------------------------------------------------------------
    def _read(self, timeout: float) -> dict:
        assert self.proc is not None and self.proc.stdout is not None
        poller = select.poll()   # not select(): it fails on fds above 1024
        poller.register(self.proc.stdout, select.POLLIN)
        if not poller.poll(timeout * 1000):
            raise SlotError(f"slot {self.index}: fork server did not answer in {timeout:.0f} s")
        line = self.proc.stdout.readline()
        if not line:
            raise SlotError(f"slot {self.index}: fork server exited")
        return json.loads(line)

    def request(self, payload: dict, timeout: float = 60) -> dict:
        with self.lock:
            if not self.alive():
                raise SlotError(f"slot {self.index}: fork server is not running")
            try:
                self.proc.stdin.write(json.dumps(payload) + "\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError) as exc:
                raise SlotError(f"slot {self.index}: fork server is gone ({exc})") from exc
            return self._read(timeout)

    def kernel_manager(self, limits: Limits) -> AsyncKernelManager:
        """A kernel manager whose kernel the fork server forks inside this slot.

        Asynchronous, as nbclient expects: with a blocking client a kernel that dies mid-cell
        would leave nbclient waiting for output forever."""
        from .provisioner import QuickReadyClient, SlotKernelManager, SlotProvisioner  # (loaded late)

        km = SlotKernelManager(kernel_name="python3", transport="ipc",
                                ip=str(self.dir / KERNEL_BASENAME),
                                connection_file=str(self.dir / f"{KERNEL_BASENAME}.json"),
                                client_factory=QuickReadyClient)
        km.provisioner = SlotProvisioner(kernel_id="slot", kernel_spec=km.kernel_spec, parent=km)
        km.provisioner.slot = self
        km.provisioner.limits = limits
        return km
