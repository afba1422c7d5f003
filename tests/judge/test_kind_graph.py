"""kinds/graph.py and recorder.py: in a graph cell, tensors go as recipes the agent replays from an
allow-list; the learner's function gets the judge's graphs (node classes, edges, leaves), what it
frees stays freed, and the .grad of the recipe's leaves comes back."""
from __future__ import annotations

import json

import pytest

from autograder.judge import Judge
from judge_helpers import GRAPH, NOTHING, passes, refused, run, serve


DESCRIBE = '''
def describe(out, *leaves):
    """The graph below out: node classes, edges in order, and each AccumulateGrad's leaf by identity."""
    def walk(node, depth=0):
        if node is None:
            return None
        if hasattr(node, "variable"):
            v = node.variable
            return ("AccumulateGrad", [i for i, leaf in enumerate(leaves) if leaf is v], type(v).__name__,
                    None if v.grad is None else v.grad.tolist())
        return (type(node).__name__, [walk(child, depth + 1) for child, _ in node.next_functions])
    return [out.requires_grad, out.is_leaf, out.tolist(), walk(out.grad_fn)]
'''
GRAPHS = GRAPH + DESCRIBE.replace("def describe", "def here") + '''
x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
w = torch.tensor([4.0, 5.0], requires_grad=True)
p = torch.nn.Parameter(torch.tensor([2.0, -2.0]))
p.grad = torch.tensor([5.0, 5.0])
s = torch.zeros(5)
s[1:4] = x * 2                                   # CopySlices
d = torch.zeros(3)
d.copy_(x)                                       # CopyBackwards
c = x.clone()
c[1:] = w.to(torch.float64)                      # ToCopyBackward0 below CopySlices
m = torch.arange(6.0).reshape(2, 3).requires_grad_()
views = m.view(6).sum() + m.t().sum() + m[0].sum() + m[:1].expand(4, 3).sum()
with torch.no_grad():
    frozen = x * 3                               # made under no_grad: no graph
mixed = (x.detach() * 2 + frozen + x * w[:1]).exp() + (p * p).sum()
alias = x.detach().requires_grad_()
q = torch.ones(3)
q.requires_grad = True                           # the attribute set, as requires_grad_() would
cases = {"s": s * 1, "d": d.sum(), "c": (c * x).sum(), "views": views, "mixed": mixed, "frozen": frozen,
         "alias": (alias * x).sum(), "q": q * x}
for name, out in cases.items():
    ck.check_equal(describe(out, x, w, p, m, alias, q), here(out, x, w, p, m, alias, q), f"the graph of {name}")
ck.ok("the same graphs")
'''


def test_a_replayed_graph_has_the_judges_node_classes_edges_and_leaves():
    """CopySlices, CopyBackwards, ToCopyBackward0, views, a no_grad part, a detached branch and a
    Parameter with a .grad set before: the learner's function walks the graph the judge built."""
    errors, printed, seen = run(DESCRIBE, GRAPHS)
    assert not errors and printed == "\u2713 the same graphs\n", errors
    # the replay really is a replay: a wrong allow-listed call in the recipe gives another graph
    namespace = {}
    exec("import torch\n" + DESCRIBE, namespace)

    def tampered(request):
        return serve(json.loads(json.dumps(request).replace('"Tensor.copy_"', '"Tensor.add_"')), namespace), ""
    outputs = Judge(tampered).run_cell(GRAPHS)
    assert [o for o in outputs if o["output_type"] == "error"][0]["evalue"].startswith("the graph of d is")


def test_the_learners_function_gets_the_judges_leaf_itself_and_leaves_no_trace_of_values_it_was_not_given():
    learner = "def same(out, leaf):\n    return any(getattr(n, 'variable', None) is leaf for n, _ in out.grad_fn.next_functions)\n"
    test = GRAPH + """
x = torch.tensor([1.0, 2.0], requires_grad=True)
twin = torch.tensor([1.0, 2.0], requires_grad=True)
expected = (x.detach() * 12345.5).sum()          # the test's own value: never sent
ck.check_equal(same(x * 2, x), True, "x")
ck.check_equal(same(x * 2, twin), False, "twin")
"""
    errors, _, seen = run(learner, test)
    assert not errors, errors
    assert seen and not any("12345" in s or "check_equal" in s for s in seen)


def test_a_graph_the_learners_function_freed_stays_freed_and_its_gradients_come_back():
    learner = "def reaches(out, leaf):\n    out.sum().backward()\n    return leaf.grad is not None\n"
    test = GRAPH + """
x = torch.tensor([1.0, 2.0], requires_grad=True)
w = torch.tensor([3.0, 4.0], requires_grad=True)
y = x * w
ck.check_equal(reaches(y, x), True, "first")
ck.check_grad(w, [1.0, 2.0], "w.grad, from the kernel's backward")
reaches(y, w)
"""
    errors, _, _ = run(learner, test)
    assert errors[0]["ename"] == "RuntimeError" and "backward through the graph a second time" in errors[0]["evalue"]


