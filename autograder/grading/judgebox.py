"""A slot's second sandbox: the judge server (``judgeserver.py``) and the judge it forks per submission.

The judge runs a submission's judged tests with real torch, so it holds the hidden tests and
parses what the learner's kernel answered.  It lives in a sandbox of its own, beside the kernel's
and apart from the grader: the read-only environment as the kernel's sandbox sees it and a
scratch folder of its own (never the kernel's), no network, its own PID namespace, its own user
(as root), its own cgroup (memory and processes) and a CPU-time limit.  What it sends back is
read by ``judgepipe``, bounded; a judge that crashes, stalls or passes a limit ends its
submission's judged tests and nothing else.  Between submissions every process in the sandbox
is killed and its scratch folder emptied.  Without bubblewrap the judge is still a process of
its own, with the same per-process limits.
"""
from __future__ import annotations

import json
import select
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from .bwrap import Sandbox, SlotError, server_command

JUDGE_TASKS = 32      # tasks of the judge's sandbox: bwrap, the server, the judge and its threads
CRASHES = {signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGILL, signal.SIGFPE}


class JudgeBox(Sandbox):
    """The judge's sandbox of one slot: started beside the slot's, a judge forked per submission."""

    def __init__(self, index: int, base_dir: Path, sandboxed: bool):
        super().__init__(f"judge{index}", base_dir, sandboxed)
        self.index = index
        self.proc: subprocess.Popen | None = None
        self.control: socket.socket | None = None
        self.ready = False
        self.warm = False       # whether the server ran its warm-up
        self.grads = False      # whether it loaded what a gradient call loads (load_grads)
        self.exit_asked = False
        self.lock = threading.Lock()
        self._buffer = b""
        self._oom_before = 0

    # -- life cycle ----------------------------------------------------------------------------
    def launch(self) -> None:
        """Start the judge server; it loads torch and the judge while the slot's fork server starts
        (``fork`` waits for it)."""
        mine, theirs = socket.socketpair()
        argv, env = self.command(server_command("judgeserver.py") + [str(theirs.fileno())])
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd="/", env=env,
                                         pass_fds=(theirs.fileno(),), start_new_session=True)
        theirs.close()
        self.control, self.ready, self._buffer, self.exit_asked = mine, False, b"", False
        self.warm = self.grads = False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _wait_ready(self, timeout: float = 300) -> None:
        if self.ready:
            return
        try:
            reply = self._read(timeout)
        except SlotError as exc:
            raise SlotError(f"{exc}: {self.log_tail() or 'it printed nothing'}") from None
        if not reply.get("ready"):
            raise SlotError(f"judge {self.index}: the judge server did not start")
        self.ready = True

    def ask_to_exit(self) -> None:
        """Tell the server to exit, without waiting (``close`` waits)."""
        if self.alive() and self.ready and not self.exit_asked:
            self.exit_asked = True
            self.control.sendall(b'{"op": "exit"}\n')

    def close(self) -> None:
        if self.alive():
            try:
                if not self.ready:        # still loading torch: nothing of it is needed
                    raise SlotError("not started")
                self.ask_to_exit()
                self.proc.wait(timeout=5)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        if self.control is not None:
            self.control.close()
        self.proc, self.control, self.ready = None, None, False

    def release(self) -> None:
        self.close()
        super().release()

    def restart(self) -> None:
        self.kill_server()
        self.close()
        self.launch()

    def warm_up(self) -> None:
        """Have the server load once what torch loads lazily (an optimizer's first step), for every
        judge it forks after: what ``fork(warm=True)`` does, asked for ahead of the first fork so
        that it runs beside the fork server's own warm-up.  Raises SlotError as ``fork`` does."""
        if not self.warm:
            self._ask_server("warm", timeout=300)
            self.warm = True

    def load_grads(self) -> None:
        """Have the server load what a gradient call loads (``forkserver.GRAD_MODULE``) for every
        judge it forks after, as ``warm_up`` does for an optimizer (which loads it too)."""
        if not (self.warm or self.grads):
            self._ask_server("grads", timeout=120)
            self.grads = True

    def _ask_server(self, op: str, timeout: float) -> None:
        if not self.alive():
            self.restart()
        self._wait_ready()
        self.request({"op": op}, timeout=timeout)

    # -- one submission's judge ------------------------------------------------------------------
    def fork(self, limits, warm: bool = True, fixtures: dict[str, str] | None = None) -> socket.socket:
        """A fresh judge for the next submission, with ``limits``' judge_memory_bytes and
        judge_cpu_seconds; the grader's end of its pipe.  ``warm``: the submission's tests use what
        torch loads lazily (an optimizer), which the server then loads once for every judge after;
        ``fixtures``: the course's fixtures files (module name -> the instructor's source) the judge loads.
        Raises SlotError when the server cannot start (the grader's problem, not the submission's)."""
        if not self.alive():
            self.restart()
        self._wait_ready()
        self._oom_before = self.limit(limits.judge_memory_bytes, JUDGE_TASKS)
        mine, theirs = socket.socketpair()
        try:
            reply = self.request({"op": "fork", "cwd": str(self.dir), "warm": warm, "fixtures": dict(fixtures or {}), "limits": {
                "memory_bytes": limits.judge_memory_bytes, "cpu_seconds": limits.judge_cpu_seconds,
                "file_bytes": limits.file_bytes}}, fd=theirs.fileno(), timeout=120)
        finally:
            theirs.close()
        self.warm = self.warm or warm
        if "pid" not in reply:
            mine.close()
            raise SlotError(f"judge {self.index}: the judge server did not fork a judge")
        return mine

    def end(self) -> int | None:
        """Kill everything in the sandbox but its server, empty the scratch folder: how the judge
        ended (a negative number: the signal that killed it; None: no judge ran)."""
        reply = self.request({"op": "reap"}, timeout=30)
        self.leftovers = [str(x) for x in reply.get("leftovers") or []]   # removed by the server
        self.clear()
        status = reply.get("status")
        return status if isinstance(status, int) else None

    def why_stopped(self, status: int | None, limits) -> str:
        """In words, why the judge ended (``status`` from :meth:`end`)."""
        if self.oom_kills() > self._oom_before:
            return f"it passed its memory limit of {limits.judge_memory_bytes >> 20} MiB"
        if status == -signal.SIGXCPU:
            return f"it used more than {limits.judge_cpu_seconds} s of CPU time"
        if status is not None and status < 0:
            name = signal.Signals(-status).name if -status in signal.valid_signals() else str(-status)
            return f"it was killed by {name}" + (" (it crashed)" if -status in CRASHES else "")
        return f"it exited ({status})" if status else "it ended"

    # -- the control socket -------------------------------------------------------------------
    def request(self, payload: dict, timeout: float = 60, fd: int | None = None) -> dict:
        with self.lock:
            if not self.alive() or self.control is None:
                raise SlotError(f"judge {self.index}: the judge server is not running")
            line = json.dumps(payload).encode() + b"\n"
            try:
                if fd is None:
                    self.control.sendall(line)
                else:
                    socket.send_fds(self.control, [line], [fd])
            except OSError as exc:
                raise SlotError(f"judge {self.index}: the judge server is gone ({exc})") from exc
            return self._read(timeout)

    def _read(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        poller = select.poll()   # not select(): it fails on fds above 1024
        poller.register(self.control, select.POLLIN)
        while b"\n" not in self._buffer:
            if not poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
                raise SlotError(f"judge {self.index}: the judge server did not answer in {timeout:.0f} s")
            data = self.control.recv(1 << 16)
            if not data:
                raise SlotError(f"judge {self.index}: the judge server exited")
            self._buffer += data
            if len(self._buffer) > 1 << 16:
                raise SlotError(f"judge {self.index}: the judge server said too much")
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            reply = json.loads(line)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            raise SlotError(f"judge {self.index}: the judge server answered something else")
        return reply


