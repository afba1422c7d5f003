"""What a call did to the tensors it was given, done to the judge's own: bytes written into their
storages, version bumps, a leaf's ``.grad`` set, written into or cleared, ``requires_grad``
switched, memory rebound (``t.data = ...``), a non-leaf detached in place, and an in-place write
that put an input into a graph (it joins the judge's graph through the call's node).

This kind has no values of its own: it reads and writes the sections about the tensors that
kinds/tensor.py sent, and works on that kind's per-call state.
"""
from __future__ import annotations

import torch

from ..allow import DTYPES
from ..data import b64, b64_bytes, bytes_of, count, dtype_name, fits, index, ints, raw, unb64
from ..wire import MAX_ITEMS, JudgeError
from .base import Kind

_type, _len = type, len
_untyped_storage = torch.Tensor.untyped_storage


def _list(reply: dict, key: str) -> list:
    items = reply.get(key, [])
    if not isinstance(items, list) or len(items) > MAX_ITEMS:
        raise JudgeError("the kernel's answer about its inputs is malformed")
    return items


class TensorChanges(Kind):
    """What a call did to its input tensors."""
    name = "tensor_changes"
    reply_sections = ("inputs", "rebound", "detached", "flags", "leaf_grads", "joined")

    # -- the judge's end --------------------------------------------------------------------
    def effects(self, call, reply):
        sent = call.state("tensor")
        inputs = _list(reply, "inputs")
        if len(inputs) not in (0, len(sent.storages)):
            raise JudgeError("the kernel's answer does not match the call")
        for s, after in enumerate(inputs):
            self._storage(sent, s, after)
        for item in _list(reply, "rebound"):
            self._rebound(call, sent, item)
        for i in _list(reply, "detached"):       # ``t.detach_()`` on a non-leaf input: out of its graph here too
            t = sent.objects[index(i, len(sent.objects))]
            if t.grad_fn is not None:
                try:
                    t.detach_()
                except RuntimeError as exc:
                    raise JudgeError(f"the kernel's answer about a detached input does not fit: {exc}") from None
        for item in _list(reply, "leaf_grads"):
            self._leaf_grad(sent, item)
        for item in _list(reply, "flags"):      # before the result joins the graph
            if not isinstance(item, list) or len(item) != 2 or not isinstance(item[1], bool):
                raise JudgeError("the kernel's requires_grad flag is malformed")
            t = sent.objects[index(item[0], len(sent.objects))]
            if t.is_leaf and t.requires_grad != item[1]:
                if item[1] and not (t.dtype.is_floating_point or t.dtype.is_complex):
                    raise JudgeError("the kernel's integer tensor claims to require grad")
                t.requires_grad_(item[1])

    @staticmethod
    def _storage(sent, s: int, after) -> None:
        """What the call did to one input storage: its bytes, version bumps, its leaf's .grad."""
        if not isinstance(after, dict):
            raise JudgeError("the kernel's answer about an input is not an object")
        tensors = sent.storage_tensors[s]
        first = tensors[0]
        storage = first.untyped_storage()
        if after.get("data") is not None:
            raw(storage).copy_(unb64(after["data"], torch.uint8, storage.nbytes()))   # no version bump
        bumps = after.get("bumps", 0)
        if type(bumps) is int and bumps > 0:
            owner = first._base if first._base is not None else first
            with torch.no_grad():
                for _ in range(min(bumps, 1000)):
                    owner.as_strided((0,), (1,), owner.storage_offset()).add_(0)
        if after.get("grad_cleared") is True:      # the call set the leaf's .grad to None
            for t in tensors:
                if t.is_leaf and t._base is None:
                    t.grad = None
                    break
        if after.get("grad") is None:
            return
        values = unb64(after["grad"], first.dtype, storage.nbytes() // first.element_size())
        for t in tensors:
            if t.is_leaf and t.requires_grad and t._base is None and t.numel() == values.numel() and t.is_contiguous():
                if after.get("grad_in_place") is True and t.grad is not None and t.grad.shape == t.shape:
                    with torch.no_grad():       # the same .grad object, written into
                        t.grad.copy_(values.view(t.shape))
                else:
                    t.grad = values.clone().view(t.shape)
                return
            if t.requires_grad:
                g = values.as_strided(t.shape, t.stride(), t.storage_offset())
                torch.autograd.backward([t], [g.clone()])
                return

    @staticmethod
    def _rebound(call, sent, item) -> None:
        """An input the call gave new memory: the judge's tensor gets that memory too (``.data``), and
        the views taken before keep the old, as they would in one process."""
        if not isinstance(item, dict):
            raise JudgeError("the kernel's answer about a rebound input is malformed")
        t = sent.objects[index(item.get("tensor"), len(sent.objects))]
        dtype = DTYPES.get(item.get("dtype"))
        if dtype is None:
            raise JudgeError("a rebound input with an unknown dtype")
        shape, stride, offset = ints(item.get("shape")), ints(item.get("stride")), ints([item.get("offset")])[0]
        itemsize = torch.empty(0, dtype=dtype).element_size()
        if "input_storage" in item:        # now in another input's memory: the judge's own
            owner = sent.storage_tensors[index(item["input_storage"], len(sent.storages))][0]
            owner = owner._base if owner._base is not None else owner
            if owner.dtype != dtype:
                raise JudgeError("a rebound input in a storage of another dtype")
            fits(owner.untyped_storage().nbytes(), shape, stride, offset, itemsize)
            call.budget.charge(count(shape) * itemsize, "rebound input")
            t.data = owner.detach().as_strided(shape, stride, offset)
            return
        data = unb64(item.get("data"))
        fits(data.numel(), shape, stride, offset, itemsize)
        call.budget.charge(count(shape) * itemsize, "rebound input")
        t.data = (data.view(dtype) if data.numel() else torch.empty(0, dtype=dtype)).as_strided(shape, stride, offset)

    @staticmethod
    def _leaf_grad(sent, item) -> None:
        """What the call did to the .grad of a leaf that is a view (set, written into, cleared)."""
        if not isinstance(item, list) or len(item) != 3:
            raise JudgeError("the kernel's answer about a leaf's grad is malformed")
        i = index(item[0], len(sent.objects))
        t = sent.objects[i]
        if not sent.tensors[i]["leaf_view"]:
            raise JudgeError("the kernel's answer names a grad the judge did not send")
        if item[1] is None:
            t.grad = None
            return
        values = unb64(item[1], t.dtype, t.numel())
        if item[2] is True and t.grad is not None and t.grad.shape == t.shape:
            with torch.no_grad():
                t.grad.copy_(values.view(t.shape))
        else:
            t.grad = values.clone().view(t.shape)

    def late(self, call, reply):
        """Inputs that an in-place call put into a graph: a stand-in of each joins the call's node
        (autograd.connect then writes it into the input)."""
        sent = call.state("tensor")
        for item in _list(reply, "joined"):
            if not isinstance(item, dict) or not isinstance(item.get("grad_fn"), str):
                raise JudgeError("the kernel's answer about an input's history is malformed")
            t = sent.objects[index(item.get("tensor"), len(sent.objects))]
            if not (t.dtype.is_floating_point or t.dtype.is_complex):
                raise JudgeError("the kernel's integer tensor claims a history")
            stand_in = t.detach().clone()
            sent.differentiable.append((index(item.get("output"), MAX_ITEMS), stand_in))
            sent.joined.append((t, stand_in, item["grad_fn"][:100]))
        return []

    # -- the agent's end --------------------------------------------------------------------
    def snapshot(self, call):
        r = call.state("tensor")
        r.flags = [t.requires_grad for t in r.tensors]
        r.histories = [t.grad_fn for t in r.tensors]

    def report(self, call, returned):
        r = call.state("tensor")
        out = {"inputs": self._after(r), "rebound": self._rebound_now(r),
               "detached": [i for i, t in enumerate(r.tensors)
                            if r.histories[i] is not None and t.grad_fn is None and not t.requires_grad]}
        if not returned:
            return out
        out["flags"] = [[i, t.requires_grad] for i, t in enumerate(r.tensors)
                        if t.requires_grad != r.flags[i] and t.is_leaf]
        out["joined"] = []
        for i, t in enumerate(r.tensors):
            if t.grad_fn is not None and t.grad_fn is not r.histories[i]:
                out["joined"].append({"tensor": i, "output": _len(r.differentiable), "grad_fn": _type(t.grad_fn).__name__})
                r.differentiable.append(t)
        out["leaf_grads"] = []
        for i, view, before, before_bytes in r.leaf_views:
            now = view.grad
            if now is None and before is not None:
                out["leaf_grads"].append([i, None, False])
            elif now is not None and (now is not before or bytes_of(_untyped_storage(now)) != before_bytes):
                out["leaf_grads"].append([i, b64(now), now is before])
        return out

    @staticmethod
    def _after(r) -> list[dict]:
        out = []
        for i, base in enumerate(r.bases):
            data = bytes_of(r.storages[i])
            leaf = r.leaves[i]
            entry = {"data": None if data == r.before[i] else b64_bytes(data),
                     "bumps": base._version - r.versions[i], "grad": None}
            before, before_bytes = r.grads[i]
            now = None if leaf is None else leaf.grad
            if now is None and before is not None:
                entry["grad_cleared"] = True
            elif now is not None and (now is not before or bytes_of(_untyped_storage(now)) != before_bytes):
                entry["grad"] = b64(now)
                entry["grad_in_place"] = now is before
            out.append(entry)
        return out

    @staticmethod
    def _rebound_now(r) -> list[dict]:
        """Inputs the call gave memory of their own (``t.data = ...``): their new storage, by value."""
        out = []
        for i, t in enumerate(r.tensors):
            storage = _untyped_storage(t)
            ptr = storage.data_ptr()
            if ptr != r.storage_ptrs[r.tensor_storage[i]]:
                entry = {"tensor": i, "dtype": dtype_name(t.dtype), "shape": list(t.shape),
                         "stride": list(t.stride()), "offset": t.storage_offset()}
                if ptr in r.storage_ptrs and storage.nbytes() > 0:   # another input's memory
                    entry["input_storage"] = r.storage_ptrs.index(ptr)
                else:
                    entry["data"] = b64_bytes(bytes_of(storage))
                out.append(entry)
        return out
