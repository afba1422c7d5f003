"""Bytes and numbers as they cross: base64 of tensors and storages both ways, and the checks the
judge makes on every index, size and byte count the kernel sends.

The agent's helpers use torch callables captured at import (before any learner code runs).
"""
from __future__ import annotations

import base64
from typing import Any

import torch

from .wire import JudgeError

_b64encode, _b64decode = base64.b64encode, base64.b64decode
_empty, _frombuffer = torch.empty, torch.frombuffer
_set = torch.Tensor.set_
_contiguous, _detach, _numpy = torch.Tensor.contiguous, torch.Tensor.detach, torch.Tensor.numpy
_bytearray = bytearray

MAX_INDEX = 1 << 48        # sizes, strides and offsets the kernel may name


# -- both ends --------------------------------------------------------------------------------

def dtype_name(dtype: torch.dtype) -> str:
    """A dtype's name on the wire (``float32``)."""
    return str(dtype).removeprefix("torch.")


def raw(storage) -> torch.Tensor:
    """A uint8 tensor over ``storage`` with a version counter of its own (writes bump no one)."""
    return _set(_empty(0, dtype=torch.uint8), storage)


def bytes_of(storage) -> bytes:
    """A storage's bytes."""
    if storage.nbytes() == 0:
        return b""
    return _numpy(raw(storage)).tobytes()


def b64(t: torch.Tensor) -> str:
    """A tensor's values (C order) as base64."""
    return _b64encode(_numpy(_contiguous(_detach(t))).tobytes()).decode()


def b64_bytes(data: bytes) -> str:
    """Bytes as base64."""
    return _b64encode(data).decode()


# -- the agent's end (the judge's requests are trusted there) ---------------------------------

def flat(data: bytes, dtype: torch.dtype) -> torch.Tensor:
    """A 1-d tensor of its own memory holding ``data``."""
    if not data:
        return _empty(0, dtype=dtype)
    return _frombuffer(_bytearray(data), dtype=dtype)


def unb64_trusted(text: str) -> bytes:
    """Bytes of a request (the agent's end: the judge's requests are trusted)."""
    return _b64decode(text)


def shaped(values: torch.Tensor, shape: list[int]) -> torch.Tensor:
    """``values`` with ``shape``, as a tensor of its own (not a view: in-place history is its own, as
    it is for the tensor in the judge)."""
    if values.numel() == 0:
        return _empty(shape, dtype=values.dtype)
    stride, step = [], 1
    for d in reversed(shape):
        stride.append(step)
        step *= d
    return _set(_empty(0, dtype=values.dtype), values.untyped_storage(), 0, shape, stride[::-1])


# -- the judge's end: everything from the kernel is checked -----------------------------------

def unb64(text: Any, dtype: torch.dtype = torch.uint8, count: int | None = None) -> torch.Tensor:
    """Bytes the kernel sent as a 1-d tensor of ``dtype`` (of ``count`` items when given)."""
    if not isinstance(text, str):
        raise JudgeError("the kernel sent something that is not bytes")
    size = torch.empty(0, dtype=dtype).element_size()
    if count is not None and not 0 <= (len(text) * 3) // 4 - count * size <= 2:
        raise JudgeError("the kernel sent bytes that do not fit the tensor")   # before decoding them
    try:
        data = _b64decode(text, validate=True)
    except ValueError:
        raise JudgeError("the kernel sent bytes that are not base64") from None
    if len(data) % size or (count is not None and len(data) != count * size):
        raise JudgeError("the kernel sent bytes that do not fit the tensor")
    if not data:
        return torch.empty(0, dtype=dtype)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype)


def index(v: Any, n: int) -> int:
    """An index the kernel sent, into a list of ``n`` things the judge sent."""
    if type(v) is not int or not 0 <= v < n:
        raise JudgeError("the kernel's answer names something the judge did not send")
    return v


def ints(v: Any, negative: bool = False) -> list[int]:
    """A shape, strides or offsets: at most 64 ints, each under 2**48 (negative ones only if asked)."""
    if not isinstance(v, list) or len(v) > 64 or any(type(d) is not int for d in v):
        raise JudgeError("the kernel's answer has a malformed size")
    if any(abs(d) >= MAX_INDEX or (d < 0 and not negative) for d in v):
        raise JudgeError("the kernel's answer has a size out of range")
    return v


def count(shape: list[int]) -> int:
    """The number of elements of ``shape``."""
    n = 1
    for d in shape:
        n *= d
    return n


def fits(nbytes: int, shape: list[int], stride: list[int], offset: int, itemsize: int) -> None:
    """A strided view of ``shape`` lies inside ``nbytes`` bytes."""
    if len(shape) != len(stride) or len(shape) > 64:
        raise JudgeError("the kernel's tensor has a malformed shape")
    if 0 in shape:
        return
    last = offset + sum((d - 1) * s for d, s in zip(shape, stride))
    if (last + 1) * itemsize > nbytes:
        raise JudgeError("the kernel's tensor reaches past its storage")


class Budget:
    """What the judge may materialise for one call's answer: the bytes that crossed for it, a few
    times over, plus a floor.  A result that is large over a tiny storage (stride 0) would otherwise be
    cloned to its full size here."""

    def __init__(self, floor: int, factor: int):
        self.floor, self.factor = floor, factor
        self.crossed = 0         # bytes sent and received for the call
        self.used = 0

    def crossing(self, nbytes: int) -> None:
        """Count bytes that crossed for the call."""
        self.crossed += nbytes

    def charge(self, nbytes: int, what: str) -> None:
        """Count bytes the judge is about to make; past the budget, refuse."""
        self.used += nbytes
        if self.used > self.floor + self.factor * self.crossed:
            raise JudgeError(f"the kernel's {what} is bigger than the judge makes for an answer of "
                             f"{self.crossed} bytes ({self.used} bytes at full size)")
