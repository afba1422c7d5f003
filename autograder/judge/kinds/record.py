"""Tuples with names: torch's (``t.max(dim=0)`` gives a ``torch.return_types.max``; a layer's named
output, ``AdaptiveLogSoftmaxWithLoss``'s) and a course's fixtures' named tuples, by class name and
items, both ways."""
from __future__ import annotations

from ..allow import record_class, record_name
from ..wire import MAX_ITEMS, JudgeError
from .base import Kind

_type, _isinstance, _tuple = type, isinstance, tuple


def _named(cls, courses) -> tuple[str, str] | None:
    return record_name(cls, courses) if _tuple in cls.__mro__[1:] else None


class Records(Kind):
    """Named tuples of torch and of a course's fixtures."""
    name = "record"
    codes = ("record",)
    any_type = True

    def send(self, call, value, depth):
        named = _named(type(value), call.session.fixtures)
        if named is None:
            return None
        return {"k": "record", "module": named[0], "type": named[1], "v": [call.send(x, depth + 1) for x in value]}

    def rebuild(self, call, v, depth):
        cls = record_class(v.get("module"), v.get("type"), call.session.fixtures)
        items = v.get("v")
        if cls is None or not isinstance(items, list) or len(items) > MAX_ITEMS:
            raise JudgeError("the kernel's named tuple is of a class the judge does not rebuild")
        values = [call.decode(x, depth + 1) for x in items]
        try:
            return cls._make(values) if hasattr(cls, "_make") else cls(values)
        except (TypeError, ValueError):
            raise JudgeError("the kernel's named tuple does not fit its class") from None

    def receive(self, call, v):
        cls = record_class(v["module"], v["type"], call.state("module").courses)
        values = [call.receive(x) for x in v["v"]]
        return cls._make(values) if hasattr(cls, "_make") else cls(values)

    def answer(self, call, obj, depth):
        if not _isinstance(obj, _tuple):
            return None
        named = _named(_type(obj), call.state("module").courses)
        if named is None:
            return None
        return {"k": "record", "module": named[0], "type": named[1], "v": [call.answer(x, depth + 1) for x in obj]}
