"""The kernel's end of the judge: call one of the learner's functions on inputs sent by value.

Hidden tests run in the grader's own process (``autograder.grading.judge``); this module is all
of them that the learner's kernel sees.  A request names a function and carries its arguments
by value: each storage once, as bytes, and each tensor as (storage, dtype, shape, strides,
offset, requires_grad, leaf or not).  The agent rebuilds them with the same sharing (two views
of one base stay two views of one storage), calls the function, and answers by value: the
result, whether it is one of the inputs or lies in an input's storage, and what the call did to
the inputs (bytes written, version counters, gradients accumulated).  A second request asks for
a vector-Jacobian product of an earlier call's outputs, so that ``backward()`` in the judge
reaches through the learner's function.

No test code and no expected value ever comes here.  What this code measures about the inputs
and results (storage identity, ``_version``, ``requires_grad``, ``grad_fn`` names) it measures
inside the learner's process, so a learner who rewrites this module can forge those facts; the
values themselves can only be right by computing them.  Standard library and torch only.
"""
from __future__ import annotations

import base64
import json
import math

import torch

_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
_type = type
_isinstance = isinstance
_frombuffer = torch.frombuffer
_empty = torch.empty
_grad = torch.autograd.grad
_no_grad = torch.no_grad

DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128,
    torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool)}
MAX_CALLS = 256            # calls kept for a later vector-Jacobian product

last_reply = ""            # read back by the judge as a user expression
_calls: dict[int, dict] = {}


def _bytes_of(storage) -> bytes:
    if storage.nbytes() == 0:
        return b""
    return _empty(0, dtype=torch.uint8).set_(storage).numpy().tobytes()


def _flat(data: bytes, dtype: torch.dtype) -> _Tensor:
    if not data:
        return _empty(0, dtype=dtype)
    return _frombuffer(bytearray(data), dtype=torch.uint8).view(dtype)


# -- the request's values -------------------------------------------------------------------

class _Inputs:
    """The storages and tensors of one call, rebuilt with their sharing."""

    def __init__(self, storages: list[dict], tensors: list[dict]):
        self.bases: list[_Tensor] = []     # per storage: the tensor every input on it views
        self.leaves: list[_Tensor | None] = []   # per storage: the leaf that gradients reach
        self.before: list[bytes] = []
        self.versions: list[int] = []
        for s in storages:
            dtype = DTYPES[s["dtype"]]
            data = base64.b64decode(s["data"])
            base = _flat(data, dtype)
            if s.get("shape") is not None:     # a tensor passed whole: the base is that tensor
                base = base.view(s["shape"])
            leaf = None
            if s["requires_grad"] and (dtype.is_floating_point or dtype.is_complex):
                base.requires_grad_(True)
                leaf = base
                if s.get("grad") is not None:
                    base.grad = _flat(base64.b64decode(s["grad"]), dtype).clone().view(base.shape)
                if s["non_leaf"]:          # views of a tensor with history: in-place works on them
                    base = base.clone()
            self.bases.append(base)
            self.leaves.append(leaf)
            self.before.append(data)
            self.versions.append(base._version)
        self.tensors: list[_Tensor] = []
        for t in tensors:
            base = self.bases[t["storage"]]
            if t["whole"]:
                self.tensors.append(base)
            else:
                view = base.as_strided(t["shape"], t["stride"], t["offset"])
                if not t["requires_grad"] and view.requires_grad:
                    view = view.detach()
                self.tensors.append(view)
        # the storages as they were: a call that gives an input new memory (``t.data = ...``,
        # ``t.set_(...)``) leaves the old memory, and the views on it, as they were
        self.storages = [base.untyped_storage() for base in self.bases]
        self.storage_ptrs = [st.data_ptr() for st in self.storages]
        self.tensor_storage = [t["storage"] for t in tensors]
        self.ptrs = {}
        for i, base in enumerate(self.bases):
            self.ptrs[base.untyped_storage().data_ptr()] = i
            leaf = self.leaves[i]
            if leaf is not None:
                self.ptrs.setdefault(leaf.untyped_storage().data_ptr(), i)

    def decode(self, v):
        kind = v["k"]
        if kind == "t":
            return self.tensors[v["i"]]
        if kind == "v":
            return v["v"]
        if kind == "f":
            return float(v["v"])
        if kind in ("list", "tuple"):
            items = [self.decode(x) for x in v["v"]]
            return items if kind == "list" else tuple(items)
        if kind == "dict":
            return {self.decode(a): self.decode(b) for a, b in v["v"]}
        if kind == "dtype":
            return DTYPES[v["v"]]
        if kind == "size":
            return torch.Size(v["v"])
        if kind == "device":
            return torch.device(v["v"])
        raise ValueError(f"cannot decode a {kind!r}")

    def after(self) -> list[dict]:
        out = []
        for i, base in enumerate(self.bases):
            data = _bytes_of(self.storages[i])
            leaf = self.leaves[i]
            grad = None
            if leaf is not None and leaf.grad is not None:
                grad = base64.b64encode(leaf.grad.detach().contiguous().numpy().tobytes()).decode()
            out.append({"data": None if data == self.before[i] else base64.b64encode(data).decode(),
                        "bumps": base._version - self.versions[i], "grad": grad})
        return out

    def rebound(self) -> list[dict]:
        """Inputs the call gave memory of their own (``t.data = ...``): their new storage, by value."""
        out = []
        for i, t in enumerate(self.tensors):
            if t.untyped_storage().data_ptr() != self.storage_ptrs[self.tensor_storage[i]]:
                out.append({"tensor": i, "dtype": str(t.dtype).removeprefix("torch."),
                            "data": base64.b64encode(_bytes_of(t.untyped_storage())).decode(),
                            "shape": list(t.shape), "stride": list(t.stride()), "offset": t.storage_offset()})
        return out


