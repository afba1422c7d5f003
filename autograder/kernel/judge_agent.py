"""The kernel's end of the judge: call one of the learner's functions on inputs sent by value.

Hidden tests run in the grader's own process (``autograder.grading.judge``); this module is all
of them that the learner's kernel sees.  A request names a function and carries its arguments
by value: each storage once, as bytes, and each tensor as (storage, dtype, shape, strides,
offset, requires_grad, leaf or not).  The agent rebuilds them with the same sharing (two views
of one base stay two views of one storage), calls the function, and answers by value: the
result, whether it is one of the inputs or lies in an input's storage, and what the call did to
the inputs (bytes written, version counters, gradients accumulated).  A second request asks for
a vector-Jacobian product of an earlier call's outputs, so that ``backward()`` in the judge
reaches through the learner's function.

A third request (``graph_call``, assignment 7) carries tensors as recipes: the tensors they start
from by value and the torch calls the test made on them, which the agent replays here from the
fixed list ``GRAPH_OPS`` (any other name refuses the whole request; nothing is ever evaluated) into
a mirror that later calls of the same notebook reuse, then calls the function on the mirror's
tensors and sends back the ``.grad`` of the recipe's leaves.  The replay uses this process's torch,
so a learner who patches it changes only the graphs their own function is given.  A fourth
(``look_up``) says what a name holds here, by value when it is a plain value.

No test code and no expected value ever comes here.  What this code measures about the inputs
and results (storage identity, ``_version``, ``requires_grad``, ``grad_fn`` names) it measures
inside the learner's process, so a learner who rewrites this module can forge those facts; the
values themselves can only be right by computing them.  Standard library and torch only.

Since assignment 6b a request may also carry NumPy arrays (each base's memory once, as bytes, and
each array as dtype, shape, strides, offset and writeable flag over it), paths (a fresh folder of
this kernel's stands for the test's, its files written there; after the call the regular files
found there go back, links not followed, and the folder is removed) and optimizers of a fixed list
(built here from the class, param_groups, defaults and state the judge sent).
"""
from __future__ import annotations

import base64
import collections
import importlib
import json
import math
import sys

import torch

from . import fixtures as _fixtures

_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
_Module = torch.nn.Module
_OrderedDict = collections.OrderedDict
_module_init = torch.nn.Module.__init__
_ndarray = getattr(sys.modules.get("numpy"), "ndarray", None)   # torch loads NumPy; the agent never imports it
_id = id
_len = len
_type = type
_isinstance = isinstance
_frombuffer = torch.frombuffer
_empty = torch.empty
_grad = torch.autograd.grad
_no_grad = torch.no_grad
_import_module = importlib.import_module

DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128,
    torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool)}
MAX_CALLS = 256            # calls kept for a later vector-Jacobian product
# the modules the judge sends by value (its list is the same): rebuilt without calling a constructor
MODULES = {c.__name__: c for c in (
    torch.nn.Sequential, torch.nn.Linear, torch.nn.ReLU, torch.nn.Tanh, torch.nn.Sigmoid, torch.nn.Identity,
    torch.nn.BatchNorm1d, torch.nn.LayerNorm, torch.nn.Dropout, torch.nn.Embedding, *_fixtures.MODELS)}
HOOKS = {c.__name__: c for c in _fixtures.HOOKS}
FUNCTIONS = {f.__name__: f for f in (
    torch.nn.functional.mse_loss, torch.nn.functional.l1_loss, torch.nn.functional.cross_entropy,
    torch.nn.functional.binary_cross_entropy_with_logits, torch.nn.functional.nll_loss)}
MODULE_INTERNALS = frozenset(vars(torch.nn.Module()))
# NumPy dtypes a result may have (byte order, kind, size), as ``dtype.str`` names them
ARRAY_DTYPES = frozenset({"|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4", "<f8",
                          "<c8", "<c16"})

last_reply = ""            # read back by the judge as a user expression
_calls: dict[int, dict] = {}
MAX_KEPT = 4096            # objects the judge holds only by handle
_kept: dict[int, object] = {}
_next_handle = 0


def _bytes_of(storage) -> bytes:
    if storage.nbytes() == 0:
        return b""
    return _empty(0, dtype=torch.uint8).set_(storage).numpy().tobytes()


def _flat(data: bytes, dtype: torch.dtype) -> _Tensor:
    if not data:
        return _empty(0, dtype=dtype)
    return _frombuffer(bytearray(data), dtype=dtype)


def _shaped(flat: _Tensor, shape: list[int]) -> _Tensor:
    """``flat`` with ``shape``, as a tensor of its own (not a view: in-place history is its own, as
    it is for the tensor in the judge)."""
    if flat.numel() == 0:
        return _empty(shape, dtype=flat.dtype)
    stride, step = [], 1
    for d in reversed(shape):
        stride.append(step)
        step *= d
    return _empty(0, dtype=flat.dtype).set_(flat.untyped_storage(), 0, shape, stride[::-1])


def _course_class(module: str, name: str):
    """A model class of the course's fixtures (a file in the kernel's folder), by module and name."""
    cls = getattr(_import_module(module), name)
    if not (_isinstance(cls, _type) and issubclass(cls, _Module)):
        raise ValueError(f"{module}.{name} is not a module class")
    return cls


def _course_module(course: list, cls) -> str | None:
    """The fixtures module among ``course`` that defines ``cls``, else None."""
    module = getattr(cls, "__module__", None)
    if module in course and getattr(sys.modules.get(module), cls.__name__, None) is cls:
        return module
    return None


# -- the request's values -------------------------------------------------------------------