def test_a_graph_made_by_a_call_outside_the_allow_list_is_refused_never_passed():
    test = GRAPH + "x = torch.tensor([1.0, 2.0], requires_grad=True)\nck.check_equal(f(x.sinh()), True, 'f')\n"
    errors, _, seen = run("def f(t):\n    return True\n", test)
    assert errors[0]["ename"] == "JudgeError" and "sinh" in errors[0]["evalue"] and not seen


@pytest.mark.parametrize("name", ["builtins.eval", "torch.load", "Tensor.__reduce_ex__", "Tensor.register_hook", "os.system"])
def test_the_agent_refuses_a_recipe_call_outside_the_allow_list(name):
    """A request naming anything else is refused whole, before any of it runs: the judge gets an error."""
    namespace = {"f": lambda t: True}
    request = {"op": "call", "call": 1, "function": "f", "args": [{"k": "g", "r": 1}],
               "kwargs": {}, "storages": [], "tensors": [],
               "graph": {"mirror": "t", "freeable": [], "sources": [{"ref": 0, "dtype": "float32", "shape": [1], "data": "AACAPw==",
                                      "requires_grad": True, "parameter": False}],
                         "ops": [{"fn": name, "args": [{"k": "g", "r": 0}], "kwargs": {}, "grad": True,
                                  "outs": [[None, 1]]}], "sync": [], "refs": [0, 1]}}
    assert "agent_error" in serve(request, namespace)

    def forging(req):      # a request rewritten on its way: the judge's test fails, never passes
        if req.get("graph") and req["graph"]["ops"]:
            req["graph"]["ops"][0]["fn"] = name
        return serve(req, namespace), ""
    outputs = Judge(forging).run_cell(GRAPH + "x = torch.ones(2, requires_grad=True)\nck.check_equal(f(x * 2), True, 'f')")
    assert [o["ename"] for o in outputs if o["output_type"] == "error"] == ["JudgeError"]


@pytest.mark.parametrize("reply", [
    {"result": {"k": "v", "v": True}, "inputs": [], "graph_grads": [[99, None, False]]},
    {"result": {"k": "v", "v": True}, "inputs": [], "graph_grads": [[0, "AAAA", False]]},
    {"result": {"k": "v", "v": True}, "inputs": [], "graph_grads": "x"},
    {"result": {"k": "v", "v": True}, "inputs": [], "graph_grads": [[1, None, False]]},
    {"result": {"k": "g", "r": 77}, "inputs": []},
    {"result": {"k": "v", "v": True}, "inputs": [], "freed": [5]},
    {"result": {"k": "v", "v": True}, "inputs": [], "freed": "all"},
    {"result": {"k": "set", "v": [{"k": "list", "v": []}]}, "inputs": []},
    {"result": {"k": "set", "v": "abc"}, "inputs": []},
    {"result": {"k": "v", "v": True}, "inputs": [{"data": None, "bumps": 0, "grad": None}]},
    {"result": {"k": "v", "v": True}, "inputs": [], "joined": [{"tensor": 0, "output": 0, "grad_fn": "X"}]},
])
def test_a_forged_answer_about_a_graph_call_is_an_error_never_a_pass(reply):
    refused(reply, GRAPH + "x = torch.ones(2, requires_grad=True)\nr = f(x * 2, x)\nck.check_equal(r, True, 'r')\n"
                           "ck.check_grad(x, None, 'x')")


def test_a_graph_the_learners_function_freed_is_freed_in_the_judge_too():
    """A function that runs backward once per output (then only walks) leaves the graph freed: the
    test's own backward fails, judged as next to the answer."""
    learner = '''
done = set()
def reaches(out, leaf):
    if id(out) not in done:
        done.add(id(out))
        out.sum().backward()
        leaf.grad = None
    stack = [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None:
            if getattr(node, "variable", None) is leaf:
                return True
            stack.extend(c for c, _ in node.next_functions)
    return False
'''
    test = GRAPH + """
x = torch.tensor([1.0, 2.0], requires_grad=True)
y = (x * x).sum()
ck.check_equal(reaches(y, x), True, "reaches(y, x)")
y.backward()
"""
    errors, _, _ = run(learner, test)
    assert errors and errors[0]["ename"] == "RuntimeError" and "second time" in errors[0]["evalue"], errors
    passes(learner.replace("out.sum().backward()", "out.sum().backward(retain_graph=True)"), test)


def test_a_graph_cell_sends_no_array_or_optimizer():
    for value in ("np.zeros(2)", "torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)"):
        errors, _, seen = run("def f(x):\n    return True\n", GRAPH + f"f({value})")
        assert errors and errors[0]["ename"] == "JudgeError" and "recipes" in errors[0]["evalue"] and not seen


def test_a_recipe_reference_outside_a_graph_cell_is_an_error_never_a_pass():
    refused({"result": {"k": "g", "r": 0}, "inputs": NOTHING}, "r = f(torch.ones(2))\nck.ok('passed')")
    refused({"result": {"k": "v", "v": 1}, "inputs": NOTHING, "graph_grads": [[0, None, False]]},
            "r = f(torch.ones(2))\nck.ok('passed')")
