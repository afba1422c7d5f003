"""kinds/module.py: modules by value (torch.nn's, the package's fixtures', a course's fixtures'),
what the call did to them, modules the call made; what cannot go is refused with the reason."""
from __future__ import annotations

import pytest

from judge_helpers import NOTHING, fails, passes, refused, run

MODULE_TEST = """
torch.manual_seed(0)
m = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2), nn.Tanh())
m[0].bias.requires_grad_(False)
weight, bias = m[0].weight, m[0].bias
x = torch.randn(4, 3)
out = f(m, x)
ck.check_same_object(m[0].weight, weight, "m[0].weight after the call", "the Parameter before")
ck.check_close(out, m(x).detach(), "f(m, x)")
out.sum().backward()
ck.check_equal(m[0].weight.grad is None, False, "m[0].weight.grad after backward")
ck.check_equal(m[0].bias.grad is None, True, "the frozen bias's grad")
ck.check_equal(m.training, MODE, "m.training after the call")
"""


def test_modules_go_by_value_and_come_back_with_what_the_call_did():
    # BatchNorm in train mode updates its running statistics in place; they come back as bytes
    passes("def f(m, x):\n    return m(x)\n",
           "MODE = True\n" + MODULE_TEST + "ck.check_equal(int(m[1].num_batches_tracked), 2, 'batches')")
    passes("def f(m, x):\n    m.eval()\n    return m(x)\n", "MODE = False\n" + MODULE_TEST)
    fails("def f(m, x):\n    m[0].weight = torch.nn.Parameter(m[0].weight.detach().clone())\n    return m(x)\n",
          "MODE = True\n" + MODULE_TEST, "m[0].weight after the call is a different object")
    fails("def f(m, x):\n    m[0].weight.requires_grad_(False)\n    return m(x)\n",
          "MODE = True\n" + MODULE_TEST, "m[0].weight.grad after backward")


def test_a_fixture_model_goes_by_value_with_its_list_of_calls():
    test = """
from autograder.kernel.fixtures import Recorder
model = Recorder(3, 1)
model.calls.append("before")
f(model, torch.ones(2, 3))
ck.check_equal(model.calls, ["before", (False, False)], "model.calls")
ck.check_equal(model.training, True, "model.training")
"""
    passes("def f(m, x):\n    m.eval()\n    with torch.no_grad():\n        m(x)\n    m.train()\n", test)
    fails("def f(m, x):\n    m.eval()\n    m(x)\n    m.train()\n", test, "model.calls is")
    fails("def f(m, x):\n    m.eval()\n    with torch.no_grad():\n        m(x)\n", test, "model.training is False")


def test_a_module_the_call_makes_is_rebuilt_with_its_class_ties_and_flags():
    test = """
import collections
from autograder.kernel.fixtures import Tied
torch.manual_seed(0)
m = Tied()
m(torch.tensor([1, 2])).sum().backward()
c = f(m)
ck.check_equal(type(c) is Tied, True, "type(c) is Tied")
ck.check_equal(c.out.weight is c.emb.weight, True, "the tie")
ck.check_equal(c.scale.requires_grad, False, "the frozen scale")
ck.check_type(c.emb.weight, (nn.Parameter,), "c.emb.weight")
ck.check_new_storage(c.emb.weight, m.emb.weight, "c.emb.weight", "m.emb.weight")
ck.check_equal(c.emb.weight.grad is None, True, "the copy's .grad (Parameter's deepcopy leaves it out)")
ck.check_close(h(m.emb.weight).grad, [2.0, 2.0], "the .grad of a new leaf")
i = torch.tensor([0, 5])
ck.check_close(c(i), m(i).detach(), "c(i)")
ck.check_type(g(m), (collections.OrderedDict,), "state_dict()")
"""
    learner = ("import copy, collections\ndef g(m):\n    return m.state_dict()\n"
               "def h(w):\n    c = torch.zeros(2, requires_grad=True)\n    (c * 2).sum().backward()\n    return c\n")
    passes(learner + "def f(m):\n    return copy.deepcopy(m)\n", test)
    fails(learner + "def f(m):\n    return copy.copy(m)\n", test, "shares memory with m.emb.weight")
    fails(learner + "def f(m):\n    c = copy.deepcopy(m)\n    c.out.weight = torch.nn.Parameter(c.emb.weight.detach().clone())\n"
          "    return c\n", test, "the tie is False")


def test_a_course_fixture_model_and_nested_layers_go_by_value_and_come_back(course_fixtures):
    test = """
from fixtures import Scaled, Stack
torch.manual_seed(0)
s = Stack()
x = torch.randn(2, 5, 3)
out = f(s, x)
ck.check_close(out, s(x).detach(), "f(s, x)")
ck.check_equal(s.head.seen, [(2, 4), (2, 4)], "what the head saw, there then here")
c = g(s)
ck.check_equal((type(c) is Stack, type(c.head) is Scaled, c.head.shape), (True, True, torch.Size([4, 2])), "the copy")
ck.check_close(c(x), s(x).detach(), "the copy's output")
"""
    passes("import copy\ndef f(m, x):\n    return m(x)\ndef g(m):\n    return copy.deepcopy(m)\n", test, course_fixtures)


def test_a_class_defined_in_the_test_is_refused_with_where_it_belongs():
    errors, _, seen = run("def f(x):\n    return 1\n", "class M(nn.Module):\n    pass\nf(M())")
    assert errors and errors[0]["ename"] == "JudgeError" and not seen
    message = errors[0]["evalue"]
    assert "M (a class defined in the test)" in message and "fixtures.py" in message, message


