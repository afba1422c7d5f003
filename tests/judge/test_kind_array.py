"""kinds/array.py: NumPy arrays over the memory of their innermost base, with dtype, shape, strides,
offset and flags; what the call wrote there comes back; arrays and tensors of the answer on that
memory are on the judge's own array."""
from __future__ import annotations

import pytest

from judge_helpers import NOTHING, fails, passes, refused, run

B24 = "A" * 32      # 24 bytes of zeros, base64


def test_arrays_arrive_on_one_buffer_with_their_offset_strides_and_flags():
    learner = """
import numpy as np
def describe(a):
    return a.dtype.str, a.shape, a.strides, bool(a.flags.writeable), a.tolist()
def overlap(a, b):
    return bool(np.shares_memory(a, b))
"""
    test = """
m = np.arange(12.0).reshape(3, 4)
ck.check_equal(describe(m[:, 1]), ("<f8", (3,), (32,), True, [1.0, 5.0, 9.0]), "a column")
ck.check_equal(describe(m[::-1, ::2]), ("<f8", (3, 2), (-32, 16), True, [[8.0, 10.0], [4.0, 6.0], [0.0, 2.0]]), "reversed")
b = np.broadcast_to(np.arange(3, dtype=np.int32), (2, 3))
ck.check_equal(describe(b), ("<i4", (2, 3), (0, 4), False, [[0, 1, 2], [0, 1, 2]]), "broadcast_to")
frozen = m.view()
frozen.flags.writeable = False
ck.check_equal(describe(frozen)[3], False, "a read-only view")
ck.check_equal(overlap(m[:, 1], m[::-1, ::2]), False, "two views that miss each other")
ck.check_equal(overlap(m[0], m[:, 0]), True, "two views of one base")
ck.check_equal(overlap(m, np.arange(12.0)), False, "two bases")
ck.ok("arrays")
"""
    errors, printed, _ = run(learner, test)
    assert not errors and printed == "\u2713 arrays\n", errors
    # an array and a tensor on the same memory: refused, nothing is sent
    errors, _, seen = run(learner, "t = torch.zeros(3)\noverlap(t.numpy(), t)")
    assert errors and errors[0]["ename"] == "JudgeError" and not seen
    errors, _, seen = run(learner, "overlap(np.zeros(2, dtype=object), 1)")
    assert errors and errors[0]["ename"] == "JudgeError" and not seen


def test_numpy_results_carry_dtype_shape_strides_and_the_memory_they_live_in():
    test = """
t = torch.arange(6, dtype=torch.int32).reshape(2, 3)
a = f(t)
ck.check_type(a, (np.ndarray,), "f(t)")
ck.check_equal(str(a.dtype), "int32", "dtype")
ck.check_equal(a.tolist(), EXPECTED, "values")
a[...] = -1
ck.check_close(t, torch.arange(6, dtype=torch.int32).reshape(2, 3), "t after writing into the array")
"""
    passes("def f(t):\n    return t.numpy().T.copy()\n", "EXPECTED = [[0, 3], [1, 4], [2, 5]]\n" + test)
    fails("def f(t):\n    return t.numpy().T\n", "EXPECTED = [[0, 3], [1, 4], [2, 5]]\n" + test, "t after writing into the array")
    fails("def f(t):\n    return t.numpy()[:, ::-1]\n", "EXPECTED = [[2, 1, 0], [5, 4, 3]]\n" + test, "t after writing")
    fails("def f(t):\n    return t.numpy().astype('float64')\n", "EXPECTED = [[0, 1, 2], [3, 4, 5]]\n" + test, "dtype is")
    errors, _, _ = run("def f(t):\n    a = t.numpy().copy()\n    a.flags.writeable = False\n    return a\n",
                       "a = f(torch.zeros(2))\na[0] = 1")
    assert errors and errors[0]["ename"] == "ValueError"     # read-only stays read-only


def test_a_tensor_in_an_arrays_memory_is_on_the_judges_own_array():
    test = """
m = np.arange(12.0).reshape(3, 4)
t = wrap(m[:, 1])
ck.check_equal(bool(np.shares_memory(m, t.numpy())), SHARES, "np.shares_memory(m, t.numpy())")
t[0] = -1.0
ck.check_equal(float(m[0, 1]), -1.0 if SHARES else 1.0, "m[0, 1] after t[0] = -1")
m[2, 1] = 100.0
ck.check_equal(float(t[2]), 100.0 if SHARES else 9.0, "t[2] after m[2, 1] = 100")
"""
    passes("def wrap(a):\n    return torch.from_numpy(a)\n", "SHARES = True\n" + test)
    passes("def wrap(a):\n    return torch.from_numpy(a.copy())\n", "SHARES = False\n" + test)
    fails("def wrap(a):\n    return torch.from_numpy(a)\n", "SHARES = False\n" + test, "np.shares_memory(m, t.numpy()) is True")
    # torch's refusal of a negative stride is a ValueError in the judge too, with its message
    errors, printed, _ = run("def wrap(a):\n    return torch.from_numpy(a)\n",
                             "try:\n    wrap(np.arange(3.0)[::-1])\nexcept ValueError as e:\n    ck.ok(str(e)[:26])")
    assert not errors and printed == "\u2713 At least one stride in the\n"


