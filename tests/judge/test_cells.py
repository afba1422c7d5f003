"""Running a judged cell: the marker, one namespace per notebook, two judges side by side, what
reaches the kernel (no test source, no expected value), the learner's exceptions, exact types, the
agent's name in the install cell, and a course's fixtures imported by name."""
from __future__ import annotations

import sys
import threading

import torch

from autograder.grading.judged import is_judged
from autograder.judge import AGENT, Judge
from judge_helpers import errors_of, fails, kernel, passes, run

STORAGE = "def shares_memory(a, b):\n    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()\n"


def test_every_test_is_judged_but_a_visible_one_that_opts_out():
    assert is_judged("# Hidden tests\n### BEGIN HIDDEN TESTS\n# graded outside your kernel\nx = 1\n### END HIDDEN TESTS")
    assert is_judged("# graded outside your kernel\nx = 1")
    assert is_judged("### BEGIN HIDDEN TESTS\nx = 1\n### END HIDDEN TESTS")
    assert is_judged("x = 1\nck.ok('done')")
    assert not is_judged("# runs in your kernel\nx = 1")
    assert is_judged("x = 1  # runs in your kernel"), "the opt-out is a line of its own"
    # a hidden test never runs in the kernel, whatever it says (build refuses it too)
    assert is_judged("# runs in your kernel\n### BEGIN HIDDEN TESTS\nx = 1\n### END HIDDEN TESTS")


def test_the_agent_is_loaded_under_the_name_the_judge_calls():
    from autograder.grading.jobs import INSTALL_SOURCE

    assert f"import autograder.judge.agent as {AGENT}" in INSTALL_SOURCE


def test_no_expected_value_and_no_test_source_reaches_the_kernel():
    test = "ck.check_equal(shares_memory(torch.zeros(3), torch.zeros(3)), False, 'SECRET-WHAT', hint='SECRET-HINT')"
    _, _, seen = run(STORAGE, test)
    assert seen and not any("SECRET" in s or "check_equal" in s for s in seen)


def test_an_answer_that_reads_its_caller_finds_the_agent_not_the_test():
    oracle = """
import inspect
def shares_memory(a, b):
    for info in inspect.stack()[1:]:
        for value in info.frame.f_locals.values():
            if value is True or value is False:
                return value
        src = "".join(info.code_context or [])
        if "expected" in src or "check_equal" in src:
            return "check_equal(" in src
    return True     # a guess
"""
    # served in a thread of its own, as a kernel is a process of its own: its stack is the agent's
    fails(oracle, "ck.check_equal(shares_memory(torch.zeros(3), torch.zeros(3)), False, 'two zeros')",
          "two zeros is True", threaded=True)


def test_a_learners_exception_fails_the_test_under_its_own_name():
    errors, _, _ = run("def f(t):\n    raise NotImplementedError()\n", "f(torch.zeros(1))")
    assert errors[0]["ename"] == "NotImplementedError"
    errors, _, _ = run("", "g(torch.zeros(1))")
    assert errors[0]["ename"] == "NameError"


def test_a_builtin_exception_is_raised_in_the_judge_as_itself_with_the_kernels_message():
    test = """
try:
    f(torch.ones(1))
except TypeError as e:
    ck.check_equal(str(e), "needs 2 arguments", "the message")
else:
    raise AssertionError("no TypeError")
"""
    passes("def f(t):\n    raise TypeError('needs 2 arguments')\n", test)
    errors, _, _ = run("class Mine(Exception):\n    pass\ndef f(t):\n    raise Mine('x')\n", test)
    assert errors[0]["ename"] == "Mine"          # a learner's own class is not a TypeError here either


def test_a_builtin_exception_that_takes_other_arguments_still_fails_under_its_own_name():
    errors, _, _ = run("def f(t):\n    b'\\xff'.decode('utf-8')\n", "f(torch.ones(1))")
    assert errors[0]["ename"] == "UnicodeDecodeError" and "f() raised UnicodeDecodeError" in errors[0]["evalue"]


def test_an_exception_whose_message_cannot_be_printed_still_fails_the_test_by_name():
    learner = "class Odd(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\ndef f(t):\n    raise Odd()\n"
    errors, _, _ = run(learner, "f(torch.ones(1))")
    assert errors[0]["ename"] == "Odd" and "<unprintable>" in errors[0]["evalue"]


