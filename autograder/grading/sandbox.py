"""Grading slots: a bubblewrap sandbox with a fork server inside, and the kernels it forks.

A slot is one long-lived sandbox that grades submissions one after another:

- it sees the read-only Python environment and system, its own scratch folder and nothing of
  the course (``solutions/``, the gradebook, other submissions), the home folders or ``/tmp``;
- it has no network, its own PID namespace, and (when the grader runs as root) its own user id,
  so process-count limits are per slot and the kernel cannot read root-only files;
- each submission runs in a kernel forked from the slot's fork server, with memory, CPU-time,
  process-count and file-size limits; afterwards every process in the slot is killed and the
  scratch folder emptied before the next submission comes in.

Without bubblewrap the same code runs with the limits but no isolation, and the grader warns.
"""
from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import threading
import time
from queue import Empty
from dataclasses import dataclass, asdict
from pathlib import Path

from jupyter_client import AsyncKernelClient, AsyncKernelManager
from jupyter_client.provisioning import LocalProvisioner

SLOT_UID_BASE = 61000   # slot i runs as uid SLOT_UID_BASE + i when the grader is root
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

    def kernel_limits(self) -> dict:
        d = asdict(self)
        return {k: d[k] for k in ("memory_bytes", "cpu_seconds", "processes", "file_bytes")}


class SlotError(RuntimeError):
    """The slot's fork server died or stopped answering."""


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def _hidden_roots(course_root: Path) -> list[Path]:
    home = Path.home()
    roots = [course_root, Path("/tmp"), Path("/home"), Path("/root"), home]
    seen, out = set(), []
    for r in roots:
        r = r.resolve() if r.exists() else r
        if r.exists() and r not in seen and r != Path("/"):
            seen.add(r)
            out.append(r)
    return out


def _needed_read_only(hidden: list[Path]) -> list[Path]:
    """Parts of hidden folders the kernel still needs: the interpreter, the venv, this package."""
    import autograder

    wanted = [Path(sys.base_prefix), Path(sys.prefix), Path(autograder.__file__).resolve().parent]
    wanted += [Path(p) for p in sys.path if p and Path(p).is_dir() and "site-packages" in p]
    out = []
    for w in wanted:
        w = w.resolve()
        if any(w == h or h in w.parents for h in hidden) and w not in out:
            out.append(w)
    return out


def sandbox_argv(slot_dir: Path, course_root: Path, uid: int | None) -> list[str]:
    """The bubblewrap command line for one slot's fork server."""
    hidden = _hidden_roots(course_root)
    argv = [bwrap_path() or "bwrap", "--die-with-parent", "--new-session",
            "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    if os.geteuid() != 0:
        argv += ["--unshare-user"]
    for h in hidden:
        argv += ["--tmpfs", str(h)]
    made: set[Path] = set()

    def parents_of(path: Path) -> list[str]:
        # bubblewrap creates missing mount points with mode 0700; the slot's user must traverse them
        out = []
        for parent in reversed(path.parents):
            if parent not in made and any(h in parent.parents for h in hidden):
                made.add(parent)
                out += ["--perms", "0755", "--dir", str(parent)]
        return out

    for keep in _needed_read_only(hidden):
        argv += parents_of(keep) + ["--ro-bind", str(keep), str(keep)]
    argv += parents_of(slot_dir) + ["--bind", str(slot_dir), str(slot_dir), "--chdir", "/", "--clearenv"]
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(slot_dir), "TMPDIR": str(slot_dir), "LANG": "C.UTF-8", "PYTHONNOUSERSITE": "1",
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "agg",
        "COPY_THAT_PIDNS": "1",
    }
    for key, value in env.items():
        argv += ["--setenv", key, value]
    argv.append("--")
    if uid is not None:
        argv += [shutil.which("setpriv") or "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                 "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs", "--"]
    argv += forkserver_command()
    return argv


def forkserver_command() -> list[str]:
    """How a slot starts its fork server: isolated mode (no PYTHON* variables, no user site, no
    script or working folder on ``sys.path``), run as a file, so the kernels it forks never have
    ``autograder.grading`` imported."""
    return [sys.executable, "-I", str(Path(__file__).with_name("forkserver.py"))]


class Slot:
    """One sandbox with a fork server, grading one submission at a time."""

    def __init__(self, index: int, base_dir: Path, course_root: Path, sandboxed: bool):
        self.index = index
        self.dir = base_dir / f"slot{index}"
        self.course_root = course_root
        self.sandboxed = sandboxed
        self.uid = SLOT_UID_BASE + index if (sandboxed and os.geteuid() == 0 and shutil.which("setpriv")) else None
        self.proc: subprocess.Popen | None = None
        self.lock = threading.Lock()

    # -- life cycle ----------------------------------------------------------------------------
    def start(self, timeout: float = 300) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.uid is not None:
            os.chmod(self.dir.parent, 0o711)  # the slot's user must traverse to its folder
        self._own(self.dir)
        if self.sandboxed:
            argv = sandbox_argv(self.dir, self.course_root, self.uid)
            env = None
        else:
            argv = forkserver_command()
            env = dict(os.environ, OMP_NUM_THREADS="1", MPLBACKEND="agg")
            env.pop("COPY_THAT_PIDNS", None)
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, cwd="/", env=env, text=True,
                                     start_new_session=True)
        reply = self._read(timeout)
        if not reply.get("ready"):
            raise SlotError(f"slot {self.index}: fork server did not start")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def close(self) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"op": "exit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=5)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        if self.proc is not None:
            try:
                self.proc.kill()
                self.proc.wait(timeout=10)
            except Exception:
                pass
        self.proc = None
        self.start()

    # -- the scratch folder ----------------------------------------------------------------------
    def _own(self, path: Path) -> None:
        if self.uid is not None:
            os.chown(path, self.uid, self.uid)
            os.chmod(path, 0o700)

    def clear(self) -> None:
        for entry in list(self.dir.iterdir()):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)

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
        km = AsyncKernelManager(kernel_name="python3", transport="ipc",
                                ip=str(self.dir / KERNEL_BASENAME),
                                connection_file=str(self.dir / f"{KERNEL_BASENAME}.json"),
                                client_factory=QuickReadyClient)
        km.provisioner = SlotProvisioner(kernel_id="slot", kernel_spec=km.kernel_spec, parent=km)
        km.provisioner.slot = self
        km.provisioner.limits = limits
        return km


