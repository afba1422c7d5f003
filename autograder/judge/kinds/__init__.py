"""The registry of value kinds: one line per kind, in the order they are offered a value.

Order matters where two kinds take one Python type: a str is first offered to ``path`` (a path in a
folder of the test's), then ``plain``; a tensor to ``graph`` (in a graph cell), then ``tensor``.
Kinds whose ``any_type`` is set are offered every value their types do not claim, ``handle`` last.
The same order runs their phases on both ends (see base.py), so that the values the agent answers in
its sections are rebuilt by the judge in the order they were written.

To add a kind: a module here with a subclass of ``base.Kind`` (its ``codes`` and sections added to
``wire.CODES``, ``wire.REQUEST``, ``wire.REPLY``; what it allows, to ``allow.py``), one line below,
and ``tests/judge/test_kind_<name>.py``: the value there and back, what a call does to it, and a
forged answer for each check the judge's end makes (``tests/judge/test_wire.py`` holds the table and
the registry equal).  kinds/record.py is an example of the smallest.
"""
from __future__ import annotations

import functools

from .array import Arrays
from .base import Kind
from .containers import Containers
from .function import Functions
from .graph import Graphs
from .handle import Handles
from .hook import Hooks
from .iterator import Iterators
from .module import Modules
from .optimizer import Optimizers
from .path import Paths
from .plain import Plain
from .record import Records
from .tensor import Tensors
from .tensor_changes import TensorChanges
from .torch_values import TorchValues
from .weak import WeakRefs

KINDS: tuple[Kind, ...] = (
    Paths(),
    Plain(),
    Graphs(),
    Tensors(),
    TensorChanges(),
    Containers(),
    Records(),
    TorchValues(),
    Functions(),
    WeakRefs(),
    Iterators(),
    Hooks(),
    Modules(),
    Arrays(),
    Optimizers(),
    Handles(),
)
BY_NAME = {k.name: k for k in KINDS}
BY_CODE = {code: k for k in KINDS for code in k.codes}


@functools.lru_cache(maxsize=1024)
def offered(t: type) -> tuple[Kind, ...]:
    """The kinds a value of exact type ``t`` is offered to, in order."""
    return tuple(k for k in KINDS if t in k.types) + tuple(k for k in KINDS if k.any_type and t not in k.types)
