"""The torch calls a graph cell makes, recorded while it runs, so that a tensor passed to the
learner's function can go as its recipe (kinds/graph.py): the leaves it starts from by value and the
calls that built it, replayed in the kernel from the allow-list ``allow.GRAPH_OPS``.  The judge's end
only; the recorder is a ``TorchFunctionMode``, active in the judge's thread only (modes are per thread).
"""
from __future__ import annotations

import base64
import collections
import math
import os
from typing import Any

import torch

from .allow import DTYPES, GRAPH_OPS
from .data import b64, dtype_name
from .wire import JudgeError

GRAPH_MARKER = "# graphs go to your kernel as recipes"


def graph_cell(source: str) -> bool:
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


class Recorder(torch.overrides.TorchFunctionMode):
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
                self.ref(t)
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
        return storage.data_ptr() if storage.nbytes() else ("empty", self.ref(t))

    def ref(self, t: torch.Tensor, source: bool = True) -> int:
        """The tensor's reference in the recipes (a source's value is copied when first seen)."""
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
        r = self.ref(t, source=False)
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
            return {"k": "g", "r": self.ref(v)}
        if type(v) in (tuple, list):
            return {"k": type(v).__name__, "v": [self._const(x, depth + 1) for x in v]}
        if type(v) is slice:
            return {"k": "slice", "v": [self._const(x, depth + 1) for x in (v.start, v.stop, v.step)]}
        if v is Ellipsis:
            return {"k": "ellipsis"}
        if type(v) is torch.dtype and v in DTYPES.values():
            return {"k": "dtype", "v": dtype_name(v)}
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
                    self.ref(t)          # a plain tensor or a leaf: by value, as it is now
                else:
                    self._unreplayable(t, label)
            for t in bumped:
                self._unreplayable(t, label)
            return
        reads = [[self.ref(t), self._key(t)] for t in _tensors_in((args, kwargs))]
        out_refs = [[pos, self.ref(t, source=False)] for pos, t in outs]
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
                sources.append({"ref": r, "dtype": dtype_name(copy.dtype), "shape": list(copy.shape),
                                "data": b64(copy), "requires_grad": requires_grad, "parameter": parameter})
        ops = [{k: self.ops[i][k] for k in ("fn", "args", "kwargs", "grad", "outs")}
               for i in sorted(needed - self.sent_ops)]
        sync = []
        for r in sorted(involved):
            t = self.objects[r]
            if t.is_leaf and t.requires_grad:
                g = t.grad
                if g is not None and (g.shape != t.shape or g.dtype != t.dtype or g.device.type != "cpu"):
                    raise JudgeError("the judge sends a .grad of its leaf's shape and dtype only")
                sync.append([r, None if g is None else b64(g)])
        self.sent_sources.update(s["ref"] for s in sources)
        self.sent_ops.update(needed)
        return {"sources": sources, "ops": ops, "sync": sync, "refs": sorted(involved)}
