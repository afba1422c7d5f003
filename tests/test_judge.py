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
from harness import SANDBOX


def kernel(source: str):
    """An rpc into a fresh 'kernel' namespace holding the learner's ``source``."""
    namespace: dict = {}
    exec("import torch\n" + source, namespace)
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


# -- whole assignments: every answer of the corpus, judged and in the kernel, cell for cell -----------

def _cells(assignment: str):
    """The instructor's notebook's code cells in order: (grade_id, is_test, source)."""
    import nbformat

    from autograder.learner.cells import role
    from harness import source_notebook

    nb = nbformat.read(source_notebook(assignment), as_version=4)
    return [(role(c).grade_id, role(c).is_test, c.source) for c in nb.cells if c.cell_type == "code"]


def _only(cells, exercise: str | None):
    """The cells that test one exercise (with every cell that is not a test); all, for None."""
    import re

    own = re.compile(rf"^test_{re.escape(exercise or '')}(_hidden|_\d+)?$")
    return [c for c in cells if exercise is None or not c[1] or own.match(c[0] or "")]


def _in_kernel(cells, answers: dict[str, str]) -> dict[str, str | None]:
    """Each test cell's failure (``ename: evalue``, or None) with the tests run next to the answer."""
    namespace: dict = {"__name__": "__main__"}
    out = {}
    for gid, is_test, source in cells:
        try:
            exec(compile(answers.get(gid, source), f"<{gid}>", "exec"), namespace)
            if is_test:
                out[gid] = None
        except Exception as exc:  # noqa: BLE001 - the cell's failure is what is compared
            if is_test:
                out[gid] = f"{type(exc).__name__}: {exc}"
    return out


def _judged(cells, answers: dict[str, str]) -> dict[str, str | None]:
    """The same, with every judged test cell run by a Judge whose kernel is a namespace of its own."""
    import threading

    namespace: dict = {"__name__": "__main__"}

    def rpc(request: dict):
        # in a thread of its own, as a kernel is a process of its own: a learner's function that
        # walks up its callers' frames finds the agent, never the judge's test
        reply = []
        serving = threading.Thread(target=lambda: reply.append(judge_agent.serve(json.dumps(request), namespace)
                                                                or judge_agent.last_reply))
        serving.start()
        serving.join()
        return json.loads(reply[0]), ""
    judge = Judge(rpc)
    out = {}
    for gid, is_test, source in cells:
        if is_test and is_judged(source):
            errors = [o for o in judge.run_cell(source) if o["output_type"] == "error"]
            out[gid] = f"{errors[0]['ename']}: {errors[0]['evalue']}" if errors else None
            continue
        try:
            exec(compile(answers.get(gid, source), f"<{gid}>", "exec"), namespace)
            if is_test:
                out[gid] = None
        except Exception as exc:  # noqa: BLE001
            if is_test:
                out[gid] = f"{type(exc).__name__}: {exc}"
    return out


def _same_verdicts(kernel: dict, judged: dict) -> list[str]:
    """Cells where the judge and the kernel disagree: pass or fail, and a check's message word for word
    (a learner's own exception is named by the judge as raised by the function, so only its name counts)."""
    bad = []
    for gid in kernel:
        k, j = kernel[gid], judged[gid]
        if (k is None) != (j is None):
            bad.append(f"{gid}: kernel {k!r}, judge {j!r}")
        elif k is not None and k.startswith("CheckFailed") and k != j:
            bad.append(f"{gid}: kernel {k!r}, judge {j!r}")
        elif k is not None and k.split(":")[0] != j.split(":")[0]:
            bad.append(f"{gid}: kernel {k!r}, judge {j!r}")
    return bad


JUDGED_ASSIGNMENTS = ["a1_views", "a2_clone", "a3_detach", "a4_grad_modes", "a5_copy", "a6_deepcopy", "a8_devices", "a9_capstone"]
JUDGED_ASSIGNMENTS.append("a6b_boundaries")

JUDGED_ASSIGNMENTS.append("a7_graphs")    # its graphs go to the kernel as recipes


@pytest.mark.parametrize("assignment", JUDGED_ASSIGNMENTS)
def test_every_test_cell_of_a_judged_assignment_is_judged(assignment):
    cells = _cells(assignment)
    tests = [(gid, src) for gid, is_test, src in cells if is_test and gid != "test_predictions"]
    assert tests and all(is_judged(src) for _, src in tests), [gid for gid, src in tests if not is_judged(src)]


@pytest.mark.parametrize("assignment", JUDGED_ASSIGNMENTS)
def test_the_judge_scores_every_answer_of_the_corpus_as_the_kernel_does(assignment):
    """Every wrong and right answer of tests/answers/<assignment>.py (and the reference): the same
    cells pass, and a failed check says the same thing, judged or run next to the answer."""
    import importlib

    from harness import reference_answers

    cells = _cells(assignment)
    module = importlib.import_module(f"answers.{assignment}")
    submissions = {"reference": {}}
    for kind, items in (("wrong", module.WRONG), ("right", module.RIGHT)):
        for i, a in enumerate(items):
            if a.cell != "predictions":         # the prediction sets stay in the kernel
                submissions[f"{kind}_{i}_{a.why}"] = {a.cell: a.source}
    failures = {}
    reference = reference_answers(assignment)
    for name, replace in submissions.items():
        answers = {gid: src for gid, src in reference.items()} | replace
        only = _only(cells, next(iter(replace), None))   # an answer's own tests; all for the reference
        torch.manual_seed(0)
        judged = _judged(only, answers)
        if name.startswith("right"):      # next to the answer they pass: tests/test_corpus.py shows it
            assert all(v is None for v in judged.values()), (name, judged)
            continue
        torch.manual_seed(0)
        kernel = _in_kernel(only, answers)
        bad = _same_verdicts(kernel, judged)
        if bad:
            failures[name] = bad
        if name.startswith("wrong"):
            assert any(v is not None for v in judged.values()), f"{name} lost no point when judged"
        else:
            assert all(v is None for v in judged.values()), (name, judged)
    assert not failures, failures


# -- an answer that reads its caller, in an assignment judged outside the kernel --------------------

COPY_TO_ORACLE = '''
import sys

def copy_to(t, device):
    frame = sys._getframe(1)
    while frame is not None:             # a caller that checks for new memory is a test: copy for it
        if "check_new_storage" in frame.f_code.co_names:
            return t.to(device, copy=True)
        frame = frame.f_back
    return t.to(device)
'''
COPY_TO_TWIN = "def copy_to(t, device):\n    return t.to(device)\n"


