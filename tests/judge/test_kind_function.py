"""kinds/function.py: functions of torch.nn.functional go by name, both ways; no other function."""
from __future__ import annotations

import pytest

from judge_helpers import NOTHING, passes, refused, run


def test_a_loss_function_goes_by_name_and_comes_back_as_itself():
    passes("def g(fn, a, b):\n    return fn(a, b).item(), fn\n", """
value, fn = g(F.mse_loss, torch.ones(2), torch.zeros(2))
ck.check_equal((value, fn is F.mse_loss), (1.0, True), "the loss")
""")


def test_a_layers_activation_goes_by_name():
    passes("def f(layer):\n    return layer.activation.__name__, layer.activation is torch.nn.functional.gelu\n", """
layer = nn.TransformerEncoderLayer(4, 2, 8, activation=F.gelu)
ck.check_equal(f(layer), ("gelu", True), "the activation")
""")


def test_no_other_function_goes():
    for fn in ("lambda a, b: 0", "print", "torch.add", "F.handle_torch_function"):
        errors, _, seen = run("def f(fn):\n    return 1\n", f"f({fn})")
        assert errors[0]["ename"] == "JudgeError" and not seen, fn


@pytest.mark.parametrize("result", [{"k": "fn", "name": "system"}, {"k": "fn", "name": "handle_torch_function"},
                                    {"k": "fn", "name": ["relu"]}, {"k": "fn"}])
def test_a_forged_function_is_an_error_never_a_pass(result):
    refused({"result": result, "inputs": NOTHING}, "r = f(torch.zeros(3))\nck.ok('passed')")
