"""Hidden tests judged outside the learner's kernel.

Every test cell is judged unless it is a visible test that opts out (``judged.py``): it is never
sent to the kernel at grading, so that reading the caller earns no point anywhere.  Its source is
the gradebook's, never the submission's.  The grader
runs its code here, in its own process, with real torch and the course's check helpers; every name the test uses that it does not define (the learner's
functions) is a :class:`RemoteFunction`.  Calling one sends the arguments *by value* to the
kernel's agent (``autograder.kernel.judge_agent``), which rebuilds them with their sharing,
calls the learner's function, and answers by value.  The answer is rebuilt here:

- a result that is one of the inputs is that input;
- a result in an input's storage is a view of the judge's own input, so writes through it and
  ``check_new_storage`` behave as they would in one process;
- a result in new memory is a new tensor; when it requires grad it is the output of
  :class:`_RemoteCall`, an autograd function whose backward asks the kernel for the
  vector-Jacobian product, so ``backward()`` here reaches through the learner's function;
- bytes the call wrote into an input, bumps of its version counter and gradients it
  accumulated are applied to the judge's inputs.

Besides tensors (a Parameter goes as the leaf of its storage; a leaf that views its storage is a
leaf there too), the arguments may hold lists and dicts (by identity: what the call leaves in
them comes back), generators (one-pass iterators there), the loss functions of ``FUNCTIONS`` (by
name) and models of ``MODULES`` (torch.nn layers and the test models of
``autograder.kernel.fixtures``, which both sides import): a model goes as its class name,
plain attributes, parameters, buffers, submodules and the fixtures' forward pre-hooks, and is
rebuilt there without calling a constructor; its training flags and replaced parameters or
buffers come back.  Results may also be NumPy arrays (dtype, shape, strides, read-only flag;
a view of the judge's own input when they lie in an input's memory), modules the call made
(ties kept: a tensor met twice in one answer is one object), and objects the judge cannot
rebuild, held by a handle the kernel resolves when they are sent back.  A built-in exception
the learner's function raised is raised here as itself, with the kernel's message.  The
judged cells of one notebook share a namespace, as kernel cells do.

Graphs (assignment 7) go another way, since autograd nodes cannot leave the process that made
them.  In a judged cell that also holds the line ``# graphs go to your kernel as recipes``, a
``TorchFunctionMode`` (:class:`_Graphs`, active in the judge's thread only) records the test's torch
calls, and each tensor argument goes as its recipe: the tensors it starts from by value, then the
recorded calls that wrote its memory (and what they read), which the agent replays from a fixed
allow-list (``judge_agent.GRAPH_OPS``) into a mirror kept for the notebook.  The learner's function
gets real graphs whose node classes, edges and ``AccumulateGrad.variable`` identities are the
judge's; what it does to the mirror stays there (a graph it freed is freed at the next call), and
the ``.grad`` of the recipe's leaves comes back.  The replay runs on the kernel's torch: a learner
who patches it only changes what their own function sees, the expected values being computed here.
A name the test reads but never calls (``graph_answer``) is fetched by value, or stays undefined.

So the test's code and its expected values never reach the learner's process: an answer that
reads its caller finds the agent, not the test.  The kernel's answers are data (JSON, tensors as
bytes, checked against the dtypes and sizes asked for); a forged answer can still claim facts
the agent measures there (storage identity, ``_version``, ``grad_fn`` names), but a value can
only be right by being computed.

Since assignment 6b, three more kinds of argument go by value.  A NumPy array goes as the memory of
its innermost base (once per call: views of one base stay views of one buffer there) with its
dtype, shape, strides, offset and writeable flag; what the call wrote there comes back, and a
result on that memory (``torch.from_numpy(arr)``, a view) is rebuilt on the judge's own array.  A
str naming an entry directly in a folder the test made with ``tempfile`` (the judged namespace's
``tempfile`` makes its folders under a root of the judge's and knows them) goes as a path in a
fresh folder of the kernel's, with the folder's regular files; afterwards the files found there
come back (no link followed, plain names, capped in count and bytes; past the cap a file comes
back as a sparse file of its reported size).  ``torch.load`` in the judged namespace reads with
``weights_only=True`` whatever the test passes, so no pickle the kernel wrote runs code here.  An
optimizer of ``OPTIMIZERS`` goes as its class name, its ``param_groups`` and ``defaults`` (lists
and dicts by identity) and its state per parameter; a result holding its state tensors holds the
judge's own, and the state entries, groups and defaults the call replaced are replaced here.

Transport: the kernel's own messaging.  Each call is a silent ``execute_request`` whose user
expression calls the agent and evaluates to its answer, which comes back in the ``execute_reply``
(an expression, not cell code: the kernel hashes and transforms cell code in pure Python, seconds
for a request that carries megabytes); what the learner's code prints on the way is collected
from IOPub and counted against the notebook's output budget.
The requests and answers themselves count against a budget of their own
(``jobs.JUDGE_DATA_LIMIT``): storages and files of a megabyte or two are values, not output.
"""
from __future__ import annotations

import ast
import base64
import builtins
import collections
import contextlib
import functools
import io
import itertools
import math
import os
import re
import sys
import threading
import traceback
import types
import weakref
from typing import Any, Callable

import torch

from ..kernel import checks, fixtures
from ..kernel.judge_agent import DTYPES

from .judged import MARKER, is_judged, judged_sources  # noqa: F401  (where the runner finds them)
AGENT = "__copy_that_judge"
MAX_REPLY = 64 << 20
# what a judged test may use besides the learner's functions: the judge never runs a cell of the
# notebook (its setup cell included), only the gradebook's source of the hidden test itself
PRELUDE = """\
import copy, math, tempfile
import numpy as np
import torch
from torch import nn
import torch.nn.functional as F
from autograder.kernel import checks as ck
from autograder.kernel.fixtures import Recorder
"""


class JudgeError(Exception):
    """The judge could not run the test: a bad answer from the kernel, or an input it cannot send."""


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _raw(storage) -> torch.Tensor:
    """A uint8 tensor over ``storage`` with a version counter of its own (writes bump no one)."""
    return torch.empty(0, dtype=torch.uint8).set_(storage)


def _b64(t: torch.Tensor) -> str:
    return base64.b64encode(t.detach().contiguous().numpy().tobytes()).decode()


def _from_b64(text: Any, dtype: torch.dtype, count: int | None = None) -> torch.Tensor:
    if not isinstance(text, str):
        raise JudgeError("the kernel sent something that is not bytes")
    data = base64.b64decode(text, validate=True)
    size = torch.tensor([], dtype=dtype).element_size()
    if len(data) % size or (count is not None and len(data) != count * size):
        raise JudgeError("the kernel sent bytes that do not fit the tensor")
    if not data:
        return torch.empty(0, dtype=dtype)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype)


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
_compile_lock = threading.Lock()
_PRELUDE_CODE = compile(PRELUDE, "<judge prelude>", "exec")


@contextlib.contextmanager
def _printing_to(out: io.StringIO):
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


class _Facts:
    """What the kernel measured about a result, for the checks that ask about history."""

    def __init__(self, grad_fn: str | None, leaf: bool, requires_grad: bool, version: int, here: int):
        self.grad_fn, self.leaf, self.requires_grad = grad_fn, leaf, requires_grad
        self.version, self.here = version, here


class _FactsById:
    """Facts per tensor object, by identity (a tensor's ``==`` compares values)."""

    def __init__(self):
        self._by_id: dict[int, tuple[weakref.ref, _Facts]] = {}

    def get(self, t):
        entry = self._by_id.get(id(t))
        return entry[1] if entry is not None and entry[0]() is t else None

    def __setitem__(self, t, facts: _Facts) -> None:
        key = id(t)
        self._by_id[key] = (weakref.ref(t, lambda _, key=key: self._by_id.pop(key, None)), facts)


# checks.check_grad_fn's default hint when the result should be outside every graph (a test in
# tests/test_judge.py holds the two messages equal)
GRAD_FN_NONE_HINT = ("M-clone-leaves-graph: the result was computed with gradient tracking on; use `detach()` or "
                     "`torch.no_grad()`.")


class _Checks(types.ModuleType):
    """The course's check helpers, where a result's history is the kernel's, not the mirror's."""

    def __init__(self, facts: _FactsById):
        super().__init__("autograder.kernel.checks")
        self._facts = facts

    def __getattr__(self, name: str):
        return getattr(checks, name)

    def version(self, t):
        f = self._facts.get(t) if isinstance(t, torch.Tensor) else None
        return checks.version(t) if f is None else f.version + (t._version - f.here)

    def _with_kernel_version(self, check, t, before, what, hint):
        """A version check on a tensor whose history is the kernel's: run on a stand-in whose counter
        reads what the kernel's would, so the check and its message are the in-kernel ones."""
        __tracebackhide__ = True
        f = self._facts.get(t) if isinstance(t, torch.Tensor) else None
        if f is None:
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
        __tracebackhide__ = True
        return self._with_kernel_version(checks.check_version_unchanged, t, before, what, hint)

    def check_version_bumped(self, t, before, what="the tensor", hint=None):
        __tracebackhide__ = True
        return self._with_kernel_version(checks.check_version_bumped, t, before, what, hint)

    def check_grad_fn(self, t, expected, what="the result", hint=None):
        __tracebackhide__ = True
        f = self._facts.get(t) if isinstance(t, torch.Tensor) else None
        if f is None:
            return checks.check_grad_fn(t, expected, what, hint)
        checks.check_tensor(t, what, allow_parameter=True)
        if f.grad_fn != expected:      # the same message, default hint included, as checks.check_grad_fn
            if expected is None:
                checks._fail(f"{what}.grad_fn is {f.grad_fn}", "None (outside every graph)", hint or GRAD_FN_NONE_HINT)
            checks._fail(f"{what}.grad_fn is {f.grad_fn}", f"{expected}", hint)

    def check_leaf(self, t, expected, what="the result", hint=None):
        __tracebackhide__ = True
        f = self._facts.get(t) if isinstance(t, torch.Tensor) else None
        if f is None:
            return checks.check_leaf(t, expected, what, hint)
        checks.check_tensor(t, what, allow_parameter=True)
        if f.leaf is not expected:
            checks._fail(f"{what}.is_leaf is {f.leaf}", f"{expected}", hint)


class _RemoteCall(torch.autograd.Function):
    """Outputs of one of the learner's calls, in the judge's graph; backward asks the kernel."""

    @staticmethod
    def forward(ctx, judge, call, outputs, count, *inputs):
        # inputs: the call's input tensors, then the leaves it made (their gradients come by the
        # judge's vjp, which accumulates them; autograd gets None for them here)
        ctx.judge, ctx.call, ctx.count, ctx.extra = judge, call, count, len(inputs) - count
        ctx.needs = [t.requires_grad for t in inputs[:count]]
        ctx.shapes = [(t.shape, t.dtype) for t in inputs[:count]]
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *grads):
        found = ctx.judge.vjp(ctx.call, grads, ctx.needs, ctx.shapes)
        return (None, None, None, None, *found, *([None] * ctx.extra))


def _opaque(type_name: str, text: str):
    """An object standing for a result the judge cannot rebuild, named as its type was."""
    module, _, qualname = type_name.rpartition(".")
    cls = type(qualname or type_name, (), {"__repr__": lambda self: text or f"<{type_name}>",
                                           "__eq__": lambda self, other: False, "__hash__": object.__hash__})
    cls.__module__, cls.__qualname__ = module or "builtins", qualname or type_name
    return cls()