def test_an_oracle_that_reads_its_caller_scores_like_its_wrong_twin_when_judged():
    """Next to the tests the oracle passes everything; judged, it fails exactly where its fallback does."""
    from harness import reference_answers

    cells = _cells("a8_devices")
    answers = reference_answers("a8_devices")
    assert all(v is None for v in _in_kernel(cells, answers | {"copy_to": COPY_TO_ORACLE}).values())
    oracle = _judged(cells, answers | {"copy_to": COPY_TO_ORACLE})
    twin = _judged(cells, answers | {"copy_to": COPY_TO_TWIN})
    assert oracle == twin and oracle["test_copy_to"] and oracle["test_copy_to_hidden"], oracle


@SANDBOX
def test_the_course_grader_scores_the_oracle_like_its_wrong_twin(tmp_path):
    """The same through ``grade``: a real kernel in a sandbox, the hidden tests from the gradebook."""
    from corpus import grade_with_the_course_grader
    from harness import scratch_course, submission

    subs = {"oracle": submission("a8_devices", {"copy_to": COPY_TO_ORACLE}),
            "twin": submission("a8_devices", {"copy_to": COPY_TO_TWIN})}
    graded = grade_with_the_course_grader(scratch_course(tmp_path, "a8_devices"), {"a8_devices": subs})["a8_devices"]
    oracle, twin = graded.scores["oracle"], graded.scores["twin"]
    assert oracle == twin, (oracle, twin)
    assert oracle["test_copy_to_hidden"] == (0.0, 2.0) and oracle["test_copy_to"] == (0.0, 1.0), oracle
    assert oracle["test_predictions"] == (1.0, 1.0)


# -- the kinds of values sent since assignments 3 and 5 are judged ----------------------------------

def test_a_judged_grad_fn_check_fails_with_the_kernels_message_and_hint():
    """The judge's check_grad_fn (which reads the kernel's facts) says what checks.check_grad_fn says,
    its default hint and misconception link included."""
    from autograder.kernel import checks

    x = torch.ones(2, requires_grad=True)
    with pytest.raises(checks.CheckFailed) as in_kernel:
        checks.check_grad_fn(x * 2, None, "r")
    errors, _, _ = run("def f(x):\n    return x * 2\n",
                       "x = torch.ones(2, requires_grad=True)\nck.check_grad_fn(f(x), None, 'r')")
    assert errors[0]["evalue"] == str(in_kernel.value) and "M-clone-leaves-graph" in errors[0]["evalue"]


def test_modules_go_by_value_and_come_back_with_what_the_call_did():
    test = """
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
    # BatchNorm in train mode updates its running statistics in place; they come back as bytes
    passes("def f(m, x):\n    return m(x)\n", "MODE = True\n" + test + "ck.check_equal(int(m[1].num_batches_tracked), 2, 'batches')")
    passes("def f(m, x):\n    m.eval()\n    return m(x)\n", "MODE = False\n" + test)
    fails("def f(m, x):\n    m[0].weight = torch.nn.Parameter(m[0].weight.detach().clone())\n    return m(x)\n",
          "MODE = True\n" + test, "m[0].weight after the call is a different object")
    fails("def f(m, x):\n    m[0].weight.requires_grad_(False)\n    return m(x)\n",
          "MODE = True\n" + test, "m[0].weight.grad after backward")


def test_lists_and_dicts_come_back_changed_with_their_items_by_identity():
    test = """
x = torch.ones(2, requires_grad=True)
history, table = [1.0], {"a": x}
f(history, table, x)
ck.check_equal(len(history), 3, "len(history)")
ck.check_equal(history[1], 2.0, "history[1]")
ck.check_equal(history[2] is x, True, "history[2] is x")
ck.check_equal(sorted(table), ["a", "b"], "the keys")
ck.check_equal(table["b"] is history, True, "table['b'] is history")
"""
    passes("def f(h, t, x):\n    h.append(x.sum().item())\n    h.append(x)\n    t['b'] = h\n", test)
    fails("def f(h, t, x):\n    h.append(x.sum())\n    h.append(x)\n    t['b'] = h\n", test, "history[1] is a torch.Tensor")
    fails("def f(h, t, x):\n    h.append(2.0)\n    h.append(x.detach())\n    t['b'] = h\n", test, "history[2] is x is False")
    # an object the judge cannot rebuild is held by handle: sent back, it is the kernel's own again
    passes("def f(h):\n    h.append(h.append)\n    return h[-1].__self__ is h\n",
           "h = []\nf(h)\nck.check_equal(f(h), True, 'the kept method')")


def test_numpy_results_carry_dtype_shape_strides_and_the_memory_they_live_in():
    test = """