class _Inputs:
    """The storages and tensors of one call, rebuilt with their sharing."""

    def __init__(self, storages: list[dict], tensors: list[dict], course: list | tuple = ()):
        self.course = [m for m in course if _type(m) is str]   # the course's fixtures modules the judge knows
        self.bases: list[_Tensor] = []     # per storage: the tensor every input on it views
        self.leaves: list[_Tensor | None] = []   # per storage: the leaf that gradients reach
        self.before: list[bytes] = []
        self.versions: list[int] = []
        self.grads: list[tuple] = []       # per storage: the leaf's .grad before the call, and its bytes
        for s in storages:
            dtype = DTYPES[s["dtype"]]
            data = base64.b64decode(s["data"])
            base = _flat(data, dtype)
            if s.get("shape") is not None:     # a tensor passed whole: the base is that tensor
                base = _shaped(base, s["shape"])
            leaf = None
            if s.get("parameter"):             # a Parameter is the whole of its storage, and its leaf
                if s.get("shape") is None or s["non_leaf"]:
                    raise ValueError("a Parameter that is not a whole leaf")
                base = _Parameter(base, requires_grad=bool(s["requires_grad"]))
            if s["requires_grad"] and (dtype.is_floating_point or dtype.is_complex):
                base.requires_grad_(True)
                leaf = base
                if s.get("grad") is not None:
                    base.grad = _flat(base64.b64decode(s["grad"]), dtype).clone().view(base.shape)
                if s["non_leaf"]:          # views of a tensor with history: in-place works on them
                    base = base.clone()
            self.bases.append(base)
            self.leaves.append(leaf)
            self.grads.append((leaf.grad, _bytes_of(leaf.grad.untyped_storage())) if leaf is not None and leaf.grad is not None
                              else (None, None))
            self.before.append(data)
            self.versions.append(base._version)
        self.tensors: list[_Tensor] = []
        self.leaf_views: list[tuple] = []   # (index, leaf, its .grad before, that grad's bytes)
        for i, t in enumerate(tensors):
            base = self.bases[t["storage"]]
            if t["whole"]:
                self.tensors.append(base)
            elif t.get("leaf_view"):          # a leaf of its own on a storage that does not require grad
                view = base.detach().as_strided(t["shape"], t["stride"], t["offset"]).requires_grad_(True)
                if t.get("grad") is not None:
                    view.grad = _flat(base64.b64decode(t["grad"]), view.dtype).clone().view(t["shape"])
                self.leaf_views.append((i, view, view.grad, None if view.grad is None else _bytes_of(view.grad.untyped_storage())))
                self.tensors.append(view)
            else:
                view = base.as_strided(t["shape"], t["stride"], t["offset"])
                if not t["requires_grad"] and view.requires_grad:
                    view = view.detach()
                self.tensors.append(view)
        # the storages as they were: a call that gives an input new memory (``t.data = ...``,
        # ``t.set_(...)``) leaves the old memory, and the views on it, as they were
        self.storages = [base.untyped_storage() for base in self.bases]
        self.storage_ptrs = [st.data_ptr() for st in self.storages]
        self.tensor_storage = [t["storage"] for t in tensors]
        self.flags = [t.requires_grad for t in self.tensors]
        self.histories = [t.grad_fn for t in self.tensors]
        self.containers: dict[int, object] = {}    # lists and dicts, by the judge's index
        self.modules: dict[int, object] = {}
        self.fixtures: dict[int, object] = {}      # the fixtures' hook objects, by the judge's index
        self.ptrs = {}
        for i, base in enumerate(self.bases):
            self.ptrs[base.untyped_storage().data_ptr()] = i
            leaf = self.leaves[i]
            if leaf is not None:
                self.ptrs.setdefault(leaf.untyped_storage().data_ptr(), i)

    def decode(self, v):
        kind = v["k"]
        if kind in _EXTRA_KINDS:          # since 6b: arrays, paths, optimizers
            return _decode_extra(self, v)
        if kind == "t":
            return self.tensors[v["i"]]
        if kind == "v":
            return v["v"]
        if kind == "f":
            return float(v["v"])
        if kind == "tuple":
            return tuple(self.decode(x) for x in v["v"])
        if kind == "list":
            out = self.containers[v["c"]] = []
            out.extend(self.decode(x) for x in v["v"])
            return out
        if kind == "dict":
            out = self.containers[v["c"]] = {}
            for a, b in v["v"]:
                out[self.decode(a)] = self.decode(b)
            return out
        if kind == "cref":
            return self.containers[v["c"]]
        if kind == "module":
            return self._module(v)
        if kind == "mref":
            return self.modules[v["m"]] if v["m"] in self.modules else self.fixtures[v["m"]]
        if kind == "fixture":
            cls = HOOKS[v["type"]]
            h = self.fixtures[v["m"]] = cls.__new__(cls)
            for k, a in v["attrs"]:
                if k.startswith("__"):
                    raise ValueError(f"a hook attribute {k!r}")
                h.__dict__[k] = self.decode(a)
            return h
        if kind == "handle":
            return _kept[v["h"]]
        if kind == "iter":
            return iter([self.decode(x) for x in v["v"]])
        if kind == "fn":
            return FUNCTIONS[v["name"]]
        if kind == "dtype":
            return DTYPES[v["v"]]
        if kind == "size":
            return torch.Size(v["v"])
        if kind == "device":
            return torch.device(v["v"])
        raise ValueError(f"cannot decode a {kind!r}")

    def _module(self, v):
        cls = MODULES[v["type"]] if "from" not in v else _course_class(v["from"], v["type"])
        m = cls.__new__(cls)
        _module_init(m)
        self.modules[v["m"]] = m
        for k, a in v["attrs"]:
            if k in MODULE_INTERNALS or k.startswith("__"):
                raise ValueError(f"a module attribute {k!r}")
            m.__dict__[k] = self.decode(a)
        m.training = bool(v["training"])
        for k, p in v["params"]:
            p = None if p is None else self.decode(p)
            if p is not None and _type(p) is not _Parameter:
                raise ValueError("a module parameter that is not a Parameter")
            m._parameters[k] = p
        for k, b in v["buffers"]:
            m._buffers[k] = None if b is None else self.decode(b)
        m._non_persistent_buffers_set.update(v["non_persistent"])
        for k, c in v["children"]:
            m._modules[k] = None if c is None else self.decode(c)
        for h in v.get("pre_hooks", []):
            h = self.decode(h)
            if HOOKS.get(_type(h).__name__) is not _type(h):
                raise ValueError("a hook that is not the fixtures'")
            m.register_forward_pre_hook(h)
        return m

    def snapshot(self) -> None:
        """What the containers and modules hold before the call, by identity."""
        self.held = {c: self._holding(obj) for c, obj in self.containers.items()}
        self.slots = {i: self._slots(m) for i, m in self.modules.items()}

    @staticmethod
    def _holding(obj):
        if _type(obj) is list:
            return [_id(x) for x in obj]
        return [(_id(k), _id(x)) for k, x in obj.items()] if _type(obj) is dict else None

    @staticmethod
    def _slots(m):
        return ({k: _id(p) for k, p in m._parameters.items()}, {k: _id(b) for k, b in m._buffers.items()},
                {k: _id(c) for k, c in m._modules.items()}, m.training)

    def changes(self, results) -> dict:
        """What the call did to the containers, modules and flags it was given, by value."""
        containers = []
        for c, obj in self.containers.items():
            if self._holding(obj) != self.held[c]:
                if _type(obj) is list:
                    containers.append([c, [results.encode(x) for x in obj]])
                else:
                    containers.append([c, [[results.encode(k), results.encode(x)] for k, x in obj.items()]])
        modules = []
        for i, m in self.modules.items():
            params, buffers, children, training = self.slots[i]
            now = self._slots(m)
            entry = {"m": i, "training": m.training}
            if now[2] != children:
                entry["children_changed"] = True
            if now[0] != params:
                entry["params"] = [[k, None if p is None else results.encode(p)] for k, p in m._parameters.items()]
            if now[1] != buffers:
                entry["buffers"] = [[k, None if b is None else results.encode(b)] for k, b in m._buffers.items()]
            if _len(entry) > 2 or m.training != training:
                modules.append(entry)
        flags = [[i, t.requires_grad] for i, t in enumerate(self.tensors)
                 if t.requires_grad != self.flags[i] and t.is_leaf]
        # inputs that an in-place operation put into a graph: a later backward starts from them too
        joined = []
        for i, t in enumerate(self.tensors):
            if t.grad_fn is not None and t.grad_fn is not self.histories[i]:
                joined.append({"tensor": i, "output": _len(results.differentiable), "grad_fn": _type(t.grad_fn).__name__})
                results.differentiable.append(t)
        leaf_grads = []
        for i, view, before, before_bytes in self.leaf_views:
            now = view.grad
            if now is None and before is not None:
                leaf_grads.append([i, None, False])
            elif now is not None and (now is not before or _bytes_of(now.untyped_storage()) != before_bytes):
                leaf_grads.append([i, base64.b64encode(now.detach().contiguous().numpy().tobytes()).decode(), now is before])
        return {"containers": containers, "modules": modules, "flags": flags, "joined": joined, "leaf_grads": leaf_grads}

    def after(self) -> list[dict]:
        out = []
        for i, base in enumerate(self.bases):
            data = _bytes_of(self.storages[i])
            leaf = self.leaves[i]
            entry = {"data": None if data == self.before[i] else base64.b64encode(data).decode(),
                     "bumps": base._version - self.versions[i], "grad": None}
            before, before_bytes = self.grads[i]
            now = None if leaf is None else leaf.grad
            if now is None and before is not None:
                entry["grad_cleared"] = True
            elif now is not None and (now is not before or _bytes_of(now.untyped_storage()) != before_bytes):
                entry["grad"] = base64.b64encode(now.detach().contiguous().numpy().tobytes()).decode()
                entry["grad_in_place"] = now is before
            out.append(entry)
        return out

    def rebound(self) -> list[dict]:
        """Inputs the call gave memory of their own (``t.data = ...``): their new storage, by value."""
        out = []
        for i, t in enumerate(self.tensors):
            ptr = t.untyped_storage().data_ptr()
            if ptr != self.storage_ptrs[self.tensor_storage[i]]:
                entry = {"tensor": i, "dtype": str(t.dtype).removeprefix("torch."),
                         "shape": list(t.shape), "stride": list(t.stride()), "offset": t.storage_offset()}
                if ptr in self.storage_ptrs and t.untyped_storage().nbytes() > 0:   # another input's memory
                    entry["input_storage"] = self.storage_ptrs.index(ptr)
                else:
                    entry["data"] = base64.b64encode(_bytes_of(t.untyped_storage())).decode()
                out.append(entry)
        return out


