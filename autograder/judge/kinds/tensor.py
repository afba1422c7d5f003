"""Tensors by value: each storage once, as bytes, and each tensor as a view of one (shape, strides,
offset, requires_grad, leaf or not), so that two views of one base arrive as two views of one
storage.  A Parameter goes as the leaf of its storage; a leaf that views its storage
(``base.t().requires_grad_()``) is a leaf of its own there too.

A tensor of the answer comes with the kernel's facts (``grad_fn``, leaf, ``_version``) and where its
memory is: an input's storage (a view of the judge's own input), an input array's memory (see
kinds/array.py), bytes of a new storage, or the meta device (no data).  One that requires grad and
was computed joins the judge's graph (autograd.py).  What the call did to the input tensors is
kinds/tensor_changes.py.
"""
from __future__ import annotations

import weakref

import torch

from ..allow import DTYPES
from ..autograd import connect
from ..data import (b64, b64_bytes, bytes_of, count, dtype_name, fits, flat, index, ints, raw, shaped, unb64,
                    unb64_trusted)
from ..facts import Facts
from ..wire import MAX_ITEMS, JudgeError
from .base import Kind
from .handle import unsendable

_Tensor, _Parameter = torch.Tensor, torch.nn.Parameter
_type, _len, _bool = type, len, bool
_as_strided, _detach = torch.Tensor.as_strided, torch.Tensor.detach
_requires_grad_, _clone = torch.Tensor.requires_grad_, torch.Tensor.clone
_untyped_storage = torch.Tensor.untyped_storage


class _Sent:
    """The judge's end: the storages and tensors of one call (and, once answered, its new storages)."""

    def __init__(self):
        self.storages: list[dict] = []
        self.storage_of: dict = {}                        # the judge's storage (data_ptr) -> index
        self.storage_tensors: list[list[torch.Tensor]] = []
        self.tensors: list[dict] = []
        self.objects: list[torch.Tensor] = []             # the tensors sent, by index
        self.new: dict[int, torch.Tensor] = {}            # the answer's new storages, as bytes
        self.differentiable: list[tuple[int, torch.Tensor]] = []   # (output number, tensor) to join the graph
        self.joined: list[tuple] = []                     # (input, its stand-in, the kernel's grad_fn name)


class _Received:
    """The agent's end: the inputs rebuilt with their sharing, and the answer's new storages."""

    def __init__(self):
        self.bases: list = []          # per storage: the tensor every input on it views
        self.leaves: list = []         # per storage: the leaf that gradients reach
        self.before: list[bytes] = []
        self.versions: list[int] = []
        self.grads: list[tuple] = []   # per storage: the leaf's .grad before the call, and its bytes
        self.tensors: list = []
        self.leaf_views: list[tuple] = []   # (index, leaf, its .grad before, that grad's bytes)
        self.storages: list = []
        self.storage_ptrs: list[int] = []
        self.tensor_storage: list[int] = []
        self.flags: list[bool] = []             # per tensor, right before the call
        self.histories: list = []
        self.ptrs: dict[int, int] = {}
        self.new: dict[int, int] = {}           # data_ptr of a new storage -> its index
        self.new_storages: list[dict] = []
        self.differentiable: list = []          # tensors a later backward starts from
        self.made_leaves: list = []             # new leaves that require grad: a backward may reach them


def sent(call) -> _Sent:
    """The tensors kind's state on the judge's end of ``call``."""
    return call.state("tensor")


