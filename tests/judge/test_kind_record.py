"""kinds/record.py: tuples with names (torch.return_types, a layer's named output, a course's named
tuples) go by class and items, both ways."""
from __future__ import annotations

import pytest

from judge_helpers import NOTHING, passes, refused


def test_torchs_named_results_come_back_with_their_names():
    passes("def f(t):\n    return t.max(dim=0)\n", """
r = f(torch.tensor([[1.0, 5.0], [3.0, 2.0]]))
ck.check_equal(type(r).__name__, "max", "type(r)")
ck.check_close(r.values, [3.0, 5.0], "r.values")
ck.check_equal(r.indices.tolist(), [1, 0], "r.indices")
""")


def test_a_named_result_goes_to_the_learners_function_as_itself():
    passes("def f(r):\n    return type(r).__name__, r.indices.tolist()\n",
           "ck.check_equal(f(torch.tensor([2, 9, 4]).max(dim=0)), ('max', 1), 'f')")


def test_a_layers_named_output_comes_back():
    passes("def f(m, x, y):\n    return m(x, y)\n", """
torch.manual_seed(0)
m = nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4, 8])
x, y = torch.randn(5, 8), torch.tensor([0, 3, 5, 9, 1])
r = f(m, x, y)
ck.check_equal(r._fields, ("output", "loss"), "the fields")
ck.check_close(r.loss, m(x, y).loss.detach(), "r.loss")
""")


@pytest.mark.parametrize("result", [
    {"k": "record", "module": "collections", "type": "OrderedDict", "v": []},
    {"k": "record", "module": "torch.return_types", "type": "SequenceKey", "v": []},
    {"k": "record", "module": "torch.return_types", "type": "max", "v": [{"k": "v", "v": 1}]},
    {"k": "record", "module": "os", "type": "stat_result", "v": []},
    {"k": "record", "module": "torch.nn.modules.adaptive", "type": "_ASMoutput", "v": "ab"},
])
def test_a_forged_named_tuple_is_an_error_never_a_pass(result):
    refused({"result": result, "inputs": NOTHING}, "r = f(torch.zeros(3))\nck.ok('passed')")