class _Results:
    """The call's result, by value, and the tensors a later backward starts from."""

    def __init__(self, inputs: _Inputs):
        self.inputs = inputs
        self.new: dict[int, int] = {}        # data_ptr of a new storage -> its index
        self.storages: list[dict] = []
        self.differentiable: list[_Tensor] = []
        self.seen: dict[int, int] = {}       # id of a tensor already sent -> its number (ties stay ties)
        self.seen_modules: dict[int, int] = {}
        self.alive: list = []                # what the ids above name, kept alive while encoding
        self.leaves: list[_Tensor] = []      # new leaves that require grad: a backward may reach them

    def encode(self, obj, depth: int = 0):
        if depth > 20:
            return {"k": "opaque", "type": "deeply nested object", "repr": ""}
        if obj is None or _type(obj) in (bool, int, str):
            return {"k": "v", "v": obj}
        if _type(obj) is float:
            return {"k": "v", "v": obj} if math.isfinite(obj) else {"k": "f", "v": repr(obj)}
        for c, given in self.inputs.containers.items():
            if obj is given:
                return {"k": "cref", "c": c}
        for table in (self.inputs.modules, self.inputs.fixtures):
            for i, given in table.items():
                if obj is given:
                    return {"k": "mref", "m": i}
        extra = _result_extra(self.inputs, obj)   # since 6b: an input optimizer or its state
        if extra is not None:
            return extra
        if HOOKS.get(_type(obj).__name__) is _type(obj):
            return self._fixture(obj, depth)
        if _type(obj) in (list, tuple):
            return {"k": _type(obj).__name__, "v": [self.encode(x, depth + 1) for x in obj]}
        if _type(obj) in (dict, _OrderedDict):
            return {"k": "dict" if _type(obj) is dict else "odict",
                    "v": [[self.encode(a, depth + 1), self.encode(b, depth + 1)] for a, b in obj.items()]}
        if _ndarray is not None and _type(obj) is _ndarray:
            return self._array(obj)
        if _isinstance(obj, _Module) and (MODULES.get(_type(obj).__name__) is _type(obj)
                                          or _course_module(self.inputs.course, _type(obj))):
            return self._module(obj, depth)
        if _type(obj) is torch.Size:
            return {"k": "size", "v": list(obj)}
        if _type(obj) is torch.dtype:
            return {"k": "dtype", "v": str(obj).removeprefix("torch.")}
        if _type(obj) in (_Tensor, _Parameter):
            return self._tensor(obj)
        t = _type(obj)
        return {"k": "opaque", "type": f"{t.__module__}.{t.__qualname__}", "repr": _short_repr(obj), "h": _keep(obj)}

    def _tensor(self, t: _Tensor) -> dict:
        facts = {"k": "t", "parameter": _type(t) is _Parameter, "requires_grad": t.requires_grad,
                 "leaf": t.is_leaf, "grad_fn": None if t.grad_fn is None else _type(t.grad_fn).__name__,
                 "version": t._version, "dtype": str(t.dtype).removeprefix("torch."),
                 "shape": list(t.shape), "stride": list(t.stride()), "offset": t.storage_offset()}
        if t.device.type == "meta" and t.layout == torch.strided and t.dtype in DTYPES.values():
            facts["meta"] = True           # shape, strides and dtype only: a meta tensor has no data
            return facts
        if t.device.type != "cpu" or t.is_sparse or t.dtype not in DTYPES.values():
            return {"k": "opaque", "type": f"a {t.layout} {t.dtype} tensor on {t.device}", "repr": ""}
        for i, given in enumerate(self.inputs.tensors):
            if t is given:
                facts["same_as"] = i
                return facts
        if _id(t) in self.seen:
            return {"k": "tref", "r": self.seen[_id(t)]}
        facts["ref"] = self.seen[_id(t)] = _len(self.seen)
        self.alive.append(t)
        ptr = t.untyped_storage().data_ptr()
        if ptr in self.inputs.ptrs and t.untyped_storage().nbytes() > 0:
            facts["input_storage"] = self.inputs.ptrs[ptr]
            return facts
        if _tensor_in_array(self.inputs, t, facts):    # since 6b: in an input array's memory
            return facts
        if ptr not in self.new or t.untyped_storage().nbytes() == 0:
            self.new[ptr] = len(self.storages)
            self.storages.append({"data": base64.b64encode(_bytes_of(t.untyped_storage())).decode()})
        facts["new_storage"] = self.new[ptr]
        if t.requires_grad and t.grad_fn is not None:
            facts["output"] = len(self.differentiable)
            self.differentiable.append(t)
        if t.requires_grad and t.is_leaf and (t.dtype.is_floating_point or t.dtype.is_complex):
            facts["leaf_index"] = _len(self.leaves)
            self.leaves.append(t)
        if t.is_leaf and t.grad is not None and _type(t.grad) is _Tensor:
            facts["grad"] = self._tensor(t.grad)
        return facts

    def _module(self, m, depth: int) -> dict:
        """A module the call made (a copy of a model): its class by name, its state by value."""
        if _id(m) in self.seen_modules:
            return {"k": "rmref", "r": self.seen_modules[_id(m)]}
        if (any(getattr(m, h) for h in MODULE_INTERNALS
                if "hook" in h and h not in ("_is_full_backward_hook", "_forward_pre_hooks"))
                or any(HOOKS.get(_type(h).__name__) is not _type(h) for h in m._forward_pre_hooks.values())):
            return {"k": "opaque", "type": f"a {_type(m).__name__} with hooks", "repr": "", "h": _keep(m)}
        r = self.seen_modules[_id(m)] = _len(self.seen_modules)
        self.alive.append(m)
        attrs = [[k, self.encode(v, depth + 1)] for k, v in m.__dict__.items() if k not in MODULE_INTERNALS]
        course = _course_module(self.inputs.course, _type(m))
        return {"k": "rmodule", "r": r, "type": _type(m).__name__, **({"from": course} if course else {}),
                "training": m.training, "attrs": attrs,
                "params": [[k, None if p is None else self.encode(p, depth + 1)] for k, p in m._parameters.items()],
                "buffers": [[k, None if b is None else self.encode(b, depth + 1)] for k, b in m._buffers.items()],
                "non_persistent": sorted(m._non_persistent_buffers_set),
                "children": [[k, None if c is None else self.encode(c, depth + 1)] for k, c in m._modules.items()],
                "pre_hooks": [self.encode(h, depth + 1) for h in m._forward_pre_hooks.values()]}

    def _fixture(self, h, depth: int) -> dict:
        """A hook object of the fixtures the call made (a deepcopy of a model copies its hooks)."""
        if _id(h) in self.seen_modules:
            return {"k": "rmref", "r": self.seen_modules[_id(h)]}
        r = self.seen_modules[_id(h)] = _len(self.seen_modules)
        self.alive.append(h)
        return {"k": "rfixture", "r": r, "type": _type(h).__name__,
                "attrs": [[k, self.encode(v, depth + 1)] for k, v in h.__dict__.items()]}


    def _array(self, a) -> dict:
        """A NumPy array: its dtype, shape, strides and flags; the input storage it lies in (with its
        byte offset) or its values as bytes (C order)."""
        extra = _array_result(self.inputs, a)     # since 6b: an input array, or in its memory
        if extra is not None:
            return extra
        dtype = a.dtype.str
        if dtype not in ARRAY_DTYPES:
            return {"k": "opaque", "type": f"a NumPy array of {dtype}", "repr": ""}
        facts = {"k": "a", "dtype": dtype, "shape": list(a.shape), "strides": list(a.strides),
                 "writeable": bool(a.flags.writeable), "owns": a.base is None}
        address = a.__array_interface__["data"][0]
        low = address + sum((d - 1) * st for d, st in zip(a.shape, a.strides) if st < 0 and d > 0)
        for i, storage in enumerate(self.inputs.storages):
            ptr, n = storage.data_ptr(), storage.nbytes()
            if n and a.size and ptr <= low < ptr + n:
                facts["input_storage"], facts["byte_offset"] = i, address - ptr
                return facts
        facts["data"] = base64.b64encode(a.tobytes(order="C")).decode()
        return facts


