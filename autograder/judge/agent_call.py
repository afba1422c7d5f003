"""One call of a learner's function, on the agent's end: its arguments rebuilt in the kernel (each
object the judge sent by identity under the judge's number), and its answer written by value.

The judge's requests are trusted here; this runs inside the learner's kernel, so it uses builtins
captured at import, before any learner code runs.
"""
from __future__ import annotations

from typing import Any

from .kinds import BY_CODE, BY_NAME, offered
from .kinds.handle import unsendable
from .wire import MAX_DEPTH

_id, _type, _len, _isinstance, _str = id, type, len, isinstance, str


class AgentCall:
    """The arguments of one call, rebuilt, and the call's answer, by value."""

    def __init__(self, session, request: dict):
        self.session, self.request = session, request
        self.received: dict[int, object] = {}      # objects sent by identity, by the judge's number
        self.given: dict[int, tuple] = {}          # id -> (object, the judge's number)
        self.ties: dict[int, int] = {}             # id of an object already in the answer -> its number
        self.alive: list = []                      # what those ids name, kept alive while answering
        self.states: dict[str, Any] = {}

    def state(self, kind) -> Any:
        name = kind if _isinstance(kind, _str) else kind.name
        if name not in self.states:
            self.states[name] = BY_NAME[name].agent_state()
        return self.states[name]

    @staticmethod
    def kind(name: str):
        return BY_NAME[name]

    def keep(self, n: int, obj):
        """An object the judge sent as number ``n``: answered as a reference to it."""
        self.received[n] = obj
        self.given[_id(obj)] = (obj, n)
        return obj

    def receive(self, v: dict):
        """An argument, rebuilt by its kind."""
        if v["k"] == "ref":
            return self.received[v["n"]]
        return BY_CODE[v["k"]].receive(self, v)

    def tie(self, obj) -> int:
        """Number an object of the answer: met again, it goes as ``again`` (ties stay ties)."""
        n = _len(self.alive)
        self.alive.append(obj)
        self.ties[_id(obj)] = n
        return n

    def answer(self, obj, depth: int = 0) -> dict:
        """A value of the answer, by value (or a reference to what the judge sent, or a handle)."""
        if depth > MAX_DEPTH:
            return unsendable("deeply nested object")
        found = self.given.get(_id(obj))
        if found is not None and found[0] is obj:
            return {"k": "ref", "n": found[1]}
        n = self.ties.get(_id(obj))
        if n is not None and self.alive[n] is obj:
            return {"k": "again", "n": n}
        for kind in offered(_type(obj)):
            encoded = kind.answer(self, obj, depth)
            if encoded is not None:
                return encoded
        return unsendable("object")      # not reached: the handle kind answers everything
