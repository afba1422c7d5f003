"""kinds/optimizer.py: an optimizer goes by value and what the call did to it comes back, accepted
only in the form the judge gave it: the groups' keys, the settings that choose a step's
implementation, each hyper-parameter's type, each state tensor as torch makes it."""
from __future__ import annotations

import pytest

from autograder.judge import Judge
from judge_helpers import NOTHING, errors_of, fails, passes, refused, run


OPTIMIZER_TEST = """
torch.manual_seed(0)
model = nn.Linear(3, 2)
opt = torch.optim.Adam(model.parameters(), lr=0.01, betas=(0.8, 0.9))
model(torch.randn(4, 3)).sum().backward()
opt.step()
sd = f(opt)
live = opt.state[model.weight]["exp_avg"]
before = live.clone()
ck.check_equal(sd["param_groups"][0]["betas"], (0.8, 0.9), "betas")
ck.check_equal(sd["state"][0]["exp_avg"] is live, SAME, "the snapshot's exp_avg is the optimizer's")
ck.check_equal(sd["state"][0]["step"] is opt.state[model.weight]["step"], SAME, "the step count is the optimizer's")
ck.check_equal(sd["state"][0] is opt.state[model.weight], SAME, "the state dict is the optimizer's")
opt.step()
ck.check_close(sd["state"][0]["exp_avg"], live if SAME else before, "the snapshot's exp_avg after a step")
ck.check_new_storage(sd["state"][1]["exp_avg_sq"], opt.state[model.bias]["exp_avg_sq"], "exp_avg_sq", "the live one")
"""


def test_an_optimizer_goes_by_value_and_its_state_dict_is_the_judges_own_state():
    passes("import copy\ndef f(o):\n    return copy.deepcopy(o.state_dict())\n", "SAME = False\n" + OPTIMIZER_TEST)
    fails("def f(o):\n    return o.state_dict()\n", "SAME = True\n" + OPTIMIZER_TEST, "exp_avg_sq shares memory with the live one")
    fails("def f(o):\n    sd = o.state_dict()\n    for s in sd['state'].values():\n        s['exp_avg_sq'] = s['exp_avg_sq'].clone()\n"
          "    return sd\n", "SAME = True\n" + OPTIMIZER_TEST, "exp_avg_sq shares memory with the live one")
    # a view of a state tensor, the optimizer itself and its state mapping are the judge's own
    passes("def f(o):\n    p = o.param_groups[0]['params'][0]\n    return o, o.state, o.state[p]['exp_avg'][0]\n",
           "torch.manual_seed(0)\nm = nn.Linear(2, 2)\nopt = torch.optim.AdamW(m.parameters())\n"
           "m(torch.ones(1, 2)).sum().backward()\nopt.step()\nr = f(opt)\n"
           "ck.check_equal((r[0] is opt, r[1] is opt.state), (True, True), 'the optimizer and its state')\n"
           "ck.check_same_storage(r[2], opt.state[m.weight]['exp_avg'], 'the row', 'exp_avg')")


def test_what_the_call_does_to_an_optimizer_comes_back():
    test = """
torch.manual_seed(0)
model = nn.Linear(3, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
ref_model, ref_opt = copy.deepcopy((model, opt))
x = torch.randn(4, 3)
model(x).sum().backward()
ref_model(x).sum().backward()
groups = opt.param_groups
f(opt)
ref_opt.step()
ck.check_close(model.weight, ref_model.weight, "the weight after the kernel's step")
ck.check_close(opt.state[model.weight]["momentum_buffer"], ref_opt.state[ref_model.weight]["momentum_buffer"],
               "the momentum buffer made in the kernel")
ck.check_equal(opt.param_groups is groups, True, "the same param_groups")
ck.check_equal(opt.param_groups[0]["lr"], 0.5, "lr after the call")
ck.check_equal(opt.param_groups[0]["nesterov"], True, "nesterov")
opt.step()
ref_opt.param_groups[0]["lr"] = 0.5
ref_opt.step()
ck.check_close(model.bias, ref_model.bias, "the bias after one more step here")
"""
    passes("def f(o):\n    o.step()\n    o.param_groups[0]['lr'] = 0.5\n", test)
    fails("def f(o):\n    o.param_groups[0]['lr'] = 0.5\n", test, "the weight after the kernel's step")
    fails("def f(o):\n    o.step()\n", test, "lr after the call is 0.1")
    # a group dict replaced in the list: the judge's list holds the new dict, as it would in one process
    passes("def f(o):\n    o.step()\n    o.param_groups[0] = dict(o.param_groups[0], lr=0.5)\n", test)
    # load_state_dict replaces the state mapping's entries and param_groups there: here too
    passes("import copy\ndef f(o):\n    sd = copy.deepcopy(o.state_dict())\n    sd['param_groups'][0]['lr'] = 0.25\n"
           "    o.load_state_dict(sd)\n",
           "m = nn.Linear(2, 1)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\nf(opt)\n"
           "ck.check_equal(opt.param_groups[0]['lr'], 0.25, 'lr')\n"
           "ck.check_equal(opt.param_groups[0]['params'], [m.weight, m.bias], 'params')")