class _Results:
    """The call's result, by value, and the tensors a later backward starts from."""

    def __init__(self, inputs: _Inputs):
        self.inputs = inputs
        self.new: dict[int, int] = {}        # data_ptr of a new storage -> its index
        self.storages: list[dict] = []
        self.differentiable: list[_Tensor] = []

    def encode(self, obj, depth: int = 0):
        if depth > 20:
            return {"k": "opaque", "type": "deeply nested object", "repr": ""}
        if obj is None or _type(obj) in (bool, int, str):
            return {"k": "v", "v": obj}
        if _type(obj) is float:
            return {"k": "v", "v": obj} if math.isfinite(obj) else {"k": "f", "v": repr(obj)}
        if _type(obj) in (list, tuple):
            return {"k": _type(obj).__name__, "v": [self.encode(x, depth + 1) for x in obj]}
        if _type(obj) is dict:
            return {"k": "dict", "v": [[self.encode(a, depth + 1), self.encode(b, depth + 1)] for a, b in obj.items()]}
        if _type(obj) is torch.Size:
            return {"k": "size", "v": list(obj)}
        if _type(obj) is torch.dtype:
            return {"k": "dtype", "v": str(obj).removeprefix("torch.")}
        if _type(obj) in (_Tensor, _Parameter):
            return self._tensor(obj)
        t = _type(obj)
        return {"k": "opaque", "type": f"{t.__module__}.{t.__qualname__}", "repr": _short_repr(obj)}

    def _tensor(self, t: _Tensor) -> dict:
        facts = {"k": "t", "parameter": _type(t) is _Parameter, "requires_grad": t.requires_grad,
                 "leaf": t.is_leaf, "grad_fn": None if t.grad_fn is None else _type(t.grad_fn).__name__,
                 "version": t._version, "dtype": str(t.dtype).removeprefix("torch."),
                 "shape": list(t.shape), "stride": list(t.stride()), "offset": t.storage_offset()}
        if t.device.type == "meta" and t.layout == torch.strided and t.dtype in DTYPES.values():
            facts["meta"] = True           # shape, strides and dtype only: a meta tensor has no data
            return facts
        if t.device.type != "cpu" or t.is_sparse or t.dtype not in DTYPES.values():
            return {"k": "opaque", "type": f"a {t.layout} {t.dtype} tensor on {t.device}", "repr": ""}
        for i, given in enumerate(self.inputs.tensors):
            if t is given:
                facts["same_as"] = i
                return facts
        ptr = t.untyped_storage().data_ptr()
        if ptr in self.inputs.ptrs and t.untyped_storage().nbytes() > 0:
            facts["input_storage"] = self.inputs.ptrs[ptr]
            return facts
        if ptr not in self.new or t.untyped_storage().nbytes() == 0:
            self.new[ptr] = len(self.storages)
            self.storages.append({"data": base64.b64encode(_bytes_of(t.untyped_storage())).decode()})
        facts["new_storage"] = self.new[ptr]
        if t.requires_grad and t.grad_fn is not None:
            facts["output"] = len(self.differentiable)
            self.differentiable.append(t)
        return facts


def _short_repr(obj) -> str:
    try:
        return repr(obj)[:200]
    except Exception:
        return "<unprintable>"


# -- the requests -----------------------------------------------------------------------------

def _call(request: dict, namespace: dict) -> dict:
    fn = namespace.get(request["function"])
    if fn is None:
        return {"raised": {"ename": "NameError", "evalue": f"name '{request['function']}' is not defined"}}
    inputs = _Inputs(request["storages"], request["tensors"])
    args = [inputs.decode(a) for a in request["args"]]
    kwargs = {k: inputs.decode(v) for k, v in request["kwargs"].items()}
    try:
        value = fn(*args, **kwargs)
    except BaseException as exc:  # the learner's exception is the test's failure, reported by name
        if _isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return {"raised": {"ename": _type(exc).__name__, "evalue": str(exc)[:2000]}, "inputs": inputs.after()}
    results = _Results(inputs)
    encoded = results.encode(value)
    call = request["call"]
    _calls[call] = {"outputs": results.differentiable, "inputs": inputs.tensors}
    while len(_calls) > MAX_CALLS:
        _calls.pop(next(iter(_calls)))
    return {"result": encoded, "storages": results.storages, "inputs": inputs.after(), "rebound": inputs.rebound()}


def _vjp(request: dict) -> dict:
    call = _calls.get(request["call"])
    if call is None:
        return {"raised": {"ename": "RuntimeError", "evalue": "the call's graph is gone"}}
    outputs, grads = [], []
    for out, g in zip(call["outputs"], request["grads"]):
        if g is None:
            continue
        outputs.append(out)
        grads.append(_flat(base64.b64decode(g), out.dtype).view(out.shape))
    wanted = [t for t, needs in zip(call["inputs"], request["inputs"]) if needs]
    if not outputs or not wanted:
        return {"grads": [None] * len(request["inputs"])}
    found = _grad(outputs, wanted, grads, retain_graph=True, allow_unused=True)
    it = iter(found)
    out = []
    for needs in request["inputs"]:
        g = next(it) if needs else None
        out.append(None if g is None else base64.b64encode(g.detach().contiguous().numpy().tobytes()).decode())
    return {"grads": out}


def serve(request: str, namespace: dict) -> None:
    """Answer one request (JSON); the answer is left in ``last_reply`` for the judge to read."""
    global last_reply
    try:
        message = json.loads(request)
        reply = _vjp(message) if message["op"] == "vjp" else _call(message, namespace)
    except Exception as exc:
        reply = {"agent_error": f"{_type(exc).__name__}: {exc}"[:2000]}
    last_reply = json.dumps(reply)
