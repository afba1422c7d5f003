"""One call of a learner's function, on the judge's end: its arguments as they go, and its answer
rebuilt, checked, and applied to the judge's own objects.

The steps, each run for every kind in the registry's order (kinds/base.py says what each does):
``send`` the arguments, ``request`` sections; then on the answer: ``effects``, the learner's
exception if it raised, ``rebuild`` the result and ``late`` values, ``finish``, ``check``, ``settle``.
"""
from __future__ import annotations

import builtins
import re
from typing import Any

from .allow import MATERIALISE_FACTOR, MATERIALISE_FLOOR
from .data import Budget
from .kinds import BY_CODE, BY_NAME, KINDS, offered
from .autograd import replace
from .wire import MAX_DEPTH, MAX_ITEMS, JudgeError


class Call:
    """The arguments of one call, by value, and its answer turned back into the judge's objects."""

    def __init__(self, session, function: str):
        session.calls += 1
        self.session, self.function, self.number = session, function, session.calls
        self.graphing = session.graphing
        self.sent: list = []                  # objects sent by identity, by number
        self._numbers: dict[int, int] = {}
        self.states: dict[str, Any] = {}
        self.budget = Budget(MATERIALISE_FLOOR, MATERIALISE_FACTOR)
        self.reply: dict = {}
        self.made: dict[int, Any] = {}        # objects of the answer, by the number they carried
        self.late_values: dict[int, Any] = {}
        self.swap: dict[int, Any] = {}        # tensors of the answer -> their copy in the judge's graph

    def state(self, kind) -> Any:
        name = kind if isinstance(kind, str) else kind.name
        if name not in self.states:
            self.states[name] = BY_NAME[name].judge_state()
        return self.states[name]

    @staticmethod
    def kind(name: str):
        return BY_NAME[name]

    # -- what the judge sent ----------------------------------------------------------------
    def register(self, obj) -> int:
        """Number an object sent by identity: it comes back as a reference to itself."""
        self._numbers[id(obj)] = n = len(self.sent)
        self.sent.append(obj)
        return n

    def sent_number(self, obj) -> int | None:
        """The number ``obj`` was sent under, or None."""
        n = self._numbers.get(id(obj))
        return n if n is not None and self.sent[n] is obj else None

    def is_sent(self, obj) -> bool:
        """Whether ``obj`` is one of the objects the judge sent in this call."""
        return self.sent_number(obj) is not None

    def sent_object(self, n: Any, types: tuple) -> Any:
        """The object the judge sent as number ``n``, of one of the exact ``types`` (or a subclass of a
        class among them, for modules)."""
        if type(n) is not int or not 0 <= n < len(self.sent):
            raise JudgeError("the kernel's answer names something the judge did not send")
        obj = self.sent[n]
        if not (type(obj) in types or any(t not in (list, dict) and isinstance(obj, t) for t in types)):
            raise JudgeError(f"the kernel's answer names a {type(obj).__name__} where it means a "
                             f"{' or '.join(t.__name__ for t in types)}")
        return obj

    def send(self, value: Any, depth: int = 0) -> dict:
        """A value as it goes to the learner's function."""
        if depth > MAX_DEPTH:
            raise JudgeError("an argument nested too deeply")
        n = self.sent_number(value)
        if n is not None:
            return {"k": "ref", "n": n}
        for kind in offered(type(value)):
            encoded = kind.send(self, value, depth)
            if encoded is not None:
                return encoded
        raise JudgeError(f"the judge cannot send a {type(value).__qualname__} to the learner's function")

    def request(self, args: tuple, kwargs: dict) -> dict:
        request = {"op": "call", "call": self.number, "function": self.function,
                   "args": [self.send(a) for a in args], "kwargs": {str(k): self.send(v) for k, v in kwargs.items()}}
        for kind in KINDS:
            request.update(kind.request(self))
        return request

    # -- its answer -------------------------------------------------------------------------
    def answer(self, reply: dict) -> Any:
        """The learner's result, rebuilt; what the call did to its inputs, done to the judge's own."""
        self.reply = reply
        self.budget.crossing(self.session.received)
        for kind in KINDS:
            kind.effects(self, reply)
        if "raised" in reply:
            raise_learners(self.function, reply["raised"])
        result = self.decode(reply.get("result"), 0)
        later = [v for kind in KINDS for v in kind.late(self, reply)]
        self.late_values = {id(v): self.decode(v, 1) for v in later}
        for kind in KINDS:
            result = kind.finish(self, reply, result)
        for kind in KINDS:
            kind.check(self, reply)
        for kind in KINDS:
            kind.settle(self, reply)
        return result

    def decode(self, v: Any, depth: int) -> Any:
        """A value of the answer, rebuilt by its kind."""
        if depth > MAX_DEPTH or not isinstance(v, dict):
            raise JudgeError("the kernel's result is malformed")
        code = v.get("k")
        if code == "ref":
            n = v.get("n")
            if type(n) is not int or not 0 <= n < len(self.sent):
                raise JudgeError("the kernel's answer names something the judge did not send")
            return self.sent[n]
        if code == "again":
            if type(v.get("n")) is not int or v["n"] not in self.made:
                raise JudgeError("the kernel's answer names an object it did not send")
            return self.made[v["n"]]
        kind = BY_CODE.get(code) if type(code) is str else None
        if kind is None:
            raise JudgeError(f"the kernel's result holds an unknown kind {str(code)[:40]!r}")
        return kind.rebuild(self, v, depth)

    def made_object(self, v: dict, obj: Any) -> Any:
        """Note an object of the answer under the number it carries, for a later ``again``."""
        if "n" in v:
            n = v["n"]
            if type(n) is not int or n in self.made or not 0 <= n < MAX_ITEMS:
                raise JudgeError("the kernel's answer numbers its objects wrongly")
            self.made[n] = obj
        return obj

    def late(self, v: Any) -> Any:
        """A value of the answer's sections, rebuilt with the result (kinds' ``late``)."""
        if id(v) not in self.late_values:
            raise JudgeError("the kernel's answer about its inputs is malformed")
        return replace(self.late_values[id(v)], self.swap)


def raise_learners(function: str, raised: Any):
    """The learner's exception, raised here: a built-in one as itself, with the kernel's message (a
    test that catches it does what it would next to the answer); any other by its name."""
    if not isinstance(raised, dict):
        raise JudgeError("the kernel's answer about an exception is malformed")
    ename = str(raised.get("ename", "Exception"))
    ename = ename if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,80}", ename) else "Exception"
    evalue = str(raised.get("evalue", ""))[:2000]
    builtin = getattr(builtins, ename, None)
    if (isinstance(builtin, type) and issubclass(builtin, Exception)
            and not issubclass(builtin, (StopIteration, StopAsyncIteration))):
        try:
            exc = builtin(evalue)
        except Exception:     # one that takes other arguments (UnicodeDecodeError)
            exc = None
        if exc is not None:
            raise exc
    raise type(ename, (Exception,), {"__module__": "builtins"})(f"{function}() raised {ename}: {evalue}")