# -- since assignment 6b: NumPy arrays, files in a test's folder, optimizers ----------------------
# (a block of its own: the hooks above call into it by one line each)

import os as _os
import shutil as _shutil
import stat as _stat
import tempfile as _tempfile

_np = sys.modules.get("numpy")
# the optimizers the judge sends by value (its list is the same): class name, param_groups, state
OPTIMIZERS = {c.__name__: c for c in (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW)}
MAX_FILES = 64             # files of a test's folder sent back after a call, at most
MAX_FILE_BYTES = 8 << 20   # their bytes, all together; a file beyond goes back by its size alone
_EXTRA_KINDS = frozenset({"arr", "aref", "path", "optim", "oref"})


class _Extras:
    """What one request carries besides tensors, lists, dicts and modules."""

    def __init__(self):
        self.buffers: list[tuple] = []       # per buffer: (uint8 tensor, its NumPy view, bytes before)
        self.arrays: dict[int, object] = {}  # by the judge's number
        self.folders: dict[int, str] = {}    # by the judge's number: a fresh folder of the kernel's
        self.optimizers: dict[int, object] = {}
        self.before: dict[int, tuple] = {}   # per optimizer: its state, param_groups and defaults before


def _extras(inputs) -> _Extras:
    extras = inputs.__dict__.get("extras")
    if extras is None:
        extras = inputs.extras = _Extras()
    return extras


