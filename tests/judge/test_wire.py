"""The judge's messages: one table of operations, codes and sections that the registry of kinds
matches exactly; answers parsed in linear time and bounded in nesting; references to what the judge
sent and to what the answer already held; and what the judge materialises bounded by what crossed."""
from __future__ import annotations

import json

import pytest

from autograder.judge import wire
from autograder.judge.kinds import BY_CODE, KINDS
from autograder.judge.kinds.base import Kind
from judge_helpers import NOTHING, kernel, passes, refused, run

CORE = {"ref", "again"}      # read by call.py and agent_call.py, for every kind


def test_every_code_of_the_table_belongs_to_exactly_one_kind_and_every_kind_code_is_in_the_table():
    owned = [code for kind in KINDS for code in kind.codes]
    assert len(owned) == len(set(owned)), "a code claimed by two kinds"
    assert set(owned) | CORE == set(wire.CODES)
    assert set(BY_CODE) == set(owned)


def test_every_section_a_kind_writes_is_in_the_table_and_belongs_to_one_kind():
    requests = [s for kind in KINDS for s in kind.request_sections]
    replies = [s for kind in KINDS for s in kind.reply_sections]
    assert len(requests) == len(set(requests)) and len(replies) == len(set(replies))
    assert set(requests) <= set(wire.REQUEST) and set(replies) <= set(wire.REPLY)


def test_every_kind_has_a_name_and_reads_on_each_end_what_it_writes_on_the_other():
    names = [k.name for k in KINDS]
    assert len(names) == len(set(names)) and all(names)
    for kind in KINDS:
        cls = type(kind)
        if cls.send is not Kind.send:          # what the judge sends, the agent receives
            assert cls.receive is not Kind.receive, kind.name
        if cls.answer is not Kind.answer:      # what the agent answers, the judge rebuilds
            assert cls.rebuild is not Kind.rebuild, kind.name
        assert (cls.send is not Kind.send or cls.answer is not Kind.answer) == bool(kind.codes), kind.name
    assert KINDS[-1].name == "handle", "what no kind takes is held by handle, last"


def test_the_agent_answers_each_operation_of_the_table_and_refuses_any_other():
    from judge_helpers import serve

    assert set(wire.OPS) == {"call", "vjp", "look_up"}
    assert "agent_error" in serve({"op": "exec", "code": "1"}, {})
    assert "raised" in serve({"op": "vjp", "call": 12345, "grads": [], "inputs": []}, {})
    assert serve({"op": "look_up", "names": ["x"]}, {"x": 1}) == {"names": {"x": {"kind": "value", "value": {"k": "v", "v": 1}}}}


def test_an_answer_is_parsed_as_json_only_and_bounded_in_nesting():
    assert wire.loads('{"result": {"k": "v", "v": 1}}') == {"result": {"k": "v", "v": 1}}
    for text in ("[1]", "{'a': 1}", "__import__('os')", "{" * 10 + "}" * 10, '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}",
                 "x" * (wire.MAX_REPLY + 1)):
        with pytest.raises(wire.JudgeError):
            wire.loads(text)
    deep = {"result": {"k": "v", "v": None}}
    node = deep
    for _ in range(wire.MAX_JSON_DEPTH + 1):
        node["x"] = {}
        node = node["x"]
    with pytest.raises(wire.JudgeError, match="nested too deeply"):
        wire.check_message(deep)
    assert wire.check_message({"a": ["xy", {"b": "z"}]}) == 3


def test_a_forged_answer_nested_too_deeply_is_an_error_never_a_pass():
    reply = {"result": {"k": "v", "v": None}, "inputs": NOTHING}
    node = reply
    for _ in range(200):
        node["deep"] = [{}]
        node = node["deep"][0]
    refused(reply, "f(torch.zeros(3))\nck.ok('passed')")


@pytest.mark.parametrize("reply", [
    {"result": {"k": "t", "dtype": "float32", "shape": [10 ** 6], "stride": [1], "offset": 0, "new_storage": 0},
     "storages": [{"data": ""}], "inputs": NOTHING},
    {"result": {"k": "t", "dtype": "float32", "shape": [3], "stride": [1], "offset": 0, "input_storage": 7},
     "storages": [], "inputs": NOTHING},
    {"result": {"k": "pickle", "v": "cos\nsystem\n"}, "storages": [], "inputs": NOTHING},
    {"result": {"k": "v", "v": ["nested"]}, "inputs": NOTHING},
    {"result": {"k": "f", "v": "__import__('os')"}, "inputs": NOTHING},
    {"result": "not a value", "inputs": NOTHING},
    {"inputs": [{"data": "AAAA", "bumps": 0, "grad": None}], "result": {"k": "v", "v": 1}},
    {"inputs": [NOTHING[0]] * 2, "result": {"k": "v", "v": 1}},
    {"result": {"k": "v", "v": None}, "agent_error": "KeyError: 'x'"},
    {"result": {"k": "v", "v": None}, "raised": "not an object"},
    "not even an object",
])
def test_a_forged_answer_is_an_error_never_a_pass(reply):
    refused(reply, "r = f(torch.zeros(3))\nck.check_close(r, torch.zeros(3), 'r')")


