"""kinds/tensor.py: tensors by value, each storage once (views of one base stay views of one storage),
and the tensors of an answer: an input itself, a view of an input's storage, new memory, the meta
device; a result that requires grad joins the judge's graph (autograd.py)."""
from __future__ import annotations

import pytest
import torch

from judge_helpers import NOTHING, fails, passes, refused, run

STORAGE = "def shares_memory(a, b):\n    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()\n"
SHARES = """
a = torch.arange(12.0).reshape(3, 4)
ck.check_equal(shares_memory(a[0], a[2]), True, "shares_memory(a[0], a[2])")
ck.check_equal(shares_memory(a, a.t()), True, "shares_memory(a, a.t())")
ck.check_equal(shares_memory(a, a.clone()), False, "shares_memory(a, a.clone())")
i = torch.arange(6, dtype=torch.int32)
ck.check_equal(shares_memory(i.view(2, 3)[:, 2], i[1:]), True, "int32 views")
ck.ok("done")
"""


def test_views_of_one_base_arrive_as_views_of_one_storage():
    errors, printed, _ = run(STORAGE, SHARES)
    assert not errors and printed == "\u2713 done\n"
    fails("def shares_memory(a, b):\n    return a.data_ptr() == b.data_ptr()\n", SHARES, "shares_memory(a[0], a[2]) is False")


def test_a_result_in_an_inputs_storage_is_a_view_of_the_judges_input():
    test = "t = torch.tensor([1.0, 2.0, 3.0])\nr = plus_one(t)\nck.check_new_storage(r, t, 'plus_one(t)', 't')"
    passes("def plus_one(t):\n    return t + 1\n", test)
    fails("def plus_one(t):\n    t += 1\n    return t\n", test, "shares memory with t")
    fails("def plus_one(t):\n    return t[:].add_(1)\n", test, "shares memory with t")


def test_backward_in_the_judge_reaches_through_the_learners_function():
    test = """
x = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64, requires_grad=True)
y = x * 2
c = graph_copy(y)
ck.check_new_storage(c, y, "graph_copy(y)", "y")
ck.check_requires_grad(c, True, "graph_copy(y)")
(c ** 2).sum().backward()
ck.check_grad(x, [8.0, -16.0, 4.0], "x.grad")
s = torch.tensor(2.5, requires_grad=True)
(graph_copy(s) * 4).backward()
ck.check_grad(s, 4.0, "s.grad")
"""
    passes("def graph_copy(t):\n    return t.clone()\n", test)
    fails("def graph_copy(t):\n    return t.detach().clone()\n", test, "requires_grad is False")
    fails("def graph_copy(t):\n    return t.detach().clone().requires_grad_()\n", test, "x.grad is None")
    fails("def graph_copy(t):\n    return t.view_as(t)\n", test, "shares memory with y")


def test_a_judged_grad_fn_check_fails_with_the_kernels_message_and_hint():
    """The judge's check_grad_fn (which reads the kernel's facts) says what checks.check_grad_fn says,
    its default hint and misconception link included."""
    from autograder.kernel import checks

    x = torch.ones(2, requires_grad=True)
    with pytest.raises(checks.CheckFailed) as in_kernel:
        checks.check_grad_fn(x * 2, None, "r")
    errors, _, _ = run("def f(x):\n    return x * 2\n", "x = torch.ones(2, requires_grad=True)\nck.check_grad_fn(f(x), None, 'r')")
    assert errors[0]["evalue"] == str(in_kernel.value) and "M-clone-leaves-graph" in errors[0]["evalue"]


def test_version_checks_on_a_result_count_in_the_kernels_numbers_and_say_what_the_kernel_says():
    from autograder.kernel import checks

    learner = "def f(t):\n    r = t.clone()\n    r.add_(1)\n    return r\n"
    passes(learner, "r = f(torch.ones(2))\nbefore = ck.version(r)\nck.check_version_unchanged(r, before, 'r')\n"
                    "r.add_(1)\nck.check_version_bumped(r, before, 'r')")
    r = torch.ones(2)
    r.add_(1)
    r.add_(1)
    with pytest.raises(checks.CheckFailed) as in_kernel:
        checks.check_version_unchanged(r, 1, "r")
    fails(learner, "r = f(torch.ones(2))\nr.add_(1)\nck.check_version_unchanged(r, 1, 'r')", str(in_kernel.value))
    with pytest.raises(checks.CheckFailed) as in_kernel:
        checks.check_version_bumped(torch.ones(1).add_(1), 1, "r")
    fails(learner, "r = f(torch.ones(2))\nck.check_version_bumped(r, 1, 'r')", str(in_kernel.value))