def test_results_keep_their_exact_type():
    test = "ck.check_equal(f(torch.zeros(2)), True, 'f')"
    fails("import torch\ndef f(t):\n    return torch.tensor(True)\n", test, "is a torch.Tensor")
    fails("class Lies:\n    def __eq__(self, o):\n        return True\ndef f(t):\n    return Lies()\n", test, "Lies")


def test_two_judges_side_by_side_keep_their_own_output():
    results = {}

    def one(name):
        results[name] = Judge(kernel("def f(t):\n    return t + 1\n")).run_cell(
            f"for _ in range(50):\n    f(torch.zeros(2))\nck.ok({name!r})")
    threads = [threading.Thread(target=one, args=(n,)) for n in ("first", "second")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["first"] == [{"output_type": "stream", "name": "stdout", "text": "\u2713 first\n"}]
    assert results["second"] == [{"output_type": "stream", "name": "stdout", "text": "\u2713 second\n"}]


def test_judged_cells_of_one_notebook_share_a_namespace():
    judge = Judge(kernel("def f(t):\n    return t + 1\n"))
    assert not errors_of(judge.run_cell("def helper(t):\n    return f(t) * 2\n"))
    assert not errors_of(judge.run_cell("ck.check_close(helper(torch.ones(2)), [4.0, 4.0], 'helper')"))


def test_what_the_learners_function_prints_is_the_cells_output():
    judge = Judge(kernel("def f(t):\n    print('from the kernel')\n    return t\n"))
    outputs = judge.run_cell("f(torch.ones(1))\nck.ok('after')")
    assert outputs == [{"output_type": "stream", "name": "stdout", "text": "from the kernel\n\u2713 after\n"}]


def test_the_rpc_may_be_replaced_between_cells():
    judge = Judge(kernel("def f(t):\n    return 1\n"))
    assert not errors_of(judge.run_cell("ck.check_equal(f(torch.ones(1)), 1, 'f')"))
    judge.rpc = kernel("def f(t):\n    return 2\n")
    assert not errors_of(judge.run_cell("ck.check_equal(f(torch.ones(1)), 2, 'f')"))


def test_a_cell_imports_a_course_fixture_as_the_module_the_judge_was_given(course_fixtures):
    """``from fixtures import Scaled`` is the judge's own module, never what sys.modules holds (there,
    the 'kernel' of these tests imported its released copy)."""
    import importlib

    kernel_copy = importlib.import_module("fixtures")
    learner = "def f(m):\n    return type(m).__module__\n"
    judge = Judge(kernel(learner), course_fixtures)
    outputs = judge.run_cell("import fixtures\nfrom fixtures import Scaled\nGOT = (fixtures, Scaled)\n"
                             "ck.check_equal(f(Scaled(2, 1)), 'fixtures', 'the kernel rebuilds it from its fixtures')")
    assert not errors_of(outputs), outputs
    assert judge.namespace["GOT"] == (course_fixtures["fixtures"], course_fixtures["fixtures"].Scaled)
    assert sys.modules["fixtures"] is kernel_copy and kernel_copy is not course_fixtures["fixtures"]
    errors = errors_of(judge.run_cell("import fixtures.other"))
    assert errors and errors[0]["ename"] == "ImportError"


def test_a_model_of_a_module_the_judge_was_not_given_does_not_go(course_fixtures):
    """Given no fixtures, the judge sends no model of theirs, even where its process can import them
    (here, the 'kernel's' copy is in sys.modules): the test fails saying where the class belongs."""
    import importlib

    scaled = importlib.import_module("fixtures").Scaled
    judge = Judge(kernel("def f(m):\n    return 1\n"))
    judge.run_cell("pass")
    judge.namespace["Scaled"] = scaled
    errors = errors_of(judge.run_cell("f(Scaled(2, 1))"))
    assert errors and errors[0]["ename"] == "JudgeError" and "fixtures.py" in errors[0]["evalue"], errors


def test_a_cell_that_does_not_parse_fails_as_in_the_kernel():
    errors = errors_of(Judge(kernel("")).run_cell("x = ("))
    assert errors and errors[0]["ename"] == "SyntaxError"


def test_torch_in_a_judged_cell_is_torch():
    judge = Judge(kernel(""))
    assert not errors_of(judge.run_cell("import torch as t2\nck.check_equal(t2.ones(1).item(), 1.0, 'torch')"))
    assert judge.namespace["torch"].ones is torch.ones
