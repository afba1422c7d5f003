"""Small values of torch: a dtype (of the allow-list), a torch.Size, a torch.device."""
from __future__ import annotations

import torch

from ..allow import DTYPES
from ..data import dtype_name, ints
from ..wire import JudgeError
from .base import Kind

_type, _Size, _device, _str = type, torch.Size, torch.device, str


class TorchValues(Kind):
    """dtypes, torch.Size and torch.device."""
    name = "torch_values"
    codes = ("dtype", "size", "device")
    types = (torch.dtype, torch.Size, torch.device)

    def send(self, call, value, depth):
        return self._encode(value)

    def rebuild(self, call, v, depth):
        kind = v["k"]
        if kind == "dtype":
            if v.get("v") not in DTYPES:
                raise JudgeError("the kernel's dtype is not one the judge takes")
            return DTYPES[v["v"]]
        if kind == "size":
            return torch.Size(ints(v.get("v")))
        name = v.get("v")
        if type(name) is not str or len(name) > 40:
            raise JudgeError("the kernel's device is malformed")
        try:
            return torch.device(name)
        except (RuntimeError, ValueError):
            raise JudgeError("the kernel's device is malformed") from None

    def receive(self, call, v):
        kind = v["k"]
        if kind == "dtype":
            return DTYPES[v["v"]]
        return _Size(v["v"]) if kind == "size" else _device(v["v"])

    def answer(self, call, obj, depth):
        if _type(obj) is torch.dtype and obj not in DTYPES.values():
            return None
        return self._encode(obj)

    @staticmethod
    def _encode(value) -> dict | None:
        if _type(value) is torch.dtype:
            if value not in DTYPES.values():
                return None
            return {"k": "dtype", "v": dtype_name(value)}
        if _type(value) is _Size:
            return {"k": "size", "v": list(value)}
        return {"k": "device", "v": _str(value)}
