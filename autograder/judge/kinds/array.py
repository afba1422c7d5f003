"""NumPy arrays: each array goes as the memory of its innermost base (once per call, so views of one
base stay views of one buffer there) plus its dtype, shape, strides (negative and zero too), byte
offset and writeable flag.  Bytes the call wrote there come back (``buffers``); an array or tensor
of the answer on that memory (``torch.from_numpy(arr)``, a view) is rebuilt on the judge's own
array, so ``np.shares_memory`` and writes both ways behave as in one process.  NumPy is loaded by
torch; neither end imports it for nothing.
"""
from __future__ import annotations

import sys
import warnings

import torch

from ..allow import ARRAY_DTYPES
from ..data import b64_bytes, bytes_of, count, fits, index, ints, raw, unb64, unb64_trusted
from ..wire import JudgeError
from .base import Kind
from .handle import unsendable

_np = sys.modules.get("numpy")                 # torch has loaded it; the agent never imports it
_ndarray = getattr(_np, "ndarray", None)
_type, _len, _bool, _tuple = type, len, bool, tuple
_frombuffer, _empty = torch.frombuffer, torch.empty


def _is_array(v) -> bool:
    return type(v).__name__ == "ndarray" and type(v).__module__ == "numpy"


def _span(shape, strides, itemsize: int) -> tuple[int, int]:
    """(lowest, one past the highest) byte an array reaches, from its first element."""
    low = sum((d - 1) * st for d, st in zip(shape, strides) if st < 0 and d > 0)
    high = sum((d - 1) * st for d, st in zip(shape, strides) if st > 0 and d > 0) + itemsize
    return low, high


class _Memory:
    """The bytes of a NumPy array's memory, as an object NumPy can view (it keeps the array alive)."""

    def __init__(self, owner, address: int, n: int, writeable: bool):
        self.owner = owner
        self.__array_interface__ = {"data": (address, not writeable), "shape": (n,), "typestr": "|u1", "version": 3}


class _Buffer:
    """The memory that one or more arrays of a call lie in, found from their innermost base."""

    def __init__(self, root):
        import numpy as np

        address = root.__array_interface__["data"][0]
        low, high = _span(root.shape, root.strides, root.itemsize)
        self.low = address + low
        self.n = high - low if root.size else 0
        self.writeable = bool(root.flags.writeable)
        self.u8 = np.asarray(_Memory(root, self.low, self.n, self.writeable)) if self.n else np.zeros(0, np.uint8)


class _Sent:
    def __init__(self):
        self.buffers: list[_Buffer] = []


class _Received:
    def __init__(self):
        self.buffers: list[tuple] = []       # per buffer: (uint8 tensor, its NumPy view, bytes before)