class RemoteFunction:
    """A learner's function, called in the kernel."""

    def __init__(self, judge: "Judge", name: str):
        self.judge, self.__name__ = judge, name

    def __call__(self, *args, **kwargs):
        return self.judge.call(self.__name__, args, kwargs)

    def __repr__(self) -> str:
        return f"<the learner's {self.__name__}, in the kernel>"


# modules the judge sends by value: classes of torch.nn whose whole state is their parameters, buffers,
# submodules and plain attributes (rebuilt in the kernel without calling a constructor)
MODULES = {c.__name__: c for c in (
    torch.nn.Sequential, torch.nn.Linear, torch.nn.ReLU, torch.nn.Tanh, torch.nn.Sigmoid, torch.nn.Identity,
    torch.nn.BatchNorm1d, torch.nn.LayerNorm, torch.nn.Dropout, torch.nn.Embedding, *fixtures.MODELS)}
# functions the judge sends by name (a loss function passed to the learner's function)
FUNCTIONS = {f.__name__: f for f in (
    torch.nn.functional.mse_loss, torch.nn.functional.l1_loss, torch.nn.functional.cross_entropy,
    torch.nn.functional.binary_cross_entropy_with_logits, torch.nn.functional.nll_loss)}
# what nn.Module.__init__ makes: never sent (hooks must be empty; the rest is rebuilt)
MODULE_INTERNALS = frozenset(vars(torch.nn.Module()))
_HOOKS = tuple(k for k in MODULE_INTERNALS if "hook" in k)


HOOKS = {c.__name__: c for c in fixtures.HOOKS}


def _fixture_hooks(m: torch.nn.Module) -> list | None:
    """The module's forward pre-hooks when they all are the fixtures' and it has no other hook; else None."""
    if any(getattr(m, h) for h in _HOOKS if h not in ("_is_full_backward_hook", "_forward_pre_hooks")):
        return None
    hooks = list(m._forward_pre_hooks.values())
    if any(HOOKS.get(type(h).__name__) is not type(h) for h in hooks):
        return None
    return hooks


def _plain(v) -> bool:
    """A module attribute the judge may send: None, bool, int, float, str, or a tuple of those."""
    if v is None or type(v) in (bool, int, float, str):
        return True
    return type(v) is tuple and len(v) <= 64 and all(_plain(x) for x in v)


def _course_module(fixtures: dict, cls: type) -> str | None:
    """The name of the course's fixtures module that defines ``cls`` (an ``nn.Module`` class), else None."""
    module = fixtures.get(getattr(cls, "__module__", None))
    if module is not None and getattr(module, cls.__name__, None) is cls and issubclass(cls, torch.nn.Module):
        return cls.__module__
    return None


def _course_class(fixtures: dict, module: Any, name: Any):
    """The ``nn.Module`` class ``name`` of the course's fixtures module ``module``, else None."""
    if not isinstance(module, str) or not isinstance(name, str) or not name.isidentifier():
        return None
    cls = getattr(fixtures.get(module), name, None)
    return cls if isinstance(cls, type) and _course_module(fixtures, cls) == module else None


class _Request:
    """The arguments of one call, by value: each storage once, each tensor with its geometry, each
    list, dict and module once (by identity, so that what the call does to them comes back)."""

    def __init__(self, handles: "_FactsById | None" = None, fixtures: dict | None = None):
        self.handles = handles
        self.fixtures = fixtures or {}             # the course's fixtures modules, by name
        self.storages: list[dict] = []
        self.storage_of: dict[int, int] = {}       # judge storage data_ptr -> index
        self.storage_tensors: list[list[torch.Tensor]] = []
        self.tensors: list[dict] = []
        self.tensor_objects: list[torch.Tensor] = []
        self.tensor_of: dict[int, int] = {}        # id(tensor) -> index
        self.containers: list[Any] = []            # lists and dicts sent, by index
        self.container_of: dict[int, int] = {}
        self.modules: list[torch.nn.Module] = []
        self.module_of: dict[int, int] = {}

    def encode(self, v, depth: int = 0):
        if depth > 20:
            raise JudgeError("an argument nested too deeply")
        extra = _encode_extra(self, v, depth)      # since 6b: arrays, paths, optimizers
        if extra is not None:
            return extra
        if v is None or type(v) in (bool, int, str):
            return {"k": "v", "v": v}
        if type(v) is float:
            return {"k": "v", "v": v} if math.isfinite(v) else {"k": "f", "v": repr(v)}
        if type(v) is tuple:
            return {"k": "tuple", "v": [self.encode(x, depth + 1) for x in v]}
        if type(v) in (list, dict):
            if id(v) in self.container_of:
                return {"k": "cref", "c": self.container_of[id(v)]}
            self.container_of[id(v)] = c = len(self.containers)
            self.containers.append(v)
            if type(v) is list:
                return {"k": "list", "c": c, "v": [self.encode(x, depth + 1) for x in v]}
            return {"k": "dict", "c": c, "v": [[self.encode(a, depth + 1), self.encode(b, depth + 1)] for a, b in v.items()]}
        if type(v) is torch.dtype:
            return {"k": "dtype", "v": _dtype_name(v)}
        if type(v) is torch.Size:
            return {"k": "size", "v": list(v)}
        if type(v) is torch.device:
            return {"k": "device", "v": str(v)}
        if type(v) in (torch.Tensor, torch.nn.Parameter):
            return {"k": "t", "i": self._tensor(v)}
        if isinstance(v, torch.nn.Module) and (MODULES.get(type(v).__name__) is type(v)
                                               or _course_module(self.fixtures, type(v))):
            return self._module(v, depth)
        if isinstance(v, types.GeneratorType):   # model.parameters(): a one-pass iterator there too
            return {"k": "iter", "v": [self.encode(x, depth + 1) for x in itertools.islice(v, 100_000)]}
        if any(f is v for f in FUNCTIONS.values()):
            return {"k": "fn", "name": v.__name__}
        handle = self.handles.get(v) if self.handles is not None else None
        if handle is not None:
            return {"k": "handle", "h": handle}
        raise JudgeError(f"the judge cannot send a {type(v).__qualname__} to the learner's function")

    def _module(self, m: torch.nn.Module, depth: int) -> dict:
        if id(m) in self.module_of:
            return {"k": "mref", "m": self.module_of[id(m)]}
        pre_hooks = _fixture_hooks(m)
        if pre_hooks is None:
            raise JudgeError("the judge cannot send a module with hooks (but the fixtures' forward pre-hooks)")
        self.module_of[id(m)] = i = len(self.modules)
        self.modules.append(m)
        attrs = []
        for k, v in vars(m).items():
            if k in MODULE_INTERNALS:
                continue
            if not (_plain(v) or type(v) is list):   # a list goes as a list: what the call appends comes back
                raise JudgeError(f"the judge cannot send the attribute {k!r} of a {type(m).__name__}")
            attrs.append([k, self.encode(v, depth + 1)])
        course = _course_module(self.fixtures, type(m))    # a class of the course's fixtures: by module and name
        return {"k": "module", "m": i, "type": type(m).__name__, **({"from": course} if course else {}),
                "training": m.training, "attrs": attrs,
                "params": [[k, None if p is None else self.encode(p, depth + 1)] for k, p in m._parameters.items()],
                "buffers": [[k, None if b is None else self.encode(b, depth + 1)] for k, b in m._buffers.items()],
                "non_persistent": sorted(m._non_persistent_buffers_set),
                "children": [[k, None if c is None else self.encode(c, depth + 1)] for k, c in m._modules.items()],
                "pre_hooks": [self._fixture(h, depth + 1) for h in pre_hooks]}

    def _fixture(self, h, depth: int) -> dict:
        """A hook object of the fixtures (its class by name, its attributes: a list comes back)."""
        if id(h) in self.module_of:
            return {"k": "mref", "m": self.module_of[id(h)]}
        self.module_of[id(h)] = i = len(self.modules)
        self.modules.append(h)
        attrs = []
        for k, v in vars(h).items():
            if not (_plain(v) or type(v) is list):
                raise JudgeError(f"the judge cannot send the attribute {k!r} of a {type(h).__name__}")
            attrs.append([k, self.encode(v, depth + 1)])
        return {"k": "fixture", "m": i, "type": type(h).__name__, "attrs": attrs}



    def _tensor(self, t: torch.Tensor) -> int:
        if id(t) in self.tensor_of:
            return self.tensor_of[id(t)]
        if t.device.type != "cpu" or t.layout != torch.strided or t.dtype not in DTYPES.values():
            raise JudgeError(f"the judge sends CPU tensors of plain dtypes only, not {t.dtype} on {t.device}")
        storage = t.untyped_storage()
        ptr = storage.data_ptr() if storage.nbytes() else -len(self.storages) - 1
        if ptr not in self.storage_of:
            self.storage_of[ptr] = len(self.storages)
            self.storages.append({"dtype": _dtype_name(t.dtype), "data": _b64(_raw(storage)),
                                  "requires_grad": False, "non_leaf": False, "grad": None, "shape": None,
                                  "parameter": None})
            self.storage_tensors.append([])
        s = self.storage_of[ptr]
        entry = self.storages[s]
        if entry["dtype"] != _dtype_name(t.dtype):
            raise JudgeError("the judge sends one dtype per storage")
        whole = (t._base is None and t.storage_offset() == 0 and t.is_contiguous()
                 and t.numel() * t.element_size() == storage.nbytes())
        whole = bool(whole and (t.is_leaf or t.requires_grad))
        # a leaf that requires grad but is not its storage's whole (``base.t().requires_grad_()``):
        # a leaf of its own there too, on a storage that does not require grad
        leaf_view = bool(t.is_leaf and t.requires_grad and not whole)
        if not leaf_view:
            entry["requires_grad"] |= t.requires_grad
        entry["leaf_views"] = entry.get("leaf_views", False) or leaf_view
        if entry["requires_grad"] and entry["leaf_views"]:
            raise JudgeError("the judge cannot send a leaf view on a storage that requires grad otherwise")
        entry["non_leaf"] |= t.grad_fn is not None
        if whole and (entry["parameter"] or (type(t) is torch.nn.Parameter and entry["shape"] is not None)):
            raise JudgeError("the judge sends one whole tensor per storage")
        if type(t) is torch.nn.Parameter:
            if not whole:   # the kernel's Parameter is the leaf of its storage
                raise JudgeError("the judge sends a Parameter only as the whole of its storage")
            entry["parameter"] = True
        if whole:
            entry["shape"] = list(t.shape)   # the kernel's base of this storage takes its shape
            if t.is_leaf and t.grad is not None:
                entry["grad"] = _b64(t.grad)
        self.storage_tensors[s].append(t)
        self.tensor_of[id(t)] = len(self.tensors)
        self.tensors.append({"storage": s, "shape": list(t.shape), "stride": list(t.stride()),
                             "offset": t.storage_offset(), "requires_grad": t.requires_grad,
                             "whole": whole, "leaf_view": leaf_view,
                             "grad": _b64(t.grad) if leaf_view and t.grad is not None else None})
        self.tensor_objects.append(t)
        return self.tensor_of[id(t)]


