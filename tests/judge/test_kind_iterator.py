"""kinds/iterator.py: a generator goes as a one-pass iterator over its items."""
from __future__ import annotations

from judge_helpers import fails, passes, refused


def test_a_generator_is_a_one_pass_iterator():
    test = "m = nn.Linear(2, 1)\nck.check_equal(f(m.parameters()), 4, 'parameters seen in two loops')"
    passes("def f(ps):\n    ps = list(ps)\n    return len(ps) + len([p for p in ps])\n", test)
    fails("def f(ps):\n    return len(list(ps)) + len(list(ps))\n", test, "parameters seen in two loops is 2")


def test_an_iterator_is_never_an_answer():
    refused({"result": {"k": "iter", "v": []}, "inputs": []}, "r = f(1)\nck.ok('passed')")