def _decode_extra(inputs, v):
    extras = _extras(inputs)
    kind = v["k"]
    if kind == "aref":
        return extras.arrays[v["n"]]
    if kind == "oref":
        return extras.optimizers[v["o"]]
    if kind == "arr":
        return _array_in(extras, v)
    if kind == "path":
        return _path_in(extras, v)
    return _optimizer_in(inputs, extras, v)


def _array_in(extras: _Extras, v: dict):
    """An array on a buffer of the request's (the first array on a buffer carries its bytes)."""
    if _np is None or _ndarray is None:
        raise ValueError("NumPy is not loaded in the kernel")
    b = v["b"]
    if "buffer" in v:
        if b != _len(extras.buffers):
            raise ValueError("buffers out of order")
        data = base64.b64decode(v["buffer"]["data"])
        raw = _frombuffer(bytearray(data), dtype=torch.uint8) if data else _empty(0, dtype=torch.uint8)
        whole = raw.numpy()
        if not v["buffer"]["writeable"]:
            whole.flags.writeable = False
        extras.buffers.append((raw, whole, data))
    whole = extras.buffers[b][1]
    if v["dtype"] not in ARRAY_DTYPES:
        raise ValueError(f"an array of {v['dtype']!r}")
    a = _ndarray(tuple(v["shape"]), dtype=_np.dtype(v["dtype"]), buffer=whole, offset=v["offset"],
                 strides=tuple(v["strides"]))
    if not v["writeable"]:
        a.flags.writeable = False
    extras.arrays[v["n"]] = a
    return a


def _check_name(name) -> str:
    if (_type(name) is not str or not 0 < _len(name) <= 255 or name in (".", "..") or "/" in name
            or "\\" in name or "\x00" in name):
        raise ValueError("a file name that is not one plain component")
    return name


def _path_in(extras: _Extras, v: dict) -> str:
    """A path in a fresh folder of the kernel's, standing for the test's folder (with its files)."""
    p = v["p"]
    if p not in extras.folders:
        folder = _tempfile.mkdtemp(prefix="judged-")
        extras.folders[p] = folder
        for entry in v.get("files", []):
            fd = _os.open(_os.path.join(folder, _check_name(entry["name"])),
                          _os.O_WRONLY | _os.O_CREAT | _os.O_EXCL | _os.O_NOFOLLOW, 0o600)
            with open(fd, "wb") as f:
                f.write(base64.b64decode(entry["data"]))
    return _os.path.join(extras.folders[p], _check_name(v["name"]))


def _files_of(folder: str) -> list[dict]:
    """The regular files directly in ``folder`` (links are not followed), by value up to the caps."""
    try:
        names = sorted(_os.listdir(folder))
    except OSError:
        return []
    out, budget = [], MAX_FILE_BYTES
    for name in names:
        if _len(out) >= MAX_FILES:
            break
        try:
            fd = _os.open(_os.path.join(folder, name), _os.O_RDONLY | _os.O_NOFOLLOW | _os.O_NONBLOCK)
        except OSError:        # a symbolic link, or gone
            continue
        try:
            st = _os.fstat(fd)
            if not _stat.S_ISREG(st.st_mode):
                continue
            entry = {"name": name, "size": st.st_size, "data": None}
            if st.st_size <= budget:
                chunks, left = [], st.st_size
                while left > 0:
                    chunk = _os.read(fd, min(left, 1 << 20))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    left -= _len(chunk)
                data = b"".join(chunks)
                entry["size"] = _len(data)
                entry["data"] = base64.b64encode(data).decode()
                budget -= _len(data)
            out.append(entry)
        except OSError:
            continue
        finally:
            _os.close(fd)
    return out


def _optimizer_in(inputs, extras: _Extras, v: dict):
    """An optimizer of the listed classes, built from its param_groups, defaults and state as sent."""
    cls = OPTIMIZERS[v["type"]]
    groups, defaults = inputs.decode(v["groups"]), inputs.decode(v["defaults"])
    if _type(groups) is not list or not all(_type(g) is dict for g in groups) or _type(defaults) is not dict:
        raise ValueError("an optimizer's param_groups or defaults are malformed")
    contents = [(g, dict(g)) for g in groups]
    code = cls.__init__.__code__
    accepted = set(code.co_varnames[1:code.co_argcount + code.co_kwonlyargcount]) - {"params"}
    opt = cls(list(groups), **{k: x for k, x in defaults.items() if k in accepted})
    for g, items in contents:         # the constructor's add_param_group copied the params list: undo
        g.clear()
        g.update(items)
    opt.param_groups, opt.defaults = groups, defaults
    params = {_id(p) for g in groups for p in g["params"]}
    state = collections.defaultdict(dict)
    for key, entry in v["state"]:
        p, d = inputs.decode(key), inputs.decode(entry)
        if _id(p) not in params or _type(d) is not dict:
            raise ValueError("an optimizer's state is malformed")
        state[p] = d
    opt.state = state
    extras.optimizers[v["o"]] = opt
    extras.before[v["o"]] = (opt.state, [(_id(k), _id(x)) for k, x in opt.state.items()], opt.param_groups,
                             opt.defaults)
    return opt