t = torch.arange(6, dtype=torch.int32).reshape(2, 3)
a = f(t)
ck.check_type(a, (np.ndarray,), "f(t)")
ck.check_equal(str(a.dtype), "int32", "dtype")
ck.check_equal(a.tolist(), EXPECTED, "values")
a[...] = -1
ck.check_close(t, torch.arange(6, dtype=torch.int32).reshape(2, 3), "t after writing into the array")
"""
    passes("def f(t):\n    return t.numpy().T.copy()\n", "EXPECTED = [[0, 3], [1, 4], [2, 5]]\n" + test)
    fails("def f(t):\n    return t.numpy().T\n", "EXPECTED = [[0, 3], [1, 4], [2, 5]]\n" + test, "t after writing into the array")
    fails("def f(t):\n    return t.numpy()[:, ::-1]\n", "EXPECTED = [[2, 1, 0], [5, 4, 3]]\n" + test, "t after writing")
    fails("def f(t):\n    return t.numpy().astype('float64')\n", "EXPECTED = [[0, 1, 2], [3, 4, 5]]\n" + test, "dtype is")
    errors, _, _ = run("def f(t):\n    a = t.numpy().copy()\n    a.flags.writeable = False\n    return a\n",
                       "a = f(torch.zeros(2))\na[0] = 1")
    assert errors and errors[0]["ename"] == "ValueError"     # read-only stays read-only


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
    test = "x = torch.ones(2, requires_grad=True)\nf(x)\nck.check_requires_grad(x, False, 'x')"
    passes("def f(x):\n    x.requires_grad_(False)\n", test)


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


NOTHING = [{"data": None, "bumps": 0, "grad": None}]


@pytest.mark.parametrize("reply", [
    {"result": {"k": "v", "v": None}, "inputs": NOTHING, "containers": [[5, []]]},
    {"result": {"k": "v", "v": None}, "inputs": NOTHING, "containers": [[True, []]]},
    {"result": {"k": "v", "v": None}, "inputs": NOTHING, "containers": [[0, [["not", "encoded"]]]]},
    {"result": {"k": "v", "v": None}, "inputs": NOTHING, "flags": [[0, "yes"]]},
    {"result": {"k": "v", "v": None}, "inputs": NOTHING, "joined": [{"tensor": 3, "output": 0, "grad_fn": "X"}]},
    {"result": {"k": "v", "v": None}, "inputs": NOTHING,
     "rebound": [{"tensor": 0, "dtype": "float32", "shape": [3], "stride": [1], "offset": 0, "input_storage": -1}]},
    {"result": {"k": "v", "v": None}, "inputs": NOTHING,
     "rebound": [{"tensor": 0, "dtype": "float32", "shape": [3], "stride": [1], "offset": 1, "input_storage": 0}]},
    {"result": {"k": "a", "dtype": "|O", "shape": [1], "strides": [8], "data": "AAAAAAAAAAA="}, "inputs": NOTHING},
    {"result": {"k": "a", "dtype": ">f4", "shape": [1], "strides": [4], "data": "AAAAAA=="}, "inputs": NOTHING},
    {"result": {"k": "a", "dtype": "<f4", "shape": [2], "strides": [4], "data": "AAAAAA=="}, "inputs": NOTHING},
    {"result": {"k": "a", "dtype": "<f4", "shape": [10 ** 9], "strides": [4], "data": ""}, "inputs": NOTHING},
    {"result": {"k": "a", "dtype": "<f4", "shape": [3], "strides": [4], "input_storage": 0, "byte_offset": 4},
     "inputs": NOTHING},
    {"result": {"k": "a", "dtype": "<f4", "shape": [3], "strides": [-4], "input_storage": 0, "byte_offset": 4},
     "inputs": NOTHING},
    {"result": {"k": "t", "dtype": "float32", "shape": ["3"], "stride": [1], "offset": 0, "input_storage": 0},
     "inputs": NOTHING},
    {"result": {"k": "t", "dtype": "float32", "shape": [3], "stride": [1], "offset": 0, "same_as": True},
     "inputs": NOTHING},
    {"result": {"k": "mref", "m": 0}, "inputs": NOTHING},
    {"result": {"k": "t", "meta": True, "dtype": "float32", "shape": [1 << 45], "stride": [1], "offset": 0},
     "inputs": NOTHING},
    {"result": {"k": "t", "meta": True, "dtype": "int64", "shape": [2], "stride": [1], "offset": 0,
                "requires_grad": True}, "inputs": NOTHING},
    {"result": {"k": "v", "v": None}, "inputs": NOTHING, "containers": [[0, [{"k": "a", "dtype": "<f8", "shape": [2],
                                                                             "strides": [8], "data": "A" * 12}]]]},
])
def test_a_forged_answer_about_new_kinds_is_an_error_never_a_pass(reply):
    judge = Judge(lambda request: (reply, ""))
    outputs = judge.run_cell("h = []\nr = f(torch.zeros(3), h)\nck.check_equal(r, None, 'r')\n"
                             "ck.check_equal(h, [], 'h')\nck.ok('passed')")
    errors = [o for o in outputs if o["output_type"] == "error"]
    assert errors and errors[0]["ename"] == "JudgeError", outputs


@pytest.mark.parametrize("reply", [
    {"result": {"k": "v", "v": None}, "inputs": [NOTHING[0]] * 3,
     "modules": [{"m": 0, "training": True, "params": [["weight", {"k": "v", "v": 1}]]}]},
    {"result": {"k": "v", "v": None}, "inputs": [NOTHING[0]] * 3, "modules": [{"m": 0, "training": "no"}]},
    {"result": {"k": "v", "v": None}, "inputs": [NOTHING[0]] * 3, "modules": [{"m": 0, "training": True,
                                                                               "children_changed": True}]},
    {"result": {"k": "v", "v": None}, "inputs": [NOTHING[0]] * 3, "modules": [{"m": 9, "training": True}]},
])
def test_a_forged_answer_about_a_module_is_an_error_never_a_pass(reply):
    judge = Judge(lambda request: (reply, ""))
    outputs = judge.run_cell("m = nn.Linear(2, 2)\nf(m)\nck.check_equal(m.training, True, 'training')\nck.ok('passed')")
    errors = [o for o in outputs if o["output_type"] == "error"]
    assert errors and errors[0]["ename"] == "JudgeError", outputs


def test_the_judge_refuses_to_send_what_it_cannot_rebuild_there():
    for test in ("class M(nn.Module):\n    pass\nf(M())",
                 "m = nn.Linear(2, 2)\nm.register_forward_hook(lambda *a: None)\nf(m)",
                 "t = torch.ones(4)\nf((t, nn.Parameter(t)))", "f(lambda: 1)"):
        errors, _, seen = run("def f(x):\n    return 1\n", test)
        assert errors and errors[0]["ename"] == "JudgeError" and not seen, test


# -- assignment 7: graphs go to the learner's function as their recipe ------------------------------

GRAPH = "# graded outside your kernel\n# graphs go to your kernel as recipes\n"
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
    def tampered(request):
        text = json.dumps(request).replace('"Tensor.copy_"', '"Tensor.add_"')
        namespace = {}
        exec("import torch\n" + DESCRIBE, namespace)
        judge_agent.serve(text, namespace)
        return json.loads(judge_agent.last_reply), ""
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
    request = {"op": "graph_call", "call": 1, "mirror": "t", "function": "f", "args": [{"k": "g", "r": 1}],
               "kwargs": {}, "storages": [], "tensors": [],
               "graph": {"sources": [{"ref": 0, "dtype": "float32", "shape": [1], "data": "AACAPw==",
                                      "requires_grad": True, "parameter": False}],
                         "ops": [{"fn": name, "args": [{"k": "g", "r": 0}], "kwargs": {}, "grad": True,
                                  "outs": [[None, 1]]}], "sync": [], "refs": [0, 1]}}
    judge_agent.serve(json.dumps(request), namespace)
    assert "agent_error" in json.loads(judge_agent.last_reply)

    def forging(req):      # a request rewritten on its way: the judge's test fails, never passes
        if req.get("op") == "graph_call" and req["graph"]["ops"]:
            req["graph"]["ops"][0]["fn"] = name
        judge_agent.serve(json.dumps(req), namespace)
        return json.loads(judge_agent.last_reply), ""
    outputs = Judge(forging).run_cell(GRAPH + "x = torch.ones(2, requires_grad=True)\nck.check_equal(f(x * 2), True, 'f')")
    assert [o["ename"] for o in outputs if o["output_type"] == "error"] == ["JudgeError"]


@pytest.mark.parametrize("reply", [
    {"result": {"k": "v", "v": True}, "inputs": [], "graph_grads": [[99, None, False]]},
    {"result": {"k": "v", "v": True}, "inputs": [], "graph_grads": [[0, "AAAA", False]]},
    {"result": {"k": "v", "v": True}, "inputs": [], "graph_grads": "x"},
    {"result": {"k": "v", "v": True}, "inputs": [], "graph_grads": [[1, None, False]]},
    {"result": {"k": "gref", "r": 77}, "inputs": []},
    {"result": {"k": "v", "v": True}, "inputs": [], "freed": [5]},
    {"result": {"k": "v", "v": True}, "inputs": [], "freed": "all"},
    {"result": {"k": "set", "v": [{"k": "list", "v": []}]}, "inputs": []},
    {"result": {"k": "set", "v": "abc"}, "inputs": []},
    {"result": {"k": "v", "v": True}, "inputs": [{"data": None, "bumps": 0, "grad": None}]},
    {"result": {"k": "v", "v": True}, "inputs": [], "joined": [{"tensor": 0, "output": 0, "grad_fn": "X"}]},
])
def test_a_forged_answer_about_a_graph_call_is_an_error_never_a_pass(reply):
    judge = Judge(lambda request: (reply, ""))
    outputs = judge.run_cell(GRAPH + "x = torch.ones(2, requires_grad=True)\n"
                             "r = f(x * 2, x)\nck.check_equal(r, True, 'r')\nck.check_grad(x, None, 'x')")
    errors = [o for o in outputs if o["output_type"] == "error"]
    assert errors, "a malformed answer passed"
    assert errors[0]["ename"] in ("JudgeError", "CheckFailed"), errors[0]


GRAPH_ANSWER = """
try:
    graph_answer