def test_an_input_array_and_arrays_in_its_memory_come_back_as_the_judges_own():
    test = """
v = np.arange(6.0)
r = f(v)
ck.check_equal(r[0] is v, True, "the input itself")
ck.check_equal(bool(np.shares_memory(r[1], v)), True, "a view of it")
r[1][0] = 50.0
ck.check_equal(float(v[4]), 50.0, "v[4] after a write into the view")
"""
    passes("def f(a):\n    return a, a[4:1:-1]\n", test)
    fails("def f(a):\n    return a, a[4:1:-1].copy()\n", test, "a view of it is False")


def test_what_the_call_writes_into_an_array_comes_back_and_read_only_stays_read_only():
    test = """
v = np.arange(6.0)
bump(v[::-1][1:3])
ck.check_equal(v.tolist(), [0.0, 1.0, 2.0, 4.0, 5.0, 5.0], "v after bump")
"""
    passes("def bump(a):\n    a += 1\n", test)
    fails("def bump(a):\n    a = a + 1\n", test, "v after bump is")
    # a read-only view of writable memory may be made writable again, as in one process; read-only
    # memory may not
    flip = "def bump(a):\n    a.flags.writeable = True\n    a += 1\n"
    passes(flip, "b = np.arange(3.0)\na = b.view()\na.flags.writeable = False\nbump(a)\n"
                 "ck.check_equal(b.tolist(), [1.0, 2.0, 3.0], 'b')")
    passes(flip, "a = np.frombuffer(bytes(24), dtype=np.float64)\ntry:\n    bump(a)\nexcept ValueError:\n    pass\n"
                 "else:\n    raise AssertionError('no ValueError')\nck.check_equal(a.tolist(), [0.0] * 3, 'a')")


def test_an_array_in_a_tensors_storage_is_a_view_of_the_judges_tensor():
    passes("def f(t):\n    return t.numpy()[1:]\n",
           "t = torch.zeros(3)\na = f(t)\na[0] = 7.0\nck.check_close(t, [0.0, 7.0, 0.0], 't after a write into the array')")


ONE = "a = np.zeros(3)\nr = f(a)"


@pytest.mark.parametrize("cell, reply", [
    (ONE, {"result": {"k": "v", "v": None}, "buffers": [B24, B24]}),
    (ONE, {"result": {"k": "v", "v": None}, "buffers": ["AAAA"]}),
    (ONE, {"result": {"k": "v", "v": None}, "buffers": "x"}),
    ("b = np.frombuffer(bytes(24))\nr = f(b)", {"result": {"k": "v", "v": None}, "buffers": [B24]}),
    (ONE, {"result": {"k": "ref", "n": 1}}),
    (ONE, {"result": {"k": "array", "b": 0, "byte_offset": 8, "dtype": "<f8", "shape": [3], "strides": [8]}}),
    (ONE, {"result": {"k": "array", "b": 0, "byte_offset": 0, "dtype": "<f8", "shape": [2], "strides": [-8]}}),
    (ONE, {"result": {"k": "array", "b": 0, "byte_offset": 0, "dtype": "|O", "shape": [1], "strides": [8]}}),
    (ONE, {"result": {"k": "array", "b": 1, "byte_offset": 0, "dtype": "<f8", "shape": [1], "strides": [8]}}),
    (ONE, {"result": {"k": "array", "b": 0, "byte_offset": 0, "dtype": "<f8", "shape": [1 << 40], "strides": [0]}}),
    (ONE, {"result": {"k": "array", "dtype": "|O", "shape": [1], "strides": [8], "data": "AAAAAAAAAAA="}}),
    (ONE, {"result": {"k": "array", "dtype": ">f4", "shape": [1], "strides": [4], "data": "AAAAAA=="}}),
    (ONE, {"result": {"k": "array", "dtype": "<f4", "shape": [2], "strides": [4], "data": "AAAAAA=="}}),
    (ONE, {"result": {"k": "array", "dtype": "<f4", "shape": [10 ** 9], "strides": [4], "data": ""}}),
    ("t = torch.zeros(3)\nr = f(t)", {"result": {"k": "array", "dtype": "<f4", "shape": [3], "strides": [4],
                                                  "input_storage": 0, "byte_offset": 4}, "inputs": NOTHING}),
    ("t = torch.zeros(3)\nr = f(t)", {"result": {"k": "array", "dtype": "<f4", "shape": [3], "strides": [-4],
                                                  "input_storage": 0, "byte_offset": 4}, "inputs": NOTHING}),
    (ONE, {"result": {"k": "t", "dtype": "float64", "shape": [3], "stride": [1], "offset": 0,
                      "in_array": 0, "byte_offset": 8, "nbytes": 24}}),
    (ONE, {"result": {"k": "t", "dtype": "float64", "shape": [4], "stride": [1], "offset": 0,
                      "in_array": 0, "byte_offset": 0, "nbytes": 24}}),
    (ONE, {"result": {"k": "t", "dtype": "float64", "shape": [1], "stride": [1], "offset": 0,
                      "in_array": 1, "byte_offset": 0, "nbytes": 8}}),
])
def test_a_forged_answer_about_arrays_is_an_error_never_a_pass(cell, reply):
    refused(reply, cell + "\nck.ok('passed')")