def _array_result(inputs, a):
    """An input array, or an array in an input array's memory (None: neither)."""
    extras = inputs.__dict__.get("extras")
    if extras is None:
        return None
    for n, given in extras.arrays.items():
        if a is given:
            return {"k": "aref", "n": n}
    dtype = a.dtype.str
    if dtype not in ARRAY_DTYPES or not a.size:
        return None
    address = a.__array_interface__["data"][0]
    found = _in_buffer(inputs, address)
    if found is None:
        return None
    return {"k": "ab", "b": found[0], "byte_offset": found[1], "dtype": dtype, "shape": list(a.shape),
            "strides": list(a.strides), "writeable": bool(a.flags.writeable)}


def _in_buffer(inputs, ptr: int):
    """(buffer, byte offset) when ``ptr`` lies in the memory of an input array's buffer; else None."""
    extras = inputs.__dict__.get("extras")
    for b, (raw, _, _) in enumerate(extras.buffers if extras is not None else ()):
        start, n = raw.data_ptr(), raw.numel()
        if n and start <= ptr < start + n:
            return b, ptr - start
    return None


def _tensor_in_array(inputs, t: _Tensor, facts: dict) -> bool:
    """A result tensor whose storage lies in an input array's memory (``torch.from_numpy(arr)``)."""
    found = _in_buffer(inputs, t.untyped_storage().data_ptr())
    if found is None or t.untyped_storage().nbytes() == 0:
        return False
    facts["in_array"], facts["byte_offset"], facts["nbytes"] = found[0], found[1], t.untyped_storage().nbytes()
    return True


def _result_extra(inputs, obj):
    """An input optimizer, or its state mapping, by the judge's number (None: neither)."""
    extras = inputs.__dict__.get("extras")
    for o, opt in (extras.optimizers.items() if extras is not None else ()):
        if obj is opt:
            return {"k": "oref", "o": o}
        if obj is opt.state:
            return {"k": "ostate", "o": o}
    return None


def _after_extra(inputs, results) -> dict:
    """What the call did to the arrays' memory, the folders' files, the optimizers and its inputs'
    history (``detach_()``), by value; the kernel's folders are removed."""
    # non-leaf inputs the call took out of their graph in place (``t.detach_()``)
    detached = [i for i, t in enumerate(inputs.tensors)
                if inputs.histories[i] is not None and t.grad_fn is None and not t.requires_grad]
    extras = inputs.__dict__.get("extras")
    if extras is None:
        return {"detached": detached}
    buffers = []
    for raw, _, before in extras.buffers:
        now = _bytes_of(raw.untyped_storage())
        buffers.append(None if now == before else base64.b64encode(now).decode())
    folders = []
    for p in sorted(extras.folders):
        folders.append(_files_of(extras.folders[p]))
        _shutil.rmtree(extras.folders[p], ignore_errors=True)
    optimizers = []
    for o, opt in extras.optimizers.items() if results is not None else ():
        state, items, groups, defaults = extras.before[o]
        entry = {"o": o}
        if opt.param_groups is not groups:
            entry["param_groups"] = results.encode(opt.param_groups)
        if opt.defaults is not defaults:
            entry["defaults"] = results.encode(opt.defaults)
        if opt.state is not state or [(_id(k), _id(x)) for k, x in opt.state.items()] != items:
            entry["state"] = [[results.encode(k), results.encode(x)] for k, x in opt.state.items()]
        if _len(entry) > 1:
            optimizers.append(entry)
    return {"detached": detached, "buffers": buffers, "folders": folders, "optimizers": optimizers}


def _keep(obj) -> int:
    """A handle for an object the judge cannot rebuild: sent back, it is this object again."""
    global _next_handle
    _next_handle += 1
    _kept[_next_handle] = obj
    while _len(_kept) > MAX_KEPT:
        _kept.pop(next(iter(_kept)))
    return _next_handle


def _short_repr(obj) -> str:
    try:
        return repr(obj)[:200]
    except Exception:
        return "<unprintable>"


# -- the requests -----------------------------------------------------------------------------

def _not_defined(request: dict) -> dict:
    """The NameError the test cell would raise for a function the learner did not define."""
    return {"ename": "NameError", "evalue": f"name '{request['function']}' is not defined"}


def _invoke(fn, request: dict, inputs) -> tuple:
    """Call the learner's function on the request's arguments, decoded into ``inputs``: (value,
    None), or (None, what it raised): the learner's exception is the test's failure, reported by
    name."""
    args = [inputs.decode(a) for a in request["args"]]
    kwargs = {k: inputs.decode(v) for k, v in request["kwargs"].items()}
    inputs.snapshot()
    try:
        return fn(*args, **kwargs), None
    except BaseException as exc:
        if _isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return None, {"ename": _type(exc).__name__, "evalue": str(exc)[:2000]}


def _remember(call, outputs: list, inputs: list, leaves: list) -> None:
    """Keep a call's graph for the judge's backward passes, the newest MAX_CALLS calls."""
    _calls[call] = {"outputs": outputs, "inputs": inputs, "leaves": leaves}
    while len(_calls) > MAX_CALLS:
        _calls.pop(next(iter(_calls)))


def _call(request: dict, namespace: dict) -> dict:
    fn = namespace.get(request["function"])
    if fn is None:
        return {"raised": _not_defined(request)}
    inputs = _Inputs(request["storages"], request["tensors"], request.get("fixtures", ()))
    value, raised = _invoke(fn, request, inputs)
    if raised is not None:
        return {"raised": raised, "inputs": inputs.after(), **_after_extra(inputs, None)}
    results = _Results(inputs)
    encoded = results.encode(value)
    changes = inputs.changes(results)
    changes.update(_after_extra(inputs, results))   # since 6b: arrays' memory, folders, optimizers
    _remember(request["call"], results.differentiable, inputs.tensors, results.leaves)
    return {"result": encoded, "storages": results.storages, "inputs": inputs.after(), "rebound": inputs.rebound(),
            **changes}


