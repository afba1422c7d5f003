"""kinds/weak.py: a weak reference goes with what it refers to, and comes back referring to the
judge's own copy (an RNN's references to its parameters)."""
from __future__ import annotations

import pytest

from judge_helpers import NOTHING, passes, refused


def test_a_weak_reference_refers_to_the_object_sent_alongside_both_ways():
    passes("import weakref\ndef f(t, ref):\n    return ref() is t, weakref.ref(t), [t]\n", """
import weakref
t = torch.ones(2)
same, back, keep = f(t, weakref.ref(t))
ck.check_equal((same, type(back) is weakref.ReferenceType, back() is t), (True, True, True), "the references")
""")


def test_an_rnns_references_to_its_parameters_are_its_own_after_the_call():
    passes("import copy\ndef f(rnn):\n    return copy.deepcopy(rnn)\n", """
rnn = nn.GRU(3, 4)
c = f(rnn)
ck.check_equal([r() is p for r, p in zip(c._flat_weight_refs, c._flat_weights)], [True] * 4, "the copy's references")
ck.check_equal([p is getattr(c, n) for p, n in zip(c._flat_weights, c._flat_weights_names)], [True] * 4, "the weights")
""")


@pytest.mark.parametrize("result", [{"k": "wref", "v": {"k": "v", "v": 3}}, {"k": "wref"}, {"k": "wref", "v": {"k": "ref", "n": 5}}])
def test_a_forged_weak_reference_is_an_error_never_a_pass(result):
    refused({"result": result, "inputs": NOTHING}, "r = f(torch.zeros(3))\nck.ok('passed')")
