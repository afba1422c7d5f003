"""kinds/hook.py: the fixtures' forward pre-hooks go with their module; their attributes come back."""
from __future__ import annotations

import pytest

from judge_helpers import NOTHING, fails, passes, refused, run


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


def test_a_copy_of_a_model_copies_its_hook():
    passes("import copy\ndef f(m):\n    return copy.deepcopy(m)\n", """
from autograder.kernel.fixtures import SnapshotBeforeForward
net = nn.Linear(2, 1)
net.register_forward_pre_hook(SnapshotBeforeForward())
c = f(net)
[hook] = c._forward_pre_hooks.values()
c(torch.ones(1, 2))
ck.check_equal((type(hook).__name__, len(hook.trace)), ("SnapshotBeforeForward", 1), "the copy's hook")
""")


MODULE = {"k": "module", "n": 0, "module": "torch.nn.modules.linear", "type": "Linear", "training": True, "attrs": [],
          "params": [], "buffers": [], "non_persistent": [], "children": []}


@pytest.mark.parametrize("hook", [
    {"k": "hook", "n": 1, "type": "Recorder", "attrs": []},
    {"k": "hook", "n": 1, "type": "SnapshotBeforeForward", "attrs": [["__class__", {"k": "v", "v": 1}]]},
    {"k": "hook", "n": 1, "type": "SnapshotBeforeForward", "attrs": "trace"},
    {"k": "v", "v": 1},
])
def test_a_forged_hook_in_a_made_module_is_an_error_never_a_pass(hook):
    refused({"result": {**MODULE, "pre_hooks": [hook]}, "inputs": NOTHING, "storages": []},
            "r = f(torch.zeros(3))\nck.ok('passed')")
