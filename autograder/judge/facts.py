"""What the kernel measured about the tensors of its answers, and the check helpers that read it.

A result's history (``grad_fn``, leaf, ``_version``) is the kernel's, not that of the tensor the
judge rebuilt: the judged namespace's ``ck`` is :class:`Checks`, the course's helpers with those
facts read where a check asks about history, so a check says what it would say in the kernel.
"""
from __future__ import annotations

import types
import weakref

import torch

from ..kernel import checks
from .wire import JudgeError

# checks.check_grad_fn's default hint when the result should be outside every graph (a test holds
# the two messages equal)
GRAD_FN_NONE_HINT = ("M-clone-leaves-graph: the result was computed with gradient tracking on; use `detach()` or "
                     "`torch.no_grad()`.")


class Facts:
    """What the kernel measured about a result, for the checks that ask about history."""

    def __init__(self, grad_fn: str | None, leaf: bool, requires_grad: bool, version: int, here: int):
        self.grad_fn, self.leaf, self.requires_grad = grad_fn, leaf, requires_grad
        self.version, self.here = version, here


class ById:
    """Something per object, by identity (a tensor's ``==`` compares values), forgotten with it."""

    def __init__(self):
        self._by_id: dict[int, tuple[weakref.ref, object]] = {}

    def get(self, obj):
        entry = self._by_id.get(id(obj))
        return entry[1] if entry is not None and entry[0]() is obj else None

    def __setitem__(self, obj, value) -> None:
        key = id(obj)
        self._by_id[key] = (weakref.ref(obj, lambda _, key=key: self._by_id.pop(key, None)), value)


class Checks(types.ModuleType):
    """The course's check helpers, where a result's history is the kernel's, not the rebuilt one's."""

    def __init__(self, facts: ById):
        super().__init__("autograder.kernel.checks")
        self._facts = facts

    def __getattr__(self, name: str):
        return getattr(checks, name)

    def _of(self, t) -> Facts | None:
        return self._facts.get(t) if isinstance(t, torch.Tensor) else None

    def version(self, t):
        """``checks.version``, in the kernel's numbers for a tensor of an answer."""
        f = self._of(t)
        return checks.version(t) if f is None else f.version + (t._version - f.here)

    def _with_kernel_version(self, check, t, before, what, hint):
        """A version check on a tensor whose history is the kernel's: run on a stand-in whose counter
        reads what the kernel's would, so the check and its message are the in-kernel ones."""
        __tracebackhide__ = True
        if self._of(t) is None:
            return check(t, before, what, hint)
        now = self.version(t)
        if not 0 <= now <= 10_000:
            raise JudgeError("the kernel's version counter is out of range")
        stand_in = torch.empty(0)
        with torch.no_grad():
            for _ in range(now - stand_in._version):
                stand_in.add_(0)
        return check(stand_in, before, what, hint)

    def check_version_unchanged(self, t, before, what="the input", hint=None):
        """``checks.check_version_unchanged``, in the kernel's numbers."""
        __tracebackhide__ = True
        return self._with_kernel_version(checks.check_version_unchanged, t, before, what, hint)

    def check_version_bumped(self, t, before, what="the tensor", hint=None):
        """``checks.check_version_bumped``, in the kernel's numbers."""
        __tracebackhide__ = True
        return self._with_kernel_version(checks.check_version_bumped, t, before, what, hint)

    def check_grad_fn(self, t, expected, what="the result", hint=None):
        """``checks.check_grad_fn``, on the kernel's ``grad_fn`` name."""
        __tracebackhide__ = True
        f = self._of(t)
        if f is None:
            return checks.check_grad_fn(t, expected, what, hint)
        checks.check_tensor(t, what, allow_parameter=True)
        if f.grad_fn != expected:      # the same message, default hint included, as checks.check_grad_fn
            if expected is None:
                checks._fail(f"{what}.grad_fn is {f.grad_fn}", "None (outside every graph)", hint or GRAD_FN_NONE_HINT)
            checks._fail(f"{what}.grad_fn is {f.grad_fn}", f"{expected}", hint)

    def check_leaf(self, t, expected, what="the result", hint=None):
        """``checks.check_leaf``, on the kernel's answer."""
        __tracebackhide__ = True
        f = self._of(t)
        if f is None:
            return checks.check_leaf(t, expected, what, hint)
        checks.check_tensor(t, what, allow_parameter=True)
        if f.leaf is not expected:
            checks._fail(f"{what}.is_leaf is {f.leaf}", f"{expected}", hint)
