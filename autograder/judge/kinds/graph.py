"""Graphs as recipes (assignment 7).  Autograd nodes cannot leave the process that made them, so in a
graph cell (``# graphs go to your kernel as recipes``) a tensor goes as its reference in a recipe: the
tensors it starts from by value and the torch calls the test made on them (recorder.py), which the
agent replays from the allow-list ``allow.GRAPH_OPS`` into a mirror kept for the notebook.  The
learner's function gets real graphs whose node classes, edges and ``AccumulateGrad.variable``
identities are the judge's; what it does to the mirror stays there (a graph it freed is freed at the
next call, and here too), and the ``.grad`` of the recipe's leaves comes back.  The replay runs on
the kernel's torch: a learner who patches it only changes what their own function sees, the expected
values being computed in the judge.
"""
from __future__ import annotations

import torch

from ..allow import DTYPES, GRAPH_OPS, MAX_MIRROR
from ..data import b64, bytes_of, flat, shaped, unb64, unb64_trusted
from ..wire import MAX_ITEMS, JudgeError
from .base import Kind

_Tensor, _Parameter, _F = torch.Tensor, torch.nn.Parameter, torch.nn.functional
_type, _id, _len, _isinstance, _dir, _getattr = type, id, len, isinstance, dir, getattr
_set_grad_enabled, _ellipsis = torch.set_grad_enabled, Ellipsis
_untyped_storage = torch.Tensor.untyped_storage


def graph_op(name: str):
    """The torch function or method a recipe names: only those of ``GRAPH_OPS``."""
    if name not in GRAPH_OPS:
        raise ValueError(f"the recipe names {str(name)[:80]!r}, which the agent does not replay")
    owner, _, attr = name.partition(".")
    return _getattr({"Tensor": _Tensor, "F": _F}.get(owner, torch), attr)


class Replayed(Exception):
    """The test's own torch call failed when replayed: the test's failure, as next to the answer."""


class _Sent:
    def __init__(self):
        self.refs: list[int] = []           # the arguments' references
        self.graph: dict = {}
        self.involved: set[int] = set()


class _Received:
    def __init__(self):
        self.mirror: dict | None = None
        self.refs: dict[int, tuple] = {}    # id of a mirror tensor of this call -> (reference, tensor)
        self.synced: list[tuple] = []       # (reference, leaf, its .grad before, that grad's bytes)
        self.freeable: list[int] = []


class Graphs(Kind):
    """Tensors of a graph cell, as recipes the agent replays."""
    name = "graph"
    codes = ("g",)
    types = (torch.Tensor, torch.nn.Parameter)
    request_sections = ("graph",)
    reply_sections = ("graph_grads", "freed")

    def judge_state(self):
        return _Sent()

    def agent_state(self):
        return _Received()

    # -- the judge's end --------------------------------------------------------------------
    def send(self, call, v, depth):
        if not call.graphing:
            return None
        if v.device.type != "cpu" or v.layout != torch.strided or v.dtype not in DTYPES.values():
            raise JudgeError(f"the judge sends CPU tensors of plain dtypes only, not {v.dtype} on {v.device}")
        r = call.session.graphs.ref(v)
        call.state(self).refs.append(r)
        return {"k": "g", "r": r}

    def request(self, call):
        if not call.graphing:
            return {}
        sent, recorder = call.state(self), call.session.graphs
        graph = recorder.recipe(sent.refs)
        sent.involved = set(graph["refs"])
        graph["mirror"] = recorder.token
        graph["freeable"] = sorted({r for r in sent.refs if recorder.objects[r].grad_fn is not None})
        sent.graph = graph
        return {"graph": graph}

    def effects(self, call, reply):
        grads, freed = reply.get("graph_grads", []), reply.get("freed", [])
        if not call.graphing:
            if grads or freed:
                raise JudgeError("the kernel's answer names a graph the judge did not send")
            return
        sent, objects = call.state(self), call.session.graphs.objects
        if not isinstance(grads, list) or len(grads) > MAX_ITEMS:
            raise JudgeError("the kernel's answer about its leaves is malformed")
        for item in grads:        # the .grad of the recipe's leaves, as the learner's function left them
            if not isinstance(item, list) or len(item) != 3 or type(item[0]) is not int or item[0] not in sent.involved:
                raise JudgeError("the kernel's answer names a leaf the judge did not send")
            t = objects[item[0]]
            if not (t.is_leaf and t.requires_grad):
                raise JudgeError("the kernel's answer gives a .grad to a tensor that is no leaf")
            if item[1] is None:
                t.grad = None
                continue
            values = unb64(item[1], t.dtype, t.numel()).clone().view(t.shape)
            if item[2] is True and t.grad is not None and t.grad.shape == t.shape:
                with torch.no_grad():
                    t.grad.copy_(values)
            else:
                t.grad = values
        freeable = set(sent.graph["freeable"])
        if not isinstance(freed, list) or any(type(r) is not int or r not in freeable for r in freed):
            raise JudgeError("the kernel's answer names a graph the judge did not send")
        for r in freed:
            _free(objects[r])

    def rebuild(self, call, v, depth):
        r = v.get("r")
        if not call.graphing or type(r) is not int or r not in call.state(self).involved:
            raise JudgeError("the kernel's answer names a tensor the judge did not send")
        return call.session.graphs.objects[r]

    # -- the agent's end --------------------------------------------------------------------
    def prepare(self, call, request):
        graph = request.get("graph")
        if graph is None:
            return
        r = call.state(self)
        mirrors = call.session.mirrors
        r.mirror = mirrors.setdefault(str(graph["mirror"]), {})
        while _len(mirrors) > 4:
            mirrors.pop(next(iter(mirrors)))
        for op in graph["ops"]:                  # refuse the whole request before running any of it
            graph_op(op["fn"])
        if _len(r.mirror) + _len(graph["sources"]) + _len(graph["ops"]) > MAX_MIRROR:
            raise ValueError("the mirror is full")
        for s in graph["sources"]:
            r.mirror[s["ref"]] = _source(s)
        try:
            for op in graph["ops"]:
                _replay(r.mirror, op)
        except Exception as exc:   # the test's own torch call fails here as it would next to the answer
            raise Replayed(exc) from None
        for ref, g in graph["sync"]:
            t = r.mirror[ref]
            if not t.is_leaf:
                continue
            if g is None:
                if t.grad is not None:
                    t.grad = None
            elif t.grad is None or bytes_of(_untyped_storage(t.grad)) != unb64_trusted(g) or t.grad.shape != t.shape:
                t.grad = flat(unb64_trusted(g), t.dtype).clone().view(t.shape)
            r.synced.append((ref, t, t.grad, None if t.grad is None else bytes_of(_untyped_storage(t.grad))))
        r.freeable = graph["freeable"]
        for ref in graph["refs"]:
            if ref in r.mirror:
                r.refs[_id(r.mirror[ref])] = (ref, r.mirror[ref])

    def receive(self, call, v):
        return call.state(self).mirror[v["r"]]

    def answer(self, call, t, depth):
        found = call.state(self).refs.get(_id(t))
        return {"k": "g", "r": found[0]} if found is not None and found[1] is t else None

    def report(self, call, returned):
        r = call.state(self)
        if r.mirror is None:
            return {}
        grads = []
        for ref, t, before, before_bytes in r.synced:
            now = t.grad
            if now is None and before is not None:
                grads.append([ref, None, False])
            elif now is not None and (now is not before or bytes_of(_untyped_storage(now)) != before_bytes):
                grads.append([ref, b64(now), now is before])
        freed = [ref for ref in r.freeable if ref in r.mirror and r.mirror[ref].grad_fn is not None
                 and _freed(r.mirror[ref])]
        return {"graph_grads": grads, "freed": freed}


