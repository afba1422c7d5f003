"""The namespace judged cells run in: what a test may use besides the learner's functions (the
judge never runs a cell of the notebook, its setup cell included, only the gradebook's source of the
test itself), with ``ck`` reading the kernel's facts, a ``tempfile`` whose folders the judge knows, a
``torch`` whose ``load`` reads weights only, and the course's fixtures importable by name, also
where a cell imports them itself; and the output of each judged cell, kept apart per thread."""
from __future__ import annotations

import builtins
import contextlib
import io
import os
import sys
import tempfile
import threading

import torch

from .facts import Checks
from .files import TORCH, Tempfile

PRELUDE = """\
import copy, math, tempfile
import numpy as np
import torch
from torch import nn
import torch.nn.functional as F
from autograder.kernel import checks as ck
from autograder.kernel.fixtures import Recorder
"""
_PRELUDE_CODE = compile(PRELUDE, "<judge prelude>", "exec")
compile_lock = threading.Lock()     # CPython 3.11's compiler is not safe from two threads at once


class RemoteFunction:
    """A learner's function, called in the kernel."""

    def __init__(self, judge, name: str):
        self.judge, self.__name__ = judge, name

    def __call__(self, *args, **kwargs):
        return self.judge.call(self.__name__, args, kwargs)

    def __repr__(self) -> str:
        return f"<the learner's {self.__name__}, in the kernel>"


def make_namespace(session) -> dict:
    """A fresh namespace for one notebook's judged cells."""
    proxies = {"torch": TORCH, "tempfile": Tempfile(session.files)}
    fixtures = dict(session.fixtures)

    def judged_import(name, globals=None, locals=None, fromlist=(), level=0):
        """``__import__`` for judged cells: the fixtures given, and the torch and tempfile of judged tests."""
        if level == 0 and name.partition(".")[0] in fixtures:
            # a course's fixtures: the judge's own module object, never sys.modules
            if name not in fixtures:
                raise ImportError(f"no module named {name!r} among the course's fixtures")
            return fixtures[name]
        module = builtins.__import__(name, globals, locals, fromlist, level)
        if level == 0 and module is torch:
            return proxies["torch"]
        if level == 0 and module is tempfile:
            return proxies["tempfile"]
        return module

    namespace = {"__name__": "__judge__", "__builtins__": {**vars(builtins), "__import__": judged_import}}
    exec(_PRELUDE_CODE, namespace)
    namespace["ck"] = Checks(session.facts)
    namespace.update(proxies, os=os)
    return namespace


class _PerThreadStdout(io.TextIOBase):
    """``sys.stdout`` that writes where the current thread asks (a judged cell's output), else where
    it wrote before: judges of two notebooks run side by side in one process."""

    def __init__(self, real):
        self.real = real
        self.local = threading.local()

    def _target(self):
        return getattr(self.local, "target", None) or self.real

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def writable(self) -> bool:
        return True

    def __getattr__(self, name: str):
        return getattr(self.real, name)


_install_lock = threading.Lock()


@contextlib.contextmanager
def printing_to(out: io.StringIO):
    """What this thread prints goes to ``out`` meanwhile."""
    with _install_lock:
        if not isinstance(sys.stdout, _PerThreadStdout):
            sys.stdout = _PerThreadStdout(sys.stdout)
        proxy = sys.stdout
    before = getattr(proxy.local, "target", None)
    proxy.local.target = out
    try:
        yield
    finally:
        proxy.local.target = before