class Judge:
    """Runs judged hidden test cells for one notebook; ``rpc(request) -> (reply, printed)``.

    One judge per notebook run: the kernel's agent numbers the calls, and a ``backward()`` in a
    later cell may still reach through an earlier call."""

    def __init__(self, rpc: Callable[[dict], tuple[dict, str]] | None = None,
                 fixtures: dict[str, types.ModuleType] | None = None):
        """``fixtures``: the course's fixtures modules by name (an assignment's ``fixtures.py``), which a
        judged cell imports by that name and whose ``nn.Module`` classes go to the kernel by value."""
        self.rpc = rpc
        self.fixtures = dict(fixtures or {})
        self.calls = 0
        self.facts = _FactsById()
        self.handles = _FactsById()    # objects the kernel keeps, by the handle it gave them
        self.namespace: dict[str, Any] = {}
        self.leaves: dict[int, dict[int, weakref.ref]] = {}   # call -> leaf number -> the judge's copy
        self.printed: io.StringIO | None = None
        self.files = _Files()           # since 6b: the folders judged tests make

    # -- one cell ---------------------------------------------------------------------------
    def run_cell(self, source: str) -> list[dict]:
        """Run the cell's code here; return its outputs as a kernel would have shown them.

        The judged cells of one notebook share one namespace, as cells in a kernel do (a helper that
        one hidden test defines, a later one may use)."""
        namespace = self.namespace
        out = io.StringIO()
        self.printed = out
        error = None
        with _printing_to(out):
            try:
                with _compile_lock:   # CPython 3.11's compiler is not safe from two threads at once
                    tree = ast.parse(source)
                    code = compile(tree, "<hidden tests>", "exec")
                if not namespace:
                    namespace.update({"__name__": "__judge__", "__builtins__": builtins})
                    exec(_PRELUDE_CODE, namespace)
                    namespace["ck"] = _Checks(self.facts)
                    _boundaries(self, namespace)     # since 6b: os, tempfile, a weights-only torch.load
                defined = set(namespace) | set(dir(builtins))
                for node in ast.walk(tree):
                    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                        defined.add(node.name)
                    elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                        defined.add(node.id)
                for node in ast.walk(tree):
                    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in defined:
                        namespace[node.id] = RemoteFunction(self, node.id)
                self._look_up_values(tree, namespace)
                with self._recording(source):
                    exec(code, namespace)
            except BaseException as exc:  # the test's failure, shown as a kernel would show it
                if isinstance(exc, KeyboardInterrupt):
                    raise
                error = exc
        outputs: list[dict] = []
        if out.getvalue():
            outputs.append({"output_type": "stream", "name": "stdout", "text": out.getvalue()})
        if error is not None:
            ename = type(error).__name__
            tb = [line for line in traceback.format_exception_only(type(error), error)]
            outputs.append({"output_type": "error", "ename": ename, "evalue": str(error),
                            "traceback": [t.rstrip("\n") for t in tb]})
        return outputs

    # -- a call -----------------------------------------------------------------------------
    def call(self, name: str, args: tuple, kwargs: dict):
        if getattr(self, "_graph_mode", False):
            return self._graph_call(name, args, kwargs)
        self.calls += 1
        request = _Request(self.handles, self.fixtures)
        request.files = self.files      # since 6b
        encoded_args = [request.encode(a) for a in args]
        encoded_kwargs = {str(k): request.encode(v) for k, v in kwargs.items()}
        _check_apart(request)           # since 6b
        reply = self._ask({"op": "call", "call": self.calls, "function": name, "args": encoded_args,
                           "kwargs": encoded_kwargs, "storages": request.storages, "tensors": request.tensors,
                           **({"fixtures": sorted(self.fixtures)} if self.fixtures else {})})
        if not isinstance(reply.get("inputs", []), list) or len(reply.get("inputs", [])) not in (0, len(request.storages)):
            raise JudgeError("the kernel's answer does not match the call")
        for s, after in enumerate(reply.get("inputs", [])):
            self._apply(request, s, after)
        self._rebind(request, reply.get("rebound", []))
        _apply_extra(request, reply)    # since 6b: arrays' memory and folders
        if "raised" in reply:
            raised = reply["raised"]
            ename = str(raised.get("ename", "Exception"))
            ename = ename if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,80}", ename) else "Exception"
            evalue = str(raised.get("evalue", ""))[:2000]
            builtin = getattr(builtins, ename, None)
            if (isinstance(builtin, type) and issubclass(builtin, Exception)
                    and not issubclass(builtin, (StopIteration, StopAsyncIteration))):
                # a built-in exception is raised here as itself, with the kernel's message: a test that
                # catches it (``except TypeError``) does what it would do next to the answer
                try:
                    exc = builtin(evalue)
                except Exception:     # one that takes other arguments (UnicodeDecodeError)
                    exc = None
                if exc is not None:
                    raise exc
            raise type(ename, (Exception,), {"__module__": "builtins"})(f"{name}() raised {ename}: {evalue}")
        self._leaf_grads(request, reply.get("leaf_grads", []))
        self._flags(request, reply.get("flags", []))
        rebuilt = _Rebuild(self, request, reply)
        self._mirror(request, rebuilt, reply)
        _mirror_optimizers(request, rebuilt, reply)     # since 6b
        return rebuilt.result

    def _leaf_grads(self, request: _Request, grads: Any) -> None:
        """What the call did to the .grad of leaves that are views (set, written into, cleared)."""
        if not isinstance(grads, list):
            raise JudgeError("the kernel's answer about its inputs is malformed")
        for item in grads:
            if not isinstance(item, list) or len(item) != 3:
                raise JudgeError("the kernel's answer about a leaf's grad is malformed")
            i = _index(item[0], len(request.tensor_objects))
            t = request.tensor_objects[i]
            if not request.tensors[i]["leaf_view"]:
                raise JudgeError("the kernel's answer names a grad the judge did not send")
            if item[1] is None:
                t.grad = None
                continue
            flat = _from_b64(item[1], t.dtype, t.numel())
            if item[2] is True and t.grad is not None and t.grad.shape == t.shape:
                with torch.no_grad():
                    t.grad.copy_(flat.view(t.shape))
            else:
                t.grad = flat.clone().view(t.shape)

    def _flags(self, request: _Request, flags: Any) -> None:
        """Leaves whose requires_grad the call turned on or off (before the result joins the graph)."""
        if not isinstance(flags, list):
            raise JudgeError("the kernel's answer about its inputs is malformed")
        for item in flags:
            if not isinstance(item, list) or len(item) != 2 or not isinstance(item[1], bool):
                raise JudgeError("the kernel's requires_grad flag is malformed")
            t = request.tensor_objects[_index(item[0], len(request.tensor_objects))]
            if t.is_leaf and t.requires_grad != item[1]:
                if item[1] and not (t.dtype.is_floating_point or t.dtype.is_complex):
                    raise JudgeError("the kernel's integer tensor claims to require grad")
                t.requires_grad_(item[1])

    def _mirror(self, request: _Request, rebuilt: "_Rebuild", reply: dict) -> None:
        """What the call did to the lists, dicts, modules and requires_grad flags it was given."""
        containers, modules = reply.get("containers", []), reply.get("modules", [])
        if not all(isinstance(x, list) for x in (containers, modules)):
            raise JudgeError("the kernel's answer about its inputs is malformed")
        for item in containers:
            if not isinstance(item, list) or len(item) != 2 or not isinstance(item[1], list):
                raise JudgeError("the kernel's answer about a list or dict is malformed")
            target = request.containers[_index(item[0], len(request.containers))]
            if type(target) is list:
                target[:] = [rebuilt.late(x) for x in item[1]]
            else:
                pairs = []
                for pair in item[1]:
                    if not isinstance(pair, list) or len(pair) != 2:
                        raise JudgeError("the kernel's dict is malformed")
                    pairs.append((rebuilt.late(pair[0]), rebuilt.late(pair[1])))
                target.clear()
                try:
                    target.update(pairs)
                except TypeError:
                    raise JudgeError("the kernel's dict has an unhashable key") from None
        for item in modules:
            if not isinstance(item, dict):
                raise JudgeError("the kernel's answer about a module is malformed")
            m = request.modules[_index(item.get("m"), len(request.modules))]
            if not isinstance(m, torch.nn.Module):
                raise JudgeError("the kernel's answer about a module names a hook")
            if item.get("children_changed"):
                raise JudgeError("the learner's function replaced a submodule, which the judge cannot mirror")
            if not isinstance(item.get("training"), bool):
                raise JudgeError("the kernel's training flag is not a bool")
            m.training = item["training"]
            for slot, table in (("params", m._parameters), ("buffers", m._buffers)):
                if slot not in item:
                    continue
                entries = item[slot]
                if not isinstance(entries, list) or len(entries) > 4096:
                    raise JudgeError("the kernel's module slots are malformed")
                new = {}
                for entry in entries:
                    if not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], str):
                        raise JudgeError("the kernel's module slots are malformed")
                    value = None if entry[1] is None else rebuilt.late(entry[1])
                    if value is not None and not (type(value) is torch.nn.Parameter if slot == "params"
                                                  else type(value) in (torch.Tensor, torch.nn.Parameter)):
                        raise JudgeError(f"the kernel put a {type(value).__name__} among a module's {slot}")
                    new[entry[0]] = value
                table.clear()
                table.update(new)

    def _ask(self, request: dict) -> dict:
        reply, printed = self.rpc(request)
        if printed and self.printed is not None:
            self.printed.write(printed)
        if not isinstance(reply, dict):
            raise JudgeError("the kernel's answer is not an object")
        if "agent_error" in reply:
            raise JudgeError(f"the kernel's agent failed: {reply['agent_error']}")
        return reply

    def _apply(self, request: _Request, s: int, after: Any) -> None:
        """What the call did to one input storage, done to the judge's own."""
        if not isinstance(after, dict):
            raise JudgeError("the kernel's answer about an input is not an object")
        tensors = request.storage_tensors[s]
        first = tensors[0]
        storage = first.untyped_storage()
        if after.get("data") is not None:
            data = _from_b64(after["data"], torch.uint8, storage.nbytes())
            _raw(storage).copy_(data)        # the bytes, without touching any version counter
        bumps = after.get("bumps", 0)
        if isinstance(bumps, int) and bumps > 0:
            owner = first._base if first._base is not None else first
            with torch.no_grad():
                for _ in range(min(bumps, 1000)):
                    owner.as_strided((0,), (1,), owner.storage_offset()).add_(0)
        grad = after.get("grad")
        if after.get("grad_cleared") is True:      # the call set the leaf's .grad to None
            for t in tensors:
                if t.is_leaf and t._base is None:
                    t.grad = None
                    break
        if grad is not None:
            flat = _from_b64(grad, first.dtype, storage.nbytes() // first.element_size())
            for t in tensors:
                if t.is_leaf and t.requires_grad and t._base is None and t.numel() == flat.numel() and t.is_contiguous():
                    if after.get("grad_in_place") is True and t.grad is not None and t.grad.shape == t.shape:
                        with torch.no_grad():       # the same .grad object, written into
                            t.grad.copy_(flat.view(t.shape))
                    else:
                        t.grad = flat.clone().view(t.shape)
                    break
                if t.requires_grad:
                    g = flat.as_strided(t.shape, t.stride(), t.storage_offset())
                    torch.autograd.backward([t], [g.clone()])
                    break

    def _rebind(self, request: _Request, rebound: Any) -> None:
        """Inputs the call gave new memory: the judge's tensor gets that memory too (``.data``),
        and the views taken before keep the old, as they would in one process."""
        if not isinstance(rebound, list):
            raise JudgeError("the kernel's answer about rebound inputs is not a list")
        for item in rebound:
            if not isinstance(item, dict):
                raise JudgeError("the kernel's answer about a rebound input is malformed")
            t = request.tensor_objects[_index(item.get("tensor"), len(request.tensor_objects))]
            dtype = DTYPES.get(item.get("dtype"))
            if dtype is None:
                raise JudgeError("a rebound input with an unknown dtype")
            shape, stride, offset = _ints(item.get("shape")), _ints(item.get("stride")), _ints([item.get("offset")])[0]
            if "input_storage" in item:        # now in another input's memory: the judge's own
                owner = request.storage_tensors[_index(item["input_storage"], len(request.storages))][0]
                owner = owner._base if owner._base is not None else owner
                if owner.dtype != dtype:
                    raise JudgeError("a rebound input in a storage of another dtype")
                _fits(owner.untyped_storage().nbytes(), shape, stride, offset, owner.element_size())
                t.data = owner.detach().as_strided(shape, stride, offset)
                continue
            raw = _from_b64(item.get("data"), torch.uint8)
            _fits(raw.numel(), shape, stride, offset, torch.tensor([], dtype=dtype).element_size())
            flat = raw.view(dtype) if raw.numel() else torch.empty(0, dtype=dtype)
            t.data = flat.as_strided(shape, stride, offset)

    def _leaf_grads_of(self, call: int, grads: Any) -> None:
        """Gradients that a backward through the kernel gave leaves the call made: accumulated into
        the judge's copies of them, as autograd accumulates into a leaf."""
        leaves = self.leaves.get(call, {})
        if not isinstance(grads, list) or len(grads) > 100_000:
            raise JudgeError("the kernel's gradients do not match the call")
        for k, g in enumerate(grads):
            ref = leaves.get(k)
            t = ref() if ref is not None else None
            if g is None or t is None:
                continue
            flat = _from_b64(g, t.dtype, t.numel()).clone().view(t.shape)
            with torch.no_grad():
                if t.grad is None:
                    t.grad = flat
                else:
                    t.grad.add_(flat)

    def vjp(self, call: int, grads: tuple, needs: list[bool], shapes: list) -> list:
        encoded = [None if g is None else _b64(g) for g in grads]
        reply = self._ask({"op": "vjp", "call": call, "grads": encoded, "inputs": needs})
        if "raised" in reply:
            raise RuntimeError(f"backward through the learner's function failed: {reply['raised'].get('evalue', '')}")
        found = reply.get("grads")
        if not isinstance(found, list) or len(found) != len(needs):
            raise JudgeError("the kernel's gradients do not match the call")
        self._leaf_grads_of(call, reply.get("leaf_grads", []))
        out = []
        for g, (shape, dtype) in zip(found, shapes):
            if g is None:
                out.append(None)
            else:
                n = 1
                for d in shape:
                    n *= d
                out.append(_from_b64(g, dtype, n).clone().view(shape))
        return out


class _Rebuild:
    """The kernel's answer turned back into objects of the judge's process."""

    def __init__(self, judge: Judge, request: _Request, reply: dict):
        self.judge, self.request = judge, request
        self.new_storages = reply.get("storages", [])
        if not isinstance(self.new_storages, list):
            raise JudgeError("the kernel's new storages are not a list")
        self.new_cache: dict[int, torch.Tensor] = {}
        self.differentiable: list[tuple[int, torch.Tensor, dict]] = []
        self.placeholders: dict[int, Any] = {}
        self.swap: dict[int, torch.Tensor] = {}
        self.refs: dict[int, torch.Tensor] = {}
        self.result_modules: dict[int, torch.nn.Module] = {}
        result = self.decode(reply.get("result"), 0)
        # what the call put into its inputs (lists, dicts, module slots) joins the same graph node
        self.late_values = {}
        for item in reply.get("containers", []) if isinstance(reply.get("containers"), list) else []:
            if isinstance(item, list) and len(item) == 2 and isinstance(item[1], list):
                for x in item[1]:
                    for y in (x if isinstance(x, list) else [x]):
                        self.late_values[id(y)] = self.decode(y, 1)
        for item in reply.get("modules", []) if isinstance(reply.get("modules"), list) else []:
            for slot in ("params", "buffers"):
                entries = item.get(slot) if isinstance(item, dict) else None
                for entry in entries if isinstance(entries, list) else []:
                    if isinstance(entry, list) and len(entry) == 2 and entry[1] is not None:
                        self.late_values[id(entry[1])] = self.decode(entry[1], 1)
        joined = reply.get("joined", [])
        if not isinstance(joined, list):
            raise JudgeError("the kernel's answer about its inputs is malformed")
        placeholders = []
        for item in joined:
            if not isinstance(item, dict) or not isinstance(item.get("grad_fn"), str):
                raise JudgeError("the kernel's answer about an input's history is malformed")
            t = request.tensor_objects[_index(item.get("tensor"), len(request.tensor_objects))]
            if not (t.dtype.is_floating_point or t.dtype.is_complex):
                raise JudgeError("the kernel's integer tensor claims a history")
            stand_in = t.detach().clone()
            self.differentiable.append((_ints([item.get("output")])[0], stand_in, item))
            placeholders.append((t, stand_in, item["grad_fn"][:100]))
        if self.differentiable:
            result = self._connect(result)
        # an input the call wrote into in place, from tensors that require grad: in the judge's graph
        # too (a copy of its own values, whose backward asks the kernel), with the kernel's grad_fn name
        for t, stand_in, name in placeholders:
            before = t._version
            try:
                with torch.enable_grad():
                    t.copy_(self.swap.get(id(stand_in), stand_in))
            except RuntimeError as exc:
                raise JudgeError(f"the kernel's answer about an input's history does not fit: {exc}") from None
            self.judge.facts[t] = _Facts(name, False, True, before, t._version)
        self.result = result

    def late(self, v: Any):
        """A value the call left in one of its inputs, decoded with the result."""
        if id(v) not in self.late_values:
            raise JudgeError("the kernel's answer about its inputs is malformed")
        return _replace(self.late_values[id(v)], self.swap)

    def decode(self, v: Any, depth: int):
        if depth > 20 or not isinstance(v, dict):
            raise JudgeError("the kernel's result is malformed")
        kind = v.get("k")
        if kind in _EXTRA_RESULT_KINDS:         # since 6b
            return _decode_extra_result(self, v, depth)
        if kind == "v":
            value = v.get("v")
            if value is not None and type(value) not in (bool, int, float, str):
                raise JudgeError("the kernel's result holds an unknown value")
            return value
        if kind == "f":
            return float(v["v"]) if v.get("v") in ("nan", "inf", "-inf") else math.nan
        if kind in ("list", "tuple"):
            items = [self.decode(x, depth + 1) for x in v.get("v", [])]
            return items if kind == "list" else tuple(items)
        if kind in ("dict", "odict"):
            out = {} if kind == "dict" else collections.OrderedDict()
            for pair in v.get("v", []):
                key = self.decode(pair[0], depth + 1)
                try:
                    out[key] = self.decode(pair[1], depth + 1)
                except TypeError:
                    raise JudgeError("the kernel's dict has an unhashable key") from None
            return out
        if kind == "size":
            return torch.Size([int(d) for d in v["v"]])
        if kind == "dtype":
            return DTYPES[v["v"]]
        if kind == "opaque":
            obj = _opaque(str(v.get("type", "object")), str(v.get("repr", ""))[:200])
            if type(v.get("h")) is int:    # sent back to the kernel, it is the kernel's object again
                self.judge.handles[obj] = v["h"]
            return obj
        if kind == "cref":
            return self.request.containers[_index(v.get("c"), len(self.request.containers))]
        if kind == "mref":
            return self.request.modules[_index(v.get("m"), len(self.request.modules))]
        if kind == "a":
            return self._array(v)
        if kind == "tref":
            if v.get("r") not in self.refs or type(v.get("r")) is not int:
                raise JudgeError("the kernel's answer names a tensor it did not send")
            return self.refs[v["r"]]
        if kind == "rmodule":
            return self._module(v, depth)
        if kind == "rfixture":
            return self._fixture(v, depth)
        if kind == "rmref":
            if v.get("r") not in self.result_modules or type(v.get("r")) is not int:
                raise JudgeError("the kernel's answer names a module it did not send")
            return self.result_modules[v["r"]]
        if kind == "t":
            return self._tensor(v)
        raise JudgeError(f"the kernel's result holds an unknown kind {kind!r}")

    def _tensor(self, v: dict):
        if "same_as" in v:
            return self.request.tensor_objects[_index(v["same_as"], len(self.request.tensor_objects))]
        dtype = DTYPES.get(v.get("dtype"))
        if dtype is None:
            raise JudgeError("the kernel's tensor has an unknown dtype")
        shape, stride, offset = _ints(v.get("shape")), _ints(v.get("stride")), _ints([v.get("offset")])[0]
        if any(d < 0 for d in shape + stride) or offset < 0:
            raise JudgeError("the kernel's tensor has a negative size, stride or offset")
        facts = _Facts(v.get("grad_fn") if isinstance(v.get("grad_fn"), str) else None, bool(v.get("leaf")),
                       bool(v.get("requires_grad")), int(v.get("version", 0)), 0)
        if v.get("meta") is True:
            # a tensor on the meta device: shape, strides and dtype, no data; it joins no graph here
            # (nothing can flow back through it), so only the kernel's facts say where it came from
            if len(shape) > 64 or any(d >= 1 << 40 for d in shape + stride) or offset >= 1 << 40:
                raise JudgeError("the kernel's meta tensor is malformed")
            t = torch.empty_strided(shape, stride, dtype=dtype, device="meta")
            if facts.requires_grad:
                if not (dtype.is_floating_point or dtype.is_complex):
                    raise JudgeError("the kernel's integer tensor claims to require grad")
                t.requires_grad_(True)
            facts.here = t._version
            self.judge.facts[t] = facts
            return t
        if "input_storage" in v:
            s = _index(v["input_storage"], len(self.request.storages))
            owner = self.request.storage_tensors[s][0]
            owner = owner._base if owner._base is not None else owner
            _fits(owner.untyped_storage().nbytes(), shape, stride, offset, owner.element_size())
            if owner.dtype != dtype:
                raise JudgeError("a result in an input's storage with another dtype")
            if facts.requires_grad and not facts.leaf and owner.requires_grad:
                t = owner.as_strided(shape, stride, offset)
            else:
                t = owner.detach().as_strided(shape, stride, offset)
                if facts.requires_grad:
                    t.requires_grad_(True)
        elif "in_array" in v:                 # since 6b: in an input array's memory
            t = _tensor_in_array(self, v, dtype, shape, stride, offset, facts)
        else:
            k = int(v["new_storage"])
            if k not in self.new_cache:
                if not 0 <= k < len(self.new_storages):
                    raise JudgeError("the kernel's result names a storage it did not send")
                data = self.new_storages[k].get("data")
                if not isinstance(data, str) or len(data) > MAX_REPLY:
                    raise JudgeError("the kernel's new storage is missing or too big")
                self.new_cache[k] = _from_b64(data, torch.uint8)
            raw = self.new_cache[k]
            _fits(raw.numel(), shape, stride, offset, torch.tensor([], dtype=dtype).element_size())
            flat = raw.view(dtype) if raw.numel() else torch.empty(0, dtype=dtype)
            t = flat.as_strided(shape, stride, offset)
            if facts.requires_grad:
                if "output" in v and not facts.leaf:
                    t = t.clone()
                    self.differentiable.append((int(v["output"]), t, v))
                else:
                    t.requires_grad_(True)
        if v.get("parameter"):
            t = torch.nn.Parameter(t.detach(), requires_grad=facts.requires_grad)
        if "leaf_index" in v and "new_storage" in v and t.is_leaf and t.requires_grad:
            k = v["leaf_index"]
            if type(k) is not int or not 0 <= k < 100_000:
                raise JudgeError("the kernel's answer numbers its leaves wrongly")
            self.judge.leaves.setdefault(self.judge.calls, {})[k] = weakref.ref(t)
        facts.here = t._version
        self.judge.facts[t] = facts
        if "ref" in v:                        # the same tensor again later in the answer: this object
            r = v["ref"]
            if type(r) is not int or r in self.refs or len(self.refs) > 100_000:
                raise JudgeError("the kernel's answer numbers its tensors wrongly")
            self.refs[r] = t
        if "grad" in v:
            g = self.decode(v["grad"], 19)
            if type(g) is not torch.Tensor or g.shape != t.shape or g.dtype != t.dtype or not t.is_leaf:
                raise JudgeError("the kernel's .grad does not fit its tensor")
            t.grad = g
        return t

    def _module(self, v: dict, depth: int):
        """A module the call made, rebuilt here from its class (the same fixed list) and its state."""
        r = v.get("r")
        if type(r) is not int or r in self.result_modules:
            raise JudgeError("the kernel's answer numbers its modules wrongly")
        cls = MODULES.get(v.get("type")) if "from" not in v else _course_class(self.judge.fixtures, v["from"], v.get("type"))
        if cls is None:
            raise JudgeError("the kernel's module is of a class the judge does not rebuild")
        m = cls.__new__(cls)
        torch.nn.Module.__init__(m)
        self.result_modules[r] = m
        if not isinstance(v.get("training"), bool):
            raise JudgeError("the kernel's training flag is not a bool")
        m.training = v["training"]
        for field in ("attrs", "params", "buffers", "children", "non_persistent"):
            if not isinstance(v.get(field), list) or len(v[field]) > 4096:
                raise JudgeError("the kernel's module is malformed")
        for entry in v["attrs"] + v["params"] + v["buffers"] + v["children"]:
            if not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], str):
                raise JudgeError("the kernel's module is malformed")
        for k, a in v["attrs"]:
            if k in MODULE_INTERNALS or k.startswith("__") or not k.isidentifier():
                raise JudgeError(f"the kernel's module has an attribute {k[:40]!r} the judge does not set")
            m.__dict__[k] = self.decode(a, depth + 1)
        for k, p in v["params"]:
            p = None if p is None else self.decode(p, depth + 1)
            if p is not None and type(p) is not torch.nn.Parameter:
                raise JudgeError("the kernel's module parameter is not a Parameter")
            m._parameters[k] = p
        for k, b in v["buffers"]:
            b = None if b is None else self.decode(b, depth + 1)
            if b is not None and type(b) not in (torch.Tensor, torch.nn.Parameter):
                raise JudgeError("the kernel's module buffer is not a tensor")
            m._buffers[k] = b
        if not all(isinstance(k, str) for k in v["non_persistent"]):
            raise JudgeError("the kernel's module is malformed")
        m._non_persistent_buffers_set.update(v["non_persistent"])
        for k, c in v["children"]:
            c = None if c is None else self.decode(c, depth + 1)
            if c is not None and not isinstance(c, torch.nn.Module):
                raise JudgeError("the kernel's submodule is not a module")
            m._modules[k] = c
        hooks = v.get("pre_hooks", [])
        if not isinstance(hooks, list) or len(hooks) > 64:
            raise JudgeError("the kernel's module hooks are malformed")
        for h in hooks:
            h = self.decode(h, depth + 1)
            if HOOKS.get(type(h).__name__) is not type(h):
                raise JudgeError("the kernel's module hook is not one of the fixtures'")
            m.register_forward_pre_hook(h)
        return m

    def _fixture(self, v: dict, depth: int):
        """A hook object of the fixtures the call made, rebuilt here from its class and attributes."""
        r = v.get("r")
        cls = HOOKS.get(v.get("type"))
        if type(r) is not int or r in self.result_modules or cls is None or not isinstance(v.get("attrs"), list):
            raise JudgeError("the kernel's hook object is malformed")
        h = cls.__new__(cls)
        self.result_modules[r] = h
        for entry in v["attrs"][:64]:
            if not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], str) \
                    or entry[0].startswith("__") or not entry[0].isidentifier():
                raise JudgeError("the kernel's hook object is malformed")
            h.__dict__[entry[0]] = self.decode(entry[1], depth + 1)
        return h

    def _connect(self, result):
        """Route the differentiable results through one _RemoteCall node of the judge's graph."""
        order = sorted(self.differentiable, key=lambda item: item[0])
        inputs = self.request.tensor_objects
        made = [ref() for ref in self.judge.leaves.get(self.judge.calls, {}).values()]
        made = [t for t in made if t is not None]
        needs_grad = [t for t in inputs if t.requires_grad]
        if not needs_grad and not made:
            for _, t, _ in order:
                t.requires_grad_(True)
            return result
        connected = _RemoteCall.apply(self.judge, self.judge.calls, [t for _, t, _ in order], len(inputs),
                                      *inputs, *made)
        swap = self.swap = {id(t): c for (_, t, _), c in zip(order, connected)}
        for (_, t, _), c in zip(order, connected):
            f = self.judge.facts.get(t) or _Facts(None, False, True, 0, 0)
            f.here = c._version
            self.judge.facts[c] = f
        return _replace(result, swap)


    def _array(self, v: dict):
        """A NumPy array: in an input's storage, a view of the judge's own; else new memory with the
        values sent.  Everything is checked against the storage and the bytes sent."""
        import numpy as np

        dtype = v.get("dtype")
        if dtype not in ARRAY_DTYPES:
            raise JudgeError("the kernel's array has a dtype the judge does not take")
        dtype = np.dtype(dtype)
        shape, strides = _ints(v.get("shape")), _ints(v.get("strides"), negative=True)
        if len(shape) != len(strides) or len(shape) > 32:
            raise JudgeError("the kernel's array has a malformed shape")
        count = 1
        for d in shape:
            count *= d
        if "input_storage" in v:
            owner = self.request.storage_tensors[_index(v["input_storage"], len(self.request.storages))][0]
            storage = owner.untyped_storage()
            offset = _ints([v.get("byte_offset")])[0]
            low = offset + sum((d - 1) * st for d, st in zip(shape, strides) if st < 0 and d > 0)
            high = offset + sum((d - 1) * st for d, st in zip(shape, strides) if st > 0 and d > 0) + dtype.itemsize
            if count == 0 or low < 0 or high > storage.nbytes():
                raise JudgeError("the kernel's array reaches past the input's storage")
            a = np.ndarray(tuple(shape), dtype=dtype, buffer=_raw(storage).numpy(), offset=offset,
                           strides=tuple(strides))
        else:
            data = v.get("data")
            if not isinstance(data, str) or len(data) > MAX_REPLY:
                raise JudgeError("the kernel's array has no values")
            raw = base64.b64decode(data, validate=True)
            if len(raw) != count * dtype.itemsize:
                raise JudgeError("the kernel sent bytes that do not fit the array")
            a = np.frombuffer(bytearray(raw), dtype=dtype).reshape(shape)
        if v.get("writeable") is False:
            a.flags.writeable = False
        return a