except NameError:
    raise NotImplementedError('graph_answer is not set yet') from None
ck.check_equal(graph_answer == "B", True, "graph_answer matching the picture")
"""


def test_a_plain_value_the_test_reads_is_fetched_by_value_and_a_missing_one_is_a_name_error():
    passes('graph_answer = "B"\n', "# graded outside your kernel\n" + GRAPH_ANSWER)
    fails('graph_answer = "A"\n', "# graded outside your kernel\n" + GRAPH_ANSWER, "is False")
    errors, _, _ = run("", "# graded outside your kernel\n" + GRAPH_ANSWER)
    assert errors[0]["ename"] == "NotImplementedError"
    # a later cell reads it again, as the kernel would: not the value the first cell fetched
    namespace: dict = {}
    exec('graph_answer = "A"', namespace)

    def rpc(request):
        judge_agent.serve(json.dumps(request), namespace)
        return json.loads(judge_agent.last_reply), ""
    judge = Judge(rpc)
    assert [o for o in judge.run_cell(GRAPH_ANSWER) if o["output_type"] == "error"]
    namespace["graph_answer"] = "B"
    assert not [o for o in judge.run_cell(GRAPH_ANSWER) if o["output_type"] == "error"]


@pytest.mark.parametrize("reply", [
    {"names": {"graph_answer": {"kind": "value", "v": ["B"]}}},
    {"names": {"graph_answer": {"kind": "value", "f": "__import__('os')"}}},
    {"names": {"graph_answer": {"kind": "pickle", "v": "B"}}},
    {"names": "B"},
    {"names": {}},
])
def test_a_forged_answer_about_a_name_is_an_error_never_a_pass(reply):
    outputs = Judge(lambda request: (reply, "")).run_cell(GRAPH_ANSWER)
    errors = [o for o in outputs if o["output_type"] == "error"]
    assert errors and errors[0]["ename"] == "JudgeError", errors


A7_ORACLE = '''
import dis, sys

def reaches(output, leaf):
    """Reads the expected answer from the caller's next instructions: check_equal(reaches(...), True, ...)."""
    frame = sys._getframe(1)
    for ins in dis.get_instructions(frame.f_code):
        if ins.offset <= frame.f_lasti:
            continue
        if ins.opname == "LOAD_CONST" and type(ins.argval) is bool:
            return ins.argval
        if ins.opname.startswith(("CALL", "STORE", "RETURN", "POP")):
            break
    return output.grad_fn is not None
