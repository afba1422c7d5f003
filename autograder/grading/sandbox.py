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

from .files import remove_trees

SERVER_TASKS = 8       # tasks of bwrap and the fork server, besides a submission's own
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


def mount_scratch(folder: Path) -> bool:
    """Mount a tmpfs of SCRATCH_BYTES on ``folder``; False where the grader may not mount (not
    root, or a container without the right): the folder then stays a plain one."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SCRATCH_BYTES},mode=0700", "copy-that-scratch",
                           str(folder)], capture_output=True)
    return done.returncode == 0


def scratch_is_sized() -> bool:
    """Whether slots here get a size-limited scratch folder (tried on a folder of its own)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="copy-that-mount-probe-") as tmp:
        if not mount_scratch(Path(tmp)):
            return False
        subprocess.run(["umount", "-l", tmp], capture_output=True)
        return True


class SlotError(RuntimeError):
    """The slot's fork server died or stopped answering."""


UID_RANGE = 1000   # slot users are SLOT_UID_BASE .. SLOT_UID_BASE + UID_RANGE - 1


def _claim_uid():
    """A slot user id no other slot on this machine holds, in this run or a concurrent one: each
    id is held by a lock on a file while its slot lives (the lock dies with the process)."""
    import fcntl
    import tempfile

    folder = Path(tempfile.gettempdir()) / "copy-that-slot-uids"
    folder.mkdir(mode=0o700, exist_ok=True)
    for uid in range(SLOT_UID_BASE, SLOT_UID_BASE + UID_RANGE):
        handle = open(folder / str(uid), "a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        return uid, handle
    raise SlotError(f"all {UID_RANGE} slot user ids are in use")


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


# What the kernel sees of the host: the system's programs and libraries, a few files of /etc the
# loader and the C library read, and (added per slot) the interpreter, the environment, this
# package and the slot's scratch folder.  Nothing else: no other checkout, /home, /root, /srv,
# /var, /run (host sockets), /opt or /mnt.
SYSTEM_PATHS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
                "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
                "/etc/localtime", "/etc/nsswitch.conf", "/etc/passwd", "/etc/group", "/etc/fonts",
                "/sys/devices/system/cpu"]
SCRATCH_TMP_BYTES = 256 << 20   # the kernel's /tmp: RAM-backed, so it is sized
SCRATCH_BYTES = 512 << 20       # the slot's scratch folder, where the grader may mount a tmpfs


def package_dir() -> Path:
    """This package's folder, every link on the way resolved: the package the grader runs, which is
    the one its sandboxes import (not whichever another install would put first on their path)."""
    import autograder

    return Path(autograder.__file__).resolve().parent


def visible_paths() -> list[Path]:
    """The host paths a slot's sandbox shows, read-only (besides the system's): the interpreter,
    the environment and its site-packages, and this package (its kernel/ and the fork server)."""
    wanted = [Path(sys.base_prefix), Path(sys.prefix), package_dir()]
    wanted += [Path(p) for p in sys.path if p and "site-packages" in p and Path(p).is_dir()]
    out: list[Path] = []
    for w in sorted({w.resolve() for w in wanted}, key=lambda p: len(p.parts)):
        if not any(w == o or o in w.parents for o in out):
            out.append(w)
    return out


def host_links() -> list[tuple[str, Path]]:
    """The symbolic links on the way to the interpreter as this process was started (a ``.venv``
    that links to an environment elsewhere, say): (what each link says, where it is), outermost
    first.  The sandbox shows only the places they lead to (``visible_paths``), so it makes the
    same links, or ``sys.executable`` would not be found there.  A link inside a folder the
    sandbox already shows is shown with it and is not listed."""
    shown = [Path(p) for p in SYSTEM_PATHS] + visible_paths()
    links: list[tuple[str, Path]] = []
    pending = [Path(os.path.abspath(sys.executable)), Path(os.path.abspath(sys.prefix))]
    for _ in range(64):                       # a chain of links, each followed once
        if not pending:
            break
        path = pending.pop()
        walked = Path("/")
        for i, part in enumerate(path.parts[1:], start=1):
            walked = walked / part
            if any(walked == p or p in walked.parents for p in shown):
                break                         # the sandbox shows this folder, links and all
            if walked.is_symlink():
                target = os.readlink(walked)
                if all(at != walked for _, at in links):
                    links.append((target, walked))
                rest = path.parts[i + 1:]
                pending.append(Path(os.path.normpath(walked.parent / target)).joinpath(*rest))
                break
    return links


