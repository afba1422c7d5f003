"""Helpers for the judge's tests: the kernel's agent behind an in-process ``rpc`` that speaks JSON,
as the real transport does, with a namespace of its own standing for the kernel's (what crosses is
only what the messages carry); a judge whose answers are forged; the outcome of a cell."""
from __future__ import annotations

import json
import threading

from autograder.judge import Judge
from autograder.judge import agent as judge_agent

GRAPH = "# graded outside your kernel\n# graphs go to your kernel as recipes\n"
NOTHING = [{"data": None, "bumps": 0, "grad": None}]     # an input storage the call left alone


def serve(request: dict, namespace: dict) -> dict:
    """The agent's answer to ``request``, through JSON both ways."""
    judge_agent.serve(json.dumps(request), namespace)
    return json.loads(judge_agent.last_reply)


def kernel(source: str, seen: list[str] | None = None, threaded: bool = False):
    """An rpc into a fresh 'kernel' namespace holding the learner's ``source``; ``seen`` collects the
    requests as sent.  ``threaded``: each request served in a thread of its own, as a kernel is a
    process of its own (a learner's function that walks its callers' frames finds the agent)."""
    namespace: dict = {"__name__": "__main__"}
    exec("import torch\n" + source, namespace)

    def rpc(request: dict):
        text = json.dumps(request)
        if seen is not None:
            seen.append(text)
        if not threaded:
            judge_agent.serve(text, namespace)
            return json.loads(judge_agent.last_reply), ""
        reply = []
        serving = threading.Thread(target=lambda: reply.append(judge_agent.serve(text, namespace)
                                                                or judge_agent.last_reply))
        serving.start()
        serving.join()
        return json.loads(reply[0]), ""
    rpc.namespace = namespace
    return rpc


def errors_of(outputs: list[dict]) -> list[dict]:
    return [o for o in outputs if o["output_type"] == "error"]


def printed_by(outputs: list[dict]) -> str:
    return "".join(o.get("text", "") for o in outputs if o["output_type"] == "stream")


def run(learner: str, test: str, fixtures=None, threaded: bool = False):
    """The test cell judged against the learner's source: (errors, printed, requests sent)."""
    seen: list[str] = []
    outputs = Judge(kernel(learner, seen, threaded), fixtures).run_cell(test)
    return errors_of(outputs), printed_by(outputs), seen


def passes(learner: str, test: str, fixtures=None) -> None:
    errors, _, _ = run(learner, test, fixtures)
    assert not errors, errors[0]["evalue"]


def fails(learner: str, test: str, message: str, fixtures=None, threaded: bool = False) -> None:
    errors, _, _ = run(learner, test, fixtures, threaded)
    assert errors and message in errors[0]["evalue"], errors or "the test passed"


def forged(reply, cell: str, fixtures=None) -> list[dict]:
    """The errors of ``cell`` run by a judge to which the kernel answers ``reply`` every time."""
    return errors_of(Judge(lambda request: (reply, ""), fixtures).run_cell(cell))


def refused(reply, cell: str, fixtures=None) -> str:
    """A forged answer is a JudgeError, never a pass: its message."""
    errors = forged(reply, cell, fixtures)
    assert errors and errors[0]["ename"] == "JudgeError", errors or "a forged answer passed"
    return errors[0]["evalue"]


def through(learner: str, forge):
    """An rpc into the learner's 'kernel' whose every answer ``forge(request, answer)`` rewrites on the
    way back: what a learner who rewrote the agent could send."""
    real = kernel(learner)

    def rpc(request):
        answer, printed = real(request)
        return forge(request, answer), printed
    return rpc


COURSE_FIXTURES = '''
import torch
from torch import nn


class Scaled(nn.Module):
    """A model a course defines for its tests: a Linear, a scale it learns, a list of what it saw."""

    def __init__(self, n_in, n_out, scale=2.0):
        super().__init__()
        self.lin = nn.Linear(n_in, n_out)
        self.scale = nn.Parameter(torch.tensor(scale))
        self.seen = []
        self.shape = torch.Size([n_in, n_out])

    def forward(self, x):
        self.seen.append(tuple(x.shape))
        return self.lin(x) * self.scale


class Stack(nn.Module):
    """Nested: a GRU and a Scaled head."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(3, 4, batch_first=True)
        self.head = Scaled(4, 2)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out[:, -1])
'''


def make_course_fixtures(folder, monkeypatch, name: str = "fixtures") -> dict:
    """``{name: module}`` for Judge(rpc, fixtures): the judge's own module object, made from the source;
    the same source as a file the 'kernel' imports by name (its working folder on sys.path)."""
    import sys
    import types

    (folder / f"{name}.py").write_text(COURSE_FIXTURES)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, name, raising=False)
    module = types.ModuleType(name)
    exec(compile(COURSE_FIXTURES, f"<{name}>", "exec"), module.__dict__)
    return {name: module}
