"""kinds/plain.py: None, bools, ints, floats (nan and the infinities by their repr) and strs."""
from __future__ import annotations

import pytest

from judge_helpers import NOTHING, passes, refused

ECHO = "def echo(x):\n    return x\n"


def test_plain_values_go_and_come_back_as_themselves():
    passes(ECHO, """
for v in (None, True, False, 0, -7, 2 ** 70, 1.5, -0.0, "", "text \\u2713"):
    r = echo(v)
    ck.check_equal((type(r), r), (type(v), v), repr(v))
ck.check_equal(str(echo(-0.0)), "-0.0", "the sign of zero")
""")


def test_nan_and_the_infinities_go_by_their_repr():
    passes(ECHO, """
ck.check_equal(math.isnan(echo(float("nan"))), True, "nan")
ck.check_equal(echo(float("inf")), float("inf"), "inf")
ck.check_equal(echo(-math.inf), -math.inf, "-inf")
""")


@pytest.mark.parametrize("result", [
    {"k": "v", "v": [1]}, {"k": "v", "v": {"a": 1}}, {"k": "f", "v": "1e999999"}, {"k": "f", "v": "__import__('os')"},
    {"k": "f"}, {"k": "v"} | {"k": 1},
])
def test_a_forged_plain_value_is_an_error_never_a_pass(result):
    refused({"result": result, "inputs": NOTHING}, "r = echo(torch.zeros(3))\nck.ok('passed')")