ARRAY_DTYPES = frozenset({"|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4", "<f8",
                          "<c8", "<c16"})


# -- since assignment 6b: NumPy arrays, files in a test's folder, optimizers ----------------------
# (a block of its own: the code above calls into it by one line each)

import os  # noqa: E402
import shutil  # noqa: E402
import stat  # noqa: E402
import tempfile  # noqa: E402
import warnings  # noqa: E402

# the optimizers the judge sends by value (the agent's list is the same)
OPTIMIZERS = {c.__name__: c for c in (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW)}
MAX_FILES = 64                 # files of a test's folder, each way
MAX_FILE_BYTES = 8 << 20       # their bytes, all together
MAX_FILE_SIZE = 1 << 40        # the size a file may claim when its bytes stay in the kernel


@functools.cache
def _optimizer_internals() -> frozenset:
    """The attributes every optimizer has.  Found on first use: making an optimizer loads
    torch._dynamo (a second and some 70 MB), which only a test that sends one should pay for."""
    return frozenset(vars(torch.optim.SGD([torch.zeros(1, requires_grad=True)])))


class _Memory:
    """The bytes of a NumPy array's memory, as an object NumPy can view (it keeps the array alive)."""

    def __init__(self, owner, address: int, n: int, writeable: bool):
        self.owner = owner
        self.__array_interface__ = {"data": (address, not writeable), "shape": (n,), "typestr": "|u1",
                                    "version": 3}