@pytest.mark.parametrize("result", [
    {"k": "ref", "n": 9},          # the judge sent a tensor (0) and a list (1)
    {"k": "ref", "n": -1},
    {"k": "ref", "n": "0"},
    {"k": "again", "n": 0},        # nothing of the answer carried 0 yet
    {"k": "list", "v": [{"k": "list", "n": 0, "v": []}, {"k": "list", "n": 0, "v": []}]},   # numbered twice
    {"k": "list", "n": 10 ** 9, "v": []},
])
def test_a_forged_reference_is_an_error_never_a_pass(result):
    refused({"result": result, "inputs": NOTHING}, "h = []\nr = f(torch.zeros(3), h)\nck.ok('passed')")


def test_a_reference_to_what_the_judge_sent_is_that_object_and_ties_stay_ties():
    learner = ("def f(t, h):\n    h.append(h)\n    u = t * 2\n    return t, h, [u, u, {'again': u}], h[0]\n")
    passes(learner, """
t, h = torch.ones(2), []
r = f(t, h)
ck.check_equal((r[0] is t, r[1] is h, r[3] is h, h[0] is h), (True, True, True, True), "the inputs themselves")
u = r[2][0]
ck.check_equal((r[2][1] is u, r[2][2]['again'] is u), (True, True), "one tensor met three times")
""")


def test_a_result_large_over_a_tiny_storage_is_refused_before_the_judge_makes_it():
    """A shape of 2**31 floats (8 GiB) with stride 0 over 4 bytes: cloned here (it requires grad, so
    the judge would copy it into its graph), it would kill the grader; eight of 1 GiB as well."""
    stride0 = {"k": "t", "dtype": "float32", "shape": [1 << 31], "stride": [0], "offset": 0, "new_storage": 0,
               "requires_grad": True, "leaf": False, "grad_fn": "ExpandBackward0", "output": 0}
    message = refused({"result": stride0, "storages": [{"data": "AAAAAA=="}], "inputs": NOTHING},
                      "x = torch.ones(1, requires_grad=True)\nr = f(x)\nck.ok('passed')")
    assert "bigger than the judge makes" in message
    eight = {"k": "list", "v": [dict(stride0, shape=[1 << 28], output=i) for i in range(8)]}
    refused({"result": eight, "storages": [{"data": "AAAAAA=="}], "inputs": NOTHING},
            "x = torch.ones(1, requires_grad=True)\nr = f(x)\nck.ok('passed')")
    view = {"k": "t", "dtype": "float32", "shape": [1 << 31], "stride": [0], "offset": 0, "input_storage": 0}
    refused({"result": view, "inputs": NOTHING}, "r = f(torch.zeros(3))\nck.ok('passed')")


def test_a_learners_expanded_result_of_honest_size_still_comes_back():
    passes("def f(t):\n    return t.expand(512, 3)\n",
           "t = torch.arange(3.0, requires_grad=True)\nr = f(t)\nck.check_equal(r.stride(), (0, 1), 'strides')\n"
           "r.sum().backward()\nck.check_close(t.grad, [512.0, 512.0, 512.0], 't.grad')")


def test_the_judges_requests_are_json():
    _, _, seen = run("def f(*a, **k):\n    return None\n", "f(torch.ones(2), [1, (2.5, None)], {'a': float('nan')}, k=torch.int64)")
    assert seen and all(isinstance(json.loads(s), dict) for s in seen)


def test_a_request_names_its_function_and_number():
    rpc = kernel("def f(x):\n    return x\n")
    requests = []

    def spy(request):
        requests.append(request)
        return rpc(request)
    from autograder.judge import Judge
    Judge(spy).run_cell("f(1)\nf(2)")
    assert [(r["op"], r["call"], r["function"]) for r in requests] == [("call", 1, "f"), ("call", 2, "f")]