'''
A7_TWIN = "def reaches(output, leaf):\n    return output.grad_fn is not None\n"


def test_an_oracle_of_assignment_7_scores_like_its_wrong_twin_when_judged():
    """Next to the tests it passes everything; judged, its caller is the agent and it fails as its twin does."""
    from harness import reference_answers

    cells = _only(_cells("a7_graphs"), "reaches")
    answers = reference_answers("a7_graphs")
    assert all(v is None for v in _in_kernel(cells, answers | {"reaches": A7_ORACLE}).values())
    oracle = _judged(cells, answers | {"reaches": A7_ORACLE})
    twin = _judged(cells, answers | {"reaches": A7_TWIN})
    assert oracle == twin and oracle["test_reaches"] and oracle["test_reaches_hidden"], oracle


@SANDBOX
def test_the_course_grader_scores_the_a7_oracle_like_its_wrong_twin(tmp_path):
    """The same through ``grade``: a real kernel, its agent replaying the recipes, the tests from the gradebook."""
    from corpus import auto_cells, grade_with_the_course_grader
    from harness import scratch_course, submission

    subs = {"oracle": submission("a7_graphs", {"reaches": A7_ORACLE}),
            "twin": submission("a7_graphs", {"reaches": A7_TWIN}),
            "reference": submission("a7_graphs")}
    graded = grade_with_the_course_grader(scratch_course(tmp_path, "a7_graphs"), {"a7_graphs": subs})["a7_graphs"]
    oracle, twin, reference = (graded.scores[k] for k in ("oracle", "twin", "reference"))
    assert oracle == twin, (oracle, twin)
    assert oracle["test_reaches_hidden"] == (0.0, 2.0) and oracle["test_reaches"] == (0.0, 1.0), oracle
    assert all(reference[gid][0] == reference[gid][1] for gid in auto_cells("a7_graphs")), reference


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


# -- since assignments 4 and 6: iterators, functions by name, fixture models, grads, modules made ---

def test_a_generator_is_a_one_pass_iterator_and_a_loss_function_goes_by_name():
    test = """
m = nn.Linear(2, 1)
ck.check_equal(f(m.parameters()), 2, "parameters seen in two loops")
ck.check_equal(g(F.mse_loss, torch.ones(2), torch.zeros(2)), 1.0, "the loss")
"""
    passes("def f(ps):\n    ps = list(ps)\n    return len(ps) + len([p for p in ps])\n"
           "def g(fn, a, b):\n    return fn(a, b).item()\n", test.replace("2, \"parameters", "4, \"parameters"))
    fails("def f(ps):\n    return len(list(ps)) + len(list(ps))\n"
          "def g(fn, a, b):\n    return fn(a, b).item()\n", test.replace("2, \"parameters", "4, \"parameters"),
          "parameters seen in two loops is 2")
    errors, _, seen = run("def f(fn):\n    return 1\n", "f(lambda a, b: 0)")
    assert errors[0]["ename"] == "JudgeError" and not seen      # no function but the listed ones


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


def test_a_module_the_call_makes_is_rebuilt_with_its_class_ties_and_flags():
    test = """
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
    passes(learner + "def f(m):\n    return copy.deepcopy(m)\n", "import collections\n" + test)
    fails(learner + "def f(m):\n    return copy.copy(m)\n", "import collections\n" + test, "shares memory with m.emb.weight")
    fails(learner + "def f(m):\n    c = copy.deepcopy(m)\n"
          "    c.out.weight = torch.nn.Parameter(c.emb.weight.detach().clone())\n    return c\n",
          "import collections\n" + test, "the tie is False")


def test_a_builtin_exception_is_raised_in_the_judge_as_itself_with_the_kernels_message():
    test = """
try:
    f(torch.ones(1))
except TypeError as e:
    ck.check_equal(str(e), "needs 2 arguments", "the message")
else:
    raise AssertionError("no TypeError")
"""
    passes("def f(t):\n    raise TypeError('needs 2 arguments')\n", test)
    errors, _, _ = run("class Mine(Exception):\n    pass\ndef f(t):\n    raise Mine('x')\n", test)
    assert errors[0]["ename"] == "Mine"          # a learner's own class is not a TypeError here either


@pytest.mark.parametrize("result", [
    {"k": "rmodule", "r": 0, "type": "Module", "training": True, "attrs": [], "params": [], "buffers": [],
     "non_persistent": [], "children": []},
    {"k": "rmodule", "r": 0, "type": "Linear", "training": "yes", "attrs": [], "params": [], "buffers": [],
     "non_persistent": [], "children": []},
    {"k": "rmodule", "r": 0, "type": "Linear", "training": True, "attrs": [["_parameters", {"k": "v", "v": 1}]],
     "params": [], "buffers": [], "non_persistent": [], "children": []},
    {"k": "rmodule", "r": 0, "type": "Linear", "training": True, "attrs": [], "buffers": [], "non_persistent": [],
     "params": [["weight", {"k": "v", "v": 1.0}]], "children": []},
    {"k": "rmodule", "r": 0, "type": "Linear", "training": True, "attrs": [], "params": [], "buffers": [],
     "non_persistent": [], "children": [["x", {"k": "v", "v": 1}]]},
    {"k": "rmref", "r": 3},
    {"k": "tref", "r": 0},
    {"k": "list", "v": [{"k": "t", "dtype": "float32", "shape": [1], "stride": [1], "offset": 0, "new_storage": 0,
                         "ref": 0},
                        {"k": "t", "dtype": "float32", "shape": [1], "stride": [1], "offset": 0, "new_storage": 0,
                         "ref": 0}]},
    {"k": "t", "dtype": "float32", "shape": [1], "stride": [1], "offset": 0, "new_storage": 0, "leaf": True,
     "grad": {"k": "t", "dtype": "float64", "shape": [1], "stride": [1], "offset": 0, "new_storage": 1}},
])
def test_a_forged_module_or_reference_in_a_result_is_an_error_never_a_pass(result):
    reply = {"result": result, "inputs": NOTHING, "storages": [{"data": "AAAAAA=="}, {"data": "AAAAAAAAAAA="}]}
    judge = Judge(lambda request: (reply, ""))
    outputs = judge.run_cell("r = f(torch.zeros(3))\nck.ok('passed')")
    errors = [o for o in outputs if o["output_type"] == "error"]
    assert errors and errors[0]["ename"] == "JudgeError", outputs


# -- since assignment 9: the fixtures' hook, one namespace per notebook ------------------------------

def test_a_fixture_hook_goes_with_its_model_and_its_trace_comes_back():
    test = """
from autograder.kernel.fixtures import SnapshotBeforeForward
net = nn.Linear(2, 1)
hook = SnapshotBeforeForward()
handle = net.register_forward_pre_hook(hook)
twice(net, torch.ones(3, 2))
handle.remove()
ck.check_equal(len(hook.trace), 2, "snapshots taken")
ck.check_close(hook.trace[0]["weight"], net.weight.detach(), "the first snapshot")
"""
    passes("def twice(m, x):\n    m(x)\n    m(x)\n", test)
    fails("def twice(m, x):\n    m(x)\n", test, "snapshots taken is 1")
    errors, _, seen = run("def twice(m, x):\n    pass\n",
                          "net = nn.Linear(2, 1)\nnet.register_forward_pre_hook(lambda m, a: None)\ntwice(net, 1)")
    assert errors[0]["ename"] == "JudgeError" and not seen      # a closure of the test never leaves


def test_judged_cells_of_one_notebook_share_a_namespace():
    rpc, _ = kernel("def f(t):\n    return t + 1\n")
    judge = Judge(rpc)
    assert not [o for o in judge.run_cell("def helper(t):\n    return f(t) * 2\n") if o["output_type"] == "error"]
    outputs = judge.run_cell("ck.check_close(helper(torch.ones(2)), [4.0, 4.0], 'helper')")
    assert not [o for o in outputs if o["output_type"] == "error"], outputs


def test_a_forged_hook_in_a_made_module_is_an_error_never_a_pass():
    module = {"k": "rmodule", "r": 0, "type": "Linear", "training": True, "attrs": [], "params": [], "buffers": [],
              "non_persistent": [], "children": []}
    for hook in ({"k": "rfixture", "r": 1, "type": "Recorder", "attrs": []},
                 {"k": "rfixture", "r": 1, "type": "SnapshotBeforeForward", "attrs": [["__class__", {"k": "v", "v": 1}]]},
                 {"k": "v", "v": 1}):
        reply = {"result": {**module, "pre_hooks": [hook]}, "inputs": NOTHING, "storages": []}
        outputs = Judge(lambda request: (reply, "")).run_cell("r = f(torch.zeros(3))\nck.ok('passed')")
        assert [o for o in outputs if o["output_type"] == "error"][0]["ename"] == "JudgeError", hook


# -- since assignment 6b: NumPy arrays, paths in a folder of the test's, optimizers -----------------

def test_arrays_arrive_on_one_buffer_with_their_offset_strides_and_flags():
    learner = """
import numpy as np
def describe(a):
    return a.dtype.str, a.shape, a.strides, bool(a.flags.writeable), a.tolist()
def overlap(a, b):
    return bool(np.shares_memory(a, b))
"""
    test = """
m = np.arange(12.0).reshape(3, 4)
ck.check_equal(describe(m[:, 1]), ("<f8", (3,), (32,), True, [1.0, 5.0, 9.0]), "a column")
ck.check_equal(describe(m[::-1, ::2]), ("<f8", (3, 2), (-32, 16), True, [[8.0, 10.0], [4.0, 6.0], [0.0, 2.0]]), "reversed")
b = np.broadcast_to(np.arange(3, dtype=np.int32), (2, 3))
ck.check_equal(describe(b), ("<i4", (2, 3), (0, 4), False, [[0, 1, 2], [0, 1, 2]]), "broadcast_to")
frozen = m.view()
frozen.flags.writeable = False
ck.check_equal(describe(frozen)[3], False, "a read-only view")
ck.check_equal(overlap(m[:, 1], m[::-1, ::2]), False, "two views that miss each other")
ck.check_equal(overlap(m[0], m[:, 0]), True, "two views of one base")
ck.check_equal(overlap(m, np.arange(12.0)), False, "two bases")
ck.ok("arrays")
"""
    errors, printed, _ = run(learner, test)
    assert not errors and printed == "\u2713 arrays\n", errors
    # an array and a tensor on the same memory: refused, nothing is sent
    errors, _, seen = run(learner, "t = torch.zeros(3)\noverlap(t.numpy(), t)")
    assert errors and errors[0]["ename"] == "JudgeError" and not seen


def test_a_tensor_in_an_arrays_memory_is_on_the_judges_own_array():
    test = """
m = np.arange(12.0).reshape(3, 4)
t = wrap(m[:, 1])
ck.check_equal(bool(np.shares_memory(m, t.numpy())), SHARES, "np.shares_memory(m, t.numpy())")
t[0] = -1.0
ck.check_equal(float(m[0, 1]), -1.0 if SHARES else 1.0, "m[0, 1] after t[0] = -1")
m[2, 1] = 100.0
ck.check_equal(float(t[2]), 100.0 if SHARES else 9.0, "t[2] after m[2, 1] = 100")
"""
    passes("def wrap(a):\n    return torch.from_numpy(a)\n", "SHARES = True\n" + test)
    passes("def wrap(a):\n    return torch.as_tensor(a)[1:].clone() if False else torch.from_numpy(a.copy())\n",
           "SHARES = False\n" + test)
    fails("def wrap(a):\n    return torch.from_numpy(a)\n", "SHARES = False\n" + test, "np.shares_memory(m, t.numpy()) is True")
    # torch's refusal of a negative stride is a ValueError in the judge too, with its message
    errors, printed, _ = run("def wrap(a):\n    return torch.from_numpy(a)\n",
                             "try:\n    wrap(np.arange(3.0)[::-1])\nexcept ValueError as e:\n    ck.ok(str(e)[:26])")
    assert not errors and printed == "\u2713 At least one stride in the\n"


def test_an_input_array_and_arrays_in_its_memory_come_back_as_the_judges_own():
    test = """
v = np.arange(6.0)
r = f(v)
ck.check_equal(r[0] is v, True, "the input itself")
ck.check_equal(bool(np.shares_memory(r[1], v)), True, "a view of it")
r[1][0] = 50.0
ck.check_equal(float(v[4]), 50.0, "v[4] after a write into the view")
"""
    passes("def f(a):\n    return a, a[4:1:-1]\n", test)
    fails("def f(a):\n    return a, a[4:1:-1].copy()\n", test, "a view of it is False")


def test_what_the_call_writes_into_an_array_comes_back_and_read_only_stays_read_only():
    test = """
v = np.arange(6.0)
bump(v[::-1][1:3])
ck.check_equal(v.tolist(), [0.0, 1.0, 2.0, 4.0, 5.0, 5.0], "v after bump")
"""
    passes("def bump(a):\n    a += 1\n", test)
    fails("def bump(a):\n    a = a + 1\n", test, "v after bump is")
    # a read-only view of writable memory may be made writable again, as in one process; read-only
    # memory may not
    flip = "def bump(a):\n    a.flags.writeable = True\n    a += 1\n"
    passes(flip, "b = np.arange(3.0)\na = b.view()\na.flags.writeable = False\nbump(a)\n"
                 "ck.check_equal(b.tolist(), [1.0, 2.0, 3.0], 'b')")
    passes(flip, "a = np.frombuffer(bytes(24), dtype=np.float64)\ntry:\n    bump(a)\nexcept ValueError:\n    pass\n"
                 "else:\n    raise AssertionError('no ValueError')\nck.check_equal(a.tolist(), [0.0] * 3, 'a')")


def test_a_path_in_a_folder_of_the_test_goes_as_a_fresh_folder_and_its_files_come_back():
    test = """
with tempfile.TemporaryDirectory() as folder:
    with open(os.path.join(folder, "in.txt"), "w") as f:
        f.write("hello")
    path = os.path.join(folder, "x.pt")
    ck.check_equal(save(torch.arange(3.0), path), "hello", "what the kernel read from in.txt")
    ck.check_equal(sorted(os.listdir(folder)), ["x.pt"], "the folder after the call")
    ck.check_close(torch.load(path), [0.0, 1.0, 2.0], "torch.load(path)")
ck.ok("files")
"""
    learner = ("import os\ndef save(t, path):\n    folder = os.path.dirname(path)\n"
               "    text = open(os.path.join(folder, 'in.txt')).read()\n    os.remove(os.path.join(folder, 'in.txt'))\n"
               "    torch.save(t, {target})\n    return text\n")
    errors, printed, seen = run(learner.format(target="path"), test)
    assert not errors and printed == "\u2713 files\n", errors
    assert not any("judge-" in s for s in seen)       # the grader's folder's name never reaches the kernel
    fails(learner.format(target="path + '.bak'"), test, "the folder after the call is")


def test_links_are_not_followed_and_big_or_many_files_come_back_capped():
    learner = """
import os
def make(path, kind):
    folder = os.path.dirname(path)
    if kind == "link":
        secret = os.path.join(os.path.dirname(folder), "secret-of-the-kernel")
        with open(secret, "w") as f:
            f.write("kernel")
        os.symlink(secret, path)
        os.mkdir(os.path.join(folder, "sub"))
    elif kind == "big":
        with open(path, "wb") as f:
            f.write(b"x" * (9 << 20))
    else:
        for i in range(70):
            open(os.path.join(folder, f"{i:03}"), "w").close()
"""
    test = """
with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "x.pt")
    make(path, "link")
    ck.check_equal(os.listdir(folder), [], "the folder after a link and a folder were made there")
    make(path, "big")
    ck.check_equal(os.path.getsize(path), 9 << 20, "the size of a file over the cap")
    with open(path, "rb") as f:
        ck.check_equal(f.read(4), bytes(4), "the bytes of a file over the cap (never sent)")
    os.remove(path)
    make(path, "many")
    ck.check_equal(len(os.listdir(folder)), 64, "files that came back")
ck.ok("capped")
"""
    errors, printed, _ = run(learner, test)
    assert not errors and printed == "\u2713 capped\n", errors


EVIL_SAVE = """
import builtins

class Evil:
    def __reduce__(self):
        return (exec, ("import builtins; builtins.JUDGE_RAN_A_PICKLE = True",))

def save_compact(t, path):
    torch.save({"t": t.clone(), "evil": Evil()}, path)
"""


def test_a_malicious_pickle_from_the_kernel_never_runs_in_the_grader(monkeypatch):
    """A learner's file whose pickle would run code: judged, torch.load reads weights only whatever the
    test or the environment asks, and the test fails without the code running in the grader."""
    import builtins

    from harness import reference_answers

    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    cells = _only(_cells("a6b_boundaries"), "save_compact")
    judged = _judged(cells, reference_answers("a6b_boundaries") | {"save_compact": EVIL_SAVE})
    assert not hasattr(builtins, "JUDGE_RAN_A_PICKLE")
    assert "UnpicklingError" in judged["test_save_compact"] and "UnpicklingError" in judged["test_save_compact_hidden"]
    for load in ("torch.load(path, weights_only=False)", "torch.load(path, None, pickle)",
                 "__import__('torch').load(path, weights_only=False)"):
        test = f"""
import pickle
import torch
with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "evil.pt")
    save_compact(torch.ones(2), path)
    {load}
"""
        errors, _, _ = run(EVIL_SAVE, test)
        assert errors and errors[0]["ename"] == "UnpicklingError", (load, errors)
        assert not hasattr(builtins, "JUDGE_RAN_A_PICKLE")


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


B24 = "A" * 32      # 24 bytes of zeros, base64


@pytest.mark.parametrize("cell, reply", [
    # arrays
    ("a = np.zeros(3)\nr = f(a)", {"result": {"k": "v", "v": None}, "buffers": [B24, B24]}),
    ("a = np.zeros(3)\nr = f(a)", {"result": {"k": "v", "v": None}, "buffers": ["AAAA"]}),
    ("a = np.zeros(3)\nr = f(a)", {"result": {"k": "v", "v": None}, "buffers": "x"}),
    ("a = np.zeros(3)\na.flags.writeable = False\nb = np.frombuffer(bytes(24))\nr = f(b)",
     {"result": {"k": "v", "v": None}, "buffers": [B24]}),
    ("a = np.zeros(3)\nr = f(a)", {"result": {"k": "aref", "n": 1}}),
    ("a = np.zeros(3)\nr = f(a)", {"result": {"k": "ab", "b": 0, "byte_offset": 8, "dtype": "<f8", "shape": [3],
                                              "strides": [8]}}),
    ("a = np.zeros(3)\nr = f(a)", {"result": {"k": "ab", "b": 0, "byte_offset": 0, "dtype": "<f8", "shape": [2],
                                              "strides": [-8]}}),
    ("a = np.zeros(3)\nr = f(a)", {"result": {"k": "ab", "b": 0, "byte_offset": 0, "dtype": "|O", "shape": [1],
                                              "strides": [8]}}),
    ("a = np.zeros(3)\nr = f(a)", {"result": {"k": "t", "dtype": "float64", "shape": [3], "stride": [1], "offset": 0,
                                              "in_array": 0, "byte_offset": 8, "nbytes": 24}}),
    ("a = np.zeros(3)\nr = f(a)", {"result": {"k": "t", "dtype": "float64", "shape": [4], "stride": [1], "offset": 0,
                                              "in_array": 0, "byte_offset": 0, "nbytes": 24}}),
    ("a = np.zeros(3)\nr = f(a)", {"result": {"k": "t", "dtype": "float64", "shape": [1], "stride": [1], "offset": 0,
                                              "in_array": 1, "byte_offset": 0, "nbytes": 8}}),
    # files
    *[("with tempfile.TemporaryDirectory() as d:\n    r = f(os.path.join(d, 'x'))",
       {"result": {"k": "v", "v": None}, "folders": [entries]}) for entries in (
        [{"name": "../x", "size": 1, "data": "AA=="}], [{"name": "a/b", "size": 1, "data": "AA=="}],
        [{"name": "..", "size": 0, "data": ""}], [{"name": "x", "size": -1, "data": None}],
        [{"name": "x", "size": 2, "data": "AA=="}], [{"name": "x", "size": 1 << 50, "data": None}],
        [{"name": "x", "size": 1, "data": "AA=="}, {"name": "x", "size": 1, "data": "AA=="}],
        [{"name": str(i), "size": 0, "data": ""} for i in range(65)], "x", [["x", 1]])],
    ("with tempfile.TemporaryDirectory() as d:\n    r = f(os.path.join(d, 'x'))",
     {"result": {"k": "v", "v": None}, "folders": [[], []]}),
    # optimizers
    *[("m = nn.Linear(1, 1)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\nr = f(opt)",
       {"result": result, "inputs": [NOTHING[0]] * 2, **extra}) for result, extra in (
        ({"k": "oref", "o": 1}, {}), ({"k": "ostate", "o": -1}, {}),
        ({"k": "v", "v": None}, {"optimizers": [{"o": 3, "state": []}]}),
        ({"k": "v", "v": None}, {"optimizers": [{"o": 0, "state": [[{"k": "v", "v": 1}, {"k": "dict", "v": []}]]}]}),
        ({"k": "v", "v": None}, {"optimizers": [{"o": 0, "state": [[{"k": "t", "dtype": "float32", "shape": [1],
                                                                       "stride": [1], "offset": 0, "same_as": 1},
                                                                      {"k": "v", "v": 1}]]}]}),
        ({"k": "v", "v": None}, {"optimizers": [{"o": 0, "param_groups": {"k": "v", "v": 1}}]}),
        ({"k": "v", "v": None}, {"optimizers": [{"o": 0, "param_groups": {"k": "list", "v": [
            {"k": "dict", "v": [[{"k": "v", "v": "params"}, {"k": "list", "v": [{"k": "v", "v": 1}]}]]}]}}]}),
        ({"k": "v", "v": None}, {"optimizers": [{"o": 0, "defaults": {"k": "list", "v": []}}]}),
        ({"k": "v", "v": None}, {"optimizers": "x"}),
        ({"k": "v", "v": None}, {"detached": [7]}))],
])
def test_a_forged_answer_about_arrays_files_or_optimizers_is_an_error_never_a_pass(cell, reply):
    judge = Judge(lambda request: (reply, ""))
    outputs = judge.run_cell(cell + "\nck.ok('passed')")
    errors = [o for o in outputs if o["output_type"] == "error"]
    assert errors and errors[0]["ename"] == "JudgeError", outputs


SNAPSHOT_OPTIMIZER_ORACLE = '''
import copy
import sys