class _Buffer:
    """The memory that one or more arrays of a call lie in, found from their innermost base."""

    def __init__(self, root):
        import numpy as np

        address = root.__array_interface__["data"][0]
        self.low = address + sum((d - 1) * st for d, st in zip(root.shape, root.strides) if st < 0 and d > 0)
        high = address + sum((d - 1) * st for d, st in zip(root.shape, root.strides) if st > 0 and d > 0)
        self.n = high + root.itemsize - self.low if root.size else 0
        self.writeable = bool(root.flags.writeable)
        self.u8 = (np.asarray(_Memory(root, self.low, self.n, self.writeable)) if self.n
                   else np.zeros(0, dtype=np.uint8))


def _root(a):
    """The innermost NumPy array whose memory ``a`` views (an array that is nobody's view is its own)."""
    import numpy as np

    while type(a.base) is np.ndarray:
        a = a.base
    return a


def _encode_extra(request: "_Request", v, depth: int):
    """A NumPy array, a path in a folder of the test's, or an optimizer; None for anything else."""
    if type(v) is str:
        return _path_arg(request, v)
    if type(v).__name__ == "ndarray" and type(v).__module__ == "numpy":
        return _array_arg(request, v)
    if type(v) in OPTIMIZERS.values() and OPTIMIZERS.get(type(v).__name__) is type(v):
        return _optimizer_arg(request, v, depth)
    return None


def _array_arg(request: "_Request", a) -> dict:
    """An array by value: its buffer once (bytes and writeable flag), then dtype, shape, strides, the
    byte offset of its first element and its own writeable flag; the same array again by number."""
    arrays = request.__dict__.setdefault("arrays", [])
    buffers = request.__dict__.setdefault("buffers", [])
    for n, given in enumerate(arrays):
        if given is a:
            return {"k": "aref", "n": n}
    dtype = a.dtype.str
    if dtype not in ARRAY_DTYPES:
        raise JudgeError(f"the judge sends NumPy arrays of plain dtypes only, not {a.dtype}")
    buffer = _Buffer(_root(a))
    entry = {"k": "arr", "n": len(arrays), "dtype": dtype, "shape": list(a.shape), "strides": list(a.strides),
             "writeable": bool(a.flags.writeable)}
    for b, other in enumerate(buffers):
        if (other.low, other.n) == (buffer.low, buffer.n):
            entry["b"], buffer = b, other
            break
        if buffer.n and other.n and buffer.low < other.low + other.n and other.low < buffer.low + buffer.n:
            raise JudgeError("the judge cannot send two arrays whose memory overlaps unless one base holds both")
    else:
        entry["b"] = len(buffers)
        buffers.append(buffer)
        entry["buffer"] = {"data": base64.b64encode(buffer.u8.tobytes()).decode(), "writeable": buffer.writeable}
    entry["offset"] = a.__array_interface__["data"][0] - buffer.low if a.size else 0
    arrays.append(a)
    return entry


