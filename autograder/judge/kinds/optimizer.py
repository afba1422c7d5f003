"""Optimizers of the allow-list (SGD, Adam, AdamW) by value: the class by name, ``param_groups`` and
``defaults`` as lists and dicts by identity, the state per parameter (its dicts by identity, state
tensors by value); the agent builds the optimizer from those alone.  The optimizer and its state
mapping are sent objects: a ``state_dict()`` of the answer holds the judge's own state tensors.

What the call did to it comes back (replaced groups, defaults or state; in-place changes come as the
lists' and dicts'), and is accepted only in the form the judge gave it, before any of it is done:
the groups' keys and the settings that choose a step's implementation (``fused``, ``foreach``,
``capturable``, ``differentiable``, ``maximize``) as sent, each hyper-parameter of the type it had,
and each state tensor as torch makes it for that parameter (a momentum buffer or an Adam moment like
the parameter, ``step`` a 0-dim float tensor).  A fused step checks no sizes: a state the kernel
shaped otherwise would write out of bounds in the grader.
"""
from __future__ import annotations

import collections
import functools

import torch

from ..allow import OPTIMIZER_FLAGS, OPTIMIZER_STATE, OPTIMIZERS
from ..data import index
from ..wire import MAX_ITEMS, JudgeError
from .base import Kind
from .plain import PLAIN

_type, _id, _len, _dict, _list = type, id, len, dict, list
_defaultdict = collections.defaultdict


@functools.cache
def _internals() -> frozenset:
    """The attributes every optimizer has.  Found on first use: making an optimizer loads
    torch._dynamo (a second and some 70 MB), which only a test that sends one should pay for."""
    return frozenset(vars(torch.optim.SGD([torch.zeros(1, requires_grad=True)])))


def _plain(v, depth: int = 0) -> bool:
    """A hyper-parameter the judge sends: a plain value, a tuple of those, or a tensor."""
    return (type(v) in PLAIN or type(v) is torch.Tensor
            or (type(v) is tuple and depth < 4 and len(v) <= 64 and all(_plain(x, depth + 1) for x in v)))


class _Sent:
    """The judge's end: the optimizers of one call, with the form they were sent in."""

    def __init__(self):
        self.optimizers: list = []
        self.keys: list[set] = []          # per optimizer: the keys of its groups
        self.settings: list[dict] = []     # per optimizer: key -> the values and forms it had (groups, defaults)
        self.checked: dict[int, list] = {}   # per optimizer whose state the call replaced: it, as checked