def snapshot_optimizer(optimizer):
    frame = sys._getframe(1)
    while frame is not None:             # a caller that checks for new memory is a test: copy for it
        if "check_new_storage" in frame.f_code.co_names:
            return copy.deepcopy(optimizer.state_dict())
        frame = frame.f_back
    return optimizer.state_dict()
'''


def test_an_oracle_of_assignment_6b_scores_like_its_wrong_twin_when_judged():
    from harness import reference_answers

    cells = _only(_cells("a6b_boundaries"), "snapshot_optimizer")
    answers = reference_answers("a6b_boundaries")
    assert all(v is None for v in _in_kernel(cells, answers | {"snapshot_optimizer": SNAPSHOT_OPTIMIZER_ORACLE}).values())
    oracle = _judged(cells, answers | {"snapshot_optimizer": SNAPSHOT_OPTIMIZER_ORACLE})
    twin = _judged(cells, answers | {"snapshot_optimizer": "def snapshot_optimizer(optimizer):\n    return optimizer.state_dict()\n"})
    assert oracle == twin and oracle["test_snapshot_optimizer"] and oracle["test_snapshot_optimizer_hidden"], oracle


@SANDBOX
def test_the_course_grader_judges_6b_in_a_real_kernel_without_flooding_or_flags(tmp_path):
    """Through ``grade``: the oracle scores like its wrong twin, and a save_compact that writes the
    whole 1.6 MB storage behind a view loses its own points only (its file comes back by value
    without passing the output budget, and the cells after it still run)."""
    from corpus import grade_with_the_course_grader
    from harness import scratch_course, submission

    twin = "def snapshot_optimizer(optimizer):\n    return optimizer.state_dict()\n"
    subs = {"oracle": submission("a6b_boundaries", {"snapshot_optimizer": SNAPSHOT_OPTIMIZER_ORACLE}),
            "twin": submission("a6b_boundaries", {"snapshot_optimizer": twin}),
            "view": submission("a6b_boundaries", {"save_compact": "def save_compact(t, path):\n    torch.save(t, path)\n"})}
    graded = grade_with_the_course_grader(scratch_course(tmp_path, "a6b_boundaries"), {"a6b_boundaries": subs})
    graded = graded["a6b_boundaries"]
    oracle, view = graded.scores["oracle"], graded.scores["view"]
    assert oracle == graded.scores["twin"], (oracle, graded.scores["twin"])
    assert oracle["test_snapshot_optimizer"] == (0.0, 1.0) and oracle["test_snapshot_optimizer_hidden"] == (0.0, 2.0)
    assert view["test_save_compact"] == (0.0, 1.0) and view["test_save_compact_hidden"] == (0.0, 2.0), view
    assert all(s == m for k, (s, m) in view.items() if k.startswith("test_") and "save_compact" not in k), view
    errors = [o for c in graded.notebooks["view"].cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors and not any(o["ename"] == "JudgeError" for o in errors), errors
    assert any("writes the whole storage behind a view" in o["evalue"] for o in errors), errors


def test_an_optimizers_parameters_and_state_tensors_are_the_objects_sent_elsewhere_in_the_call():
    learner = ("def f(m, o, e):\n    p = o.param_groups[0]['params'][0]\n"
               "    return p is m.weight, o.state[p]['exp_avg'] is e, type(o).__name__, o.defaults['betas']\n")
    test = ("torch.manual_seed(0)\nm = nn.Linear(2, 2)\nopt = torch.optim.Adam(m.parameters(), betas=(0.5, 0.6))\n"
            "m(torch.ones(1, 2)).sum().backward()\nopt.step()\n"
            "ck.check_equal(f(m, opt, opt.state[m.weight]['exp_avg']), (True, True, 'Adam', (0.5, 0.6)), 'f')")
    passes(learner, test)
    fails(learner, test.replace("opt.state[m.weight]['exp_avg'])", "opt.state[m.weight]['exp_avg'].clone())"),
          "f is (True, False, 'Adam', (0.5, 0.6))")


SNAPSHOT_ORACLE = '''
import sys

