"""lookup.py: a name the test reads but never calls is fetched by value when it is data (a7's
``graph_answer``, a prediction set's ``PREDICTIONS``: dicts, lists and tuples of plain values, bounded
in size and depth); a missing one is a NameError as it would be in the kernel."""
from __future__ import annotations

import pytest

from autograder.judge import Judge
from autograder.judge.allow import MAX_DATA_DEPTH, MAX_DATA_ITEMS
from judge_helpers import errors_of, fails, kernel, passes, refused, run, serve


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
    rpc = kernel('graph_answer = "A"')
    judge = Judge(rpc)
    assert errors_of(judge.run_cell(GRAPH_ANSWER))
    rpc.namespace["graph_answer"] = "B"
    assert not errors_of(judge.run_cell(GRAPH_ANSWER))


@pytest.mark.parametrize("reply", [
    {"names": {"graph_answer": {"kind": "value", "v": ["B"]}}},
    {"names": {"graph_answer": {"kind": "value", "value": {"k": "f", "v": "__import__('os')"}}}},
    {"names": {"graph_answer": {"kind": "value", "value": {"k": "t", "i": 0}}}},
    {"names": {"graph_answer": {"kind": "value", "value": {"k": "dict", "v": [[{"k": "list", "v": []}, {"k": "v", "v": 1}]]}}}},
    {"names": {"graph_answer": {"kind": "value", "value": {"k": "list", "v": [{"k": "v", "v": 1}] * (MAX_DATA_ITEMS + 1)}}}},
    {"names": {"graph_answer": {"kind": "pickle", "v": "B"}}},
    {"names": "B"},
    {"names": {}},
])
def test_a_forged_answer_about_a_name_is_an_error_never_a_pass(reply):
    refused(reply, GRAPH_ANSWER)


PREDICT = """
# graded outside your kernel
ck.check_equal(PREDICTIONS, {"q1": "B", "q2": "A"}, "PREDICTIONS")
"""


def test_a_dict_of_letters_is_read_by_value():
    passes('PREDICTIONS = {"q1": "B", "q2": "A"}\n', PREDICT)
    fails('PREDICTIONS = {"q1": "B", "q2": "C"}\n', PREDICT, "'q2': 'C'")
    errors, _, seen = run('PREDICTIONS = {"q1": "B", "q2": "A"}\n', PREDICT)
    assert len(seen) == 1 and '"look_up"' in seen[0] and "check_equal" not in seen[0]


def test_lists_tuples_and_nested_data_are_read_by_value_with_their_types():
    passes("DATA = [1, (2.5, None), {'k': [True, 'x']}, float('inf')]\n",
           "ck.check_equal(DATA, [1, (2.5, None), {'k': [True, 'x']}, float('inf')], 'DATA')\n"
           "ck.check_equal(type(DATA[1]), tuple, 'a tuple stays a tuple')")


def test_what_is_not_data_or_too_big_stays_the_learners():
    for value in ("[torch.ones(1)]", f"list(range({MAX_DATA_ITEMS + 1}))", "nest", "{1, 2}"):
        rpc = kernel(f"nest = []\nfor _ in range({MAX_DATA_DEPTH + 2}):\n    nest = [nest]\nDATA = {value}\n")
        judge = Judge(rpc)
        errors = errors_of(judge.run_cell("ck.check_equal(type(DATA).__name__, 'RemoteFunction', 'DATA')"))
        assert not errors, (value, errors)


def test_the_agent_answers_data_and_only_data():
    found = serve({"op": "look_up", "names": ["a", "b", "c", "d"]},
                  {"a": {"q": "B"}, "b": print, "c": object(), "e": 1})["names"]
    assert found == {"a": {"kind": "value", "value": {"k": "dict", "v": [[{"k": "v", "v": "q"}, {"k": "v", "v": "B"}]]}},
                     "b": {"kind": "function"}, "c": {"kind": "other"}, "d": {"kind": "missing"}}
