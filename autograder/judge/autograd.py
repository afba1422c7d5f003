"""The learner's function in the judge's autograd graph: one node per call, whose backward asks the
kernel for the vector-Jacobian product (``vjp``), so that ``backward()`` in a test reaches through
the learner's function to the judge's own leaves."""
from __future__ import annotations

from typing import Any

import torch

from .data import b64, count, unb64
from .facts import Facts
from .wire import MAX_ITEMS, JudgeError


class RemoteCall(torch.autograd.Function):
    """Outputs of one of the learner's calls, in the judge's graph; backward asks the kernel."""

    @staticmethod
    def forward(ctx, session, call, outputs, count, *inputs):
        # inputs: the call's input tensors, then the leaves it made (their gradients come by the
        # session's vjp, which accumulates them; autograd gets None for them here)
        ctx.session, ctx.call, ctx.count, ctx.extra = session, call, count, len(inputs) - count
        ctx.needs = [t.requires_grad for t in inputs[:count]]
        ctx.shapes = [(t.shape, t.dtype) for t in inputs[:count]]
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *grads):
        found = vjp(ctx.session, ctx.call, grads, ctx.needs, ctx.shapes)
        return (None, None, None, None, *found, *([None] * ctx.extra))


def replace(obj, swap: dict, depth: int = 0):
    """``obj`` with the tensors in ``swap`` replaced; a list or dict with nothing to replace stays the
    same object (an input list in a result is that list)."""
    if not swap or depth > 20:
        return obj
    if isinstance(obj, torch.Tensor):
        return swap.get(id(obj), obj)
    if type(obj) in (list, tuple):
        items = [replace(x, swap, depth + 1) for x in obj]
        if all(a is b for a, b in zip(items, obj)):
            return obj
        return items if type(obj) is list else tuple(items)
    if type(obj) is dict:
        values = {k: replace(v, swap, depth + 1) for k, v in obj.items()}
        return obj if all(values[k] is v for k, v in obj.items()) else values
    return obj


def connect(call, result: Any) -> Any:
    """Route the call's differentiable results (and the inputs it put into a graph in place) through
    one RemoteCall node of the judge's graph; give those inputs the kernel's history."""
    tensors = call.state("tensor")
    order = sorted(tensors.differentiable, key=lambda item: item[0])
    if order:
        inputs = tensors.objects
        made = [ref() for ref in call.session.leaves.get(call.number, {}).values()]
        made = [t for t in made if t is not None]
        if not any(t.requires_grad for t in inputs) and not made:
            for _, t in order:
                t.requires_grad_(True)
        else:
            connected = RemoteCall.apply(call.session, call.number, [t for _, t in order], len(inputs),
                                         *inputs, *made)
            call.swap = {id(t): c for (_, t), c in zip(order, connected)}
            for (_, t), c in zip(order, connected):
                f = call.session.facts.get(t) or Facts(None, False, True, 0, 0)
                f.here = c._version
                call.session.facts[c] = f
            result = replace(result, call.swap)
    # an input the call wrote into in place, from tensors that require grad: in the judge's graph
    # too (a copy of its own values, whose backward asks the kernel), with the kernel's grad_fn name
    for t, stand_in, name in tensors.joined:
        before = t._version
        try:
            with torch.enable_grad():
                t.copy_(call.swap.get(id(stand_in), stand_in))
        except RuntimeError as exc:
            raise JudgeError(f"the kernel's answer about an input's history does not fit: {exc}") from None
        call.session.facts[t] = Facts(name, False, True, before, t._version)
    return result


def vjp(session, call: int, grads: tuple, needs: list[bool], shapes: list) -> list:
    """The gradients of a call's inputs for ``grads`` of its outputs, computed in the kernel; those of
    the leaves the call made are accumulated into the judge's copies of them."""
    encoded = [None if g is None else b64(g) for g in grads]
    reply = session.ask({"op": "vjp", "call": call, "grads": encoded, "inputs": needs})
    if "raised" in reply:
        raised = reply["raised"] if isinstance(reply["raised"], dict) else {}
        raise RuntimeError(f"backward through the learner's function failed: {str(raised.get('evalue', ''))[:2000]}")
    found = reply.get("grads")
    if not isinstance(found, list) or len(found) != len(needs):
        raise JudgeError("the kernel's gradients do not match the call")
    _made_leaf_grads(session, call, reply.get("leaf_grads", []))
    return [None if g is None else unb64(g, dtype, count(shape)).clone().view(shape)
            for g, (shape, dtype) in zip(found, shapes)]


def _made_leaf_grads(session, call: int, grads: Any) -> None:
    """Gradients that a backward through the kernel gave leaves the call made: accumulated into the
    judge's copies of them, as autograd accumulates into a leaf."""
    leaves = session.leaves.get(call, {})
    if not isinstance(grads, list) or len(grads) > MAX_ITEMS:
        raise JudgeError("the kernel's gradients do not match the call")
    for k, g in enumerate(grads):
        ref = leaves.get(k)
        t = ref() if ref is not None else None
        if g is None or t is None:
            continue
        values = unb64(g, t.dtype, t.numel()).clone().view(t.shape)
        with torch.no_grad():
            if t.grad is None:
                t.grad = values
            else:
                t.grad.add_(values)
