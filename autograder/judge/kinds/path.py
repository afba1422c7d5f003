"""Paths in a folder of the test's: a str naming an entry directly in a folder the test made with
``tempfile`` (the judged namespace's ``tempfile`` makes them under a root of the judge's and knows
them, files.py) goes as a path in a fresh folder of the kernel's, holding the same regular files;
the folder's name never leaves.  After the call the regular files found there come back by value
(no link followed, one plain name each, capped in count and bytes; past the bytes a file comes back
as a sparse file of its reported size), and the kernel's folder is removed.
"""
from __future__ import annotations

import os
import shutil
import stat
import tempfile

from ..allow import MAX_FILE_BYTES, MAX_FILE_SIZE, MAX_FILES
from ..data import b64_bytes, unb64, unb64_trusted
from ..wire import JudgeError
from .base import Kind

_os_open, _os_read, _os_close, _fstat, _listdir = os.open, os.read, os.close, os.fstat, os.listdir
_join, _mkdtemp, _rmtree, _S_ISREG = os.path.join, tempfile.mkdtemp, shutil.rmtree, stat.S_ISREG
_type, _len, _sorted, _open = type, len, sorted, open


def plain_name(name) -> bool:
    """A file name of one plain component."""
    return (_type(name) is str and 0 < _len(name) <= 255 and name not in (".", "..") and "/" not in name
            and "\\" not in name and "\x00" not in name)


class Paths(Kind):
    """Paths in a folder of the test's, as folders of the kernel's."""
    name = "path"
    codes = ("path",)
    types = (str,)
    reply_sections = ("folders",)

    def judge_state(self):
        return []            # the test's folders sent, by number

    def agent_state(self):
        return {}            # by the judge's number: a fresh folder of the kernel's

    # -- the judge's end --------------------------------------------------------------------
    def send(self, call, value, depth):
        found = call.session.files.folder_of(value)
        if found is None:
            return None
        folder, name = found
        folders = call.state(self)
        if folder in folders:
            return {"k": "path", "p": folders.index(folder), "name": name}
        sent, total = [], 0
        for entry in sorted(os.listdir(folder)):
            st = os.lstat(os.path.join(folder, entry))
            if not stat.S_ISREG(st.st_mode):
                continue
            with open(os.open(os.path.join(folder, entry), os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
            total += len(data)
            if len(sent) >= MAX_FILES or total > MAX_FILE_BYTES:
                raise JudgeError(f"the judge sends a folder of at most {MAX_FILES} files and {MAX_FILE_BYTES >> 20} MiB")
            sent.append({"name": entry, "data": b64_bytes(data)})
        call.budget.crossing(total)
        folders.append(folder)
        return {"k": "path", "p": len(folders) - 1, "name": name, "files": sent}

    def effects(self, call, reply):
        folders, listed = call.state(self), reply.get("folders", [])
        if not isinstance(listed, list) or len(listed) not in (0, len(folders)):
            raise JudgeError("the kernel's answer about the folders does not match the call")
        for folder, entries in zip(folders, listed):
            _write_folder(folder, entries)

    # -- the agent's end --------------------------------------------------------------------
    def receive(self, call, v):
        folders = call.state(self)
        p = v["p"]
        if p not in folders:
            folder = folders[p] = _mkdtemp(prefix="judged-")
            for entry in v.get("files", []):
                if not plain_name(entry["name"]):
                    raise ValueError("a file name that is not one plain component")
                fd = _os_open(_join(folder, entry["name"]), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with _open(fd, "wb") as f:
                    f.write(unb64_trusted(entry["data"]))
        if not plain_name(v["name"]):
            raise ValueError("a file name that is not one plain component")
        return _join(folders[p], v["name"])

    def report(self, call, returned):
        folders = call.state(self)
        listed = []
        for p in _sorted(folders):
            listed.append(_files_of(folders[p]))
            _rmtree(folders[p], ignore_errors=True)
        return {"folders": listed}


def _files_of(folder: str) -> list[dict]:
    """The regular files directly in ``folder`` (links are not followed), by value up to the caps."""
    try:
        names = _sorted(_listdir(folder))
    except OSError:
        return []
    out, budget = [], MAX_FILE_BYTES
    for name in names:
        if _len(out) >= MAX_FILES:
            break
        try:
            fd = _os_open(_join(folder, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:        # a symbolic link, or gone
            continue
        try:
            st = _fstat(fd)
            if not _S_ISREG(st.st_mode):
                continue
            entry = {"name": name, "size": st.st_size, "data": None}
            if st.st_size <= budget:
                chunks, left = [], st.st_size
                while left > 0:
                    chunk = _os_read(fd, min(left, 1 << 20))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    left -= _len(chunk)
                data = b"".join(chunks)
                entry["size"] = _len(data)
                entry["data"] = b64_bytes(data)
                budget -= _len(data)
            out.append(entry)
        except OSError:
            continue
        finally:
            _os_close(fd)
    return out


def _write_folder(folder: str, entries) -> None:
    """The folder's regular files become the kernel's: each named once, one plain component, its bytes
    (or, past the caps, a file of the size reported)."""
    if not isinstance(entries, list) or len(entries) > MAX_FILES:
        raise JudgeError("the kernel's answer about a folder is malformed")
    files, total = {}, 0
    for entry in entries:
        if not isinstance(entry, dict):
            raise JudgeError("the kernel's answer about a file is malformed")
        name, size, data = entry.get("name"), entry.get("size"), entry.get("data")
        if not plain_name(name) or name in files:
            raise JudgeError("the kernel's answer names a file that is not one plain component")
        if type(size) is not int or not 0 <= size <= MAX_FILE_SIZE:
            raise JudgeError("the kernel's answer gives a file a size out of range")
        if data is not None:
            if size > MAX_FILE_BYTES:
                raise JudgeError("the kernel's file is too big")
            data = bytes(unb64(data, count=size).numpy())
            total += size
        if total > MAX_FILE_BYTES:
            raise JudgeError("the kernel's files are over the cap")
        files[name] = (size, data)
    for name in os.listdir(folder):           # removed there: removed here
        path = os.path.join(folder, name)
        if name not in files and stat.S_ISREG(os.lstat(path).st_mode):
            os.unlink(path)
    for name, (size, data) in files.items():
        try:
            fd = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise JudgeError(f"the judge cannot write the kernel's file: {exc}") from None
        with open(fd, "wb") as f:
            if data is None:
                f.truncate(size)     # sparse: the size is the kernel's, the bytes never came
            else:
                f.write(data)