class Optimizers(Kind):
    """Optimizers of the allow-list, by value, checked in form when they come back."""
    name = "optimizer"
    codes = ("optim",)
    types = tuple(OPTIMIZERS.values())
    reply_sections = ("optimizers",)

    def judge_state(self):
        return _Sent()

    def agent_state(self):
        return {}        # by the judge's number: (optimizer, its state, the state's items, groups, defaults)

    # -- the judge's end --------------------------------------------------------------------
    def send(self, call, opt, depth):
        if OPTIMIZERS.get(type(opt).__name__) is not type(opt):
            return None
        if call.graphing:
            raise JudgeError("a cell that sends graphs as recipes sends no NumPy array or optimizer")
        self._sendable(opt)
        sent = call.state(self)
        settings: dict = {}
        for table in [*opt.param_groups, opt.defaults]:
            for k, x in table.items():
                if k != "params":
                    seen = settings.setdefault(k, {"values": [], "types": set()})
                    seen["types"].add(_form(x))
                    seen["values"].append(x)
        sent.optimizers.append(opt)
        sent.keys.append({frozenset(g) for g in opt.param_groups})
        sent.settings.append(settings)
        o = len(sent.optimizers) - 1
        n, state_n = call.register(opt), call.register(opt.state)
        return {"k": "optim", "n": n, "state_n": state_n, "o": o, "type": type(opt).__name__,
                "groups": call.send(opt.param_groups, depth + 1), "defaults": call.send(opt.defaults, depth + 1),
                "state": [[call.send(p, depth + 1), call.send(entry, depth + 1)] for p, entry in opt.state.items()]}

    @staticmethod
    def _sendable(opt) -> None:
        what = type(opt).__name__
        if any(getattr(opt, k, None) for k in _internals() if "hooks" in k):
            raise JudgeError("the judge cannot send an optimizer with hooks")
        extra = set(vars(opt)) - _internals()
        if extra:
            raise JudgeError(f"the judge cannot send an optimizer with the attribute {sorted(extra)[0]!r}")
        if type(opt.param_groups) is not list or type(opt.defaults) is not dict:
            raise JudgeError("the judge sends an optimizer whose param_groups is a list and defaults a dict")
        params = set()
        for g in opt.param_groups:
            if type(g) is not dict or type(g.get("params")) is not list:
                raise JudgeError("the judge sends param groups that are dicts with a list of params")
            for k, x in g.items():
                if k == "params":
                    if not all(type(p) in (torch.Tensor, torch.nn.Parameter) for p in x):
                        raise JudgeError("the judge sends param groups of tensors")
                    params |= {id(p) for p in x}
                elif not _plain(x):
                    raise JudgeError(f"the judge cannot send the hyper-parameter {k!r} of a {what}")
        for k, x in opt.defaults.items():
            if not _plain(x):
                raise JudgeError(f"the judge cannot send the default {k!r} of a {what}")
        for p, entry in opt.state.items():
            if id(p) not in params or type(entry) is not dict:
                raise JudgeError("the judge sends an optimizer's state for its own parameters only")
            for k, x in entry.items():
                if not isinstance(k, str) or not _plain(x):
                    raise JudgeError(f"the judge cannot send the state entry {k!r} of a {what}")

    def late(self, call, reply):
        values = []
        for item in self._changed(reply):
            values += [item[k] for k in ("param_groups", "defaults") if k in item]
            for entry in self._state_entries(item):
                values += entry
        return values

    def check(self, call, reply):
        """Every optimizer sent, as the call leaves it (its sections here, its lists' and dicts' changes
        in containers), in the form the judge gave it."""
        sent, containers = call.state(self), call.kind("containers")
        items = {}
        for item in self._changed(reply):
            items[index(item.get("o"), len(sent.optimizers))] = item
        for o, opt in enumerate(sent.optimizers):
            item = items.get(o, {})
            groups = call.late(item["param_groups"]) if "param_groups" in item else opt.param_groups
            groups = containers.after(call, groups)
            if type(groups) is not list or not groups:
                raise JudgeError("the kernel's param_groups are not a list of groups")
            groups = [containers.after(call, g) for g in groups]
            defaults = containers.after(call, call.late(item["defaults"]) if "defaults" in item else opt.defaults)
            if "state" in item:
                state = [(call.late(p), call.late(d)) for p, d in self._state_entries(item)]
                sent.checked[o] = state
            else:
                state = list(opt.state.items())
            self._in_form(call, o, groups, defaults, [(p, containers.after(call, d)) for p, d in state])

    def _in_form(self, call, o: int, groups: list, defaults, state: list) -> None:
        """The optimizer after the call, as torch would have made it from what the judge sent."""
        sent = call.state(self)
        what, settings = type(sent.optimizers[o]).__name__, sent.settings[o]
        if type(defaults) is not dict or set(defaults) != set(sent.optimizers[o].defaults):
            raise JudgeError(f"the kernel changed the keys of the {what}'s defaults")
        params = {}
        for g in groups:
            if type(g) is not dict or frozenset(g) not in sent.keys[o] or type(g.get("params")) is not list:
                raise JudgeError(f"the kernel's param_groups of the {what} do not have the keys the judge sent")
            for p in g["params"]:
                if not call.is_sent(p) or type(p) not in (torch.Tensor, torch.nn.Parameter):
                    raise JudgeError("the kernel's param_groups are not groups of the judge's parameters")
                params[id(p)] = p
        for table in [*groups, defaults]:
            for k, x in table.items():
                if k == "params":
                    continue
                if _form(x) not in settings[k]["types"]:
                    raise JudgeError(f"the kernel set the {what}'s {k} to a {type(x).__name__}")
                if k in OPTIMIZER_FLAGS and not any(x is v or (type(x) is not torch.Tensor and x == v)
                                                    for v in settings[k]["values"]):
                    raise JudgeError(f"the kernel switched the {what}'s {k} to {x!r}, which the judge does not "
                                     "accept: it chooses the implementation of a step")
        spec = OPTIMIZER_STATE[what]
        if len(state) > MAX_ITEMS:
            raise JudgeError("the kernel's optimizer state is malformed")
        for p, entry in state:
            if id(p) not in params or params[id(p)] is not p or type(entry) is not dict:
                raise JudgeError("the kernel's optimizer state is not per parameter of the optimizer")
            for k, x in entry.items():
                _state_value(what, spec.get(k), k, x, p)

    def settle(self, call, reply):
        sent = call.state(self)
        for item in self._changed(reply):
            opt = sent.optimizers[item["o"]]
            if "param_groups" in item:
                opt.param_groups = call.late(item["param_groups"])
            if "defaults" in item:
                opt.defaults = call.late(item["defaults"])
            if "state" in item:
                opt.state.clear()
                opt.state.update(sent.checked[item["o"]])

    @staticmethod
    def _changed(reply: dict) -> list:
        changed = reply.get("optimizers", [])
        if not isinstance(changed, list) or len(changed) > MAX_ITEMS or not all(isinstance(x, dict) for x in changed):
            raise JudgeError("the kernel's answer about the optimizers is malformed")
        return changed

    @staticmethod
    def _state_entries(item: dict) -> list:
        entries = item.get("state", [])
        if not isinstance(entries, list) or len(entries) > MAX_ITEMS or not all(
                isinstance(e, list) and len(e) == 2 for e in entries):
            raise JudgeError("the kernel's optimizer state is malformed")
        return entries

    # -- the agent's end --------------------------------------------------------------------
    def receive(self, call, v):
        """An optimizer of the listed classes, built from its param_groups, defaults and state as sent."""
        cls = OPTIMIZERS[v["type"]]
        groups, defaults = call.receive(v["groups"]), call.receive(v["defaults"])
        if _type(groups) is not _list or not all(_type(g) is _dict for g in groups) or _type(defaults) is not _dict:
            raise ValueError("an optimizer's param_groups or defaults are malformed")
        contents = [(g, _dict(g)) for g in groups]
        code = cls.__init__.__code__
        accepted = set(code.co_varnames[1:code.co_argcount + code.co_kwonlyargcount]) - {"params"}
        opt = cls(_list(groups), **{k: x for k, x in defaults.items() if k in accepted})
        for g, items in contents:         # the constructor's add_param_group copied the params list: undo
            g.clear()
            g.update(items)
        opt.param_groups, opt.defaults = groups, defaults
        params = {_id(p) for g in groups for p in g["params"]}
        state = _defaultdict(_dict)
        for key, entry in v["state"]:
            p, d = call.receive(key), call.receive(entry)
            if _id(p) not in params or _type(d) is not _dict:
                raise ValueError("an optimizer's state is malformed")
            state[p] = d
        opt.state = state
        call.keep(v["n"], opt)
        call.keep(v["state_n"], state)
        call.state(self)[v["o"]] = (opt, state, [(_id(k), _id(x)) for k, x in state.items()], groups, defaults)
        return opt

    def report(self, call, returned):
        if not returned:
            return {}
        changed = []
        for o, (opt, state, items, groups, defaults) in call.state(self).items():
            entry = {"o": o}
            if opt.param_groups is not groups:
                entry["param_groups"] = call.answer(opt.param_groups)
            if opt.defaults is not defaults:
                entry["defaults"] = call.answer(opt.defaults)
            if opt.state is not state or [(_id(k), _id(x)) for k, x in opt.state.items()] != items:
                entry["state"] = [[call.answer(k), call.answer(x)] for k, x in opt.state.items()]
            if _len(entry) > 1:
                changed.append(entry)
        return {"optimizers": changed}