def _free(t: torch.Tensor) -> None:
    """A graph the learner's function freed in the kernel (a ``backward()`` without retain_graph),
    freed here too: a later backward through it fails as it would in one process."""
    leaves, stack, seen = [], [t.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if hasattr(node, "variable"):
            leaves.append(node.variable)
        stack.extend(child for child, _ in node.next_functions)
    try:   # a pass that computes nothing anyone keeps, and frees what the graph saved
        torch.autograd.grad([t], leaves, [torch.zeros_like(t)], allow_unused=True)
    except (RuntimeError, ValueError):
        pass           # freed already, or no leaf to reach


def _constant(mirror: dict, v):
    """An argument of a replayed call: a value, a slice, a dtype, or a tensor of the mirror."""
    kind = v["k"]
    if kind == "v":
        if v["v"] is not None and _type(v["v"]) not in (bool, int, float, str):
            raise ValueError("a recipe constant of an unknown kind")
        return v["v"]
    if kind == "f":
        return float(v["v"])
    if kind == "g":
        return mirror[v["r"]]
    if kind in ("tuple", "list"):
        items = [_constant(mirror, x) for x in v["v"]]
        return tuple(items) if kind == "tuple" else items
    if kind == "slice":
        return slice(*[_constant(mirror, x) for x in v["v"]])
    if kind == "ellipsis":
        return _ellipsis
    if kind == "dtype":
        return DTYPES[v["v"]]
    if kind == "size":
        return torch.Size(v["v"])
    raise ValueError(f"a recipe constant of kind {str(kind)[:40]!r}")


def _source(s: dict) -> torch.Tensor:
    """A tensor the recipe starts from, by value: a leaf (a Parameter stays one)."""
    dtype = DTYPES[s["dtype"]]
    t = shaped(flat(unb64_trusted(s["data"]), dtype), list(s["shape"]))
    if s.get("parameter"):
        return _Parameter(t, requires_grad=bool(s["requires_grad"]))
    if s["requires_grad"] and (dtype.is_floating_point or dtype.is_complex):
        t.requires_grad_(True)
    return t


def _replay(mirror: dict, op: dict) -> None:
    fn = graph_op(op["fn"])
    args = [_constant(mirror, a) for a in op["args"]]
    kwargs = {k: _constant(mirror, a) for k, a in op["kwargs"].items()}
    with _set_grad_enabled(bool(op["grad"])):
        out = fn(*args, **kwargs)
    for pos, ref in op["outs"]:
        t = out if pos is None else out[pos]
        if not _isinstance(t, _Tensor):
            raise ValueError(f"{op['fn']} did not give a tensor where the recipe says it does")
        mirror[ref] = t


def _freed(t, limit: int = 10_000) -> bool:
    """Whether a backward freed what the graph below ``t`` saved (reading a saved tensor then raises)."""
    stack, seen = [t.grad_fn], set()
    while stack and _len(seen) < limit:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for attr in _dir(node):
            if attr.startswith("_saved_"):
                try:
                    _getattr(node, attr)
                except RuntimeError:
                    return True
        stack.extend(child for child, _ in node.next_functions)
    return False
