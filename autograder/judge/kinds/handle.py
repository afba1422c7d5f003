"""What cannot go by value: the agent keeps the object and answers its type's name, its repr and a
handle; the judge holds a stand-in that prints as the object did and equals nothing, and sending
the stand-in back sends the kernel's object again."""
from __future__ import annotations

from .base import Kind

_type, _repr, _isinstance, _str = type, repr, isinstance, str


def stand_in(type_name: str, text: str):
    """An object standing for a result the judge cannot rebuild, named as its type was."""
    module, _, qualname = type_name.rpartition(".")
    cls = type(qualname or type_name, (), {"__repr__": lambda self: text or f"<{type_name}>",
                                           "__eq__": lambda self, other: False, "__hash__": object.__hash__})
    cls.__module__, cls.__qualname__ = module or "builtins", qualname or type_name
    return cls()


def _short_repr(obj) -> str:
    try:
        text = _repr(obj)
        return text[:200] if _isinstance(text, _str) else "<unprintable>"
    except Exception:
        return "<unprintable>"


class Handles(Kind):
    """What no other kind takes: kept in the kernel, a stand-in in the judge."""
    name = "handle"
    codes = ("handle",)
    any_type = True

    def send(self, call, value, depth):
        handle = call.session.handles.get(value)
        return None if handle is None else {"k": "handle", "h": handle}

    def rebuild(self, call, v, depth):
        obj = stand_in(str(v.get("type", "object"))[:200], str(v.get("repr", ""))[:200])
        if type(v.get("h")) is int:        # sent back to the kernel, it is the kernel's object again
            call.session.handles[obj] = v["h"]
        return obj

    def receive(self, call, v):
        return call.session.kept[v["h"]]

    def answer(self, call, obj, depth):
        t = _type(obj)
        return {"k": "handle", "type": f"{t.__module__}.{t.__qualname__}", "repr": _short_repr(obj),
                "h": call.session.keep(obj)}


def unsendable(type_name: str) -> dict:
    """An answer for a value that the agent neither sends nor keeps (a sparse tensor, a deep nest)."""
    return {"k": "handle", "type": type_name, "repr": ""}