def _check_apart(request: "_Request") -> None:
    """Arrays and tensors of one call in memory of their own: the judge does not send an array that a
    tensor of the same call views (or the other way round)."""
    for buffer in request.__dict__.get("buffers", []):
        for tensors in request.storage_tensors:
            storage = tensors[0].untyped_storage()
            ptr, n = storage.data_ptr(), storage.nbytes()
            if n and buffer.n and ptr < buffer.low + buffer.n and buffer.low < ptr + n:
                raise JudgeError("the judge cannot send a NumPy array and a tensor that share memory")


class _Files:
    """The folders judged tests make with ``tempfile``: under a root of the judge's own, so that a path
    in one of them can go to the kernel by value."""

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


class _Tempfile(types.ModuleType):
    """``tempfile`` for judged tests: its folders are made under the judge's root, and known."""

    def __init__(self, files: _Files):
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


def _load_weights_only(f, map_location=None, *args, **kwargs):
    """``torch.load`` that reads tensors and plain containers only, whatever the test passes: no
    pickle of the kernel's can run code in the grader (and ``weights_only=True`` given explicitly is
    what ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` cannot turn off)."""
    return torch.load(f, map_location=map_location, weights_only=True)


class _Torch(types.ModuleType):
    """``torch`` for judged tests: everything torch's, but ``load`` reads weights only."""

    load = staticmethod(_load_weights_only)

    def __init__(self):
        super().__init__("torch")

    def __getattr__(self, name: str):
        return getattr(torch, name)


_TORCH = _Torch()


def _boundaries(judge: "Judge", namespace: dict) -> None:
    """What a6b's judged tests use: ``os``, a ``tempfile`` whose folders the judge knows, and a
    ``torch`` whose ``load`` reads weights only, also where a test imports them itself."""
    proxies = {"torch": _TORCH, "tempfile": _Tempfile(judge.files)}

    def judged_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and name in judge.fixtures:    # the course's fixtures: the given module, never sys.modules
            return judge.fixtures[name]
        module = builtins.__import__(name, globals, locals, fromlist, level)
        if level == 0 and module is torch:
            return proxies["torch"]
        if level == 0 and module is tempfile:
            return proxies["tempfile"]
        return module

    namespace["__builtins__"] = {**vars(builtins), "__import__": judged_import}
    namespace.update(proxies, os=os)


def _path_arg(request: "_Request", v: str):
    """A str naming an entry directly in a folder the test made: the folder's name never leaves; the
    kernel gets a path in a fresh folder of its own, with the regular files the test's holds."""
    files = request.__dict__.get("files")
    found = files.folder_of(v) if files is not None else None
    if found is None:
        return None
    folder, name = found
    folders = request.__dict__.setdefault("folders", [])
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
            raise JudgeError("the judge sends a folder of at most 64 files and 8 MiB")
        sent.append({"name": entry, "data": base64.b64encode(data).decode()})
    folders.append(folder)
    return {"k": "path", "p": len(folders) - 1, "name": name, "files": sent}


def _apply_extra(request: "_Request", reply: dict) -> None:
    """What the call wrote into the arrays' memory and the folders, and the inputs it detached in
    place, done to the judge's own."""
    import numpy as np

    buffers, folders = request.__dict__.get("buffers", []), request.__dict__.get("folders", [])
    written = reply.get("buffers", [])
    if not isinstance(written, list) or len(written) not in (0, len(buffers)):
        raise JudgeError("the kernel's answer about the arrays does not match the call")
    for buffer, data in zip(buffers, written):
        if data is None:
            continue
        raw = _from_b64(data, torch.uint8, buffer.n)
        if not buffer.writeable:
            raise JudgeError("the kernel claims to have written into read-only memory")
        buffer.u8[:] = np.frombuffer(raw.numpy().tobytes(), dtype=np.uint8)
    detached = reply.get("detached", [])
    if not isinstance(detached, list):
        raise JudgeError("the kernel's answer about its inputs is malformed")
    for i in detached:           # ``t.detach_()`` on a non-leaf input: out of its graph here too
        t = request.tensor_objects[_index(i, len(request.tensor_objects))]
        if t.grad_fn is not None:
            try:
                t.detach_()
            except RuntimeError as exc:
                raise JudgeError(f"the kernel's answer about a detached input does not fit: {exc}") from None
    listed = reply.get("folders", [])
    if not isinstance(listed, list) or len(listed) not in (0, len(folders)):
        raise JudgeError("the kernel's answer about the folders does not match the call")
    for folder, entries in zip(folders, listed):
        _write_folder(folder, entries)


def _write_folder(folder: str, entries: Any) -> None:
    """The folder's regular files become the kernel's: each named once, one plain component, its bytes
    (or, past the caps, a file of the size reported)."""
    if not isinstance(entries, list) or len(entries) > MAX_FILES:
        raise JudgeError("the kernel's answer about a folder is malformed")
    files, total = {}, 0
    for entry in entries:
        if not isinstance(entry, dict):
            raise JudgeError("the kernel's answer about a file is malformed")
        name, size, data = entry.get("name"), entry.get("size"), entry.get("data")
        if (not isinstance(name, str) or not 0 < len(name) <= 255 or name in (".", "..") or "/" in name
                or "\\" in name or "\x00" in name or name in files):
            raise JudgeError("the kernel's answer names a file that is not one plain component")
        if type(size) is not int or not 0 <= size <= MAX_FILE_SIZE:
            raise JudgeError("the kernel's answer gives a file a size out of range")
        if data is not None:
            if not isinstance(data, str) or len(data) > MAX_FILE_BYTES * 2:
                raise JudgeError("the kernel's file is too big")
            data = bytes(_from_b64(data, torch.uint8, size).numpy())
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


def _optimizer_arg(request: "_Request", opt, depth: int) -> dict:
    """An optimizer by value: its class by name, param_groups and defaults as lists and dicts (by
    identity, so what the call does to them comes back), its state per parameter."""
    optimizers = request.__dict__.setdefault("optimizers", [])
    for o, given in enumerate(optimizers):
        if given is opt:
            return {"k": "oref", "o": o}
    if any(getattr(opt, k, None) for k in _optimizer_internals() if "hooks" in k):
        raise JudgeError("the judge cannot send an optimizer with hooks")
    extra = set(vars(opt)) - _optimizer_internals()
    if extra:
        raise JudgeError(f"the judge cannot send an optimizer with the attribute {sorted(extra)[0]!r}")
    if type(opt.param_groups) is not list or type(opt.defaults) is not dict:
        raise JudgeError("the judge sends an optimizer whose param_groups is a list and defaults a dict")
    params = []
    for g in opt.param_groups:
        if type(g) is not dict or type(g.get("params")) is not list:
            raise JudgeError("the judge sends param groups that are dicts with a list of params")
        for k, x in g.items():
            if k == "params":
                if not all(type(p) in (torch.Tensor, torch.nn.Parameter) for p in x):
                    raise JudgeError("the judge sends param groups of tensors")
                params += x
            elif not (_plain(x) or type(x) is torch.Tensor):
                raise JudgeError(f"the judge cannot send the hyper-parameter {k!r} of a {type(opt).__name__}")
    for k, x in opt.defaults.items():
        if not (_plain(x) or type(x) is torch.Tensor):
            raise JudgeError(f"the judge cannot send the default {k!r} of a {type(opt).__name__}")
    state = []
    for p, entry in opt.state.items():
        if not any(p is q for q in params) or type(entry) is not dict:
            raise JudgeError("the judge sends an optimizer's state for its own parameters only")
        for k, x in entry.items():
            if not isinstance(k, str) or not (_plain(x) or type(x) is torch.Tensor):
                raise JudgeError(f"the judge cannot send the state entry {k!r} of a {type(opt).__name__}")
    optimizers.append(opt)
    o = len(optimizers) - 1
    groups = request.encode(opt.param_groups, depth + 1)
    defaults = request.encode(opt.defaults, depth + 1)
    for p, entry in opt.state.items():
        state.append([request.encode(p, depth + 1), request.encode(entry, depth + 1)])
    return {"k": "optim", "o": o, "type": type(opt).__name__, "groups": groups, "defaults": defaults, "state": state}


_EXTRA_RESULT_KINDS = frozenset({"aref", "ab", "oref", "ostate"})


def _decode_extra_result(rebuild: "_Rebuild", v: dict, depth: int):
    """An input array, an array in an input array's memory, an input optimizer or its state."""
    import numpy as np

    request, kind = rebuild.request, v.get("k")
    if kind == "aref":
        arrays = request.__dict__.get("arrays", [])
        return arrays[_index(v.get("n"), len(arrays))]
    if kind in ("oref", "ostate"):
        optimizers = request.__dict__.get("optimizers", [])
        opt = optimizers[_index(v.get("o"), len(optimizers))]
        return opt if kind == "oref" else opt.state
    buffers = request.__dict__.get("buffers", [])
    buffer = buffers[_index(v.get("b"), len(buffers))]
    dtype = v.get("dtype")
    if dtype not in ARRAY_DTYPES:
        raise JudgeError("the kernel's array has a dtype the judge does not take")
    dtype = np.dtype(dtype)
    shape, strides = _ints(v.get("shape")), _ints(v.get("strides"), negative=True)
    offset = _ints([v.get("byte_offset")])[0]
    if len(shape) != len(strides) or len(shape) > 32 or 0 in shape:
        raise JudgeError("the kernel's array has a malformed shape")
    low = offset + sum((d - 1) * st for d, st in zip(shape, strides) if st < 0)
    high = offset + sum((d - 1) * st for d, st in zip(shape, strides) if st > 0) + dtype.itemsize
    if low < 0 or high > buffer.n:
        raise JudgeError("the kernel's array reaches past the input array's memory")
    a = np.ndarray(tuple(shape), dtype=dtype, buffer=buffer.u8, offset=offset, strides=tuple(strides))
    if v.get("writeable") is False:
        a.flags.writeable = False
    return a


def _tensor_in_array(rebuild: "_Rebuild", v: dict, dtype: torch.dtype, shape, stride, offset, facts):
    """A result tensor in an input array's memory: a tensor on the judge's own array memory."""
    buffers = rebuild.request.__dict__.get("buffers", [])
    buffer = buffers[_index(v.get("in_array"), len(buffers))]
    start, nbytes = _ints([v.get("byte_offset"), v.get("nbytes")])
    size = torch.tensor([], dtype=dtype).element_size()
    if nbytes <= 0 or nbytes % size or start + nbytes > buffer.n:
        raise JudgeError("the kernel's tensor reaches past the input array's memory")
    _fits(nbytes, shape, stride, offset, size)
    with warnings.catch_warnings():            # a read-only array: torch warns, as it would there
        warnings.simplefilter("ignore")
        raw = torch.from_numpy(buffer.u8[start:start + nbytes])
    t = raw.view(dtype).as_strided(shape, stride, offset)
    if facts.requires_grad:
        if not (dtype.is_floating_point or dtype.is_complex):
            raise JudgeError("the kernel's integer tensor claims to require grad")
        t.requires_grad_(True)
    return t


