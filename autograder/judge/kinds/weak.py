"""Weak references, to a value that goes alongside (an RNN keeps ``_flat_weight_refs``, weak
references to its own parameters): rebuilt as a weak reference to that value's copy."""
from __future__ import annotations

import weakref

from ..wire import JudgeError
from .base import Kind

_ref, _type = weakref.ref, type


class WeakRefs(Kind):
    """Weak references to values sent alongside."""
    name = "weak"
    codes = ("wref",)
    types = (weakref.ReferenceType,)

    def send(self, call, value, depth):
        if type(value) is not weakref.ReferenceType:
            return None
        target = value()
        if target is None:
            raise JudgeError("the judge cannot send a weak reference to an object that is gone")
        return {"k": "wref", "v": call.send(target, depth + 1)}

    def rebuild(self, call, v, depth):
        target = call.decode(v.get("v"), depth + 1)
        # what it points at must live as long as the value holding it: a tensor, a module or a
        # container of the answer or of the judge's inputs
        try:
            return weakref.ref(target)
        except TypeError:
            raise JudgeError("the kernel's weak reference points at a plain value") from None

    def receive(self, call, v):
        return _ref(call.receive(v["v"]))

    def answer(self, call, obj, depth):
        if _type(obj) is not weakref.ReferenceType:
            return None
        target = obj()
        if target is None:
            return None      # a dead reference: held by handle
        return {"k": "wref", "v": call.answer(target, depth + 1)}