def _user_tasks() -> int:
    """Processes and threads of this user (what RLIMIT_NPROC counts)."""
    import psutil

    uid, count = os.getuid(), 0
    for proc in psutil.process_iter(["uids", "num_threads"]):
        uids, threads = proc.info["uids"], proc.info["num_threads"]
        if uids is not None and uids.real == uid:
            count += threads or 0
    return count


class QuickReadyClient(AsyncKernelClient):
    """jupyter_client's kernel client, with a shorter wait in its readiness check.

    ``wait_for_ready`` asks for ``kernel_info`` and then waits 0.2 s for any IOPub message, to be
    sure IOPub is connected; a forked kernel is up in a few hundredths of a second, so that wait
    was most of a kernel's start.  This asks again every 20 ms instead: the same two conditions.
    """

    async def _async_wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout if timeout is not None else 60)
        while True:
            self.kernel_info()
            try:
                msg = await self.shell_channel.get_msg(timeout=0.5)
            except Empty:
                msg = None
            if msg is not None and msg["msg_type"] == "kernel_info_reply":
                try:
                    await self.iopub_channel.get_msg(timeout=0.02)
                except Empty:
                    pass
                else:
                    self._handle_kernel_info_reply(msg)
                    return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout} seconds")

    wait_for_ready = _async_wait_for_ready


class _ForkedKernel:
    """Enough of ``subprocess.Popen`` for jupyter_client, answered by the fork server."""

    stdin = stdout = stderr = None

    def __init__(self, slot: Slot, pid: int):
        self.slot = slot
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                self.returncode = self.slot.request({"op": "poll"})["status"]
            except SlotError:
                self.returncode = -9
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("kernel", timeout)
            time.sleep(0.05)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            try:
                self.slot.request({"op": "signal", "signum": int(signum)})
            except SlotError:
                self.returncode = -9

    def kill(self) -> None:
        self.send_signal(9)

    def terminate(self) -> None:
        self.send_signal(15)


class SlotProvisioner(LocalProvisioner):
    """Launches the kernel by asking the slot's fork server to fork one."""

    slot: Slot
    limits: Limits

    async def launch_kernel(self, cmd, **kwargs):
        conn = self.parent.connection_file
        if self.slot.uid is not None:
            os.chown(conn, self.slot.uid, self.slot.uid)
        limits = self.limits.kernel_limits()
        if self.slot.uid is None:
            # RLIMIT_NPROC counts every task of the real user: leave room for what already runs
            limits["processes"] = 0 if os.geteuid() == 0 else _user_tasks() + limits["processes"]
        reply = self.slot.request({"op": "run", "connection_file": conn, "cwd": str(self.slot.dir),
                                   "limits": limits})
        self.process = _ForkedKernel(self.slot, reply["pid"])
        self.pid = reply["pid"]
        self.pgid = None
        self.cwd = str(self.slot.dir)
        return self.connection_info
