"""Files that cross the sandbox's edge, read as hostile data.

What a submission brings (its folder under ``submitted/``) goes into a slot's scratch folder;
what the kernel leaves there comes back to ``autograded/``, as nbgrader's own autograde keeps
what a notebook writes beside itself.  Either way: no link is followed, only regular files are
taken, and each file, the file count and the total are capped.
"""
from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

MAX_FILE_BYTES = 20 << 20     # one file a submission brings besides its notebooks
MAX_TOTAL_BYTES = 64 << 20    # all of them together
MAX_FILES = 200

def submission_files(folder: Path, problems: list[str] | None = None) -> dict[str, bytes]:
    """The regular files under ``folder`` but notebooks, as relative path -> bytes.

    The folder is hostile data: no link is followed (a link, device or pipe is left out), and the
    files are capped one by one, in number and in total bytes (counted at their full length, so
    a sparse file counts as what it would become).  What was left out is said in ``problems``.
    """
    problems = problems if problems is not None else []
    files: dict[str, bytes] = {}
    total = 0

    def skip(text: str) -> None:
        if text not in problems:
            problems.append(text)

    def walk(directory: Path, rel: str, depth: int) -> None:
        nonlocal total
        if depth > 16:
            skip(f"{rel}: folders nested too deep; left out")
            return
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            skip(f"{rel or '.'}: cannot be listed ({exc.strerror}); left out")
            return
        for entry in entries:
            name = f"{rel}/{entry.name}" if rel else entry.name
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                walk(Path(entry.path), name, depth + 1)
            elif not stat.S_ISREG(info.st_mode):
                skip(f"{name}: not a regular file (a link, device or pipe); left out")
            elif entry.name.endswith(".ipynb"):
                continue
            elif info.st_size > MAX_FILE_BYTES:
                skip(f"{name}: {info.st_size} bytes, over the {MAX_FILE_BYTES} bytes a file may have; left out")
            elif len(files) >= MAX_FILES:
                skip(f"more than {MAX_FILES} files besides the notebooks; the rest left out")
            elif total + info.st_size > MAX_TOTAL_BYTES:
                skip(f"{name}: the files besides the notebooks pass {MAX_TOTAL_BYTES} bytes in all; left out")
            else:
                try:
                    fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW)
                except OSError as exc:
                    skip(f"{name}: cannot be read ({exc.strerror}); left out")
                    continue
                with os.fdopen(fd, "rb") as f:
                    data = f.read(MAX_FILE_BYTES + 1)
                if len(data) > MAX_FILE_BYTES:   # grew since it was listed
                    skip(f"{name}: over the {MAX_FILE_BYTES} bytes a file may have; left out")
                    continue
                files[name] = data
                total += len(data)

    walk(Path(folder), "", 0)
    return files


def remove_trees(*paths: Path) -> None:
    """Delete files and folders whatever their depth, never following a link (``shutil.rmtree``
    recurses in Python and fails on a tree deeper than the recursion limit)."""
    if paths:
        subprocess.run(["rm", "-rf", "--one-file-system", "--", *map(str, paths)], capture_output=True)


def kernel_output_files(folder: Path, given: dict[str, bytes], problems: list[str]) -> dict[str, bytes]:
    """What the kernel wrote in its scratch folder: new or changed regular files, not notebooks."""
    written = submission_files(folder, problems)
    # hidden files and folders stay behind: the kernel's configuration, its connection file and
    # what libraries keep in HOME (.cache, .config), which is the scratch folder in a slot; and
    # timestamp.txt, which is the grader's (from submitted/, or written for a hand-copied one)
    return {rel: data for rel, data in written.items()
            if given.get(rel) != data and not rel.startswith(".") and rel != "timestamp.txt"}


def write_files(folder: Path, files: dict[str, bytes]) -> None:
    """Put what the kernel wrote beside the graded notebook, as nbgrader's autograde leaves it."""
    for rel, data in files.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_symlink():
            target.write_bytes(data)