def sandbox_argv(slot_dir: Path, uid: int | None) -> list[str]:
    """The bubblewrap command line for one slot's fork server: an allow-list of mounts."""
    argv = [bwrap_path() or "bwrap", "--die-with-parent", "--new-session",
            "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if os.geteuid() != 0:
        argv += ["--unshare-user"]
    made: set[Path] = {Path("/")}

    def parents_of(path: Path) -> list[str]:
        # bubblewrap makes missing mount points with mode 0700: the slot's user must traverse them
        out = []
        for parent in reversed(path.parents):
            if parent not in made:
                made.add(parent)
                out += ["--perms", "0755", "--dir", str(parent)]
        return out

    for name in SYSTEM_PATHS:
        path = Path(name)
        if path.is_symlink():
            argv += parents_of(path) + ["--symlink", os.readlink(path), name]
        elif path.exists():
            argv += parents_of(path) + ["--ro-bind", name, name]
        made.add(path)
    argv += ["--dev", "/dev", "--proc", "/proc", "--size", str(SCRATCH_TMP_BYTES), "--tmpfs", "/tmp"]
    made.add(Path("/tmp"))
    for keep in visible_paths():
        argv += parents_of(keep) + ["--ro-bind", str(keep), str(keep)]
        made.add(keep)
    for target, link in host_links():
        argv += parents_of(link) + ["--symlink", target, str(link)]
        made.add(link)
    argv += parents_of(slot_dir) + ["--bind", str(slot_dir), str(slot_dir), "--chdir", "/", "--clearenv"]
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(slot_dir), "TMPDIR": str(slot_dir), "LANG": "C.UTF-8", "PYTHONNOUSERSITE": "1",
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
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


def probe() -> str | None:
    """Start a real sandbox, as a slot does, and run ``true`` in it: None when that works, else
    what went wrong (bubblewrap's own message: no bwrap, no user namespaces, ...)."""
    if bwrap_path() is None:
        return "bubblewrap (bwrap) is not installed (Debian/Ubuntu: sudo apt-get install bubblewrap)"
    import tempfile

    with tempfile.TemporaryDirectory(prefix="copy-that-probe-") as tmp:
        argv = sandbox_argv(Path(tmp), None)
        argv = argv[:argv.index("--") + 1] + ["/bin/true"]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap could not be started: {exc}"
    if proc.returncode != 0:
        return f"bubblewrap cannot make a sandbox here: {proc.stderr.strip() or f'exit status {proc.returncode}'}"
    return None


def forkserver_command() -> list[str]:
    """How a slot starts its fork server: isolated mode (no PYTHON* variables, no user site, no
    script or working folder on ``sys.path``), run as a file, so the kernels it forks never have
    ``autograder.grading`` imported.  Its path and the folder that holds the package (put first
    on its ``sys.path``) are this package's, links resolved: the sandbox shows the package there,
    whether it was found through a link, in another checkout than the environment's editable
    install, or in site-packages."""
    package = package_dir()
    return [sys.executable, "-I", str(package / "grading" / "forkserver.py"), str(package.parent)]


class Slot:
    """One sandbox with a fork server, grading one submission at a time."""

    def __init__(self, index: int, base_dir: Path, sandboxed: bool):
        self.index = index
        self.dir = base_dir / f"slot{index}"
        self.sandboxed = sandboxed
        self.uid: int | None = None
        self._uid_lock = None
        if sandboxed and os.geteuid() == 0 and shutil.which("setpriv"):
            self.uid, self._uid_lock = _claim_uid()
        self.proc: subprocess.Popen | None = None
        self.lock = threading.Lock()
        self.log_path = base_dir / f"slot{index}.log"
        self.cgroup = None                 # a SlotCgroup where the grader may make one
        self.scratch_mounted = False       # the scratch folder is a sized tmpfs of its own
        self._memory_base: int | None = None   # the cgroup's usage when the submission began

    # -- life cycle ----------------------------------------------------------------------------
    def start(self, timeout: float = 300) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.sandboxed and not self.scratch_mounted:
            # a size-limited scratch folder (its pages count in the slot's cgroup as well)
            self.scratch_mounted = mount_scratch(self.dir)
        if self.uid is not None:
            os.chmod(self.dir.parent, 0o711)  # the slot's user must traverse to its folder
        self._own(self.dir)
        if self.sandboxed:
            argv = sandbox_argv(self.dir, self.uid)
            env = None
        else:
            argv = forkserver_command()
            env = dict(os.environ, OMP_NUM_THREADS="1")
            env.pop("MPLBACKEND", None)   # the kernel picks the inline backend, as in Jupyter
            env.pop("COPY_THAT_PIDNS", None)
        if self.sandboxed and self.cgroup is None:
            from .cgroups import SlotCgroup, available

            if available()[0] is not None:
                self.cgroup = SlotCgroup(f"slot{self.index}")
        if self.cgroup is not None:
            argv = self.cgroup.join_command(argv)
        with open(self.log_path, "wb") as log:   # bubblewrap's and the server's own messages
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                         cwd="/", env=env, text=True, start_new_session=True)
        try:
            reply = self._read(timeout)
        except SlotError as exc:
            raise SlotError(f"{exc}: {self.log_tail() or 'it printed nothing'}") from None
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

    def release(self) -> None:
        """Close the slot, remove its cgroup and give its user id back."""
        self.close()
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        if self.scratch_mounted:
            subprocess.run(["umount", "-l", str(self.dir)], capture_output=True)
            self.scratch_mounted = False
        if self._uid_lock is not None:
            self._uid_lock.close()
            self._uid_lock = None

    def log_tail(self, size: int = 2000) -> str:
        try:
            return self.log_path.read_bytes()[-size:].decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def restart(self) -> None:
        if self.proc is not None:
            try:
                self.proc.kill()
                self.proc.wait(timeout=10)
            except Exception:
                pass
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
        self._memory_base = None
        if self.cgroup is None:
            return 0
        base = self.cgroup.usage()
        self.cgroup.set_limits(base + limits.memory_bytes if limits.memory_bytes else None,
                               SERVER_TASKS + limits.processes if limits.processes else None)
        if self.cgroup.reset_peak():
            self._memory_base = base
        return self.cgroup.oom_kills()

    def submission_peak_memory(self) -> int | None:
        """The most memory the submission's processes held together, beyond what the fork server
        held before it began, as the kernel counted it in the slot's cgroup (None without one).
        The kernel's count, read from outside the sandbox: nothing the submission prints."""
        if self.cgroup is None or self._memory_base is None:
            return None
        peak = self.cgroup.peak()
        return None if peak is None else max(0, peak - self._memory_base)

    # -- the scratch folder ----------------------------------------------------------------------
    def _own(self, path: Path) -> None:
        if self.uid is not None:
            os.chown(path, self.uid, self.uid)
            os.chmod(path, 0o700)

    def clear(self) -> None:
        """Empty the scratch folder, whatever a submission left there: a tree deeper than Python's
        recursion limit, folders without permissions, links (never followed)."""
        entries = list(self.dir.iterdir())
        if not entries:
            return
        if os.geteuid() != 0:   # root needs no permission bits; the grader's own user does
            folders = [str(e) for e in entries if e.is_dir() and not e.is_symlink()]
            if folders:
                subprocess.run(["chmod", "-R", "u+rwX", "--", *folders], capture_output=True)
        remove_trees(*entries)
        if any(self.dir.iterdir()):
            raise SlotError(f"slot {self.index}: the scratch folder could not be emptied")

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