def _mirror_optimizers(request: "_Request", rebuilt: "_Rebuild", reply: dict) -> None:
    """What the call did to the optimizers it was given: param_groups or defaults replaced, state
    entries set or removed (the entries' own dicts come back as the lists and dicts do)."""
    optimizers = request.__dict__.get("optimizers", [])
    changed = reply.get("optimizers", [])
    if not isinstance(changed, list):
        raise JudgeError("the kernel's answer about the optimizers is malformed")
    for item in changed:
        if not isinstance(item, dict):
            raise JudgeError("the kernel's answer about an optimizer is malformed")
        opt = optimizers[_index(item.get("o"), len(optimizers))]
        if "param_groups" in item:
            groups = _replace(rebuilt.decode(item["param_groups"], 1), rebuilt.swap)
            if type(groups) is not list or not all(type(g) is dict and type(g.get("params")) is list
                                                   and all(any(p is t for t in request.tensor_objects)
                                                           for p in g["params"]) for g in groups):
                raise JudgeError("the kernel's param_groups are not groups of the judge's parameters")
            opt.param_groups = groups
        if "defaults" in item:
            defaults = rebuilt.decode(item["defaults"], 1)
            if type(defaults) is not dict:
                raise JudgeError("the kernel's optimizer defaults are not a dict")
            opt.defaults = defaults
        if "state" in item:
            entries = item["state"]
            if not isinstance(entries, list) or len(entries) > 100_000:
                raise JudgeError("the kernel's optimizer state is malformed")
            params = [p for g in opt.param_groups for p in g["params"]]
            pairs = []
            for entry in entries:
                if not isinstance(entry, list) or len(entry) != 2:
                    raise JudgeError("the kernel's optimizer state is malformed")
                p, d = rebuilt.decode(entry[0], 1), rebuilt.decode(entry[1], 1)
                if not any(p is q for q in params) or type(d) is not dict:
                    raise JudgeError("the kernel's optimizer state is not per parameter of the optimizer")
                pairs.append((p, d))
            opt.state.clear()
            opt.state.update(pairs)


def _index(v: Any, n: int) -> int:
    """An index the kernel sent, into a list of ``n`` things the judge sent."""
    if type(v) is not int or not 0 <= v < n:
        raise JudgeError("the kernel's answer names something the judge did not send")
    return v


def _ints(v: Any, negative: bool = False) -> list[int]:
    if not isinstance(v, list) or len(v) > 64 or any(type(d) is not int for d in v):
        raise JudgeError("the kernel's answer has a malformed size")
    if any(abs(d) >= 1 << 48 or (d < 0 and not negative) for d in v):
        raise JudgeError("the kernel's answer has a size out of range")
    return v


def _replace(obj, swap: dict, depth: int = 0):
    """``obj`` with the tensors in ``swap`` replaced; a list or dict with nothing to replace stays the
    same object (an input list in a result is that list)."""
    if not swap or depth > 20:
        return obj
    if isinstance(obj, torch.Tensor):
        return swap.get(id(obj), obj)
    if type(obj) in (list, tuple):
        items = [_replace(x, swap, depth + 1) for x in obj]
        if all(a is b for a, b in zip(items, obj)):
            return obj
        return items if type(obj) is list else tuple(items)
    if type(obj) is dict:
        values = {k: _replace(v, swap, depth + 1) for k, v in obj.items()}
        return obj if all(values[k] is v for k, v in obj.items()) else values
    return obj


def _fits(nbytes: int, shape: list[int], stride: list[int], offset: int, itemsize: int) -> None:
    if len(shape) != len(stride) or len(shape) > 64:
        raise JudgeError("the kernel's tensor has a malformed shape")
    if 0 in shape:
        return
    last = offset + sum((d - 1) * s for d, s in zip(shape, stride))
    if (last + 1) * itemsize > nbytes:
        raise JudgeError("the kernel's tensor reaches past its storage")


# -- graphs sent as their recipe (assignment 7) -----------------------------------------------

from ..kernel.judge_agent import GRAPH_OPS  # noqa: E402  (with the code that uses it, apart from the rest)

GRAPH_MARKER = "# graphs go to your kernel as recipes"


def _graph_cell(source: str) -> bool:
    """A judged cell whose tensors go to the learner's function as recipes (their graphs rebuilt there)."""
    return any(line.strip() == GRAPH_MARKER for line in source.splitlines())


def _op_object(name: str):
    owner, _, attr = name.partition(".")
    return getattr({"Tensor": torch.Tensor, "F": torch.nn.functional}.get(owner, torch), attr, None)


# the allow-list's functions and methods, by the object torch hands a TorchFunctionMode
_GRAPH_OP_NAMES = {id(f): (name, f) for name in sorted(GRAPH_OPS) if (f := _op_object(name)) is not None}


class _Unreplayable(Exception):
    pass


def _tensors_in(v, depth: int = 0):
    if isinstance(v, torch.Tensor):
        yield v
    elif depth < 4 and isinstance(v, (tuple, list)):
        for x in v:
            yield from _tensors_in(x, depth + 1)
    elif depth < 4 and isinstance(v, dict):
        for x in v.values():
            yield from _tensors_in(x, depth + 1)


class _Graphs(torch.overrides.TorchFunctionMode):
    """The torch calls a judged cell makes, recorded while it runs (in the judge's thread only, as
    function modes are per thread), so that a tensor passed to the learner's function can be sent as
    its recipe: the leaves it starts from by value and the calls that built it, replayed in the kernel.

    Each tensor the test touches gets a reference.  A tensor that no recorded call built (a factory's
    output, a Parameter, a tensor of an earlier cell) is a *source*: its value, flags and type are
    copied the first time the judge sees it.  A call of the allow-list (``GRAPH_OPS``) is kept with its
    arguments (tensors by reference; numbers, slices, dtypes and tuples by value), the grad mode in
    force and the tensors it returned; it writes the storages of its outputs and of the arguments whose
    version counter it bumped.  What a tensor needs is every kept call that wrote its storage before,
    and what those calls read, before them.  A call outside the list that made a tensor with a graph,
    or wrote into one, cannot be replayed: a tensor that needs it is refused (JudgeError)."""

    def __init__(self):
        super().__init__()
        self.objects: dict[int, torch.Tensor] = {}      # reference -> tensor (kept alive: ids stay unique)
        self.ref_of: dict[int, int] = {}                # id(tensor) -> reference
        self.sources: dict[int, tuple] = {}             # reference -> (copy, requires_grad, parameter, leaf)
        self.ops: list[dict] = []
        self.writers: dict[Any, list[int]] = collections.defaultdict(list)
        self.sent_ops: set[int] = set()
        self.sent_sources: set[int] = set()
        self.paused = 0
        self.token = base64.b32encode(os.urandom(10)).decode()   # names this judge's mirror in the kernel

    # -- recording ---------------------------------------------------------------------------
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.paused:
            return func(*args, **kwargs)
        try:
            tensors = list(_tensors_in((args, kwargs)))
            for t in tensors:
                self._ref(t)
            versions = [(t, t._version) for t in tensors]
        except Exception:
            tensors, versions = [], None
        grad = torch.is_grad_enabled()
        result = func(*args, **kwargs)
        try:
            if versions is None:
                raise _Unreplayable
            self._record(func, args, kwargs, grad, result, versions)
        except Exception:   # never the test's failure: what the judge cannot record, it cannot send
            try:
                for t in list(_tensors_in(result)) + tensors:
                    self._unreplayable(t, "a call the judge could not record")
            except Exception:
                pass
        return result

    def _key(self, t: torch.Tensor):
        storage = t.untyped_storage()
        return storage.data_ptr() if storage.nbytes() else ("empty", self._ref(t))

    def _ref(self, t: torch.Tensor, source: bool = True) -> int:
        r = self.ref_of.get(id(t))
        if r is not None and self.objects[r] is t:
            return r
        r = len(self.objects)
        self.objects[r], self.ref_of[id(t)] = t, r
        if source:
            with torch.no_grad():
                copy = t.detach().clone() if t.device.type == "cpu" and t.layout == torch.strided else None
            self.sources[r] = (copy, t.requires_grad, type(t) is torch.nn.Parameter, t.grad_fn is None)
        return r

    def _unreplayable(self, t: torch.Tensor, label: str) -> None:
        r = self._ref(t, source=False)
        i = len(self.ops)
        self.ops.append({"fn": None, "label": label, "reads": [], "outs": [[None, r]]})
        self.writers[self._key(t)].append(i)

    def _const(self, v, depth: int = 0):
        if depth > 8:
            raise _Unreplayable
        if v is None or type(v) in (bool, int, str):
            return {"k": "v", "v": v}
        if type(v) is float:
            return {"k": "v", "v": v} if math.isfinite(v) else {"k": "f", "v": repr(v)}
        if type(v) in (torch.Tensor, torch.nn.Parameter):
            return {"k": "g", "r": self._ref(v)}
        if type(v) in (tuple, list):
            return {"k": type(v).__name__, "v": [self._const(x, depth + 1) for x in v]}
        if type(v) is slice:
            return {"k": "slice", "v": [self._const(x, depth + 1) for x in (v.start, v.stop, v.step)]}
        if v is Ellipsis:
            return {"k": "ellipsis"}
        if type(v) is torch.dtype and v in DTYPES.values():
            return {"k": "dtype", "v": _dtype_name(v)}
        if type(v) is torch.Size:
            return {"k": "size", "v": list(v)}
        raise _Unreplayable

    def _record(self, func, args, kwargs, grad, result, versions) -> None:
        entry = _GRAPH_OP_NAMES.get(id(func))
        name = entry[0] if entry is not None and entry[1] is func else None
        if type(func).__name__ == "method-wrapper" and func.__name__ == "__set__":
            attr = getattr(getattr(func, "__self__", None), "__name__", None)
            if attr == "grad":               # a leaf's .grad goes by value with the leaf, when it is sent
                return
            if attr == "requires_grad" and len(args) == 2:
                name, args, kwargs, result = "Tensor.requires_grad_", args, {}, args[0]
        outs = ([(None, result)] if isinstance(result, torch.Tensor) else
                [(i, x) for i, x in enumerate(result) if isinstance(x, torch.Tensor)]
                if isinstance(result, (tuple, list)) else [])
        bumped = [t for t, v in versions if t._version != v]
        if name is not None:
            try:
                encoded = ([self._const(a) for a in args], {str(k): self._const(v) for k, v in kwargs.items()})
            except _Unreplayable:
                name = None
        label = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)[:80]
        if name is None:
            new = [t for _, t in outs if not (id(t) in self.ref_of and self.objects[self.ref_of[id(t)]] is t)]
            for t in new:
                if t.grad_fn is None:
                    self._ref(t)          # a plain tensor or a leaf: by value, as it is now
                else:
                    self._unreplayable(t, label)
            for t in bumped:
                self._unreplayable(t, label)
            return
        reads = [[self._ref(t), self._key(t)] for t in _tensors_in((args, kwargs))]
        out_refs = [[pos, self._ref(t, source=False)] for pos, t in outs]
        written = {self._key(t) for _, t in outs} | {self._key(t) for t in bumped}
        if name in ("Tensor.backward", "Tensor.requires_grad_", "Tensor.retain_grad") and args:
            written.add(self._key(args[0]))
        i = len(self.ops)
        self.ops.append({"fn": name, "label": label, "args": encoded[0], "kwargs": encoded[1], "grad": grad,
                         "reads": reads, "outs": out_refs})
        for key in written:
            self.writers[key].append(i)

    # -- sending -----------------------------------------------------------------------------
    def recipe(self, refs: list[int]) -> dict:
        """What the kernel needs to rebuild the tensors ``refs``: the sources and calls it has not had
        yet, and every leaf's .grad as the judge has it now."""
        limit = len(self.ops)
        todo = [(self._key(self.objects[r]), limit) for r in refs]
        done: dict[Any, int] = {}
        needed: set[int] = set()
        involved = set(refs)
        while todo:
            key, lim = todo.pop()
            low = done.get(key, 0)
            if lim <= low:
                continue
            done[key] = lim
            for i in self.writers.get(key, ()):
                if low <= i < lim and i not in needed:
                    needed.add(i)
                    op = self.ops[i]
                    involved.update(r for _, r in op["outs"])
                    for r, k in op["reads"]:
                        involved.add(r)
                        todo.append((k, i))
        made = {r for i in needed for _, r in self.ops[i]["outs"]}
        for i in sorted(needed):
            if self.ops[i]["fn"] is None:
                raise JudgeError(f"the judge cannot rebuild in the kernel a graph made by {self.ops[i]['label']}")
        sources = []
        for r in sorted(involved):
            if r not in self.sources:     # made by a call: one of those needed, or it is missing
                if r not in made:
                    raise JudgeError("the judge cannot rebuild in the kernel a tensor it did not see made")
                continue
            copy, requires_grad, parameter, leaf = self.sources[r]
            if not leaf:
                raise JudgeError("the judge cannot rebuild in the kernel a graph it did not see built")
            if copy is None or copy.dtype not in DTYPES.values():
                raise JudgeError("the judge sends CPU tensors of plain dtypes only")
            if r not in self.sent_sources:
                sources.append({"ref": r, "dtype": _dtype_name(copy.dtype), "shape": list(copy.shape),
                                "data": _b64(copy), "requires_grad": requires_grad, "parameter": parameter})
        ops = [{k: self.ops[i][k] for k in ("fn", "args", "kwargs", "grad", "outs")}
               for i in sorted(needed - self.sent_ops)]
        sync = []
        for r in sorted(involved):
            t = self.objects[r]
            if t.is_leaf and t.requires_grad:
                g = t.grad
                if g is not None and (g.shape != t.shape or g.dtype != t.dtype or g.device.type != "cpu"):
                    raise JudgeError("the judge sends a .grad of its leaf's shape and dtype only")
                sync.append([r, None if g is None else _b64(g)])
        self.sent_sources.update(s["ref"] for s in sources)
        self.sent_ops.update(needed)
        return {"sources": sources, "ops": ops, "sync": sync, "refs": sorted(involved)}