def _form(x):
    """What a hyper-parameter may change into: a number into a number (0 into 0.9), a tensor into one
    of its dtype and shape, anything else into its own type."""
    if type(x) in (int, float):
        return "number"
    return (x.dtype, x.shape) if type(x) is torch.Tensor else type(x)


def _state_value(what: str, spec: str | None, key, x, p: torch.Tensor) -> None:
    """One entry of a parameter's state, as torch makes it for that parameter."""
    if spec is None:
        raise JudgeError(f"the kernel put a state entry {str(key)[:40]!r} that a {what} does not have")
    if spec == "param" and x is None:
        return
    if type(x) is not torch.Tensor or x.layout != torch.strided or x.device.type != "cpu":
        raise JudgeError(f"the kernel's {what} state {key!r} is not a CPU tensor")
    if spec == "param" and (x.shape != p.shape or x.dtype != p.dtype):
        raise JudgeError(f"the kernel's {what} state {key!r} has shape {tuple(x.shape)} and {x.dtype}, where torch "
                         f"makes {tuple(p.shape)} and {p.dtype} (the parameter's)")
    if spec == "scalar" and (x.dim() != 0 or not x.dtype.is_floating_point):
        raise JudgeError(f"the kernel's {what} state {key!r} is not a 0-dim float tensor")
