"""What may cross between the judge and the kernel's agent: every allow-list and cap, written once.

Both ends import this module (the agent inside the learner's kernel, before any learner code): it
imports the standard library, torch and ``autograder.kernel.fixtures`` only.
"""
from __future__ import annotations

import inspect
import sys
import types
from typing import Mapping

import torch

from ..kernel import fixtures

# tensors: CPU (or meta, for results), strided, of these dtypes
DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128,
    torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool)}
# NumPy arrays: little-endian or single-byte plain dtypes, as ``dtype.str`` names them
ARRAY_DTYPES = frozenset({"|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4", "<f8",
                          "<c8", "<c16"})

# functions of torch.nn.functional, by name (a loss passed to the learner's function, a layer's
# activation): every public function there but the machinery of its dispatch
_NOT_LAYERS = {"boolean_dispatch", "handle_torch_function", "has_torch_function", "has_torch_function_unary",
               "has_torch_function_variadic", "assert_int_or_pair"}
FUNCTIONS = {name: f for name, f in sorted(vars(torch.nn.functional).items())
             if not name.startswith("_") and name not in _NOT_LAYERS
             and (inspect.isfunction(f) or inspect.isbuiltin(f))}
FUNCTION_NAMES = {id(f): name for name, f in reversed(list(FUNCTIONS.items()))}   # the first name wins

# modules go by value when their class is one of torch.nn's, of the package's fixtures, or of a
# course's fixtures (modules the judge is given by name); rebuilt without calling a constructor
TORCH_MODULES = "torch.nn.modules."
FIXTURES = fixtures.__name__
MODULE_INTERNALS = frozenset(vars(torch.nn.Module()))        # what nn.Module.__init__ makes: rebuilt
HOOK_SLOTS = tuple(sorted(k for k in MODULE_INTERNALS if "hook" in k and k != "_is_full_backward_hook"))
HOOKS = {c.__name__: c for c in fixtures.HOOKS}              # forward pre-hooks a module may carry
MAX_SLOTS = 4096                                             # attributes, parameters, ... of one module
# tuples with names go by value when their class is torch's (``t.max(0)``'s ``torch.return_types.max``,
# a layer's named output) or a course's fixtures'
RETURN_TYPES = "torch.return_types"

# optimizers by value: the classes, and the state torch makes for each parameter (checked when the
# kernel sends state back: "param" is a tensor like the parameter, "scalar" a 0-dim float tensor)
OPTIMIZERS = {c.__name__: c for c in (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW)}
OPTIMIZER_STATE = {
    "SGD": {"momentum_buffer": "param"},
    "Adam": {"step": "scalar", "exp_avg": "param", "exp_avg_sq": "param", "max_exp_avg_sq": "param"},
    "AdamW": {"step": "scalar", "exp_avg": "param", "exp_avg_sq": "param", "max_exp_avg_sq": "param"},
}
# settings that choose the implementation a step runs: the kernel may not change them (a fused step
# checks no sizes)
OPTIMIZER_FLAGS = ("fused", "foreach", "capturable", "differentiable", "maximize")

# the torch calls a graph recipe may name (replayed by the agent; any other name refuses the request)
GRAPH_OPS = frozenset(
    [f"Tensor.{m}" for m in (
        "__getitem__", "__setitem__", "__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__",
        "__mul__", "__rmul__", "__imul__", "__truediv__", "__rtruediv__", "__itruediv__", "__neg__",
        "__pow__", "__rpow__", "__matmul__",
        "add", "sub", "mul", "div", "neg", "pow", "matmul", "mm", "exp", "log", "sin", "cos", "tanh",
        "sigmoid", "relu", "abs", "sqrt", "square", "sum", "mean", "prod", "clone", "detach", "detach_",
        "to", "float", "double", "view", "view_as", "reshape", "t", "transpose", "permute", "expand",
        "expand_as", "squeeze", "unsqueeze", "flatten", "contiguous", "select", "narrow",
        "copy_", "add_", "sub_", "mul_", "div_", "zero_", "fill_", "requires_grad_", "retain_grad",
        "backward", "clamp", "clamp_min", "clamp_max", "max", "min", "softmax", "log_softmax")]
    + [f"torch.{f}" for f in (
        "add", "sub", "mul", "div", "neg", "pow", "matmul", "exp", "log", "sin", "cos", "tanh", "sigmoid",
        "relu", "abs", "sqrt", "sum", "mean", "clone", "stack", "cat", "where", "clamp", "max", "min",
        "softmax", "log_softmax")]
    + [f"F.{f}" for f in ("relu", "softmax", "log_softmax", "mse_loss", "linear")])

