"""What grading a student came to (``Result``), and what a run keeps of it for the next one: the
submitted folder's hash and the report's figures (``GradingState``, ``submission_hash``)."""
from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Result:
    student: str
    score: float = 0.0
    max_score: float = 0.0
    flags: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    graded: bool = True     # False: the submission could not be graded at all
    peak_memory: int | None = None   # the most any of its notebooks' processes held together (bytes)
    auto_score: float = 0.0          # ``score`` is the gradebook's total: manual grades where given
    seconds: float = 0.0             # time its notebooks ran in a slot
    timeouts: int = 0                # cells stopped at the cell limit, notebooks at theirs
    failed: bool = False    # True: grading went wrong on the grader's side (the run failed for it);
                            # a broken notebook is graded=False, failed=False: the student's problem
    hash: str = ""                   # the submitted folder's content hash (``submission_hash``)
    slot_left: int | None = None     # bytes its slot held over its first clean state once it
                                     # was cleared (the most of its notebooks; None: no cgroup)



def submission_hash(folder: Path, big: int = 256 << 20) -> str:
    """A hash of everything in a submitted folder: names, kinds, link targets and contents (files
    over ``big`` bytes by size and modification time).  Links are never followed, nothing but a
    regular file is opened (a FIFO would block), and the walk keeps its own stack (a tree deeper
    than Python's recursion limit is hashed like any other)."""
    h = hashlib.sha256()
    stack = [Path(folder)]
    while stack:
        current = stack.pop()
        try:
            names = sorted(os.listdir(current))
        except OSError as exc:
            h.update(f"unlistable {exc.errno}".encode())
            continue
        for name in reversed(names):      # children pushed so they pop in name order
            path = current / name
            rel = os.fsencode(str(path.relative_to(folder)))
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                h.update(b"D\0" + rel + b"\0")
                stack.append(path)
            elif stat.S_ISLNK(st.st_mode):
                try:
                    h.update(b"L\0" + rel + b"\0" + os.fsencode(os.readlink(path)) + b"\0")
                except OSError:
                    h.update(b"L\0" + rel + b"\0")
            elif stat.S_ISREG(st.st_mode):
                h.update(b"F\0" + rel + b"\0" + str(st.st_size).encode() + b"\0")
                if st.st_size > big:
                    h.update(str(st.st_mtime_ns).encode())
                    continue
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                except OSError as exc:
                    h.update(f"unreadable {exc.errno}".encode())
                    continue
                with os.fdopen(fd, "rb", buffering=0) as f:
                    if stat.S_ISREG(os.fstat(fd).st_mode):
                        while chunk := f.read(1 << 20):
                            h.update(chunk)
            else:
                h.update(b"O\0" + rel + b"\0")
    return h.hexdigest()



class GradingState:
    """What the last complete grading of each student found, in a small JSON file in the course
    (``<report_directory>/<assignment>/grading-state.json``): the submitted folder's hash, the
    tests it was graded with (``Grader.tests_key``), and the flags, problems, timeouts and time
    the report shows for students not graded again.

    It lives beside the report, not in the gradebook, because nbgrader's schema has no place
    for it (and a PostgreSQL gradebook is shared by checkouts that each have their own
    ``autograded/``).  A student counts as unchanged only when the hash matches *and* the
    gradebook and ``autograded/`` still hold the results, so a lost file or a new gradebook
    means grading again, never a skipped student.  Concurrent runs merge under a file lock."""

    VERSION = 1

    def __init__(self, path: Path):
        self.path = path

    def _data(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) and data.get("version") == self.VERSION else {}

    def read(self) -> dict[str, dict]:
        students = self._data().get("students")
        return students if isinstance(students, dict) else {}

    def owed(self) -> list[str]:
        """Students a run set out to grade whatever their state (``--force``, ``--student``) and
        did not finish: interrupted, they are graded again by the next run, changed or not."""
        owed = self._data().get("owed")
        return [s for s in owed if isinstance(s, str)] if isinstance(owed, list) else []

    def runs(self) -> list[dict]:
        """The runs that graded something, oldest first (see ``add_run``)."""
        runs = self._data().get("runs")
        return [r for r in runs if isinstance(r, dict)] if isinstance(runs, list) else []

    def owe(self, students: list[str]) -> None:
        """Note students about to be graded whatever their state, until ``update`` has them."""
        self._change(lambda data: data.__setitem__("owed", sorted(set(self.owed()) | set(students))))

    def add_run(self, run: dict, keep: int = 50) -> None:
        """Keep a run's figures (when, wall time, counts, this run's mean) for the report's history."""
        self._change(lambda data: data.__setitem__("runs", (self.runs() + [run])[-keep:]))

    def update(self, entries: dict[str, dict]) -> None:
        if not entries:
            return

        def change(data: dict) -> None:
            students = data.setdefault("students", {})
            students.update(entries)
            data["owed"] = [s for s in self.owed() if s not in entries]

        self._change(change)

    def _change(self, change) -> None:
        """Read, change and write the file under its lock (concurrent runs merge)."""
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self._data()
            data.setdefault("students", {})
            change(data)
            data["version"] = self.VERSION
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
            os.replace(tmp, self.path)


def surely_graded(hashes: dict[str, str], state: dict, named: list[str], results_kept) -> int:
    """How many of the students (``hashes``: student -> their folder's hash) a run that grades only
    changed submissions grades whatever the tests are: those named, those new or changed since
    their last grading in ``state``, and those whose results are gone (``results_kept(student)``
    false).  Changed tests may add others, never remove these."""
    return sum(1 for s, h in hashes.items()
               if s in named or not h or not isinstance(state.get(s), dict) or state[s].get("hash") != h
               or not results_kept(s))
