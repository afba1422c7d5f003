"""Tuples, lists and dicts; and the OrderedDicts, sets and frozensets a call makes.

A list or dict goes by identity: it carries its number, the agent rebuilds it once, and what the
call leaves in it comes back (``containers``: its new items, rebuilt with the result), so the judge's
own list holds them afterwards, as it would in one process.  A tuple goes by value.
"""
from __future__ import annotations

import collections

from ..wire import MAX_ITEMS, JudgeError
from .base import Kind

_type, _id, _list, _dict = type, id, list, dict
_OrderedDict = collections.OrderedDict


def _items(v: dict) -> list:
    items = v.get("v")
    if not isinstance(items, list) or len(items) > MAX_ITEMS:
        raise JudgeError("the kernel's answer holds a malformed container")
    return items


def _pairs(items: list) -> list:
    if not all(isinstance(p, list) and len(p) == 2 for p in items):
        raise JudgeError("the kernel's dict is malformed")
    return items


class _Sent:
    """The lists and dicts of one call, on the agent's end: what each held before the call."""

    def __init__(self):
        self.objects: dict[int, object] = {}       # by the judge's number
        self.held: dict[int, list] = {}


def _holding(obj) -> list:
    if _type(obj) is _list:
        return [_id(x) for x in obj]
    return [(_id(k), _id(x)) for k, x in obj.items()]


class Containers(Kind):
    """Tuples, lists and dicts; the OrderedDicts, sets and frozensets of answers."""
    name = "containers"
    codes = ("tuple", "list", "dict", "odict", "set", "frozenset")
    types = (tuple, list, dict, _OrderedDict, set, frozenset)
    reply_sections = ("containers",)

    def judge_state(self):
        return {}           # the judge's number -> the new contents of a list or dict the call changed

    def agent_state(self):
        return _Sent()

    # -- the judge's end --------------------------------------------------------------------
    def send(self, call, value, depth):
        if type(value) is tuple:
            return {"k": "tuple", "v": [call.send(x, depth + 1) for x in value]}
        if type(value) is list:
            n = call.register(value)
            return {"k": "list", "n": n, "v": [call.send(x, depth + 1) for x in value]}
        if type(value) is dict:
            n = call.register(value)
            return {"k": "dict", "n": n, "v": [[call.send(a, depth + 1), call.send(b, depth + 1)]
                                               for a, b in value.items()]}
        return None          # an OrderedDict, a set: not sent (what the call did to them would not come back)

    def rebuild(self, call, v, depth):
        kind, items = v["k"], _items(v)
        if kind in ("tuple", "set", "frozenset"):
            values = [call.decode(x, depth + 1) for x in items]
            if kind == "tuple":
                return tuple(values)
            try:
                return set(values) if kind == "set" else frozenset(values)
            except TypeError:
                raise JudgeError("the kernel's set holds something unhashable") from None
        if kind == "list":
            out = call.made_object(v, [])
            out.extend(call.decode(x, depth + 1) for x in items)
            return out
        out = call.made_object(v, {} if kind == "dict" else collections.OrderedDict())
        for key, value in _pairs(items):
            key = call.decode(key, depth + 1)
            try:
                out[key] = call.decode(value, depth + 1)
            except TypeError:
                raise JudgeError("the kernel's dict has an unhashable key") from None
        return out

    def late(self, call, reply):
        values = []
        for item in self._changed(reply):
            for x in item[1]:
                values.extend(x if isinstance(x, list) else [x])
        return values

    def check(self, call, reply):
        """The new contents of each list and dict the call changed, rebuilt (applied by settle)."""
        proposed = call.state(self)
        for item in self._changed(reply):
            target = call.sent_object(item[0], (list, dict))
            if type(target) is list:
                proposed[item[0]] = [call.late(x) for x in item[1]]
                continue
            try:
                proposed[item[0]] = dict((call.late(a), call.late(b)) for a, b in _pairs(item[1]))
            except TypeError:
                raise JudgeError("the kernel's dict has an unhashable key") from None

    def settle(self, call, reply):
        for n, contents in call.state(self).items():
            target = call.sent[n]
            if type(target) is list:
                target[:] = contents
            else:
                target.clear()
                target.update(contents)

    def after(self, call, obj):
        """What a list or dict the judge sent will hold once the call's changes are done."""
        n = call.sent_number(obj)
        return call.state(self).get(n, obj) if n is not None else obj

    @staticmethod
    def _changed(reply: dict) -> list:
        changed = reply.get("containers", [])
        if not isinstance(changed, list) or len(changed) > MAX_ITEMS or not all(
                isinstance(item, list) and len(item) == 2 and isinstance(item[1], list) for item in changed):
            raise JudgeError("the kernel's answer about a list or dict is malformed")
        return changed

    # -- the agent's end --------------------------------------------------------------------
    def receive(self, call, v):
        kind = v["k"]
        if kind == "tuple":
            return tuple(call.receive(x) for x in v["v"])
        if kind == "list":
            out = call.keep(v["n"], [])
            call.state(self).objects[v["n"]] = out
            out.extend(call.receive(x) for x in v["v"])
            return out
        if kind == "dict":
            out = call.keep(v["n"], {})
            call.state(self).objects[v["n"]] = out
            for a, b in v["v"]:
                out[call.receive(a)] = call.receive(b)
            return out
        return super().receive(call, v)

    def snapshot(self, call):
        sent = call.state(self)
        sent.held = {n: _holding(obj) for n, obj in sent.objects.items()}

    def answer(self, call, obj, depth):
        t = _type(obj)
        if t in (tuple, set, frozenset):
            return {"k": t.__name__, "v": [call.answer(x, depth + 1) for x in obj]}
        if t is _list:
            entry = {"k": "list", "n": call.tie(obj)}
            entry["v"] = [call.answer(x, depth + 1) for x in obj]
            return entry
        entry = {"k": "dict" if t is _dict else "odict", "n": call.tie(obj)}
        entry["v"] = [[call.answer(a, depth + 1), call.answer(b, depth + 1)] for a, b in obj.items()]
        return entry

    def report(self, call, returned):
        if not returned:
            return {}
        sent, changed = call.state(self), []
        for n, obj in sent.objects.items():
            if _holding(obj) != sent.held.get(n):
                if _type(obj) is _list:
                    changed.append([n, [call.answer(x) for x in obj]])
                else:
                    changed.append([n, [[call.answer(k), call.answer(x)] for k, x in obj.items()]])
        return {"containers": changed}
