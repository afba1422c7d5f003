"""Names a test reads but never calls (a7's ``graph_answer``, a prediction set's ``PREDICTIONS``):
what they hold in the kernel, by value when it is data (None, bools, numbers, strs, and tuples,
lists and dicts of those, bounded in size and depth); a function, or anything else, stays the
learner's and is called there; a name the kernel does not have stays undefined in the judge too, so
reading it raises NameError as it would there.  Both ends: ``look_up_names`` in the judge,
``look_up`` in the agent.
"""
from __future__ import annotations

import ast
from typing import Any, Callable

from .allow import MAX_DATA_DEPTH, MAX_DATA_ITEMS, MAX_LOOK_UP
from .kinds.plain import PLAIN, plain, unplain
from .wire import JudgeError

_type, _callable = type, callable


# -- the agent's end --------------------------------------------------------------------------

class _TooBig(Exception):
    pass


def _data(v, depth: int, budget: list) -> dict:
    """A value as data, or _TooBig / None-returning refusal for what is not data within bounds."""
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_DATA_DEPTH:
        raise _TooBig
    t = _type(v)
    if t in PLAIN:
        return plain(v)
    if t in (list, tuple):
        return {"k": t.__name__, "v": [_data(x, depth + 1, budget) for x in v]}
    if t is dict:
        return {"k": "dict", "v": [[_data(a, depth + 1, budget), _data(b, depth + 1, budget)] for a, b in v.items()]}
    raise _TooBig


def look_up(request: dict, namespace: dict) -> dict:
    """What each name the test reads (and never calls) is here: data is sent by value."""
    found = {}
    for name in request["names"][:MAX_LOOK_UP]:
        if name not in namespace:
            found[name] = {"kind": "missing"}
            continue
        v = namespace[name]
        try:
            found[name] = {"kind": "value", "value": _data(v, 0, [MAX_DATA_ITEMS])}
        except _TooBig:
            found[name] = {"kind": "function" if _callable(v) else "other"}
    return {"names": found}


# -- the judge's end --------------------------------------------------------------------------

def _undata(v: Any, depth: int, budget: list) -> Any:
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_DATA_DEPTH or not isinstance(v, dict):
        raise JudgeError("the kernel's value is malformed or too big")
    kind = v.get("k")
    if kind in ("v", "f"):
        return unplain(v)
    items = v.get("v")
    if kind in ("list", "tuple") and isinstance(items, list):
        values = [_undata(x, depth + 1, budget) for x in items]
        return values if kind == "list" else tuple(values)
    if kind == "dict" and isinstance(items, list) and all(isinstance(p, list) and len(p) == 2 for p in items):
        out = {}
        for a, b in items:
            try:
                out[_undata(a, depth + 1, budget)] = _undata(b, depth + 1, budget)
            except TypeError:
                raise JudgeError("the kernel's dict has an unhashable key") from None
        return out
    raise JudgeError("the kernel's value is not data")


def names_read(nodes: list[ast.AST], namespace: dict, is_remote: Callable[[Any], bool], looked_up: set) -> list[str]:
    """The names a cell (``nodes``: its syntax tree, walked) reads but never calls or assigns, that
    stand for the learner's (or were looked up before)."""
    called, stored, read = set(), set(), set()
    for node in nodes:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            called.add(node.func.id)
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                stored.add(node.id)
            elif is_remote(namespace.get(node.id)) or node.id in looked_up:
                read.add(node.id)
    return sorted(read - called - stored)


def look_up_names(session, names: list[str], namespace: dict, looked_up: set, remote: Callable[[str], Any]) -> None:
    """Ask the kernel what ``names`` hold; put data into ``namespace``, drop what is missing there."""
    names = names[:MAX_LOOK_UP]
    if not names:
        return
    found = session.ask({"op": "look_up", "names": names}).get("names")
    if not isinstance(found, dict):
        raise JudgeError("the kernel's answer about names is malformed")
    for name in names:
        item = found.get(name)
        if not isinstance(item, dict) or item.get("kind") not in ("missing", "value", "function", "other"):
            raise JudgeError("the kernel's answer about a name is malformed")
        if item["kind"] == "missing":
            namespace.pop(name, None)
            looked_up.add(name)
        elif item["kind"] == "value":
            namespace[name] = _undata(item.get("value"), 0, [MAX_DATA_ITEMS])
            looked_up.add(name)
        else:                       # a function, or what cannot go by value: called there, as before
            namespace[name] = remote(name)
            looked_up.discard(name)
