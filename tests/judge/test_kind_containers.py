"""kinds/containers.py: tuples by value; lists and dicts by identity, with what the call left in them;
the OrderedDicts, sets and frozensets a call makes."""
from __future__ import annotations

import pytest

from judge_helpers import NOTHING, fails, passes, refused


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


def test_a_tuple_goes_by_value_and_nested_containers_keep_their_identity():
    passes("def f(pair):\n    pair[0].append(len(pair[1]))\n    return pair\n", """
inner, other = [], {"k": (1, 2)}
r = f((inner, other))
ck.check_equal((type(r), r[0] is inner, r[1] is other, inner), (tuple, True, True, [1]), "the pair")
""")


def test_the_containers_a_call_makes_come_back_with_their_type():
    passes("import collections\ndef f():\n    return collections.OrderedDict(a=1), {1, 2}, frozenset('ab'), {'k': [1]}\n", """
od, s, fs, d = f()
ck.check_equal((type(od), list(od.items())), (collections.OrderedDict, [("a", 1)]), "an OrderedDict")
ck.check_equal((type(s), s, type(fs), fs), (set, {1, 2}, frozenset, frozenset("ab")), "sets")
ck.check_equal(d, {"k": [1]}, "a dict of a list")
""".replace("collections.", "__import__('collections')."))


def test_a_list_that_holds_itself_comes_back_holding_itself():
    passes("def f():\n    a = [1]\n    a.append(a)\n    return a\n", "a = f()\nck.check_equal(a[1] is a, True, 'a[1] is a')")


def test_an_ordered_dict_or_a_set_of_the_test_is_not_sent():
    """What a call does to them could not come back, so they do not go (a list or dict does)."""
    from judge_helpers import run

    for value in ("__import__('collections').OrderedDict(a=1)", "{1, 2}"):
        errors, _, seen = run("def f(x):\n    return 1\n", f"f({value})")
        assert errors and errors[0]["ename"] == "JudgeError" and not seen, value


@pytest.mark.parametrize("reply", [
    {"result": {"k": "v", "v": None}, "inputs": NOTHING, "containers": [[5, []]]},
    {"result": {"k": "v", "v": None}, "inputs": NOTHING, "containers": [[True, []]]},
    {"result": {"k": "v", "v": None}, "inputs": NOTHING, "containers": [[0, []]]},          # 0 is the tensor
    {"result": {"k": "v", "v": None}, "inputs": NOTHING, "containers": [[1, [["not", "encoded"]]]]},
    {"result": {"k": "v", "v": None}, "inputs": NOTHING, "containers": "x"},
    {"result": {"k": "v", "v": None}, "inputs": NOTHING, "containers": [[1, [{"k": "array", "dtype": "<f8",
                                                                               "shape": [2], "strides": [8],
                                                                               "data": "A" * 12}]]]},
    {"result": {"k": "dict", "v": [[{"k": "list", "v": []}, {"k": "v", "v": 1}]]}, "inputs": NOTHING},
    {"result": {"k": "set", "v": [{"k": "list", "v": []}]}, "inputs": NOTHING},
    {"result": {"k": "tuple", "v": "abc"}, "inputs": NOTHING},
    {"result": {"k": "dict", "v": [[{"k": "v", "v": 1}]]}, "inputs": NOTHING},
])
def test_a_forged_answer_about_a_container_is_an_error_never_a_pass(reply):
    refused(reply, "h = []\nr = f(torch.zeros(3), h)\nck.check_equal(r, None, 'r')\nck.check_equal(h, [], 'h')\nck.ok('passed')")
