"""Generators (``model.parameters()``): the items, sent as a one-pass iterator over them."""
from __future__ import annotations

import itertools
import types

from ..wire import MAX_ITEMS, JudgeError
from .base import Kind

_iter = iter


class Iterators(Kind):
    """Generators, as one-pass iterators."""
    name = "iterator"
    codes = ("iter",)
    types = (types.GeneratorType,)

    def send(self, call, value, depth):
        items = list(itertools.islice(value, MAX_ITEMS + 1))
        if len(items) > MAX_ITEMS:
            raise JudgeError(f"the judge sends an iterator of at most {MAX_ITEMS} items")
        return {"k": "iter", "v": [call.send(x, depth + 1) for x in items]}

    def receive(self, call, v):
        return _iter([call.receive(x) for x in v["v"]])
