"""What every kind of value provides, on the judge's end and on the agent's.

A kind is one module of ``autograder.judge.kinds`` holding both ends of one kind of value: how the
judge sends it to the learner's function and rebuilds (and validates) what comes back, and how the
agent in the kernel receives it and answers.  Its codes (``wire.CODES``) and sections
(``wire.REQUEST``, ``wire.REPLY``) are its own.  A new kind is a subclass of :class:`Kind` in a file
of its own, one line in ``kinds/__init__.py``'s registry, and a test file in ``tests/judge/``.

The methods get the call they work for: on the judge's end ``autograder.judge.call.Call`` (its
``session``, the objects sent, ``send``/``decode``/``late`` for nested values, ``state(kind)``, the
materialisation ``budget``), on the agent's ``autograder.judge.agent_call.AgentCall`` (its
``session``, ``receive``/``answer`` for nested values, ``keep``, ``state(kind)``).  Each method that
does not concern a kind keeps the default, which does nothing (or declines the value).
"""
from __future__ import annotations

from typing import Any

from ..wire import JudgeError


class Kind:
    """One kind of value, both ends.  Class attributes say what it handles."""

    name: str = ""
    codes: tuple[str, ...] = ()                 # value codes it writes and reads
    types: tuple[type, ...] = ()                # exact Python types it may send or answer
    any_type: bool = False                      # offered every value its types do not cover
    request_sections: tuple[str, ...] = ()      # sections of a request it writes (and the agent reads)
    reply_sections: tuple[str, ...] = ()        # sections of an answer it writes (and the judge reads)

    def judge_state(self) -> Any:
        """Per-call state of this kind on the judge's end (``call.state(kind)``)."""
        return None

    def agent_state(self) -> Any:
        """Per-call state of this kind on the agent's end (``call.state(kind)``)."""
        return None

    # -- the judge's end --------------------------------------------------------------------
    def send(self, call, value: Any, depth: int) -> dict | None:
        """``value`` as it goes to the learner's function, or None when it is not of this kind."""
        return None

    def request(self, call) -> dict:
        """Sections of the request, once every argument is encoded."""
        return {}

    def effects(self, call, reply: dict) -> None:
        """What the call did to this kind's inputs, done to the judge's own (before the result is
        rebuilt; also when the learner's function raised)."""

    def rebuild(self, call, v: dict, depth: int) -> Any:
        """A value of one of this kind's codes in the answer, rebuilt and checked."""
        raise JudgeError(f"the kernel's answer holds a {v.get('k')!r} where the judge sent none")

    def late(self, call, reply: dict) -> list:
        """Values of the answer's sections to rebuild along with the result: they join the same
        node of the judge's graph (``call.late(v)`` gives each back)."""
        return []

    def finish(self, call, reply: dict, result: Any) -> Any:
        """The result, once every value is rebuilt (the tensors kind joins them to the judge's graph)."""
        return result

    def check(self, call, reply: dict) -> None:
        """Validate what settle will do, with every value rebuilt and nothing of it done yet (a kind
        may read what another's settle will do: containers' ``after``)."""

    def settle(self, call, reply: dict) -> None:
        """What the call did to this kind's inputs that needs the rebuilt values (after the result)."""

    # -- the agent's end --------------------------------------------------------------------
    def prepare(self, call, request: dict) -> None:
        """Read this kind's request sections before the arguments are received."""

    def receive(self, call, v: dict) -> Any:
        """A value of one of this kind's codes, rebuilt in the kernel."""
        raise ValueError(f"the agent cannot receive a {str(v.get('k'))[:40]!r}")

    def snapshot(self, call) -> None:
        """Note what this kind's inputs hold, right before the learner's function runs."""

    def answer(self, call, obj: Any, depth: int) -> dict | None:
        """``obj`` (in the learner's answer) by value, or None when it is not of this kind."""
        return None

    def report(self, call, returned: bool) -> dict:
        """Sections of the answer: what the call did to this kind's inputs (``returned`` False: the
        learner's function raised, and only what the judge applies then is asked for)."""
        return {}
