"""Limits summed over a slot's processes: a memory and a pids cgroup per slot.

``setrlimit`` limits each process alone: six forked children under a 4 GiB address-space limit
hold 24 GiB between them.  A cgroup counts every process of the slot together, and the pages
of its RAM-backed ``/tmp`` with them.  A slot grades one submission at a time, so the slot's
cgroup is the submission's: before each submission the memory limit is set to what the fork
server holds plus the submission's allowance, and the process limit to the submission's.

Both cgroup versions are supported, where the grader may create groups (as root, typically):

- v1: a group in the ``memory`` and one in the ``pids`` hierarchy, under the grader's own;
- v2: a group under the grader's own in the unified hierarchy, with ``memory`` and ``pids``
  enabled in its parent's ``cgroup.subtree_control``.  cgroup v2 forbids processes in a group
  whose controllers are enabled for its children ("no internal processes"), and the grader's own
  group holds the grader: so, as a service under systemd's ``Delegate=yes`` does, the grader first
  moves every process of its group into a leaf (``LEAF``), then enables the controllers; the
  slots' groups are the leaf's siblings.

Where neither can be made, :func:`available` says why and the grader falls back to per-process
limits (and says so).
"""
from __future__ import annotations

import os
import uuid
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _own_path(controller: str | None) -> str | None:
    """The grader's own cgroup in the hierarchy of ``controller`` (None: the unified one)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller is None and controllers == "" and line.startswith("0:"):
            return path
        if controller is not None and controller in controllers.split(","):
            return path
    return None


def _unified_mount() -> Path | None:
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields = line.split(" - ")
            if len(fields) == 2 and fields[1].split()[0] == "cgroup2":
                return Path(fields[0].split()[4])
    except OSError:
        pass
    return None


def _v1_parents() -> list[Path] | None:
    parents = []
    for controller in ("memory", "pids"):
        mount, own = CGROUP_ROOT / controller, _own_path(controller)
        if own is None or not (mount / "cgroup.procs").exists():
            return None
        parent = mount / own.lstrip("/")
        if not os.access(parent, os.W_OK):
            return None
        parents.append(parent)
    return parents


LEAF = "copy-that-grader"
WANTED = {"memory", "pids"}
_v2_note = ""


def _move(pid: str, leaf: Path) -> None:
    """Move one process into ``leaf`` (one pid per write, as the kernel takes them)."""
    fd = os.open(leaf / "cgroup.procs", os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, pid.encode())
    finally:
        os.close(fd)


def delegate(parent: Path) -> str:
    """Make ``parent`` (a delegated cgroup v2 group) able to hold the slots' groups: its processes
    moved into the leaf ``LEAF``, then ``memory`` and ``pids`` enabled for its children.  What was
    done, in words; OSError where it cannot be (not delegated, controllers missing)."""
    enabled = set((parent / "cgroup.subtree_control").read_text().split())
    if WANTED <= enabled:
        return "controllers already enabled"
    offered = set((parent / "cgroup.controllers").read_text().split())
    if not WANTED <= offered:
        raise OSError(f"the controllers {', '.join(sorted(WANTED - offered))} are not delegated to {parent}")
    moved = 0
    pids = (parent / "cgroup.procs").read_text().split()
    if pids:
        leaf = parent / LEAF
        leaf.mkdir(exist_ok=True)
        for pid in pids:
            try:
                _move(pid, leaf)
                moved += 1
            except ProcessLookupError:
                pass                        # ended meanwhile
    (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in sorted(WANTED)))
    return f"{moved} process(es) moved into {LEAF}/, memory and pids enabled" if moved else \
        "memory and pids enabled"


def _v2_parent(mount: Path | None = None, own: str | None = None) -> Path | None:
    """The grader's delegated cgroup v2 group, ready for the slots' groups, or None."""
    global _v2_note
    mount = mount if mount is not None else _unified_mount()
    own = own if own is not None else _own_path(None)
    if mount is None or own is None:
        return None
    parent = mount / own.lstrip("/")
    if own.rstrip("/").endswith("/" + LEAF):
        parent = parent.parent          # already moved into the leaf by an earlier call
    if not os.access(parent, os.W_OK):
        return None
    try:
        _v2_note = delegate(parent)
    except OSError as exc:
        _v2_note = f"not usable: {exc}"
        return None
    return parent


def available() -> tuple[str | None, str]:
    """('v1' | 'v2' | None, a sentence saying what is in force)."""
    parent = _v2_parent()
    if parent is not None:
        return "v2", (f"cgroup v2 (delegated {parent}: {_v2_note}): memory and processes are limited per "
                      "submission, summed over its processes")
    if _v1_parents() is not None:
        return "v1", "cgroup v1: memory and processes are limited per submission, summed over its processes"
    why_v2 = f" (cgroup v2 {_v2_note})" if _v2_note.startswith("not usable") else ""
    return None, (f"no cgroup the grader may create (cgroup v1 memory+pids or a delegated cgroup v2){why_v2}: "
                  "limits apply per process only")


class SlotCgroup:
    """A slot's cgroup: join it, set its limits, read what it used, remove it."""

    def __init__(self, name: str):
        self.version, _ = available()
        if self.version is None:
            raise OSError("no cgroup can be created")
        unique = f"copy-that-{name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        parents = [_v2_parent()] if self.version == "v2" else _v1_parents()
        self.dirs = [parent / unique for parent in parents]
        for d in self.dirs:
            d.mkdir()
        if self.version == "v1":
            # the tmpfs and the kernel's memory counted with the rest; no swap to escape to
            _write(self.dirs[0] / "memory.swappiness", "0", missing_ok=True)
        self._peak_fd: int | None = None

    @property
    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def join_command(self, argv: list[str]) -> list[str]:
        """``argv`` started inside the group: a shell writes its own pid, then becomes ``argv``."""
        script = "for f in " + " ".join(f"'{p}'" for p in self.procs_files) + \
            '; do echo $$ > "$f" || exit 97; done; exec "$@"'
        return ["/bin/sh", "-c", script, "sh", *argv]

    def _memory(self) -> Path:
        return self.dirs[0]

    def _pids(self) -> Path:
        return self.dirs[-1]

    def usage(self) -> int:
        name = "memory.current" if self.version == "v2" else "memory.usage_in_bytes"
        return int(_read(self._memory() / name) or 0)

    def resident(self) -> int:
        """Anonymous and shared memory the group holds (its page cache left out: reclaimable, and
        grown by any kernel that reads torch's files): what a leftover object keeps."""
        keys = ("anon", "shmem") if self.version == "v2" else ("rss", "shmem")
        total = 0
        for line in (_read(self._memory() / "memory.stat") or "").splitlines():
            key, _, value = line.partition(" ")
            if key in keys and value.strip().isdigit():
                total += int(value)
        return total

    def set_limits(self, memory_bytes: int | None, processes: int | None) -> None:
        if memory_bytes:
            name = "memory.max" if self.version == "v2" else "memory.limit_in_bytes"
            _write(self._memory() / name, str(int(memory_bytes)))
            if self.version == "v2":
                _write(self._memory() / "memory.swap.max", "0", missing_ok=True)
        if processes:
            _write(self._pids() / "pids.max", str(int(processes)))

    def reset_peak(self) -> bool:
        """Start counting the group's peak memory use afresh; False where the kernel cannot (a
        cgroup v2 ``memory.peak`` is resettable from Linux 6.12, and only for the open file)."""
        if self.version == "v1":
            try:
                (self._memory() / "memory.max_usage_in_bytes").write_text("0")
                return True
            except OSError:
                return False
        if self._peak_fd is None:
            try:
                self._peak_fd = os.open(self._memory() / "memory.peak", os.O_RDWR)
            except OSError:
                return False
        try:
            os.write(self._peak_fd, b"reset")
            return True
        except OSError:
            return False

    def peak(self) -> int | None:
        """The most memory the group's processes held together since :meth:`reset_peak`, as the
        kernel counted it (None where it was not reset)."""
        if self.version == "v1":
            value = _read(self._memory() / "memory.max_usage_in_bytes")
            return int(value) if value else None
        if self._peak_fd is None:
            return None
        try:
            return int(os.pread(self._peak_fd, 64, 0).decode().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def oom_kills(self) -> int:
        if self.version == "v2":
            text = _read(self._memory() / "memory.events") or ""
        else:
            text = _read(self._memory() / "memory.oom_control") or ""
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def remove(self) -> None:
        """Kill what is left in the group, then remove it (a group with tasks cannot be removed:
        the sandbox's processes die a moment after its launcher)."""
        import signal
        import time

        if self._peak_fd is not None:
            os.close(self._peak_fd)
            self._peak_fd = None
        for d in self.dirs:
            for _ in range(100):
                for pid in (_read(d / "cgroup.procs") or "").split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (ProcessLookupError, ValueError, PermissionError):
                        pass
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _write(path: Path, value: str, missing_ok: bool = False) -> None:
    try:
        path.write_text(value)
    except FileNotFoundError:
        if not missing_ok:
            raise