def _vjp(request: dict) -> dict:
    call = _calls.get(request["call"])
    if call is None:
        return {"raised": {"ename": "RuntimeError", "evalue": "the call's graph is gone"}}
    outputs, grads = [], []
    for out, g in zip(call["outputs"], request["grads"]):
        if g is None:
            continue
        outputs.append(out)
        grads.append(_flat(base64.b64decode(g), out.dtype).view(out.shape))
    # the inputs the judge asks about that still require grad here (the call may have turned it off)
    asked = [bool(needs) and t.requires_grad for t, needs in zip(call["inputs"], request["inputs"])]
    wanted = [t for t, needs in zip(call["inputs"], asked) if needs]
    # leaves the call made (a parameter it put into a model): the judge has them too, by value
    leaves = [t for t in call.get("leaves", []) if t.requires_grad]
    if not outputs or not (wanted or leaves):
        return {"grads": [None] * len(request["inputs"]), "leaf_grads": [None] * _len(call.get("leaves", []))}
    found = _grad(outputs, wanted + leaves, grads, retain_graph=True, allow_unused=True)
    it = iter(found)
    out = []
    for needs in asked:
        g = next(it) if needs else None
        out.append(None if g is None else base64.b64encode(g.detach().contiguous().numpy().tobytes()).decode())
    leaf_grads = []
    for t in call.get("leaves", []):
        g = next(it) if t.requires_grad else None
        leaf_grads.append(None if g is None else base64.b64encode(g.detach().contiguous().numpy().tobytes()).decode())
    return {"grads": out, "leaf_grads": leaf_grads}


def serve(request: str, namespace: dict) -> None:
    """Answer one request (JSON); the answer is left in ``last_reply`` for the judge to read."""
    global last_reply
    try:
        message = json.loads(request)
        reply = (_vjp(message) if message["op"] == "vjp" else _EXTRA_OPS[message["op"]](message, namespace)
                 if message["op"] in _EXTRA_OPS else _call(message, namespace))
    except Exception as exc:
        reply = {"agent_error": f"{_type(exc).__name__}: {exc}"[:2000]}
    last_reply = json.dumps(reply)


# -- graphs sent as their recipe (assignment 7) -----------------------------------------------
#
# A judged cell marked for it (``# graphs go to your kernel as recipes``) sends the learner's
# function its tensors by recipe: the leaves they start from by value, and the torch calls the
# test made on them, which are replayed here, in order, from a fixed list of functions and
# methods (never code).  The replayed tensors stay in ``_mirror`` for the notebook's later calls,
# so a graph the learner's function freed is still freed at the next call, as in one process.
# The replay runs on this process's torch: a learner who patches it only changes the graphs
# their own function is given, while the values the test expects stay in the grader.

GRAPH_OPS = frozenset(
    [f"Tensor.{m}" for m in (
        "__getitem__", "__setitem__", "__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__",
        "__mul__", "__rmul__", "__imul__", "__truediv__", "__rtruediv__", "__itruediv__", "__neg__",
        "__pow__", "__rpow__", "__matmul__",
        "add", "sub", "mul", "div", "neg", "pow", "matmul", "mm", "exp", "log", "sin", "cos", "tanh",
        "sigmoid", "relu", "abs", "sqrt", "square", "sum", "mean", "prod", "clone", "detach", "detach_",
        "to", "float", "double", "view", "view_as", "reshape", "t", "transpose", "permute", "expand",
        "expand_as", "squeeze", "unsqueeze", "flatten", "contiguous", "select", "narrow",
        "copy_", "add_", "sub_", "mul_", "div_", "zero_", "fill_", "requires_grad_", "retain_grad",
        "backward", "clamp", "clamp_min", "clamp_max", "max", "min", "softmax", "log_softmax")]
    + [f"torch.{f}" for f in (
        "add", "sub", "mul", "div", "neg", "pow", "matmul", "exp", "log", "sin", "cos", "tanh", "sigmoid",
        "relu", "abs", "sqrt", "sum", "mean", "clone", "stack", "cat", "where", "clamp", "max", "min",
        "softmax", "log_softmax")]
    + [f"F.{f}" for f in ("relu", "softmax", "log_softmax", "mse_loss", "linear")])
MAX_MIRROR = 200_000       # tensors the mirror holds for one notebook
_mirrors: dict[str, dict] = {}   # one mirror per judge (a judge per notebook run), by the judge's token
_mirror: dict[int, _Tensor] = {}
_set_grad_enabled = torch.set_grad_enabled
_F = torch.nn.functional
_ellipsis = Ellipsis


def graph_op(name: str):
    """The torch function or method a recipe names: only those of ``GRAPH_OPS``."""
    if name not in GRAPH_OPS:
        raise ValueError(f"the recipe names {str(name)[:80]!r}, which the agent does not replay")
    owner, _, attr = name.partition(".")
    return getattr({"Tensor": _Tensor, "F": _F}.get(owner, torch), attr)


def _constant(v):
    """An argument of a replayed call: a value, a slice, a dtype, or a tensor of the mirror."""
    kind = v["k"]
    if kind == "v":
        if v["v"] is not None and _type(v["v"]) not in (bool, int, float, str):
            raise ValueError("a recipe constant of an unknown kind")
        return v["v"]
    if kind == "f":
        return float(v["v"])
    if kind == "g":
        return _mirror[v["r"]]
    if kind in ("tuple", "list"):
        items = [_constant(x) for x in v["v"]]
        return tuple(items) if kind == "tuple" else items
    if kind == "slice":
        return slice(*[_constant(x) for x in v["v"]])
    if kind == "ellipsis":
        return _ellipsis
    if kind == "dtype":
        return DTYPES[v["v"]]
    if kind == "size":
        return torch.Size(v["v"])
    raise ValueError(f"a recipe constant of kind {str(kind)[:40]!r}")