def test_a_lazy_module_is_refused_until_it_is_made_and_goes_once_it_is():
    errors, _, seen = run("def f(x):\n    return 1\n", "f(nn.LazyLinear(3))")
    assert errors and errors[0]["ename"] == "JudgeError" and not seen
    assert "LazyLinear" in errors[0]["evalue"] and "run it once on an input" in errors[0]["evalue"], errors[0]["evalue"]
    passes("def f(m):\n    return type(m).__name__, m.in_features\n",
           "m = nn.LazyLinear(3)\nm(torch.ones(2, 5))\nck.check_equal(f(m), ('Linear', 5), 'a made lazy module')")


def test_the_judge_refuses_a_module_it_cannot_rebuild_there():
    for test in ("m = nn.Linear(2, 2)\nm.register_forward_hook(lambda *a: None)\nf(m)",
                 "m = nn.Linear(2, 2)\nm.register_forward_pre_hook(lambda *a: None)\nf(m)",
                 "m = nn.Linear(2, 2)\nm.note = object()\nf(m)",
                 "m = nn.LinearCrossEntropyLoss(2, 3, options=nn.modules.linear_cross_entropy_options.LinearCrossEntropyOptions())\nf(m)"):
        errors, _, seen = run("def f(x):\n    return 1\n", test)
        assert errors and errors[0]["ename"] == "JudgeError" and not seen, test


def test_a_parameter_put_back_in_another_shape_is_refused_and_the_model_is_left_as_it_was():
    """A Linear whose weight came back 5x5: refused, never put into the judge's model (where the
    test's next forward would fail, or a kernel without checks write out of bounds)."""
    learner = "def f(m):\n    m.weight = torch.nn.Parameter(torch.zeros(5, 5))\n"
    errors, _, _ = run(learner, "m = nn.Linear(2, 2)\nw = m.weight\ntry:\n    f(m)\nexcept Exception as e:\n"
                                "    RAISED = e\nck.check_equal((m.weight is w, tuple(m.weight.shape)), (True, (2, 2)), 'm.weight')\nraise RAISED")
    assert errors and errors[0]["ename"] == "JudgeError" and "shape (5, 5)" in errors[0]["evalue"], errors
    fails("def f(m):\n    m.weight = torch.nn.Parameter(torch.zeros(2, 2, dtype=torch.float64))\n",
          "f(nn.Linear(2, 2))", "torch.float64")
    fails("def f(m):\n    m.bias = None\n", "f(nn.Linear(2, 2))", "as None")
    fails("def f(m):\n    m.register_buffer('extra', torch.zeros(1))\n", "f(nn.Linear(2, 2))", "added or removed buffers")


LINEAR = {"k": "module", "n": 0, "module": "torch.nn.modules.linear", "type": "Linear", "training": True, "attrs": [],
          "params": [], "buffers": [], "non_persistent": [], "children": []}


@pytest.mark.parametrize("reply", [
    {"result": {"k": "v", "v": None}, "inputs": [NOTHING[0]] * 2,
     "modules": [{"n": 0, "training": True, "params": [["weight", {"k": "v", "v": 1}], ["bias", None]]}]},
    {"result": {"k": "v", "v": None}, "inputs": [NOTHING[0]] * 2, "modules": [{"n": 0, "training": "no"}]},
    {"result": {"k": "v", "v": None}, "inputs": [NOTHING[0]] * 2, "modules": [{"n": 0, "training": True,
                                                                               "children_changed": True}]},
    {"result": {"k": "v", "v": None}, "inputs": [NOTHING[0]] * 2, "modules": [{"n": 9, "training": True}]},
    {"result": {"k": "v", "v": None}, "inputs": [NOTHING[0]] * 2, "modules": [{"n": 1, "training": True}]},   # a tensor
    {"result": {"k": "v", "v": None}, "inputs": [NOTHING[0]] * 2, "modules": "all"},
    {"result": {"k": "v", "v": None}, "inputs": [NOTHING[0]] * 2,
     "modules": [{"n": 0, "training": True, "params": [["weight", {"k": "ref", "n": 2}], ["bias", {"k": "ref", "n": 1}]]}]},
])
def test_a_forged_answer_about_a_module_is_an_error_never_a_pass(reply):
    refused(reply, "m = nn.Linear(2, 2)\nf(m)\nck.check_equal(m.training, True, 'training')\nck.ok('passed')")


@pytest.mark.parametrize("result", [
    LINEAR | {"type": "Module", "module": "torch.nn.modules.module"} | {"type": "Dropout", "module": "torch.nn.modules.linear"},
    LINEAR | {"module": "os", "type": "system"},
    LINEAR | {"module": "__main__", "type": "M"},
    LINEAR | {"training": "yes"},
    LINEAR | {"attrs": [["_parameters", {"k": "v", "v": 1}]]},
    LINEAR | {"attrs": [["forward", {"k": "fn", "name": "relu"}]]},
    LINEAR | {"attrs": [["__class__", {"k": "v", "v": 1}]]},
    LINEAR | {"params": [["weight", {"k": "v", "v": 1.0}]]},
    LINEAR | {"buffers": [["b", {"k": "v", "v": 1.0}]]},
    LINEAR | {"children": [["x", {"k": "v", "v": 1}]]},
    LINEAR | {"non_persistent": [1]},
    LINEAR | {"params": "weight"},
    LINEAR | {"pre_hooks": [{"k": "v", "v": 1}]},
    {"k": "again", "n": 3},
    {"k": "list", "v": [LINEAR, LINEAR]},
])
def test_a_forged_module_in_a_result_is_an_error_never_a_pass(result):
    refused({"result": result, "inputs": NOTHING, "storages": []}, "r = f(torch.zeros(3))\nck.ok('passed')")
