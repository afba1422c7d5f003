"""The judge's messages: the operations, the value codes and the sections, in one table.

A request is one JSON object ``{"op": ..., ...}`` from the judge (the grader's end) to the agent (the
kernel's end); the answer is one JSON object back.  A value inside either is ``{"k": CODE, ...}``,
CODE one of :data:`CODES`; each code belongs to one kind of ``autograder.judge.kinds`` (a test holds
the registry and this table equal).  Both ends import this module: standard library only.
"""
from __future__ import annotations

import json
from typing import Any

AGENT = "__copy_that_judge"        # the name the kernel imports the agent under (before any learner code)
MAX_REPLY = 64 << 20               # characters of one answer, at most
MAX_DEPTH = 20                     # nesting of one value (a list in a dict in a tuple ...)
MAX_JSON_DEPTH = 64                # nesting of a whole message (values sit a few levels down)
MAX_ITEMS = 100_000                # items of one list, dict, set or iterator; entries of one section

OPS = {
    "call": "call the learner's function on arguments sent by value; answer its result and what it did",
    "vjp": "a vector-Jacobian product through the outputs of an earlier call (a backward in the judge)",
    "look_up": "what names the test reads but never calls hold in the kernel, by value when they are data",
}

CODES = {
    # plain values (kinds/plain.py)
    "v": "None, a bool, an int, a finite float or a str, as JSON has it",
    "f": "a float that is nan or infinite, by its repr",
    # containers (kinds/containers.py)
    "tuple": "a tuple of values",
    "list": "a list; sent with its number, so that what the call leaves in it comes back",
    "dict": "a dict as [key, value] pairs; sent with its number, like a list",
    "odict": "a collections.OrderedDict the call made (a state_dict())",
    "set": "a set the call made",
    "frozenset": "a frozenset the call made",
    # tuples with names (kinds/record.py)
    "record": "a named tuple of torch's (torch.return_types) or of a course's fixtures, by class and items",
    # identity (call.py, agent_call.py)
    "ref": "an object the judge sent in this call, by its number (a list, a tensor, a module, an optimizer ...)",
    "again": "an object met earlier in the same answer, by the number it carried (ties stay ties)",
    # small values of torch (kinds/torch_values.py)
    "dtype": "a torch.dtype of the allow-list, by name",
    "size": "a torch.Size",
    "device": "a torch.device, by name",
    # functions (kinds/function.py)
    "fn": "a function of torch.nn.functional, by name",
    # weak references (kinds/weak.py)
    "wref": "a weakref.ref to a value sent alongside (an RNN's references to its own parameters)",
    # iterators (kinds/iterator.py)
    "iter": "a generator, as a one-pass iterator over its items",
    # tensors (kinds/tensor.py; what the call did to them: kinds/tensor_changes.py)
    "t": "a tensor: sent as a view of a storage of the request; answered with the kernel's facts and "
         "where its memory is (an input's storage, an input array's memory, new bytes, or the meta device)",
    # graphs as recipes (kinds/graph.py)
    "g": "a tensor of a graph cell, by its reference in the recipe the agent replays",
    # modules (kinds/module.py) and the fixtures' hooks (kinds/hook.py)
    "module": "an nn.Module of an allowed class, by (module, qualname), with its attributes, parameters, "
              "buffers, submodules and hooks",
    "hook": "a forward pre-hook object of the fixtures, by class name, with its attributes",
    # NumPy arrays (kinds/array.py)
    "array": "a NumPy array: over a buffer of the request, or answered as bytes or in an input's memory",
    # paths (kinds/path.py)
    "path": "a path in a folder of the test's, sent as a fresh folder of the kernel's with its files",
    # optimizers (kinds/optimizer.py)
    "optim": "an optimizer of the allow-list: class, param_groups, defaults and state",
    # what cannot go by value (kinds/handle.py)
    "handle": "an object the kernel keeps: answered with its type name and repr, sent back by its handle",
}

# the constants of a graph recipe's calls (kinds/graph.py), besides v, f, tuple, list, dtype and size
RECIPE_CODES = {
    "slice": "a slice, by its start, stop and step",
    "ellipsis": "the Ellipsis of an index",
}

REQUEST = {
    "op": "one of OPS",
    "call": "the call's number (a vjp names the call it goes through)",
    "function": "the name the test called, looked up in the kernel's namespace",
    "args": "the positional arguments, as values",
    "kwargs": "the keyword arguments, name -> value",
    "storages": "the tensors' storages: bytes, dtype, and whether a leaf there requires grad (kinds/tensor.py)",
    "tensors": "the tensors, each a view of one storage (kinds/tensor.py)",
    "fixtures": "the names of a course's fixtures modules, which the agent imports (kinds/module.py)",
    "graph": "the recipe: sources by value, recorded torch calls, .grad to sync (kinds/graph.py)",
    "grads": "vjp: the gradient of each output of the call, or null",
    "inputs": "vjp: for each input of the call, whether its gradient is wanted",
    "names": "look_up: the names",
}

REPLY = {
    "result": "the value the learner's function returned",
    "raised": "the exception it raised instead: its name and message",
    "agent_error": "the agent could not serve the request (a malformed request, a bug, a replaced agent)",
    "storages": "the bytes of the new storages the result's tensors lie in (kinds/tensor.py)",
    "inputs": "per storage sent: bytes written, version bumps, the leaf's .grad (kinds/tensor_changes.py)",
    "rebound": "input tensors the call gave other memory (kinds/tensor_changes.py)",
    "detached": "input tensors the call detached in place (kinds/tensor_changes.py)",
    "flags": "leaves whose requires_grad the call switched (kinds/tensor_changes.py)",
    "leaf_grads": "the .grad of leaves that view their storage (kinds/tensor_changes.py); vjp: of leaves the call made",
    "joined": "input tensors an in-place call put into a graph (kinds/tensor_changes.py)",
    "containers": "the lists and dicts the call changed, with their new items (kinds/containers.py)",
    "modules": "the modules whose training flag, parameters or buffers the call changed (kinds/module.py)",
    "optimizers": "the optimizers whose groups, defaults or state the call changed (kinds/optimizer.py)",
    "buffers": "the bytes of the input arrays' memory the call wrote (kinds/array.py)",
    "folders": "the files found in each folder sent (kinds/path.py)",
    "graph_grads": "the .grad of the recipe's leaves (kinds/graph.py)",
    "freed": "the recipe's tensors whose graph the call freed (kinds/graph.py)",
    "grads": "vjp: the gradient of each input asked for, or null",
    "names": "look_up: name -> what it holds",
}


class JudgeError(Exception):
    """The judge could not run the test: a bad answer from the kernel, or an input it cannot send."""


def loads(text: str) -> dict:
    """An answer as sent (JSON text), parsed in time linear in its length and bounded in nesting."""
    if not isinstance(text, str) or len(text) > MAX_REPLY:
        raise JudgeError("the kernel's answer is missing or too big")
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        raise JudgeError("the kernel's agent answered something that is not JSON") from None
    check_message(message)
    return message


def check_message(message: Any) -> int:
    """A parsed answer is an object nested at most MAX_JSON_DEPTH deep (walked without recursion);
    returns the characters of its strings, all together (what crossed, in the main)."""
    if not isinstance(message, dict):
        raise JudgeError("the kernel's answer is not an object")
    size, stack = 0, [(message, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise JudgeError("the kernel's answer is nested too deeply")
        for x in (node.values() if type(node) is dict else node):
            if type(x) in (dict, list):
                stack.append((x, depth + 1))
            elif type(x) is str:
                size += len(x)
    return size