def test_the_judge_refuses_an_optimizer_it_cannot_rebuild_there():
    for test in ("opt = torch.optim.RMSprop([torch.zeros(1, requires_grad=True)])\nf(opt)",
                 "opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)\n"
                 "opt.register_step_pre_hook(lambda *a: None)\nf(opt)",
                 "opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)\nopt.extra = 1\nf(opt)",
                 "opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)\n"
                 "opt.param_groups[0]['f'] = print\nf(opt)"):
        errors, _, seen = run("def f(o):\n    return 1\n", test)
        assert errors and errors[0]["ename"] == "JudgeError" and not seen, test




def test_an_optimizers_parameters_and_state_tensors_are_the_objects_sent_elsewhere_in_the_call():
    learner = ("def f(m, o, e):\n    p = o.param_groups[0]['params'][0]\n"
               "    return p is m.weight, o.state[p]['exp_avg'] is e, type(o).__name__, o.defaults['betas']\n")
    test = ("torch.manual_seed(0)\nm = nn.Linear(2, 2)\nopt = torch.optim.Adam(m.parameters(), betas=(0.5, 0.6))\n"
            "m(torch.ones(1, 2)).sum().backward()\nopt.step()\n"
            "ck.check_equal(f(m, opt, opt.state[m.weight]['exp_avg']), (True, True, 'Adam', (0.5, 0.6)), 'f')")
    passes(learner, test)
    fails(learner, test.replace("opt.state[m.weight]['exp_avg'])", "opt.state[m.weight]['exp_avg'].clone())"),
          "f is (True, False, 'Adam', (0.5, 0.6))")

FUSED_ATTACK = """
def f(o):
    for g in o.param_groups:
        g["fused"] = True
        for p in g["params"]:
            o.state[p]["momentum_buffer"] = torch.empty(0)
"""


def test_an_optimizer_switched_to_the_fused_step_with_an_empty_buffer_is_refused_and_left_as_sent():
    """The attack that crashed the grader: copied back, the test's next step() would run a fused
    kernel that checks no sizes.  Refused before anything of it is done: the test's optimizer still
    steps as the judge made it."""
    test = """
m = nn.Linear(3, 2)
opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
m(torch.ones(1, 3)).sum().backward()
try:
    f(opt)
except Exception as e:
    RAISED = e
ck.check_equal((opt.param_groups[0]["fused"], len(opt.state)), (None, 0), "the optimizer after the call")
opt.step()
ck.check_equal(opt.state[m.weight]["momentum_buffer"].shape, m.weight.shape, "the step's buffer")
raise RAISED
"""
    errors, _, _ = run(FUSED_ATTACK, test)
    assert errors and errors[0]["ename"] == "JudgeError" and "fused" in errors[0]["evalue"], errors


@pytest.mark.parametrize("learner, message", [
    ("def f(o):\n    o.param_groups[0]['foreach'] = True\n", "foreach"),
    ("def f(o):\n    o.defaults['maximize'] = True\n", "maximize"),
    ("def f(o):\n    o.param_groups[0]['capturable'] = True\n", "the keys the judge sent"),
    ("def f(o):\n    del o.param_groups[0]['nesterov']\n", "the keys the judge sent"),
    ("def f(o):\n    o.param_groups[0]['lr'] = 'fast'\n", "lr to a str"),
    ("def f(o):\n    p = o.param_groups[0]['params'][0]\n    o.state[p]['momentum_buffer'] = torch.zeros(1)\n",
     "shape (1,)"),
    ("def f(o):\n    p = o.param_groups[0]['params'][0]\n    o.state[p]['momentum_buffer'] = torch.zeros(p.shape, dtype=torch.float64)\n",
     "torch.float64"),
    ("def f(o):\n    p = o.param_groups[0]['params'][0]\n    o.state[p]['exp_avg'] = torch.zeros(p.shape)\n",
     "does not have"),
    ("def f(o):\n    p = o.param_groups[0]['params'][0]\n    o.state[p] = {'momentum_buffer': [1]}\n", "not a CPU tensor"),
])
def test_an_optimizer_changed_out_of_the_form_torch_gives_it_is_refused(learner, message):
    fails(learner, "m = nn.Linear(3, 2)\nopt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)\nf(opt)", message)


