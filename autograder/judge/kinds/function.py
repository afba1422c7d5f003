"""Functions of torch.nn.functional, by name: a loss handed to the learner's function, a layer's
activation (``TransformerEncoderLayer.activation``).  Any other function stays where it is."""
from __future__ import annotations

import types

from ..allow import FUNCTION_NAMES, FUNCTIONS
from ..wire import JudgeError
from .base import Kind

_id, _get = id, FUNCTION_NAMES.get


def _name_of(f) -> str | None:
    name = _get(_id(f))
    return name if name is not None and FUNCTIONS[name] is f else None


class Functions(Kind):
    """Functions of torch.nn.functional, by name."""
    name = "function"
    codes = ("fn",)
    types = (types.FunctionType, types.BuiltinFunctionType)

    def send(self, call, value, depth):
        name = _name_of(value)
        return None if name is None else {"k": "fn", "name": name}

    def rebuild(self, call, v, depth):
        f = FUNCTIONS.get(v.get("name")) if type(v.get("name")) is str else None
        if f is None:
            raise JudgeError("the kernel's function is not one of torch.nn.functional's")
        return f

    def receive(self, call, v):
        return FUNCTIONS[v["name"]]

    def answer(self, call, obj, depth):
        name = _name_of(obj)
        return None if name is None else {"k": "fn", "name": name}
