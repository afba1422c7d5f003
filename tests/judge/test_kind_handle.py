"""kinds/handle.py: what cannot go by value stays in the kernel; the judge holds a stand-in that
prints as the object did and equals nothing, and sending it back sends the kernel's object."""
from __future__ import annotations

from judge_helpers import forged, passes, run


def test_an_object_the_judge_cannot_rebuild_is_held_by_handle_and_is_itself_when_sent_back():
    passes("def f(h):\n    h.append(h.append)\n    return h[-1].__self__ is h\n",
           "h = []\nf(h)\nck.check_equal(f(h), True, 'the kept method')")


def test_a_stand_in_prints_as_the_kernels_object_and_equals_nothing():
    passes("class Box:\n    def __repr__(self):\n        return 'Box(7)'\ndef f():\n    return Box()\n", """
b = f()
ck.check_equal((repr(b), type(b).__name__, b == b), ("Box(7)", "Box", False), "the stand-in")
""")


def test_a_handle_the_kernel_no_longer_keeps_fails_the_test_as_the_judges_error():
    from autograder.judge import agent

    learner = "def f(x=None):\n    return object()\n"
    errors, _, _ = run(learner, "o = f()\nf(o)")
    assert not errors        # kept there, and sent back
    errors, _, _ = run(learner, "o = f()\n__import__('autograder.judge.agent').judge.agent.session.kept.clear()\nf(o)")
    assert errors and errors[0]["ename"] == "JudgeError" and "KeyError" in errors[0]["evalue"], errors
    assert agent.session.kept == {}


def test_a_forged_stand_in_without_a_handle_is_only_a_stand_in():
    errors = forged({"result": {"k": "handle", "type": "x.Y", "repr": "Y()", "h": "1"}, "inputs": []},
                                           "r = f(1)\nf(r)")
    assert errors and errors[0]["ename"] == "JudgeError" and "cannot send" in errors[0]["evalue"], errors