def _source(s: dict) -> _Tensor:
    """A tensor the recipe starts from, by value: a leaf (a Parameter stays one)."""
    dtype = DTYPES[s["dtype"]]
    t = _shaped(_flat(base64.b64decode(s["data"]), dtype), list(s["shape"]))
    if s.get("parameter"):
        return _Parameter(t, requires_grad=bool(s["requires_grad"]))
    if s["requires_grad"] and (dtype.is_floating_point or dtype.is_complex):
        t.requires_grad_(True)
    return t


def _replay(op: dict) -> None:
    fn = graph_op(op["fn"])
    args = [_constant(a) for a in op["args"]]
    kwargs = {k: _constant(a) for k, a in op["kwargs"].items()}
    with _set_grad_enabled(bool(op["grad"])):
        out = fn(*args, **kwargs)
    for pos, ref in op["outs"]:
        t = out if pos is None else out[pos]
        if not _isinstance(t, _Tensor):
            raise ValueError(f"{op['fn']} did not give a tensor where the recipe says it does")
        _mirror[ref] = t


def _freed(t, limit: int = 10_000) -> bool:
    """Whether a backward freed what the graph below ``t`` saved (reading a saved tensor then raises)."""
    stack, seen = [t.grad_fn], set()
    while stack and _len(seen) < limit:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for attr in dir(node):
            if attr.startswith("_saved_"):
                try:
                    getattr(node, attr)
                except RuntimeError:
                    return True
        stack.extend(child for child, _ in node.next_functions)
    return False


def _grad_state(t):
    g = t.grad
    return g, None if g is None else _bytes_of(g.untyped_storage())


class _GraphInputs(_Inputs):
    """The arguments of a call in graph mode: tensors are the mirror's."""

    def decode(self, v):
        if v["k"] == "g":
            return _mirror[v["r"]]
        return super().decode(v)


class _GraphResults(_Results):
    """The result of a call in graph mode: a set by value, a tensor of the mirror by its reference."""

    def __init__(self, inputs, refs: dict):
        super().__init__(inputs)
        self.refs = refs                 # id of a mirror tensor of this call -> the judge's reference

    def encode(self, obj, depth: int = 0):
        if _type(obj) in (set, frozenset) and depth <= 20:
            return {"k": _type(obj).__name__, "v": [self.encode(x, depth + 1) for x in obj]}
        return super().encode(obj, depth)

    def _tensor(self, t):
        if _id(t) in self.refs and self.refs[_id(t)][1] is t:
            return {"k": "gref", "r": self.refs[_id(t)][0]}
        return super()._tensor(t)


def _graph_call(request: dict, namespace: dict) -> dict:
    """Rebuild the recipe's tensors in the mirror, then call the learner's function on them."""
    global _mirror
    graph = request["graph"]
    _mirror = _mirrors.setdefault(str(request["mirror"]), {})
    while _len(_mirrors) > 4:
        _mirrors.pop(next(iter(_mirrors)))
    for op in graph["ops"]:                  # refuse the whole request before running any of it
        graph_op(op["fn"])
    if _len(_mirror) + _len(graph["sources"]) + _len(graph["ops"]) > MAX_MIRROR:
        raise ValueError("the mirror is full")
    for s in graph["sources"]:
        _mirror[s["ref"]] = _source(s)
    try:
        for op in graph["ops"]:
            _replay(op)
    except Exception as exc:       # the test's own torch call fails here as it would have next to the answer
        return {"raised": {"ename": _type(exc).__name__, "evalue": str(exc)[:2000]}, "inputs": [], "graph_grads": []}
    synced = []
    for ref, g in graph["sync"]:
        t = _mirror[ref]
        if not t.is_leaf:
            continue
        if g is None:
            if t.grad is not None:
                t.grad = None
        elif t.grad is None or _bytes_of(t.grad.untyped_storage()) != base64.b64decode(g) or t.grad.shape != t.shape:
            t.grad = _flat(base64.b64decode(g), t.dtype).clone().view(t.shape)
        synced.append((ref, t, *_grad_state(t)))

    def freed_now():
        """The recipe's arguments whose graph the call freed (``backward()`` without retain_graph)."""
        return [r for r in request["freeable"] if r in _mirror and _mirror[r].grad_fn is not None
                and _freed(_mirror[r])]

    def grads_now():
        out = []
        for ref, t, before, before_bytes in synced:
            now = t.grad
            if now is None and before is not None:
                out.append([ref, None, False])
            elif now is not None and (now is not before or _bytes_of(now.untyped_storage()) != before_bytes):
                out.append([ref, base64.b64encode(now.detach().contiguous().numpy().tobytes()).decode(), now is before])
        return out

    fn = namespace.get(request["function"])
    if fn is None:
        return {"raised": _not_defined(request), "inputs": [], "graph_grads": []}
    inputs = _GraphInputs([], [])
    value, raised = _invoke(fn, request, inputs)
    if raised is not None:
        return {"raised": raised, "inputs": [], "graph_grads": grads_now(), "freed": freed_now()}
    refs = {}
    for ref in graph["refs"]:
        if ref in _mirror:
            refs[_id(_mirror[ref])] = (ref, _mirror[ref])
    results = _GraphResults(inputs, refs)
    encoded = results.encode(value)
    changes = inputs.changes(results)
    _remember(request["call"], results.differentiable, [], results.leaves)
    return {"result": encoded, "storages": results.storages, "inputs": [], "rebound": [], **changes,
            "graph_grads": grads_now(), "freed": freed_now()}


def _look_up(request: dict, namespace: dict) -> dict:
    """What each name the test reads (and never calls) is here: a plain value is sent by value."""
    found = {}
    for name in request["names"][:256]:
        if name not in namespace:
            found[name] = {"kind": "missing"}
            continue
        v = namespace[name]
        if v is None or _type(v) in (bool, int, str) or (_type(v) is float and math.isfinite(v)):
            found[name] = {"kind": "value", "v": v}
        elif _type(v) is float:
            found[name] = {"kind": "value", "f": repr(v)}
        elif callable(v):
            found[name] = {"kind": "function"}
        else:
            found[name] = {"kind": "other"}
    return {"names": found}


_EXTRA_OPS = {"graph_call": _graph_call, "look_up": _look_up}