# files of a test's folder: each way, at most this many files and bytes; a file past the bytes goes
# back by its size alone (a sparse file here), at most MAX_FILE_SIZE (the kernel's own file limit
# is 256 MiB by default)
MAX_FILES = 64
MAX_FILE_BYTES = 8 << 20
MAX_FILE_SIZE = 1 << 30
# torch.load in a judged cell: a zip archive of at most this many entries and declared bytes, none
# compressed more than MAX_LOAD_RATIO to one (torch.save stores its entries uncompressed)
MAX_LOAD_ENTRIES = 10_000
MAX_LOAD_BYTES = 1 << 30
MAX_LOAD_RATIO = 16

# what the judge materialises for an answer (tensors and arrays at their full size, their gradients):
# at most this much more than the bytes that crossed for the call, and MATERIALISE_FACTOR times those
MATERIALISE_FLOOR = 64 << 20
MATERIALISE_FACTOR = 4

MAX_CALLS = 256            # calls the agent keeps for a later vector-Jacobian product
MAX_KEPT = 4096            # objects the agent keeps for the judge, by handle
MAX_MIRROR = 200_000       # tensors a graph mirror holds for one notebook
MAX_LOOK_UP = 256          # names one look_up asks about
MAX_DATA_ITEMS = 10_000    # items of a value read by name (a dict of letters), all levels together
MAX_DATA_DEPTH = 8


def module_class(module: str, qualname: str, courses: Mapping[str, types.ModuleType] = {}) -> type | None:
    """The nn.Module class named ``module``.``qualname`` when it may go by value; else None.

    ``courses`` are a course's fixtures by the name a test imports them under (the judge's end holds
    the module objects; the agent's end imports them by that name)."""
    if type(module) is not str or type(qualname) is not str or not qualname.isidentifier():
        return None
    if module.startswith(TORCH_MODULES) or module == FIXTURES:
        owner = sys.modules.get(module)          # torch.nn and the fixtures are imported on both ends
    else:
        owner = courses.get(module)
    cls = vars(owner).get(qualname) if isinstance(owner, types.ModuleType) else None
    if isinstance(cls, type) and issubclass(cls, torch.nn.Module) and cls.__qualname__ == qualname:
        return cls
    return None


def module_name(cls: type, courses: Mapping[str, types.ModuleType] = {}) -> tuple[str, str] | None:
    """(module, qualname) naming an nn.Module class that may go by value; None for any other class."""
    qualname = getattr(cls, "__qualname__", None)
    if type(qualname) is not str:
        return None
    module = getattr(cls, "__module__", None)
    if type(module) is str and (module.startswith(TORCH_MODULES) or module == FIXTURES):
        return (module, qualname) if module_class(module, qualname) is cls else None
    for name, owner in courses.items():
        if vars(owner).get(qualname) is cls:
            return (name, qualname) if module_class(name, qualname, courses) is cls else None
    return None


def record_class(module: str, qualname: str, courses: Mapping[str, types.ModuleType] = {}) -> type | None:
    """The named-tuple class (or torch's structseq) named ``module``.``qualname`` when it may go by
    value; else None."""
    if type(module) is not str or type(qualname) is not str or not qualname.isidentifier():
        return None
    if module == RETURN_TYPES:
        cls = getattr(torch.return_types, qualname, None)
        return cls if cls in torch.return_types.all_return_types else None
    owner = sys.modules.get(module) if module.startswith(TORCH_MODULES) else courses.get(module)
    cls = vars(owner).get(qualname) if isinstance(owner, types.ModuleType) else None
    if isinstance(cls, type) and issubclass(cls, tuple) and type(getattr(cls, "_fields", None)) is tuple:
        return cls
    return None


def record_name(cls: type, courses: Mapping[str, types.ModuleType] = {}) -> tuple[str, str] | None:
    """(module, qualname) naming a tuple class with names that may go by value; None for any other."""
    qualname, module = getattr(cls, "__qualname__", None), getattr(cls, "__module__", None)
    if type(qualname) is not str or type(module) is not str:
        return None
    if module != RETURN_TYPES and not module.startswith(TORCH_MODULES):
        module = next((name for name, owner in courses.items() if vars(owner).get(qualname) is cls), None)
    return (module, qualname) if module is not None and record_class(module, qualname, courses) is cls else None
