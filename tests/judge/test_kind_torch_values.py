"""kinds/torch_values.py: dtypes of the allow-list, torch.Size and torch.device, both ways."""
from __future__ import annotations

import pytest

from judge_helpers import NOTHING, passes, refused


def test_dtypes_sizes_and_devices_go_and_come_back():
    passes("def f(d, s, dev):\n    return d, s, dev, torch.zeros(s, dtype=d).shape\n", """
r = f(torch.int16, torch.Size([2, 3]), torch.device("cpu"))
ck.check_equal(r, (torch.int16, torch.Size([2, 3]), torch.device("cpu"), torch.Size([2, 3])), "f")
ck.check_equal(type(r[1]), torch.Size, "a Size stays a Size")
""")


@pytest.mark.parametrize("result", [
    {"k": "dtype", "v": "object"}, {"k": "dtype", "v": "qint8"}, {"k": "size", "v": [-1]}, {"k": "size", "v": ["2"]},
    {"k": "device", "v": "gpu:x" * 3}, {"k": "device", "v": 1},
])
def test_a_forged_torch_value_is_an_error_never_a_pass(result):
    refused({"result": result, "inputs": NOTHING}, "r = f(torch.zeros(3))\nck.ok('passed')")
