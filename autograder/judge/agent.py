"""The kernel's end of the judge: call one of the learner's functions on inputs sent by value.

Hidden tests run outside the learner's kernel (judge.py); this module is all of them that the
kernel sees, imported before any learner code (``grading/jobs.py``'s install cell, under the name
``wire.AGENT``; the sandbox's fork server preloads it).  ``serve(request, globals())`` answers one
request (wire.OPS) and leaves the answer in ``last_reply``, which the judge reads back as the value
of the expression that carried the request.

No test code and no expected value ever comes here.  What the kinds measure about inputs and results
(storage identity, ``_version``, ``requires_grad``, ``grad_fn`` names) they measure inside the
learner's process, so a learner who rewrites this module can forge those facts; the values
themselves can only be right by computing them.  Standard library, torch and the package's fixtures.
"""
from __future__ import annotations

import json

import torch

from . import lookup
from .agent_call import AgentCall
from .data import b64, flat, unb64_trusted
from .kinds import KINDS
from .kinds.graph import Replayed
from .session import AgentSession

_loads, _dumps, _str, _type, _len, _isinstance, _bool = json.loads, json.dumps, str, type, len, isinstance, bool
_grad, _iter, _next = torch.autograd.grad, iter, next

last_reply = ""            # read back by the judge as a user expression
session = AgentSession()


def serve(request: str, namespace: dict) -> None:
    """Answer one request (JSON); the answer is left in ``last_reply`` for the judge to read."""
    global last_reply
    try:
        message = _loads(request)
        op = message["op"]
        if op == "call":
            reply = _call(message, namespace)
        elif op == "vjp":
            reply = _vjp(message)
        elif op == "look_up":
            reply = lookup.look_up(message, namespace)
        else:
            raise ValueError(f"no operation {_str(op)[:40]!r}")
    except Exception as exc:
        reply = {"agent_error": f"{_type(exc).__name__}: {exc}"[:2000]}
    last_reply = _dumps(reply)


def _raised(exc: BaseException) -> dict:
    try:
        evalue = _str(exc)[:2000]
    except Exception:
        evalue = "<unprintable>"
    return {"ename": _type(exc).__name__, "evalue": evalue}


def _call(request: dict, namespace: dict) -> dict:
    call = AgentCall(session, request)
    try:
        for kind in KINDS:
            kind.prepare(call, request)
    except Replayed as exc:          # the test's own torch call failed when replayed
        return {"raised": _raised(exc.args[0])}
    fn = namespace.get(request["function"])
    if fn is None:                   # the NameError the test would raise for a function not defined
        return {"raised": {"ename": "NameError", "evalue": f"name '{request['function']}' is not defined"}}
    args = [call.receive(a) for a in request["args"]]
    kwargs = {k: call.receive(v) for k, v in request["kwargs"].items()}
    for kind in KINDS:
        kind.snapshot(call)
    try:
        value = fn(*args, **kwargs)
    except BaseException as exc:     # the learner's exception is the test's failure, reported by name
        if _isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        reply = {"raised": _raised(exc)}
        for kind in KINDS:
            reply.update(kind.report(call, False))
        return reply
    reply = {"result": call.answer(value)}
    for kind in KINDS:
        reply.update(kind.report(call, True))
    tensors = call.state("tensor")
    session.remember(request["call"], tensors.differentiable, tensors.tensors, tensors.made_leaves)
    return reply


def _vjp(request: dict) -> dict:
    call = session.calls.get(request["call"])
    if call is None:
        return {"raised": {"ename": "RuntimeError", "evalue": "the call's graph is gone"}}
    outputs, grads = [], []
    for out, g in zip(call["outputs"], request["grads"]):
        if g is None:
            continue
        outputs.append(out)
        grads.append(flat(unb64_trusted(g), out.dtype).view(out.shape))
    # the inputs the judge asks about that still require grad here (the call may have turned it off)
    asked = [_bool(needs) and t.requires_grad for t, needs in zip(call["inputs"], request["inputs"])]
    wanted = [t for t, needs in zip(call["inputs"], asked) if needs]
    # leaves the call made (a parameter it put into a model): the judge has them too, by value
    leaves = [t for t in call["leaves"] if t.requires_grad]
    if not outputs or not (wanted or leaves):
        return {"grads": [None] * _len(request["inputs"]), "leaf_grads": [None] * _len(call["leaves"])}
    found = _iter(_grad(outputs, wanted + leaves, grads, retain_graph=True, allow_unused=True))
    out = []
    for needs in asked:
        g = _next(found) if needs else None
        out.append(None if g is None else b64(g))
    leaf_grads = []
    for t in call["leaves"]:
        g = _next(found) if t.requires_grad else None
        leaf_grads.append(None if g is None else b64(g))
    return {"grads": out, "leaf_grads": leaf_grads}
