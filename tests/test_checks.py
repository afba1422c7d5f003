"""autograder.kernel.checks: each helper passes what is right, fails what is wrong, and says why."""
from __future__ import annotations

import warnings

import nbformat
import pytest
import torch

from autograder.kernel import checks as ck


def fails(fn, *args, **kwargs) -> str:
    with pytest.raises(ck.CheckFailed) as info:
        fn(*args, **kwargs)
    return str(info.value)


def test_check_failed_is_an_assertion_error():
    assert issubclass(ck.CheckFailed, AssertionError)


def test_a_failed_check_shows_in_a_notebook_as_its_diagnosis_alone():
    """IPython shows ``_render_traceback_``'s lines instead of the traceback: no source, no frames."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shown: list[list[str]] = []
    shell._showtraceback = lambda etype, evalue, stb: shown.append(stb)
    shell.run_cell("from autograder.kernel import checks as ck\n"
                   "ck.check_equal(1 + 1, 3, 'one plus one', hint='M-views-copy: addition is not concatenation.')")
    import re
    from autograder.kernel.misconceptions import BY_ID

    m = BY_ID["M-views-copy"]
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in shown[-1]]
    assert lines == ["\u2717 one plus one is 2", "  expected: 3", "  likely mistake: addition is not concatenation.",
                     f"  Myth: {m.myth}", f"  read again: {m.link}"]
    # the message in one line stays what check, the grader and the feedback read; the myth is labelled
    message = fails(ck.check_equal, 1 + 1, 3, "one plus one", hint="M-views-copy: addition is not concatenation.")
    assert message == (f"one plus one is 2; expected 3. Likely mistake: addition is not concatenation. "
                       f"Myth: {m.myth} [M-views-copy: {m.link}]")
    # a hint that names no misconception is a hint, not a diagnosed mistake
    shell.run_cell("ck.check_equal(1 + 1, 3, 'one plus one', hint='one entry per epoch.')")
    assert [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in shown[-1]][-1] == "  hint: one entry per epoch."


def test_in_a_jupyter_kernel_the_diagnosis_links_to_the_lecture_heading(monkeypatch, tmp_path):
    """In JupyterLab (a kernel started in the notebook's folder) the failure shows its diagnosis as a
    display whose "read again" is a link relative to the notebook, which JupyterLab opens at the
    heading; the error output that follows is what the test is scored on.  Outside a kernel, or
    where the lectures are not found, the diagnosis stays in the error's text."""
    import os

    from IPython.core.interactiveshell import InteractiveShell
    from autograder.kernel.misconceptions import BY_ID
    from harness import ROOT

    shell = InteractiveShell.instance()
    published: list[dict] = []
    monkeypatch.setattr(shell.display_pub, "publish", lambda data, metadata=None, **kw: published.append(data),
                        raising=False)
    m = BY_ID["M-views-copy"]
    with pytest.raises(ck.CheckFailed) as failed:
        ck.check_equal(1, 2, "x", hint="M-views-copy: a slice is a view.")
    monkeypatch.chdir(ROOT / "exercises" / "a1_views")
    assert len(failed.value._render_traceback_()) == 5 and not published   # a shell without a kernel
    monkeypatch.setattr(shell, "kernel", object(), raising=False)
    lines = failed.value._render_traceback_()
    assert len(lines) == 1 and "diagnosis is above" in lines[0]
    [data] = published
    lecture = nbformat.read(ROOT / m.lecture, as_version=4)
    cell = next(c for c in lecture.cells if c.cell_type == "markdown" and f"# {m.heading}" in c.source)
    href = f"../../{m.lecture}#cell-id={cell.id}"        # JupyterLab scrolls to the heading's cell
    assert f'<a href="{href}">{m.link}</a>' in data["text/html"], data["text/html"]
    assert os.path.isfile(os.path.join(os.getcwd(), href.partition("#")[0]))
    assert f"Myth: {m.myth}" in data["text/plain"] and "likely mistake: a slice is a view." in data["text/plain"]
    assert len(failed.value._render_traceback_()) == 1 and len(published) == 1   # shown once
    with pytest.raises(ck.CheckFailed) as again:
        ck.check_equal(1, 2, "x", hint="M-views-copy: a slice is a view.")
    monkeypatch.chdir(tmp_path)             # no course/ above: the text, no link to nowhere
    assert len(again.value._render_traceback_()) == 5 and len(published) == 1


def test_predictions_not_started_show_one_line_and_still_read_as_not_implemented():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shown: list[list[str]] = []
    shell._showtraceback = lambda etype, evalue, stb: shown.append(stb)
    shell.run_cell("from autograder.kernel import checks as ck\n"
                   "ck.check_predictions({'q1': '?'}, choices={'q1': 'ab'}, feedback={}, salt='s')")
    assert len(shown[-1]) == 1 and "NotImplementedError" in shown[-1][0] and "no predictions yet" in shown[-1][0]
    with pytest.raises(NotImplementedError) as info:
        ck.check_predictions({"q1": "?"}, choices={"q1": "ab"}, feedback={}, salt="s")
    assert type(info.value).__name__ == "NotImplementedError"


def test_storage_ptr_is_equal_for_views_at_offsets_and_differs_for_copies():
    a = torch.arange(12.0).reshape(3, 4)
    assert a[2].data_ptr() != a.data_ptr()
    assert ck.storage_ptr(a[2]) == ck.storage_ptr(a) == ck.storage_ptr(a.t())
    assert ck.storage_ptr(a.clone()) != ck.storage_ptr(a)


def test_same_storage_names_what_was_seen_and_the_likely_mistake():
    a = torch.ones(3)
    ck.check_same_storage(a[1:], a)
    msg = fails(ck.check_same_storage, a + 0, a, "r", "a")
    assert "r has its own storage" in msg and "expected r to share memory with a" in msg
    assert "Likely mistake" in msg and "[M-indexing-views: course/01_names_views_storage.ipynb#3.-Copies]" in msg


def test_a_tensor_where_a_plain_value_belongs_gets_its_own_diagnosis_whatever_the_value_hint():
    msg = fails(ck.check_equal, torch.tensor(True), True, "shares_memory(a, a)", hint="M-id-is-memory: is compares objects.")
    assert "[M-tensor-is-a-number:" in msg and "M-id-is-memory" not in msg
    msg = fails(ck.check_equal, torch.tensor(1.5), 2.0, "loss", hint="M-tensor-is-a-number: use .item().")
    assert "use .item()" in msg
    assert "[M-id-is-memory:" in fails(ck.check_equal, False, True, "s", hint="M-id-is-memory: is compares objects.")


def test_new_storage_default_hint_mentions_clone():
    a = torch.ones(3)
    ck.check_new_storage(a.clone(), a)
    msg = fails(ck.check_new_storage, a.detach(), a, "snapshot(t)", "t")
    assert "snapshot(t) shares memory with t" in msg and "clone()" in msg


def test_check_tensor_rejects_none_subclasses_and_impostors():
    class Sub(torch.Tensor):
        pass

    class Liar:
        __class__ = torch.Tensor  # isinstance(Liar(), torch.Tensor) is True

        def __eq__(self, other):
            return True

    assert isinstance(Liar(), torch.Tensor)
    assert "is None" in fails(ck.check_tensor, None)
    assert "Sub" in fails(ck.check_tensor, torch.ones(2).as_subclass(Sub))
    assert "Liar" in fails(ck.check_tensor, Liar())
    ck.check_tensor(torch.nn.Parameter(torch.ones(1)), allow_parameter=True)
    fails(ck.check_tensor, torch.nn.Parameter(torch.ones(1)))


def test_check_equal_wants_the_exact_type_so_lying_eq_fails():
    class AlwaysEqual:
        def __eq__(self, other):
            return True

        def __bool__(self):
            return True

    ck.check_equal(True, True)
    ck.check_equal(3, 3)
    ck.check_equal({"A", "B"}, {"B", "A"})
    assert "AlwaysEqual" in fails(ck.check_equal, AlwaysEqual(), True)
    assert "expected a bool" in fails(ck.check_equal, torch.tensor(True), True)
    assert "is 1" in fails(ck.check_equal, 1, 2, hint="h")
    assert "expected a set" in fails(ck.check_equal, ["a"], {"a"})


def test_check_equal_compares_floats_with_a_tolerance_and_rejects_tensors():
    ck.check_equal(0.1 + 0.2, 0.3)
    assert "Python float" in fails(ck.check_equal, torch.tensor(0.3), 0.3)
    fails(ck.check_equal, 0.31, 0.3)


def test_check_close_checks_shape_dtype_and_values():
    t = torch.tensor([1.0, 2.0])
    ck.check_close(t + 1e-7, torch.tensor([1.0, 2.0]))
    assert "shape" in fails(ck.check_close, t, torch.ones(3))
    assert "dtype" in fails(ck.check_close, t.double(), t)
    ck.check_close(t.double(), t, check_dtype=False)
    assert "max difference 1" in fails(ck.check_close, t, torch.tensor([1.0, 3.0]))


def test_check_grad_is_exact_close_or_says_how_far_off():
    x = torch.ones(3, requires_grad=True)
    (x * 2).sum().backward()
    ck.check_grad(x, [2.0, 2.0, 2.0])
    ck.check_grad(x, [2.0 + 1e-7] * 3)
    assert "max difference 1" in fails(ck.check_grad, x, [3.0, 2.0, 2.0])
    y = torch.ones(2, requires_grad=True)
    assert "y.grad is None" in fails(ck.check_grad, y, [1.0, 1.0], "y.grad")
    ck.check_grad(y, None, "y.grad")
    assert "expected None" in fails(ck.check_grad, x, None)


def test_graph_state_checks():
    x = torch.ones(2, requires_grad=True)
    c = x.clone()
    ck.check_requires_grad(c, True)
    ck.check_leaf(c, False)
    ck.check_grad_fn(c, "CloneBackward0")
    assert "requires_grad is False" in fails(ck.check_requires_grad, c.detach(), True)
    assert "grad_fn is CloneBackward0" in fails(ck.check_grad_fn, c, None)
    assert "is_leaf is True" in fails(ck.check_leaf, x, False)


def test_version_checks():
    t = torch.zeros(2)
    before = ck.version(t)
    ck.check_version_unchanged(t, before)
    t[0] = 1
    assert "went from 0 to 1" in fails(ck.check_version_unchanged, t, before, "t")
    ck.check_version_bumped(t, before)
    assert "still 1" in fails(ck.check_version_bumped, t, 1)


def test_same_object():
    t = torch.zeros(1)
    ck.check_same_object(t, t)
    fails(ck.check_same_object, t.view(1), t)


def test_checks_ignore_monkeypatched_torch(monkeypatch):
    """Code that patches torch after the helpers were imported cannot change what they see."""
    a = torch.ones(3)
    copy = a.clone()
    real_storage = a.untyped_storage()
    monkeypatch.setattr(torch.Tensor, "untyped_storage", lambda self: real_storage)
    monkeypatch.setattr(torch, "allclose", lambda *args, **kwargs: True)
    monkeypatch.setattr(torch.Tensor, "requires_grad", property(lambda self: True))
    assert copy.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()  # the lie
    ck.check_new_storage(copy, a)  # the truth
    fails(ck.check_close, torch.zeros(3), torch.ones(3))
    fails(ck.check_requires_grad, torch.zeros(1), True)


def test_ok_prints_a_tick_line(capsys):
    ck.ok("views share memory")
    assert capsys.readouterr().out == "\u2713 views share memory\n"


def test_a_warning_printing_answer_really_warns():
    """The corpus uses `t.storage()` as a right answer that prints a warning: it must warn."""
    # torch warns about TypedStorage once per process: forget an earlier test's warning
    torch.storage._reset_warn_typed_storage_removal()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.ones(1).storage()
    assert any("TypedStorage is deprecated" in str(w.message) for w in caught)


def test_a_set_of_names_reads_the_same_in_every_process():
    """A set of str is shown sorted: its own order follows the hash seed, so a message (in the kernel
    or judged in the grader's process) would change from run to run."""
    from autograder.kernel import checks

    with pytest.raises(checks.CheckFailed) as failed:
        checks.check_equal({"MulBackward0", "AccumulateGrad", "SumBackward0"}, {"SumBackward0", "CopySlices"}, "ops")
    assert "ops is {'AccumulateGrad', 'MulBackward0', 'SumBackward0'}" in str(failed.value)
    assert "{'CopySlices', 'SumBackward0'}" in str(failed.value)


def test_the_default_storage_hint_tells_advanced_indexing_from_a_0d_index():
    """Indexing with a 0-d integer tensor is basic indexing (a view); a 1-d index tensor copies."""
    a = torch.arange(6.0)
    ck.check_same_storage(a[torch.tensor(1)], a)            # a view, as the hint now says
    msg = fails(ck.check_same_storage, a[torch.tensor([1])], a, "a[torch.tensor([1])]", "a")
    assert "an index tensor with a dimension" in msg and "0-d integer tensor index" in msg and "gives a view" in msg