class Arrays(Kind):
    """NumPy arrays, both ends."""
    name = "array"
    codes = ("array",)
    any_type = True
    reply_sections = ("buffers",)

    def judge_state(self):
        return _Sent()

    def agent_state(self):
        return _Received()

    # -- the judge's end --------------------------------------------------------------------
    def send(self, call, a, depth):
        if not _is_array(a):
            return None
        if call.graphing:
            raise JudgeError("a cell that sends graphs as recipes sends no NumPy array or optimizer")
        if a.dtype.str not in ARRAY_DTYPES:
            raise JudgeError(f"the judge sends NumPy arrays of plain dtypes only, not {a.dtype}")
        sent = call.state(self)
        root = a
        while type(root.base).__name__ == "ndarray" and type(root.base).__module__ == "numpy":
            root = root.base
        buffer = _Buffer(root)
        entry = {"k": "array", "dtype": a.dtype.str, "shape": list(a.shape), "strides": list(a.strides),
                 "writeable": bool(a.flags.writeable)}
        for b, other in enumerate(sent.buffers):
            if (other.low, other.n) == (buffer.low, buffer.n):
                entry["b"], buffer = b, other
                break
            if buffer.n and other.n and buffer.low < other.low + other.n and other.low < buffer.low + buffer.n:
                raise JudgeError("the judge cannot send two arrays whose memory overlaps unless one base holds both")
        else:
            entry["b"] = len(sent.buffers)
            sent.buffers.append(buffer)
            call.budget.crossing(buffer.n)
            entry["buffer"] = {"data": b64_bytes(buffer.u8.tobytes()), "writeable": buffer.writeable}
        entry["offset"] = a.__array_interface__["data"][0] - buffer.low if a.size else 0
        entry["n"] = call.register(a)
        return entry

    def request(self, call):
        """Arrays and tensors of one call in memory of their own: the judge does not send an array that
        a tensor of the same call views (or the other way round)."""
        for buffer in call.state(self).buffers:
            for tensors in call.state("tensor").storage_tensors:
                storage = tensors[0].untyped_storage()
                ptr, n = storage.data_ptr(), storage.nbytes()
                if n and buffer.n and ptr < buffer.low + buffer.n and buffer.low < ptr + n:
                    raise JudgeError("the judge cannot send a NumPy array and a tensor that share memory")
        return {}

    def effects(self, call, reply):
        import numpy as np

        buffers, written = call.state(self).buffers, reply.get("buffers", [])
        if not isinstance(written, list) or len(written) not in (0, len(buffers)):
            raise JudgeError("the kernel's answer about the arrays does not match the call")
        for buffer, data in zip(buffers, written):
            if data is None:
                continue
            values = unb64(data, torch.uint8, buffer.n)
            if not buffer.writeable:
                raise JudgeError("the kernel claims to have written into read-only memory")
            buffer.u8[:] = np.frombuffer(values.numpy().tobytes(), dtype=np.uint8)

    def rebuild(self, call, v, depth):
        """An array in an input's storage or an input array's memory (a view of the judge's own), or
        new memory with the values sent.  Everything is checked against the memory and the bytes sent."""
        import numpy as np

        if v.get("dtype") not in ARRAY_DTYPES:
            raise JudgeError("the kernel's array has a dtype the judge does not take")
        dtype = np.dtype(v["dtype"])
        shape, strides = ints(v.get("shape")), ints(v.get("strides"), negative=True)
        if len(shape) != len(strides) or len(shape) > 32:
            raise JudgeError("the kernel's array has a malformed shape")
        call.budget.charge(count(shape) * dtype.itemsize, "array")
        if "input_storage" in v or "b" in v:
            if "b" in v:
                buffers = call.state(self).buffers
                memory = buffers[index(v["b"], len(buffers))].u8
            else:
                tensors = call.state("tensor")
                owner = tensors.storage_tensors[index(v["input_storage"], len(tensors.storages))][0]
                memory = raw(owner.untyped_storage()).numpy()
            offset = ints([v.get("byte_offset")])[0]
            low, high = _span(shape, strides, dtype.itemsize)
            if count(shape) == 0 or offset + low < 0 or offset + high > memory.nbytes:
                raise JudgeError("the kernel's array reaches past the memory it names")
            a = np.ndarray(tuple(shape), dtype=dtype, buffer=memory, offset=offset, strides=tuple(strides))
        else:
            data = unb64(v.get("data"), torch.uint8, count(shape) * dtype.itemsize)
            a = np.frombuffer(bytearray(data.numpy().tobytes()), dtype=dtype).reshape(shape)
        if v.get("writeable") is False:
            a.flags.writeable = False
        return call.made_object(v, a)

    def tensor_in(self, call, v, dtype, shape, stride, offset) -> torch.Tensor:
        """A result tensor in an input array's memory: a tensor on the judge's own array memory."""
        buffers = call.state(self).buffers
        buffer = buffers[index(v.get("in_array"), len(buffers))]
        start, nbytes = ints([v.get("byte_offset"), v.get("nbytes")])
        size = torch.empty(0, dtype=dtype).element_size()
        if nbytes <= 0 or nbytes % size or start + nbytes > buffer.n:
            raise JudgeError("the kernel's tensor reaches past the input array's memory")
        fits(nbytes, shape, stride, offset, size)
        with warnings.catch_warnings():            # a read-only array: torch warns, as it would there
            warnings.simplefilter("ignore")
            memory = torch.from_numpy(buffer.u8[start:start + nbytes])
        return memory.view(dtype).as_strided(shape, stride, offset)

    # -- the agent's end --------------------------------------------------------------------
    def receive(self, call, v):
        """An array on a buffer of the request's (the first array on a buffer carries its bytes)."""
        if _np is None or _ndarray is None:
            raise ValueError("NumPy is not loaded in the kernel")
        r = call.state(self)
        if "buffer" in v:
            if v["b"] != _len(r.buffers):
                raise ValueError("buffers out of order")
            data = unb64_trusted(v["buffer"]["data"])
            memory = _frombuffer(bytearray(data), dtype=torch.uint8) if data else _empty(0, dtype=torch.uint8)
            whole = memory.numpy()
            if not v["buffer"]["writeable"]:
                whole.flags.writeable = False
            r.buffers.append((memory, whole, data))
        if v["dtype"] not in ARRAY_DTYPES:
            raise ValueError(f"an array of {v['dtype']!r}")
        a = _ndarray(_tuple(v["shape"]), dtype=_np.dtype(v["dtype"]), buffer=r.buffers[v["b"]][1],
                     offset=v["offset"], strides=_tuple(v["strides"]))
        if not v["writeable"]:
            a.flags.writeable = False
        return call.keep(v["n"], a)

    def answer(self, call, a, depth):
        """An array: its dtype, shape, strides and flags; the input memory it lies in (with its byte
        offset) or its values as bytes (C order)."""
        if _ndarray is None or _type(a) is not _ndarray:
            return None
        dtype = a.dtype.str
        if dtype not in ARRAY_DTYPES:
            return unsendable(f"a NumPy array of {dtype}")
        entry = {"k": "array", "dtype": dtype, "shape": list(a.shape), "strides": list(a.strides),
                 "writeable": _bool(a.flags.writeable), "n": call.tie(a)}
        address = a.__array_interface__["data"][0]
        if a.size:
            found = self._in_buffer(call, address)
            if found is not None:
                entry["b"], entry["byte_offset"] = found
                return entry
            low = address + _span(a.shape, a.strides, a.itemsize)[0]
            for i, storage in enumerate(call.state("tensor").storages):
                ptr, n = storage.data_ptr(), storage.nbytes()
                if n and ptr <= low < ptr + n:
                    entry["input_storage"], entry["byte_offset"] = i, address - ptr
                    return entry
        entry["data"] = b64_bytes(a.tobytes(order="C"))
        return entry

    def tensor_lies_in(self, call, t, facts: dict) -> bool:
        """A result tensor whose storage lies in an input array's memory (``torch.from_numpy(arr)``):
        where, in ``facts``."""
        storage = t.untyped_storage()
        found = self._in_buffer(call, storage.data_ptr())
        if found is None or storage.nbytes() == 0:
            return False
        facts["in_array"], facts["byte_offset"], facts["nbytes"] = found[0], found[1], storage.nbytes()
        return True

    def _in_buffer(self, call, ptr: int):
        """(buffer, byte offset) when ``ptr`` lies in the memory of an input array's buffer; else None."""
        for b, (memory, _, _) in enumerate(call.state(self).buffers):
            start, n = memory.data_ptr(), memory.numel()
            if n and start <= ptr < start + n:
                return b, ptr - start
        return None

    def report(self, call, returned):
        buffers = []
        for memory, _, before in call.state(self).buffers:
            now = bytes_of(memory.untyped_storage())
            buffers.append(None if now == before else b64_bytes(now))
        return {"buffers": buffers}