class _GraphRequest(_Request):
    """The arguments of a call in a graph cell: every tensor by its reference in the recipe."""

    def __init__(self, handles, graphs: _Graphs):
        super().__init__(handles)
        self.graphs = graphs
        self.graph_refs: list[int] = []

    def encode(self, v, depth: int = 0):
        if type(v) in (torch.Tensor, torch.nn.Parameter):
            if v.device.type != "cpu" or v.layout != torch.strided or v.dtype not in DTYPES.values():
                raise JudgeError(f"the judge sends CPU tensors of plain dtypes only, not {v.dtype} on {v.device}")
            r = self.graphs._ref(v)
            self.graph_refs.append(r)
            return {"k": "g", "r": r}
        if (type(v).__name__ == "ndarray" and type(v).__module__ == "numpy") or type(v) in OPTIMIZERS.values():
            raise JudgeError("a cell that sends graphs as recipes sends no NumPy array or optimizer")
        return super().encode(v, depth)


class _GraphRebuild(_Rebuild):
    """A graph call's answer: sets by value, and the judge's own tensors where the kernel answers
    with one of the recipe's."""

    def __init__(self, judge, request, reply, refs: set[int]):
        self.graph_refs = refs
        super().__init__(judge, request, reply)

    def decode(self, v: Any, depth: int):
        if isinstance(v, dict) and v.get("k") in ("set", "frozenset") and depth <= 20:
            items = v.get("v")
            if not isinstance(items, list) or len(items) > 100_000:
                raise JudgeError("the kernel's set is malformed")
            try:
                out = {self.decode(x, depth + 1) for x in items}
            except TypeError:
                raise JudgeError("the kernel's set holds something unhashable") from None
            return out if v["k"] == "set" else frozenset(out)
        if isinstance(v, dict) and v.get("k") == "gref":
            r = v.get("r")
            if type(r) is not int or r not in self.graph_refs:
                raise JudgeError("the kernel's answer names a tensor the judge did not send")
            return self.judge._graphs.objects[r]
        return super().decode(v, depth)


def _raise_learners(name: str, raised: Any):
    """The learner's exception, raised in the judge: a built-in one as itself, with the kernel's message."""
    if not isinstance(raised, dict):
        raise JudgeError("the kernel's answer about an exception is malformed")
    ename = str(raised.get("ename", "Exception"))
    ename = ename if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,80}", ename) else "Exception"
    evalue = str(raised.get("evalue", ""))[:2000]
    builtin = getattr(builtins, ename, None)
    if (isinstance(builtin, type) and issubclass(builtin, Exception)
            and not issubclass(builtin, (StopIteration, StopAsyncIteration))):
        try:
            exc = builtin(evalue)
        except Exception:
            exc = None
        if exc is not None:
            raise exc
    raise type(ename, (Exception,), {"__module__": "builtins"})(f"{name}() raised {ename}: {evalue}")


class _GraphCalls:
    """The Judge's methods for graph cells and for the plain values a test reads, kept with the rest
    of the graph code (installed on :class:`Judge` below)."""

    @contextlib.contextmanager
    def _recording(self, source: str):
        if not _graph_cell(source):
            yield
            return
        if getattr(self, "_graphs", None) is None:
            self._graphs = _Graphs()
        self._graph_mode = True
        try:
            with self._graphs:
                yield
        finally:
            self._graph_mode = False

    def _graph_call(self, name: str, args: tuple, kwargs: dict):
        graphs: _Graphs = self._graphs
        graphs.paused += 1
        try:
            self.calls += 1
            request = _GraphRequest(self.handles, graphs)
            encoded_args = [request.encode(a) for a in args]
            encoded_kwargs = {str(k): request.encode(v) for k, v in kwargs.items()}
            graph = graphs.recipe(request.graph_refs)
            freeable = sorted({r for r in request.graph_refs if graphs.objects[r].grad_fn is not None})
            reply = self._ask({"op": "graph_call", "call": self.calls, "mirror": graphs.token, "function": name,
                               "freeable": freeable, "args": encoded_args,
                               "kwargs": encoded_kwargs, "storages": [], "tensors": [], "graph": graph})
            if reply.get("inputs", []) != [] or reply.get("rebound", []) != []:
                raise JudgeError("the kernel's answer does not match the call")
            self._graph_grads(set(graph["refs"]), reply.get("graph_grads", []))
            self._free(set(freeable), reply.get("freed", []))
            if "raised" in reply:
                _raise_learners(name, reply["raised"])
            self._leaf_grads(request, reply.get("leaf_grads", []))
            self._flags(request, reply.get("flags", []))
            if reply.get("joined", []) != []:
                raise JudgeError("the kernel's answer does not match the call")
            rebuilt = _GraphRebuild(self, request, reply, set(graph["refs"]))
            self._mirror(request, rebuilt, reply)
            return rebuilt.result
        finally:
            graphs.paused -= 1

    def _graph_grads(self, refs: set[int], grads: Any) -> None:
        """The .grad of the recipe's leaves, as the learner's function left them in the kernel."""
        if not isinstance(grads, list):
            raise JudgeError("the kernel's answer about its leaves is malformed")
        for item in grads:
            if not isinstance(item, list) or len(item) != 3 or type(item[0]) is not int or item[0] not in refs:
                raise JudgeError("the kernel's answer names a leaf the judge did not send")
            t = self._graphs.objects[item[0]]
            if not (t.is_leaf and t.requires_grad):
                raise JudgeError("the kernel's answer gives a .grad to a tensor that is no leaf")
            if item[1] is None:
                t.grad = None
                continue
            flat = _from_b64(item[1], t.dtype, t.numel()).clone().view(t.shape)
            if item[2] is True and t.grad is not None and t.grad.shape == t.shape:
                with torch.no_grad():
                    t.grad.copy_(flat)
            else:
                t.grad = flat

    def _free(self, freeable: set[int], freed: Any) -> None:
        """The graphs the learner's function freed in the kernel (a ``backward()`` without
        retain_graph), freed here too: a later backward through them fails as it would in one process."""
        if not isinstance(freed, list) or any(type(r) is not int or r not in freeable for r in freed):
            raise JudgeError("the kernel's answer names a graph the judge did not send")
        for r in freed:
            t = self._graphs.objects[r]
            leaves, stack, seen = [], [t.grad_fn], set()
            while stack:
                node = stack.pop()
                if node is None or node in seen:
                    continue
                seen.add(node)
                if hasattr(node, "variable"):
                    leaves.append(node.variable)
                stack.extend(child for child, _ in node.next_functions)
            try:   # a pass that computes nothing anyone keeps, and frees what the graph saved
                torch.autograd.grad([t], leaves, [torch.zeros_like(t)], allow_unused=True)
            except (RuntimeError, ValueError):
                pass           # freed already, or no leaf to reach

    def _look_up_values(self, tree: ast.AST, namespace: dict) -> None:
        """Names the test reads but never calls, that the judge does not define (``graph_answer``):
        what they hold in the kernel, fetched by value when it is a plain value; a name the kernel
        does not have stays undefined here too, so reading it raises NameError as it would there."""
        called = {node.func.id for node in ast.walk(tree)
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
        stored = {node.id for node in ast.walk(tree)
                  if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del))}
        looked_up = self.__dict__.setdefault("_looked_up", set())
        names = sorted({node.id for node in ast.walk(tree)
                        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
                        and (isinstance(namespace.get(node.id), RemoteFunction) or node.id in looked_up)}
                       - called - stored)
        if not names:
            return
        reply = self._ask({"op": "look_up", "names": names[:256]})
        found = reply.get("names")
        if not isinstance(found, dict):
            raise JudgeError("the kernel's answer about names is malformed")
        for name in names[:256]:
            item = found.get(name)
            if not isinstance(item, dict) or item.get("kind") not in ("missing", "value", "function", "other"):
                raise JudgeError("the kernel's answer about a name is malformed")
            if item["kind"] == "missing":
                namespace.pop(name, None)
                looked_up.add(name)
            elif item["kind"] == "value":
                if "f" in item:
                    if item["f"] not in ("nan", "inf", "-inf"):
                        raise JudgeError("the kernel's value is malformed")
                    value = float(item["f"])
                else:
                    value = item.get("v")
                    if value is not None and type(value) not in (bool, int, float, str):
                        raise JudgeError("the kernel's value is not a plain value")
                namespace[name] = value
                looked_up.add(name)
            else:                       # a function, or what cannot go by value: called there, as before
                namespace[name] = RemoteFunction(self, name)
                looked_up.discard(name)


for _name in ("_recording", "_graph_call", "_graph_grads", "_free", "_look_up_values"):
    setattr(Judge, _name, vars(_GraphCalls)[_name])
