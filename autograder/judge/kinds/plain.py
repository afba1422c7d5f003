"""Plain values: None, bool, int, float (nan and the infinities by their repr) and str."""
from __future__ import annotations

import math
from typing import Any

from ..wire import JudgeError
from .base import Kind

_type, _isfinite, _repr, _float = type, math.isfinite, repr, float
PLAIN = (type(None), bool, int, float, str)
NON_FINITE = ("nan", "inf", "-inf")


def plain(v: Any) -> dict:
    """A plain value as it goes both ways."""
    if _type(v) is float and not _isfinite(v):
        return {"k": "f", "v": _repr(v)}
    return {"k": "v", "v": v}


def unplain(v: dict) -> Any:
    """A plain value the kernel sent, checked."""
    if v.get("k") == "f":
        if v.get("v") not in NON_FINITE:
            raise JudgeError("the kernel's float is malformed")
        return float(v["v"])
    value = v.get("v")
    if value is not None and type(value) not in (bool, int, float, str):
        raise JudgeError("the kernel's answer holds a value that is not a plain value")
    return value


class Plain(Kind):
    """None, bools, ints, floats and strs."""
    name = "plain"
    codes = ("v", "f")
    types = PLAIN

    def send(self, call, value, depth):
        return plain(value)

    def rebuild(self, call, v, depth):
        return unplain(v)

    def receive(self, call, v):
        return _float(v["v"]) if v["k"] == "f" else v["v"]

    def answer(self, call, obj, depth):
        return plain(obj)