def test_a_leaf_the_call_made_gets_its_gradient_through_the_kernel():
    """A parameter the call put into the model, used in the result's graph there: a backward here
    reaches it, as it would next to the answer."""
    test = """
torch.manual_seed(0)
m = nn.Linear(2, 1)
x = torch.ones(3, 2)
out = f(m, x)
out.sum().backward()
ck.check_close(m.weight.grad, [[3.0, 3.0]], "m.weight.grad")
ck.check_close(m.bias.grad, [3.0], "m.bias.grad")
"""
    passes("def f(m, x):\n    m.weight = torch.nn.Parameter(m.weight.detach().clone())\n    return m(x)\n", test)
    passes("def f(m, x):\n    w = torch.zeros(1, 2, requires_grad=True)\n    m.weight = torch.nn.Parameter(w.detach())\n"
           "    return m(x)\n", test)
    fails("def f(m, x):\n    m.weight = torch.nn.Parameter(m.weight.detach().clone())\n    return m(x).detach() * 1\n",
          test, "element 0 of tensors does not require grad")


def test_a_new_tensor_of_the_answer_carries_its_grad_and_a_meta_tensor_its_shape():
    passes("def f():\n    t = torch.ones(2, requires_grad=True)\n    (t * 3).sum().backward()\n"
           "    return t, torch.empty(2, 3, device='meta')\n", """
t, m = f()
ck.check_close(t.grad, [3.0, 3.0], "t.grad")
ck.check_equal((m.device.type, m.shape), ("meta", torch.Size([2, 3])), "the meta tensor")
""")


def test_the_judge_refuses_to_send_a_tensor_it_cannot_rebuild_there():
    for test in ("t = torch.ones(4)\nf((t, nn.Parameter(t)))", "f(torch.ones(2).to_sparse())",
                 "f(torch.ones(2, dtype=torch.uint16))"):
        errors, _, seen = run("def f(x):\n    return 1\n", test)
        assert errors and errors[0]["ename"] == "JudgeError" and not seen, test


@pytest.mark.parametrize("result", [
    {"k": "t", "dtype": "float32", "shape": [10 ** 6], "stride": [1], "offset": 0, "new_storage": 0},
    {"k": "t", "dtype": "float32", "shape": [3], "stride": [1], "offset": 0, "input_storage": 7},
    {"k": "t", "dtype": "float32", "shape": [3], "stride": [1], "offset": 1, "input_storage": 0},
    {"k": "t", "dtype": "float64", "shape": [1], "stride": [1], "offset": 0, "input_storage": 0},
    {"k": "t", "dtype": "float32", "shape": ["3"], "stride": [1], "offset": 0, "input_storage": 0},
    {"k": "t", "dtype": "float32", "shape": [3], "stride": [-1], "offset": 2, "input_storage": 0},
    {"k": "t", "dtype": "object", "shape": [1], "stride": [1], "offset": 0, "new_storage": 0},
    {"k": "t", "dtype": "float32", "shape": [1], "stride": [1], "offset": 0, "new_storage": 3},
    {"k": "t", "dtype": "float32", "shape": [1], "stride": [1], "offset": 0, "new_storage": 0, "version": "7"},
    {"k": "t", "dtype": "int64", "shape": [1], "stride": [1], "offset": 0, "new_storage": 1, "requires_grad": True},
    {"k": "t", "meta": True, "dtype": "float32", "shape": [1 << 45], "stride": [1], "offset": 0},
    {"k": "t", "meta": True, "dtype": "int64", "shape": [2], "stride": [1], "offset": 0, "requires_grad": True},
    {"k": "t", "dtype": "float32", "shape": [1], "stride": [1], "offset": 0, "new_storage": 0, "leaf": True,
     "grad": {"k": "t", "dtype": "float64", "shape": [1], "stride": [1], "offset": 0, "new_storage": 1}},
    {"k": "t", "dtype": "float32", "shape": [1], "stride": [1], "offset": 0, "new_storage": 0, "requires_grad": True,
     "leaf": True, "leaf_index": -1},
])
def test_a_forged_tensor_is_an_error_never_a_pass(result):
    reply = {"result": result, "inputs": NOTHING, "storages": [{"data": "AAAAAA=="}, {"data": "AAAAAAAAAAA="}]}
    refused(reply, "r = f(torch.zeros(3))\nck.ok('passed')")


def test_a_forged_tensor_that_fits_is_the_value_it_claims_but_only_a_value():
    """What the kernel claims about history is data the judge cannot verify (the README says so): a
    forged answer can make a check about facts pass, never a check of values that were not computed."""
    reply = {"result": {"k": "t", "dtype": "float32", "shape": [1], "stride": [1], "offset": 0, "new_storage": 0,
                        "grad_fn": "CloneBackward0"}, "inputs": NOTHING, "storages": [{"data": "AAAAAA=="}]}
    from judge_helpers import forged

    assert not forged(reply, "r = f(torch.zeros(3))\nck.check_grad_fn(r, 'CloneBackward0', 'r')")
    errors = forged(reply, "r = f(torch.zeros(3))\nck.check_close(r, [1.0], 'r')")
    assert errors and errors[0]["ename"] == "CheckFailed"
