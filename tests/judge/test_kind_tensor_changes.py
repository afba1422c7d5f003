"""kinds/tensor_changes.py: what a call did to the tensors it was given, done to the judge's own."""
from __future__ import annotations

import pytest

from judge_helpers import NOTHING, fails, passes, refused


def test_in_place_writes_and_version_bumps_come_back_to_the_judges_tensors():
    test = """
base = torch.arange(12).reshape(3, 4)
view = base.t()
before = ck.version(base)
add_one_(view)
ck.check_close(base, torch.arange(12).reshape(3, 4) + 1, "base")
ck.check_version_bumped(base, before, "base")
"""
    passes("def add_one_(t):\n    t.add_(1)\n", test)
    fails("def add_one_(t):\n    t = t + 1\n", test, "base has values")
    # bytes written without a version bump (through .data) come back without one
    fails("def add_one_(t):\n    t.data.add_(1)\n", test, "_version")


def test_gradients_the_learners_function_accumulates_arrive_in_the_judges_leaves():
    test = """
w = torch.tensor([1.0, 2.0], requires_grad=True)
w.grad = torch.tensor([10.0, 10.0])
out = step(w)
ck.check_grad(w, [12.0, 14.0], "w.grad")
ck.check_requires_grad(out, False, "the result")
"""
    passes("def step(w):\n    (w ** 2).sum().backward()\n    return w.grad.clone()\n", test)
    fails("def step(w):\n    w.grad = None\n    (w ** 2).sum().backward()\n    return w.grad.clone()\n", test, "w.grad")


def test_a_grad_comes_back_only_when_the_call_changed_it():
    test = """
w = torch.ones(3, requires_grad=True)
w.grad = torch.full((3,), 0.5)
g = w.grad
base = torch.zeros(2, 3)
v = base.t().requires_grad_()            # a leaf that is a view of its storage
v.grad = torch.ones(3, 2)
vg = v.grad
f(w, v)
ck.check_equal(w.grad is g, SAME, "w.grad is the same object")
ck.check_equal(v.grad is vg, SAME, "v.grad is the same object")
"""
    passes("def f(w, v):\n    pass\n", "SAME = True\n" + test + "ck.check_close(v.grad, torch.ones(3, 2), 'v.grad')")
    passes("def f(w, v):\n    w.grad.mul_(2)\n    v.grad.zero_()\n",
           "SAME = True\n" + test + "ck.check_close(w.grad, [1.0, 1.0, 1.0], 'w.grad')\nck.check_close(v.grad, torch.zeros(3, 2), 'v')")
    passes("def f(w, v):\n    w.grad = None\n    v.grad = None\n",
           "SAME = False\n" + test + "ck.check_equal((w.grad, v.grad), (None, None), 'cleared')")
    fails("def f(w, v):\n    w.grad = w.grad.clone()\n", "SAME = True\n" + test, "w.grad is the same object is False")


def test_an_input_given_new_memory_keeps_its_old_views_on_the_old_memory():
    """`t.data = t.data + 1` gives `t` new memory: a view taken before still sees the old values."""
    test = """
a = torch.zeros(2, 3)
row = a[1]
ptr = ck.storage_ptr(a)
add_one_(a)
ck.check_close(a, torch.ones(2, 3), "a after add_one_(a)")
ck.check_close(row, torch.ones(3), "a view taken before the call")
ck.check_equal(ck.storage_ptr(a) == ptr, True, "a keeps its storage")
"""
    passes("def add_one_(t):\n    t.add_(1)\n", test)
    fails("def add_one_(t):\n    t.data = t.data + 1\n", test, "a view taken before the call")
    fails("def add_one_(t):\n    t.set_(t + 1)\n", test, "a view taken before the call")


def test_an_input_pointed_at_another_inputs_memory_shares_it_in_the_judge():
    test = """
t, source = torch.zeros(3), torch.ones(3)
f(t, source)
ck.check_same_storage(t, source, "t", "source")
source.add_(1)
ck.check_close(t, [2.0, 2.0, 2.0], "t after source changed")
"""
    passes("def f(t, s):\n    t.data = s\n", test)
    fails("def f(t, s):\n    t.data = s.clone()\n", test, "t has its own storage")