class Tensors(Kind):
    """Tensors by value, both ends."""
    name = "tensor"
    codes = ("t",)
    types = (torch.Tensor, torch.nn.Parameter)
    request_sections = ("storages", "tensors")
    reply_sections = ("storages",)

    def judge_state(self):
        return _Sent()

    def agent_state(self):
        return _Received()

    # -- the judge's end --------------------------------------------------------------------
    def send(self, call, t, depth):
        if t.device.type != "cpu" or t.layout != torch.strided or t.dtype not in DTYPES.values():
            raise JudgeError(f"the judge sends CPU tensors of plain dtypes only, not {t.dtype} on {t.device}")
        s_ = sent(call)
        storage = t.untyped_storage()
        key = storage.data_ptr() if storage.nbytes() else -len(s_.storages) - 1
        if key not in s_.storage_of:
            s_.storage_of[key] = len(s_.storages)
            data = b64(raw(storage))
            call.budget.crossing(storage.nbytes())
            s_.storages.append({"dtype": dtype_name(t.dtype), "data": data, "requires_grad": False,
                                "non_leaf": False, "grad": None, "shape": None, "parameter": None})
            s_.storage_tensors.append([])
        s = s_.storage_of[key]
        entry = s_.storages[s]
        if entry["dtype"] != dtype_name(t.dtype):
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
                entry["grad"] = b64(t.grad)
        s_.storage_tensors[s].append(t)
        i = len(s_.tensors)
        s_.tensors.append({"storage": s, "shape": list(t.shape), "stride": list(t.stride()),
                           "offset": t.storage_offset(), "requires_grad": t.requires_grad,
                           "whole": whole, "leaf_view": leaf_view,
                           "grad": b64(t.grad) if leaf_view and t.grad is not None else None})
        s_.objects.append(t)
        return {"k": "t", "i": i, "n": call.register(t)}

    def request(self, call):
        s_ = sent(call)
        return {"storages": s_.storages, "tensors": s_.tensors}

    def rebuild(self, call, v, depth):
        dtype = DTYPES.get(v.get("dtype"))
        if dtype is None:
            raise JudgeError("the kernel's tensor has an unknown dtype")
        shape, stride, offset = ints(v.get("shape")), ints(v.get("stride")), ints([v.get("offset")])[0]
        if len(shape) != len(stride):
            raise JudgeError("the kernel's tensor has a malformed shape")
        version = v.get("version", 0)
        if type(version) is not int or not 0 <= version < 1 << 31:
            raise JudgeError("the kernel's version counter is out of range")
        facts = Facts(v.get("grad_fn")[:100] if isinstance(v.get("grad_fn"), str) else None, v.get("leaf") is True,
                      v.get("requires_grad") is True, version, 0)
        if facts.requires_grad and not (dtype.is_floating_point or dtype.is_complex):
            raise JudgeError("the kernel's integer tensor claims to require grad")
        if v.get("meta") is True:
            t = self._meta(shape, stride, offset, dtype, facts)
        else:
            call.budget.charge(count(shape) * torch.empty(0, dtype=dtype).element_size(), "tensor")
            t = self._located(call, v, dtype, shape, stride, offset, facts)
        if v.get("parameter"):
            t = torch.nn.Parameter(t.detach(), requires_grad=facts.requires_grad)
        if "leaf_index" in v and "new_storage" in v and t.is_leaf and t.requires_grad:
            k = v["leaf_index"]
            if type(k) is not int or not 0 <= k < MAX_ITEMS:
                raise JudgeError("the kernel's answer numbers its leaves wrongly")
            call.session.leaves.setdefault(call.number, {})[k] = weakref.ref(t)
        facts.here = t._version
        call.session.facts[t] = facts
        call.made_object(v, t)
        if "grad" in v:
            g = call.decode(v["grad"], depth + 1)
            if type(g) is not torch.Tensor or g.shape != t.shape or g.dtype != t.dtype or not t.is_leaf:
                raise JudgeError("the kernel's .grad does not fit its tensor")
            t.grad = g
        return t

    @staticmethod
    def _meta(shape, stride, offset, dtype, facts) -> torch.Tensor:
        """A tensor on the meta device: shape, strides and dtype, no data; it joins no graph here
        (nothing can flow back through it), so only the kernel's facts say where it came from."""
        if len(shape) > 64 or any(d >= 1 << 40 for d in shape + stride) or offset >= 1 << 40:
            raise JudgeError("the kernel's meta tensor is malformed")
        t = torch.empty_strided(shape, stride, dtype=dtype, device="meta")
        return t.requires_grad_(True) if facts.requires_grad else t

    def _located(self, call, v, dtype, shape, stride, offset, facts) -> torch.Tensor:
        s_ = sent(call)
        if "input_storage" in v:
            owner = s_.storage_tensors[index(v["input_storage"], len(s_.storages))][0]
            owner = owner._base if owner._base is not None else owner
            if owner.dtype != dtype:
                raise JudgeError("a result in an input's storage with another dtype")
            fits(owner.untyped_storage().nbytes(), shape, stride, offset, owner.element_size())
            if facts.requires_grad and not facts.leaf and owner.requires_grad:
                return owner.as_strided(shape, stride, offset)
            t = owner.detach().as_strided(shape, stride, offset)
            return t.requires_grad_(True) if facts.requires_grad else t
        if "in_array" in v:
            t = call.kind("array").tensor_in(call, v, dtype, shape, stride, offset)
            return t.requires_grad_(True) if facts.requires_grad else t
        k = v.get("new_storage")
        if k not in s_.new:
            storages = call.reply.get("storages", [])
            if not isinstance(storages, list) or type(k) is not int or not 0 <= k < len(storages) \
                    or not isinstance(storages[k], dict):
                raise JudgeError("the kernel's result names a storage it did not send")
            s_.new[k] = unb64(storages[k].get("data"))
        data = s_.new[k]
        fits(data.numel(), shape, stride, offset, torch.empty(0, dtype=dtype).element_size())
        t = (data.view(dtype) if data.numel() else torch.empty(0, dtype=dtype)).as_strided(shape, stride, offset)
        if facts.requires_grad:
            if "output" in v and not facts.leaf:
                t = t.clone()
                s_.differentiable.append((index(v["output"], MAX_ITEMS), t))
            else:
                t.requires_grad_(True)
        return t

    def finish(self, call, reply, result):
        return connect(call, result)

    # -- the agent's end --------------------------------------------------------------------
    def prepare(self, call, request):
        r = call.state(self)
        for s in request.get("storages", []):
            dtype = DTYPES[s["dtype"]]
            data = unb64_trusted(s["data"])
            base = flat(data, dtype)
            if s.get("shape") is not None:     # a tensor passed whole: the base is that tensor
                base = shaped(base, s["shape"])
            leaf = None
            if s.get("parameter"):             # a Parameter is the whole of its storage, and its leaf
                if s.get("shape") is None or s["non_leaf"]:
                    raise ValueError("a Parameter that is not a whole leaf")
                base = _Parameter(base, requires_grad=_bool(s["requires_grad"]))
            if s["requires_grad"] and (dtype.is_floating_point or dtype.is_complex):
                _requires_grad_(base, True)
                leaf = base
                if s.get("grad") is not None:
                    base.grad = _clone(flat(unb64_trusted(s["grad"]), dtype)).view(base.shape)
                if s["non_leaf"]:          # views of a tensor with history: in-place works on them
                    base = _clone(base)
            r.bases.append(base)
            r.leaves.append(leaf)
            r.grads.append((leaf.grad, bytes_of(_untyped_storage(leaf.grad)))
                           if leaf is not None and leaf.grad is not None else (None, None))
            r.before.append(data)
            r.versions.append(base._version)
        for i, t in enumerate(request.get("tensors", [])):
            base = r.bases[t["storage"]]
            if t["whole"]:
                r.tensors.append(base)
            elif t.get("leaf_view"):          # a leaf of its own on a storage that does not require grad
                view = _requires_grad_(_as_strided(_detach(base), t["shape"], t["stride"], t["offset"]), True)
                if t.get("grad") is not None:
                    view.grad = _clone(flat(unb64_trusted(t["grad"]), view.dtype)).view(t["shape"])
                r.leaf_views.append((i, view, view.grad,
                                     None if view.grad is None else bytes_of(_untyped_storage(view.grad))))
                r.tensors.append(view)
            else:
                view = _as_strided(base, t["shape"], t["stride"], t["offset"])
                if not t["requires_grad"] and view.requires_grad:
                    view = _detach(view)
                r.tensors.append(view)
        # the storages as they were: a call that gives an input new memory (``t.data = ...``) leaves
        # the old memory, and the views on it, as they were
        r.storages = [_untyped_storage(base) for base in r.bases]
        r.storage_ptrs = [st.data_ptr() for st in r.storages]
        r.tensor_storage = [t["storage"] for t in request.get("tensors", [])]
        for i, base in enumerate(r.bases):
            r.ptrs[_untyped_storage(base).data_ptr()] = i
            if r.leaves[i] is not None:
                r.ptrs.setdefault(_untyped_storage(r.leaves[i]).data_ptr(), i)

    def receive(self, call, v):
        return call.keep(v["n"], call.state(self).tensors[v["i"]])

    def answer(self, call, t, depth):
        r = call.state(self)
        facts = {"k": "t", "parameter": _type(t) is _Parameter, "requires_grad": t.requires_grad,
                 "leaf": t.is_leaf, "grad_fn": None if t.grad_fn is None else _type(t.grad_fn).__name__,
                 "version": t._version, "dtype": dtype_name(t.dtype),
                 "shape": list(t.shape), "stride": list(t.stride()), "offset": t.storage_offset()}
        if t.device.type == "meta" and t.layout == torch.strided and t.dtype in DTYPES.values():
            facts["meta"] = True           # shape, strides and dtype only: a meta tensor has no data
            return facts
        if t.device.type != "cpu" or t.is_sparse or t.dtype not in DTYPES.values():
            return unsendable(f"a {t.layout} {t.dtype} tensor on {t.device}")
        facts["n"] = call.tie(t)
        storage = _untyped_storage(t)
        ptr = storage.data_ptr()
        if ptr in r.ptrs and storage.nbytes() > 0:
            facts["input_storage"] = r.ptrs[ptr]
            return facts
        if call.kind("array").tensor_lies_in(call, t, facts):    # in an input array's memory
            return facts
        if ptr not in r.new or storage.nbytes() == 0:
            r.new[ptr] = _len(r.new_storages)
            r.new_storages.append({"data": b64_bytes(bytes_of(storage))})
        facts["new_storage"] = r.new[ptr]
        if t.requires_grad and t.grad_fn is not None:
            facts["output"] = _len(r.differentiable)
            r.differentiable.append(t)
        if t.requires_grad and t.is_leaf and (t.dtype.is_floating_point or t.dtype.is_complex):
            facts["leaf_index"] = _len(r.made_leaves)
            r.made_leaves.append(t)
        if t.is_leaf and t.grad is not None and _type(t.grad) is _Tensor:
            facts["grad"] = call.answer(t.grad, depth + 1)
        return facts

    def report(self, call, returned):
        # the list itself: values that later kinds' sections answer may still add storages to it
        return {"storages": call.state(self).new_storages} if returned else {}
