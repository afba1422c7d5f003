"""A bubblewrap sandbox: what it shows of the host, the user it runs as, whether one can be made.

A slot's two sandboxes (its kernels' and its judge's) are made from the same command line: the
system's programs and libraries, the interpreter, the environment and this package, read-only;
one scratch folder of its own, writable; no network, its own PID namespace, a cleared
environment and, when the grader runs as root, an unprivileged user id of its own.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from .files import remove_trees

SLOT_UID_BASE = 61000   # sandbox users are SLOT_UID_BASE .. SLOT_UID_BASE + UID_RANGE - 1 (as root)


class SlotError(RuntimeError):
    """A slot's sandbox could not be started, or the server in it died or stopped answering."""


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


UID_RANGE = 1000   # slot users are SLOT_UID_BASE .. SLOT_UID_BASE + UID_RANGE - 1


def claim_uid() -> tuple[int, object]:
    """A user id for a sandbox that no other sandbox on this machine holds, in this run or a
    concurrent one: each id is held by a lock on a file (returned) while its sandbox lives (the
    lock dies with the process).  Each slot claims one for its kernels, one for its judge."""
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


def sandbox_argv(slot_dir: Path, uid: int | None, command: list[str]) -> list[str]:
    """The bubblewrap command line that runs ``command`` (a slot's fork server, or its judge's
    server) in a sandbox of its own: an allow-list of mounts, ``slot_dir`` the only writable one."""
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
    argv += command
    return argv


def probe() -> str | None:
    """Start a real sandbox, as a slot does, and run ``true`` in it: None when that works, else
    what went wrong (bubblewrap's own message: no bwrap, no user namespaces, ...)."""
    if bwrap_path() is None:
        return "bubblewrap (bwrap) is not installed (Debian/Ubuntu: sudo apt-get install bubblewrap)"
    import tempfile

    with tempfile.TemporaryDirectory(prefix="copy-that-probe-") as tmp:
        argv = sandbox_argv(Path(tmp), None, ["/bin/true"])
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap could not be started: {exc}"
    if proc.returncode != 0:
        return f"bubblewrap cannot make a sandbox here: {proc.stderr.strip() or f'exit status {proc.returncode}'}"
    return None


def server_command(name: str) -> list[str]:
    """How a sandbox starts the server ``name`` of this package (``forkserver.py``, ``judgeserver.py``):
    isolated mode (no PYTHON* variables, no user site, no script or working folder on ``sys.path``),
    run as a file, so the kernels the fork server forks never have ``autograder.grading`` imported.
    Its path and the folder that holds the package (which the server puts first on its
    ``sys.path``) are this package's, links resolved: the sandbox shows the package there, whether
    it was found through a link, in another checkout than the environment's editable install, or
    in site-packages."""
    package = package_dir()
    return [sys.executable, "-I", str(package / "grading" / name), str(package.parent)]


def forkserver_command() -> list[str]:
    """How a slot starts its fork server (``server_command``)."""
    return server_command("forkserver.py")


class Sandbox:
    """What one sandbox holds on the host, around the server it runs: its scratch folder (a sized
    tmpfs where the grader may mount one), its user (as root), its cgroup, its log.  A slot has two,
    its kernels' (``sandbox.Slot``) and its judge's (``judgebox.JudgeBox``)."""

    def __init__(self, name: str, base_dir: Path, sandboxed: bool):
        self.name = name
        self.dir = base_dir / name
        self.sandboxed = sandboxed
        self.uid: int | None = None
        self._uid_lock = None
        if sandboxed and os.geteuid() == 0 and shutil.which("setpriv"):
            self.uid, self._uid_lock = claim_uid()
        self.log_path = base_dir / f"{name}.log"
        self.cgroup = None                 # a SlotCgroup where the grader may make one
        self.scratch_mounted = False       # the scratch folder is a sized tmpfs of its own
        self._memory_base: int | None = None   # the cgroup's usage when the submission began

    def command(self, server: list[str]) -> tuple[list[str], dict | None]:
        """(argv, environment) that start ``server`` in this sandbox, its folder made ready first;
        without bubblewrap, the server alone, with the grader's environment."""
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.sandboxed and not self.scratch_mounted:
            # a size-limited scratch folder (its pages count in the sandbox's cgroup as well)
            self.scratch_mounted = mount_scratch(self.dir)
        if self.uid is not None:
            os.chmod(self.dir.parent, 0o711)  # the sandbox's user must traverse to its folder
        self._own(self.dir)
        if self.sandboxed:
            argv, env = sandbox_argv(self.dir, self.uid, server), None
        else:
            argv = server
            env = dict(os.environ, OMP_NUM_THREADS="1")
            env.pop("MPLBACKEND", None)   # the kernel picks the inline backend, as in Jupyter
            env.pop("COPY_THAT_PIDNS", None)
        if self.sandboxed and self.cgroup is None:
            from .cgroups import SlotCgroup, available

            if available()[0] is not None:
                self.cgroup = SlotCgroup(self.name)
        if self.cgroup is not None:
            argv = self.cgroup.join_command(argv)
        return argv, env

    def log_tail(self, size: int = 2000) -> str:
        try:
            return self.log_path.read_bytes()[-size:].decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def kill_server(self) -> None:
        """Kill the server at once (a restart: it may be stuck), and wait for it briefly."""
        if self.proc is not None:
            try:
                self.proc.kill()
                self.proc.wait(timeout=10)
            except Exception:
                pass

    def release(self) -> None:
        """Remove the cgroup, unmount the scratch folder, give the user id back (the server is
        stopped first, by the subclass)."""
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        if self.scratch_mounted:
            subprocess.run(["umount", "-l", str(self.dir)], capture_output=True)
            self.scratch_mounted = False
        if self._uid_lock is not None:
            self._uid_lock.close()
            self._uid_lock = None

    # -- limits per submission, summed over the sandbox's processes ---------------------------------
    def limit(self, memory_bytes: int, tasks: int | None) -> int:
        """Set the cgroup's limits for the next submission: what the server holds now, plus the
        submission's allowance.  Returns the OOM-kill count to compare with afterwards."""
        self._memory_base = None
        if self.cgroup is None:
            return 0
        base = self.cgroup.usage()
        self.cgroup.set_limits(base + memory_bytes if memory_bytes else None, tasks)
        if self.cgroup.reset_peak():
            self._memory_base = base
        return self.cgroup.oom_kills()

    def oom_kills(self) -> int:
        return self.cgroup.oom_kills() if self.cgroup is not None else 0

    def peak_memory(self) -> int | None:
        """The most memory the submission's processes held together, beyond what the server held
        before it began, as the kernel counted it in the cgroup (None without one).  The kernel's
        count, read from outside the sandbox: nothing the submission prints."""
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
            raise SlotError(f"{self.name}: the scratch folder could not be emptied")