def test_what_a_call_did_before_it_raised_is_done_to_the_judges_inputs():
    passes("def f(t):\n    t.add_(1)\n    t.data = t.data * 10\n    raise ValueError('late')\n", """
t = torch.zeros(2)
try:
    f(t)
except ValueError:
    pass
ck.check_close(t, [10.0, 10.0], "t after the call raised")
""")


def test_an_input_that_joins_a_graph_in_place_is_in_the_judges_graph_too():
    test = """
e = torch.zeros(3)
p = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
f(e, p)
ck.check_grad_fn(e, "AddBackward0", "e")
e.sum().backward()
ck.check_grad(p, [0.5, 0.5, 0.5], "p.grad")
"""
    passes("def f(e, p):\n    e.mul_(0.5).add_(p, alpha=0.5)\n", test)
    fails("def f(e, p):\n    with torch.no_grad():\n        e.mul_(0.5).add_(p, alpha=0.5)\n", test, "e.grad_fn is None")
    passes("def f(x):\n    x.requires_grad_(False)\n", "x = torch.ones(2, requires_grad=True)\nf(x)\nck.check_requires_grad(x, False, 'x')")


def test_a_non_leaf_detached_in_place_is_detached_in_the_judge():
    passes("def f(t):\n    t.detach_()\n",
           "x = torch.ones(2, requires_grad=True)\ny = x * 2\nf(y)\nck.check_equal((y.grad_fn, y.requires_grad), (None, False), 'y')")


@pytest.mark.parametrize("reply", [
    {"result": {"k": "v", "v": None}, "inputs": NOTHING, "flags": [[0, "yes"]]},
    {"result": {"k": "v", "v": None}, "inputs": NOTHING, "flags": [[3, True]]},
    {"result": {"k": "v", "v": None}, "inputs": NOTHING, "joined": [{"tensor": 3, "output": 0, "grad_fn": "X"}]},
    {"result": {"k": "v", "v": None}, "inputs": NOTHING, "joined": [{"tensor": 0, "output": 0, "grad_fn": 7}]},
    {"result": {"k": "v", "v": None}, "inputs": NOTHING, "detached": [7]},
    {"result": {"k": "v", "v": None}, "inputs": NOTHING, "leaf_grads": [[0, None, False]]},
    {"result": {"k": "v", "v": None}, "inputs": NOTHING, "leaf_grads": "x"},
    {"result": {"k": "v", "v": None}, "inputs": [{"data": None, "bumps": 0, "grad": "AAAA"}]},
    {"result": {"k": "v", "v": None}, "inputs": ["x"]},
    {"result": {"k": "v", "v": None}, "inputs": NOTHING,
     "rebound": [{"tensor": 0, "dtype": "float32", "shape": [3], "stride": [1], "offset": 0, "input_storage": -1}]},
    {"result": {"k": "v", "v": None}, "inputs": NOTHING,
     "rebound": [{"tensor": 0, "dtype": "float32", "shape": [3], "stride": [1], "offset": 1, "input_storage": 0}]},
    {"result": {"k": "v", "v": None}, "inputs": NOTHING,
     "rebound": [{"tensor": 0, "dtype": "float32", "shape": [1 << 30], "stride": [0], "offset": 0, "data": "AAAAAA=="}]},
    {"result": {"k": "v", "v": None}, "inputs": NOTHING,
     "rebound": [{"tensor": 0, "dtype": "qint8", "shape": [1], "stride": [1], "offset": 0, "data": "AA=="}]},
])
def test_a_forged_answer_about_the_input_tensors_is_an_error_never_a_pass(reply):
    refused(reply, "h = []\nr = f(torch.zeros(3), h)\nck.check_equal(r, None, 'r')\nck.check_equal(h, [], 'h')\nck.ok('passed')")