def snapshot(t):
    frame = sys._getframe(1)
    while frame is not None:             # a caller that checks for new memory is a test: copy for it
        if "check_new_storage" in frame.f_code.co_names:
            return t.detach().clone()
        frame = frame.f_back
    return t.detach()
'''


def test_an_oracle_of_assignment_3_scores_like_its_wrong_twin_when_judged():
    from harness import reference_answers

    cells = _only(_cells("a3_detach"), "snapshot")
    answers = reference_answers("a3_detach")
    assert all(v is None for v in _in_kernel(cells, answers | {"snapshot": SNAPSHOT_ORACLE}).values())
    oracle = _judged(cells, answers | {"snapshot": SNAPSHOT_ORACLE})
    twin = _judged(cells, answers | {"snapshot": "def snapshot(t):\n    return t.detach()\n"})
    assert oracle == twin and oracle["test_snapshot"] and oracle["test_snapshot_hidden"], oracle


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


def test_a_builtin_exception_that_takes_other_arguments_still_fails_under_its_own_name():
    errors, _, _ = run("def f(t):\n    b'\\xff'.decode('utf-8')\n", "f(torch.ones(1))")
    assert errors[0]["ename"] == "UnicodeDecodeError" and "f() raised UnicodeDecodeError" in errors[0]["evalue"]


@SANDBOX
def test_the_judges_data_budget_still_stops_a_flood(tmp_path, monkeypatch):
    """With the data budget made small, a save_compact that returns big files passes it: the kernel is
    stopped there and the cells after it are not run, as a flood of output is stopped."""
    from autograder.grading import transport
    from corpus import grade_with_the_course_grader
    from harness import scratch_course, submission

    monkeypatch.setattr(transport, "JUDGE_DATA_LIMIT", 3 << 20)
    subs = {"view": submission("a6b_boundaries", {"save_compact": "def save_compact(t, path):\n    torch.save(t, path)\n"})}
    graded = grade_with_the_course_grader(scratch_course(tmp_path, "a6b_boundaries"), {"a6b_boundaries": subs})
    view = graded["a6b_boundaries"].scores["view"]
    assert view["test_save_compact_hidden"] == (0.0, 2.0) and view["test_hidden_grad_hidden"] == (0.0, 2.0), view
