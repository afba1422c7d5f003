"""Files on the judge's end: the folders judged tests make (so that a path in one can go to the
kernel by value, kinds/path.py), and ``torch.load`` for judged tests, which reads weights only and
refuses an archive whose entries would expand past the caps before torch reads a byte of it."""
from __future__ import annotations

import io
import os
import shutil
import tempfile
import types
import weakref
import zipfile

import torch

from .allow import MAX_LOAD_BYTES, MAX_LOAD_ENTRIES, MAX_LOAD_RATIO
from .wire import JudgeError


class Files:
    """The folders judged tests make with ``tempfile``: under a root of the judge's own."""

    def __init__(self):
        self._root: str | None = None
        self.folders: set[str] = set()

    def root(self) -> str:
        if self._root is None:
            self._root = tempfile.mkdtemp(prefix="judge-")
            weakref.finalize(self, shutil.rmtree, self._root, True)
        return self._root

    def folder_of(self, path: str):
        """(folder, name) when ``path`` names an entry directly in one of the folders; else None."""
        if not self.folders or "\x00" in path:
            return None
        folder, name = os.path.split(os.path.abspath(path))
        if folder not in self.folders or name in ("", ".", "..") or not os.path.isdir(folder) \
                or os.path.islink(folder):
            return None
        return folder, name


class Tempfile(types.ModuleType):
    """``tempfile`` for judged tests: its folders are made under the judge's root, and known."""

    def __init__(self, files: Files):
        super().__init__("tempfile")
        self._files = files

    def __getattr__(self, name: str):
        return getattr(tempfile, name)

    def TemporaryDirectory(self, suffix=None, prefix=None, dir=None, ignore_cleanup_errors=False, **kwargs):  # noqa: N802
        made = tempfile.TemporaryDirectory(suffix, prefix, self._files.root(), ignore_cleanup_errors, **kwargs)
        self._files.folders.add(os.path.abspath(made.name))
        return made

    def mkdtemp(self, suffix=None, prefix=None, dir=None):
        made = tempfile.mkdtemp(suffix, prefix, self._files.root())
        self._files.folders.add(os.path.abspath(made))
        return made


def check_archive(f) -> None:
    """Refuse what ``torch.load`` should not read: anything but a zip archive (torch.save's format),
    more than MAX_LOAD_ENTRIES entries, entries that declare more than MAX_LOAD_BYTES together, or one
    compressed more than MAX_LOAD_RATIO to one.  ``f`` is a path or a seekable file, left where it was."""
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as opened:
            return check_archive(opened)
    if isinstance(f, (bytes, bytearray)):
        f = io.BytesIO(f)
    try:
        start = f.tell()
    except (AttributeError, OSError, ValueError):
        raise JudgeError("the judge loads from a path or a seekable file only") from None
    try:
        try:
            archive = zipfile.ZipFile(f)
        except zipfile.BadZipFile:
            raise JudgeError("the file is not an archive torch.save writes (a zip archive): not loaded") from None
        with archive:
            size = f.seek(0, io.SEEK_END) - start
            entries = archive.infolist()
            if len(entries) > MAX_LOAD_ENTRIES:
                raise JudgeError(f"the archive holds {len(entries)} entries, over the {MAX_LOAD_ENTRIES} the judge reads")
            total = 0
            for entry in entries:
                total += entry.file_size
                stored_wrong = entry.compress_type == zipfile.ZIP_STORED and entry.file_size != entry.compress_size
                if stored_wrong or entry.file_size > MAX_LOAD_RATIO * max(entry.compress_size, 1):
                    raise JudgeError(f"the archive's entry {entry.filename[:80]!r} declares {entry.file_size} bytes "
                                     f"from {entry.compress_size}: not loaded")
            if total > MAX_LOAD_BYTES or total > MAX_LOAD_RATIO * size:
                raise JudgeError(f"the archive's entries declare {total} bytes, over the {MAX_LOAD_BYTES} the judge "
                                 "reads: not loaded")
    finally:
        f.seek(start)


def load_weights_only(f, map_location=None, *args, **kwargs):
    """``torch.load`` that checks the archive first and reads tensors and plain containers only,
    whatever the test passes: no pickle of the kernel's can run code in the judge (and
    ``weights_only=True`` given explicitly is what ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` cannot turn off)."""
    check_archive(f)
    return torch.load(f, map_location=map_location, weights_only=True)


class Torch(types.ModuleType):
    """``torch`` for judged tests: everything torch's, but ``load`` checks and reads weights only."""

    load = staticmethod(load_weights_only)

    def __init__(self):
        super().__init__("torch")

    def __getattr__(self, name: str):
        return getattr(torch, name)


TORCH = Torch()
