"""What lives as long as one notebook's judging, on each end: the judge's session (the transport,
the call counter, the kernel's facts and handles, the test's folders, the graph recorder, the course's
fixtures) and the agent's (objects kept for the judge, calls kept for a backward, graph mirrors).
The kinds get it as ``call.session``."""
from __future__ import annotations

import io
import types
from typing import Callable

from .allow import MAX_CALLS, MAX_KEPT
from .facts import ById
from .files import Files
from .wire import JudgeError, check_message

_len, _next, _iter = len, next, iter


class Session:
    """The judge's end of one notebook: ``rpc(request) -> (answer, printed)`` carries each request."""

    def __init__(self, rpc: Callable[[dict], tuple[dict, str]] | None,
                 fixtures: dict[str, types.ModuleType] | None = None):
        self.rpc = rpc
        self.fixtures = dict(fixtures or {})   # a course's fixtures, by the name a test imports them under
        self.calls = 0
        self.facts = ById()            # what the kernel measured about the tensors of its answers
        self.handles = ById()          # stand-ins for objects the kernel keeps -> their handle
        self.leaves: dict[int, dict] = {}      # call -> leaf number -> the judge's copy (weakref)
        self.files = Files()           # the folders judged tests make
        self.graphs = None             # the recorder of graph cells (recorder.Recorder), once one ran
        self.graphing = False          # a graph cell is running
        self.printed: io.StringIO | None = None   # where what the learner's code prints goes
        self.received = 0              # characters of the last answer's strings

    def ask(self, request: dict) -> dict:
        """One request to the kernel's agent; its answer, checked in form."""
        reply, printed = self.rpc(request)
        if printed and self.printed is not None:
            self.printed.write(printed)
        self.received = check_message(reply)
        if "agent_error" in reply:
            raise JudgeError(f"the kernel's agent failed: {str(reply['agent_error'])[:2000]}")
        return reply


class AgentSession:
    """The agent's end: what it keeps between requests of one kernel."""

    def __init__(self):
        self.kept: dict[int, object] = {}    # objects the judge holds only by handle
        self.next_handle = 0
        self.calls: dict[int, dict] = {}     # calls kept for a later vector-Jacobian product
        self.mirrors: dict[str, dict] = {}   # one graph mirror per judge (a judge per notebook run)

    def keep(self, obj) -> int:
        """A handle for an object the judge cannot rebuild: sent back, it is this object again."""
        self.next_handle += 1
        self.kept[self.next_handle] = obj
        while _len(self.kept) > MAX_KEPT:
            self.kept.pop(_next(_iter(self.kept)))
        return self.next_handle

    def remember(self, call: int, outputs: list, inputs: list, leaves: list) -> None:
        """Keep a call's graph for the judge's backward passes, the newest MAX_CALLS calls."""
        self.calls[call] = {"outputs": outputs, "inputs": inputs, "leaves": leaves}
        while _len(self.calls) > MAX_CALLS:
            self.calls.pop(_next(_iter(self.calls)))
