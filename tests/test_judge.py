"""The judge: hidden tests run in the grader's process, the learner's functions in the kernel.

These tests put the kernel's agent (``autograder.kernel.judge_agent``) behind an in-process
``rpc`` that speaks JSON, as the real transport does, with a namespace of its own standing for
the kernel's: what crosses is only what the messages carry.  The end-to-end runs (a real kernel
in a sandbox) are in the tamper corpus and the agreement tests.
"""
from __future__ import annotations

import json

import pytest
import torch

from autograder.grading.judge import Judge, JudgeError, is_judged
from autograder.kernel import judge_agent


def kernel(source: str):
    """An rpc into a fresh 'kernel' namespace holding the learner's ``source``."""
    namespace: dict = {}
    exec(source, namespace)
    seen: list[str] = []

    def rpc(request: dict):
        text = json.dumps(request)
        seen.append(text)
        judge_agent.serve(text, namespace)
        return json.loads(judge_agent.last_reply), ""
    return rpc, seen


def run(learner: str, test: str):
    rpc, seen = kernel(learner)
    outputs = Judge(rpc).run_cell(test)
    errors = [o for o in outputs if o["output_type"] == "error"]
    printed = "".join(o.get("text", "") for o in outputs if o["output_type"] == "stream")
    return errors, printed, seen


def passes(learner: str, test: str) -> None:
    errors, _, _ = run(learner, test)
    assert not errors, errors[0]["evalue"]


def fails(learner: str, test: str, message: str) -> None:
    errors, _, _ = run(learner, test)
    assert errors and message in errors[0]["evalue"], errors or "the test passed"


def test_only_cells_with_the_marker_line_are_judged():
    assert is_judged("# Hidden tests\n### BEGIN HIDDEN TESTS\n# graded outside your kernel\nx = 1\n### END HIDDEN TESTS")
    assert is_judged("# graded outside your kernel\nx = 1")
    assert not is_judged("### BEGIN HIDDEN TESTS\nx = 1\n### END HIDDEN TESTS")
    assert not is_judged("x = 1  # graded outside your kernel")


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


def test_no_expected_value_and_no_test_source_reaches_the_kernel():
    test = "ck.check_equal(shares_memory(torch.zeros(3), torch.zeros(3)), False, 'SECRET-WHAT', hint='SECRET-HINT')"
    _, _, seen = run(STORAGE, test)
    assert seen and not any("SECRET" in s or "check_equal" in s for s in seen)


def test_an_answer_that_reads_its_caller_finds_the_agent_not_the_test():
    oracle = """
import inspect
def shares_memory(a, b):
    for info in inspect.stack()[1:]:
        for value in info.frame.f_locals.values():
            if value is True or value is False:
                return value
        src = "".join(info.code_context or [])
        if "expected" in src or "check_equal" in src:
            return "check_equal(" in src
    return True     # a guess
"""
    fails(oracle, "ck.check_equal(shares_memory(torch.zeros(3), torch.zeros(3)), False, 'two zeros')",
          "two zeros is True")


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


def test_a_result_in_an_inputs_storage_is_a_view_of_the_judges_input():
    test = """
t = torch.tensor([1.0, 2.0, 3.0])
r = plus_one(t)
ck.check_new_storage(r, t, "plus_one(t)", "t")
"""
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


def test_gradients_the_learners_function_accumulates_arrive_in_the_judges_leaves():
    test = """
w = torch.tensor([1.0, 2.0], requires_grad=True)
w.grad = torch.tensor([10.0, 10.0])
out = step(w)
ck.check_grad(w, [12.0, 14.0], "w.grad")
ck.check_requires_grad(out, False, "the result")
"""
    passes("def step(w):\n    (w ** 2).sum().backward()\n    return w.grad.clone()\n", test)
    fails("def step(w):\n    w.grad = None\n    (w ** 2).sum().backward()\n    return w.grad.clone()\n", test,
          "w.grad")


def test_a_learners_exception_fails_the_test_under_its_own_name():
    errors, _, _ = run("def f(t):\n    raise NotImplementedError()\n", "f(torch.zeros(1))")
    assert errors[0]["ename"] == "NotImplementedError"
    errors, _, _ = run("", "g(torch.zeros(1))")
    assert errors[0]["ename"] == "NameError"


def test_results_keep_their_exact_type():
    test = "ck.check_equal(f(torch.zeros(2)), True, 'f')"
    fails("import torch\ndef f(t):\n    return torch.tensor(True)\n", test, "is a torch.Tensor")

    class Lies:
        pass
    fails("class Lies:\n    def __eq__(self, o):\n        return True\ndef f(t):\n    return Lies()\n", test, "Lies")


@pytest.mark.parametrize("reply", [
    {"result": {"k": "t", "dtype": "float32", "shape": [10 ** 6], "stride": [1], "offset": 0, "new_storage": 0},
     "storages": [{"data": ""}], "inputs": [{"data": None, "bumps": 0, "grad": None}]},
    {"result": {"k": "t", "dtype": "float32", "shape": [3], "stride": [1], "offset": 0, "input_storage": 7},
     "storages": [], "inputs": [{"data": None, "bumps": 0, "grad": None}]},
    {"result": {"k": "pickle", "v": "cos\nsystem\n"}, "storages": [], "inputs": [{"data": None, "bumps": 0, "grad": None}]},
    {"result": {"k": "v", "v": ["nested"]}, "inputs": [{"data": None, "bumps": 0, "grad": None}]},
    {"inputs": [{"data": "AAAA", "bumps": 0, "grad": None}], "result": {"k": "v", "v": 1}},
    "not even an object",
])
def test_a_forged_answer_is_an_error_never_a_pass(reply):
    judge = Judge(lambda request: (reply, ""))
    outputs = judge.run_cell("r = f(torch.zeros(3))\nck.check_close(r, torch.zeros(3), 'r')")
    errors = [o for o in outputs if o["output_type"] == "error"]
    assert errors, "a malformed answer passed"
    assert errors[0]["ename"] in ("JudgeError", "CheckFailed", "IndexError", "KeyError", "TypeError")


def test_two_judges_side_by_side_keep_their_own_output():
    import threading

    results = {}

    def one(name):
        rpc, _ = kernel("def f(t):\n    return t + 1\n")
        results[name] = Judge(rpc).run_cell(f"for _ in range(50):\n    f(torch.zeros(2))\nck.ok({name!r})")
    threads = [threading.Thread(target=one, args=(n,)) for n in ("first", "second")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["first"] == [{"output_type": "stream", "name": "stdout", "text": "\u2713 first\n"}]
    assert results["second"] == [{"output_type": "stream", "name": "stdout", "text": "\u2713 second\n"}]


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


def test_the_agent_is_loaded_under_the_name_the_judge_calls():
    from autograder.grading.jobs import INSTALL_SOURCE
    from autograder.grading.judge import AGENT

    assert f"import autograder.kernel.judge_agent as {AGENT}" in INSTALL_SOURCE