def test_adams_state_is_checked_as_adam_makes_it():
    test = ("m = nn.Linear(3, 2)\nopt = torch.optim.Adam(m.parameters())\nm(torch.ones(1, 3)).sum().backward()\n"
            "opt.step()\nf(opt)\nopt.step()")
    passes("def f(o):\n    o.step()\n", test)
    passes("def f(o):\n    o.param_groups[0]['lr'] = 1\n", test)          # a number for a number
    fails("def f(o):\n    for s in o.state.values():\n        s['step'] = torch.zeros(3)\n", test, "0-dim float")
    fails("def f(o):\n    for s in o.state.values():\n        s['exp_avg_sq'] = s['exp_avg_sq'][:1]\n", test, "where torch makes")


@pytest.mark.parametrize("cell, reply", [
    *[("m = nn.Linear(1, 1)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\nr = f(opt)",
       {"result": result, "inputs": [NOTHING[0]] * 2, **extra}) for result, extra in (
        ({"k": "ref", "n": 99}, {}), ({"k": "ref", "n": -1}, {}),
        ({"k": "v", "v": None}, {"optimizers": [{"o": 3, "state": []}]}),
        ({"k": "v", "v": None}, {"optimizers": [{"o": 0, "state": [[{"k": "v", "v": 1}, {"k": "dict", "v": []}]]}]}),
        ({"k": "v", "v": None}, {"optimizers": [{"o": 0, "state": [[{"k": "ref", "n": 5}, {"k": "v", "v": 1}]]}]}),
        ({"k": "v", "v": None}, {"optimizers": [{"o": 0, "param_groups": {"k": "v", "v": 1}}]}),
        ({"k": "v", "v": None}, {"optimizers": [{"o": 0, "param_groups": {"k": "list", "v": [
            {"k": "dict", "v": [[{"k": "v", "v": "params"}, {"k": "list", "v": [{"k": "v", "v": 1}]}]]}]}}]}),
        ({"k": "v", "v": None}, {"optimizers": [{"o": 0, "defaults": {"k": "list", "v": []}}]}),
        ({"k": "v", "v": None}, {"optimizers": "x"}),
        ({"k": "v", "v": None}, {"containers": [[3, [[{"k": "v", "v": "fused"}, {"k": "v", "v": True}]]]]}),
        ({"k": "v", "v": None}, {"optimizers": [{"o": 0, "state": [[{"k": "ref", "n": 5}, {"k": "dict", "v": [
            [{"k": "v", "v": "momentum_buffer"}, {"k": "t", "dtype": "float32", "shape": [0], "stride": [1],
                                                 "offset": 0, "new_storage": 0}]]}]]}], "storages": [{"data": ""}]}))],
])
def test_a_forged_answer_about_an_optimizer_is_an_error_never_a_pass(cell, reply):
    refused(reply, cell + "\nck.ok('passed')")


def test_a_forged_fused_switch_leaves_the_judges_optimizer_as_it_was():
    """The group dict (sent as number 3) changed to fused with an empty buffer: nothing of it is done."""
    reply = {"result": {"k": "v", "v": None}, "inputs": [NOTHING[0]] * 2,
             "containers": [[3, [[{"k": "v", "v": k}, {"k": "ref", "n": 4} if k == "params" else {"k": "v", "v": v}]
                                 for k, v in [("params", None), ("lr", 0.1), ("momentum", 0.9), ("dampening", 0),
                                              ("weight_decay", 0), ("nesterov", False), ("maximize", False),
                                              ("foreach", None), ("differentiable", False), ("fused", True)]]]]}
    judge = Judge(lambda request: (reply, ""))
    errors = errors_of(judge.run_cell("m = nn.Linear(1, 1)\nopt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)\n"
                                      "f(opt)"))
    assert errors and errors[0]["ename"] == "JudgeError" and "fused" in errors[0]["evalue"], errors
    assert judge.namespace["opt"].param_groups[0]["fused"] is None
