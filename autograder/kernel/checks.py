"""Assertion helpers for the course's test cells.

This module runs inside learners' kernels, so it imports only torch and the standard library.
Every failure raises :class:`CheckFailed` (an ``AssertionError``) whose message says what was
observed, what was expected and, where a likely mistake is known, what to change.

The helpers defend themselves against answers that lie: they look at the exact type of an
object rather than trusting ``isinstance`` or ``__eq__``, and they call the torch functions they
captured when this module was imported, so code that later monkeypatches ``torch`` does not
change what a check sees.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from . import predictions as _pred
from .diagnosis import ansi_row, find_lecture, read_again_text, show_in_notebook
from .i18n import N_, kernel_lang as _kernel_lang, tr as _tr
from .misconceptions import Misconception, split_tag as _split_tag

__all__ = [
    "CheckFailed",
    "ok",
    "storage_ptr",
    "check_tensor",
    "check_type",
    "check_same_storage",
    "check_new_storage",
    "check_same_object",
    "check_version_unchanged",
    "check_version_bumped",
    "check_requires_grad",
    "check_leaf",
    "check_grad_fn",
    "check_close",
    "check_grad",
    "check_equal",
    "check_predictions",
    "grade_predictions",
    "check_choice",
    "grade_choice",
    "version",
]

# References taken at import time, before any learner code runs.
_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
_untyped_storage = torch.Tensor.untyped_storage
_storage_data_ptr = torch.UntypedStorage.data_ptr
_storage_nbytes = torch.UntypedStorage.nbytes
_version_get = torch.Tensor._version.__get__
_requires_grad_get = torch.Tensor.requires_grad.__get__
_is_leaf_get = torch.Tensor.is_leaf.__get__
_grad_fn_get = torch.Tensor.grad_fn.__get__
_grad_get = torch.Tensor.grad.__get__
_shape_get = torch.Tensor.shape.__get__
_dtype_get = torch.Tensor.dtype.__get__
_detach = torch.Tensor.detach
_to = torch.Tensor.to
_tolist = torch.Tensor.tolist
_abs = torch.abs
_max = torch.max
_allclose = torch.allclose
_equal = torch.equal
_no_grad = torch.no_grad
_as_tensor = torch.as_tensor
_float64 = torch.float64
_int = int
_float = float
_bool = bool
_type = type
_isinstance = isinstance
_repr = repr
_str = str
_dict = dict

ATOL = 1e-5
RTOL = 1e-5


class CheckFailed(AssertionError):
    """A test expectation that the learner's code did not meet.

    In a notebook it shows as its diagnosis alone, a few lines (IPython calls
    ``_render_traceback_`` instead of printing the traceback): what was observed, what was
    expected and, where one is known, the likely mistake with the misconception behind it and
    the lecture section that refutes it.  Its message (``str()``) holds the same in one line,
    for ``check``, the grader and the feedback."""

    def __init__(self, message: str, observed: str | None = None, expected: str | None = None,
                 hint: str | None = None, misconception: Misconception | None = None):
        super().__init__(message)
        self.observed, self.expected, self.hint = observed, expected, hint
        self.misconception = misconception

    def diagnosis(self) -> list[tuple[str, str]]:
        """The diagnosis as (label, text) rows: the observation (label ``"\u2717"``), what was
        expected, the likely mistake or hint, the myth behind it and where to read again."""
        if self.observed is None:
            return [("CheckFailed", _str(self))]
        rows = [("\u2717", self.observed), ("expected", self.expected)]
        m = self.misconception
        if m is not None:
            rows += [(N_("likely mistake"), self.hint), (N_("Myth"), m.myth), (N_("read again"), m.link)]
        elif self.hint:
            rows.append((N_("hint"), self.hint))
        return rows

    def _render_traceback_(self) -> list[str]:
        lang, m = _kernel_lang(), self.misconception   # the notebook's language: the rows are shown translated
        rows = [(label, read_again_text(m, find_lecture(m), lang) if label == "read again" else _tr(text, lang))
                for label, text in self.diagnosis()]
        if self.misconception is not None and (getattr(self, "_shown", False)
                                               or show_in_notebook(rows, self.misconception, lang)):
            self._shown = True   # IPython may render a traceback twice: one display is enough
            # shown above as a display with a link that opens the lecture at its heading (the test
            # still fails on this error, as the grader scores it)
            return [f"\x1b[31m\u2717 {_tr(N_('this test failed'), lang)}\x1b[0m: {_tr(N_('the diagnosis is above'), lang)}"]
        return [ansi_row(label, text, lang) for label, text in rows]


class _NotStarted(NotImplementedError):
    """An exercise still as handed out; in a notebook it shows as its one line, not a traceback."""

    def _render_traceback_(self) -> list[str]:
        return [f"\x1b[31mNotImplementedError\x1b[0m: {_tr(_str(self), _kernel_lang())}"]


_NotStarted.__name__ = _NotStarted.__qualname__ = "NotImplementedError"  # what check and nbgrader read


def _fail(observed: str, expected: str, hint: str | None = None) -> None:
    __tracebackhide__ = True  # IPython shows the test's line, not this helper's
    misconception, text = _split_tag(hint)
    m = misconception
    if m is not None:
        message = N_(f"{observed}; expected {expected}. Likely mistake: {text} Myth: {m.myth} [{m.id}: {m.link}]")
    elif text:
        message = N_(f"{observed}; expected {expected}. Hint: {text}")
    else:
        message = N_(f"{observed}; expected {expected}.")
    raise CheckFailed(message, observed, expected, text, misconception)


def ok(message: str) -> None:
    """Print the ✓ line of a visible test that passed."""
    print(f"\u2713 {_tr(message, _kernel_lang())}")


def _type_name(obj: Any) -> str:
    t = _type(obj)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def check_type(obj: Any, expected: type | tuple[type, ...], what: str = "the result",
               hint: str | None = None) -> None:
    """The exact type of ``obj`` is ``expected`` (or one of them); subclasses do not count."""
    __tracebackhide__ = True  # IPython shows the test's line, not this helper's
    allowed = expected if _isinstance(expected, tuple) else (expected,)
    if _type(obj) not in allowed:
        names = " or ".join(t.__qualname__ for t in allowed)
        _fail(N_(f"{what} is a {_type_name(obj)}"), N_(f"a {names}"), hint)


def check_tensor(obj: Any, what: str = "the result", allow_parameter: bool = False,
                 hint: str | None = None) -> None:
    """``obj`` really is a ``torch.Tensor`` (not a subclass or an object that pretends)."""
    __tracebackhide__ = True  # IPython shows the test's line, not this helper's
    allowed: tuple[type, ...] = (_Tensor, _Parameter) if allow_parameter else (_Tensor,)
    if obj is None:
        _fail(N_(f"{what} is None"), N_("a torch.Tensor"),
              hint or N_("the function has no `return` statement, or returns what a call that gives None returned "
                         "(`list.append`, `backward()`); in-place tensor methods such as `add_` return the tensor itself."))
    check_type(obj, allowed, what, hint)


def storage_ptr(t: torch.Tensor) -> int:
    """Address of the storage behind ``t``: equal for a tensor and all of its views."""
    return _storage_data_ptr(_untyped_storage(t))


def version(t: torch.Tensor) -> int:
    """The version counter of ``t`` (bumped by every in-place operation)."""
    return _version_get(t)


def _describe_storage(t: torch.Tensor) -> str:
    return f"storage at {storage_ptr(t):#x} ({_storage_nbytes(_untyped_storage(t))} bytes)"


def check_same_storage(a: torch.Tensor, b: torch.Tensor, what: str = "the result",
                       other: str = "the input", hint: str | None = None) -> None:
    """``a`` and ``b`` are backed by one storage (views of each other, or the same tensor)."""
    __tracebackhide__ = True  # IPython shows the test's line, not this helper's
    check_tensor(a, what, allow_parameter=True)
    check_tensor(b, other, allow_parameter=True)
    if storage_ptr(a) != storage_ptr(b):
        _fail(N_(f"{what} has its own storage, not the storage of {other}"),
              N_(f"{what} to share memory with {other}"),
              hint or N_("M-indexing-views: an out-of-place operation made a copy: `t + 1`, `clone()` and advanced "
                         "indexing (a list, a mask or an index tensor with a dimension) allocate new memory; "
                         "a 0-d integer tensor index is read like `a[1]` and gives a view."))


def check_new_storage(result: torch.Tensor, source: torch.Tensor, what: str = "the result",
                      other: str = "the input", hint: str | None = None) -> None:
    """``result`` does not share memory with ``source``."""
    __tracebackhide__ = True  # IPython shows the test's line, not this helper's
    check_tensor(result, what, allow_parameter=True)
    check_tensor(source, other, allow_parameter=True)
    if storage_ptr(result) == storage_ptr(source):
        _fail(N_(f"{what} shares memory with {other} (same storage)"),
              N_("memory of its own"),
              hint or N_("M-detach-copies: assignment, views, `detach()` and `.data` never copy; add `.clone()`."))


def check_same_object(result: Any, expected: Any, what: str = "the result",
                      other: str = "the input", hint: str | None = None) -> None:
    """``result is expected``: the very same Python object."""
    __tracebackhide__ = True  # IPython shows the test's line, not this helper's
    if result is not expected:
        _fail(N_(f"{what} is a different object ({_type_name(result)})"),
              N_(f"{other} itself"),
              hint or N_("M-rebinding-writes: the function built a new object instead of working in place and returning it."))


def check_version_unchanged(t: torch.Tensor, before: int, what: str = "the input",
                            hint: str | None = None) -> None:
    """No in-place operation touched ``t`` since its version counter read ``before``."""
    __tracebackhide__ = True  # IPython shows the test's line, not this helper's
    now = version(t)
    if now != before:
        _fail(N_(f"{what}._version went from {before} to {now} (it was modified in place)"),
              N_(f"{what} untouched (version {before})"),
              hint or N_("M-augmented-assignment-copies: an in-place operation (`+=`, `add_`, `t[i] = ...`, `copy_`) wrote into it; work on a copy."))


def check_version_bumped(t: torch.Tensor, before: int, what: str = "the tensor",
                         hint: str | None = None) -> None:
    """``t`` was modified in place at least once since its version read ``before``."""
    __tracebackhide__ = True  # IPython shows the test's line, not this helper's
    now = version(t)
    if now <= before:
        _fail(N_(f"{what}._version is still {now}"),
              N_(f"an in-place update (version above {before})"),
              hint or N_("M-argument-rebinding: `t = t + 1` rebinds a local name and leaves the caller's tensor as it was; use an in-place operation."))


def check_requires_grad(t: torch.Tensor, expected: bool, what: str = "the result",
                        hint: str | None = None) -> None:
    """``t.requires_grad`` is ``expected``."""
    __tracebackhide__ = True  # IPython shows the test's line, not this helper's
    check_tensor(t, what, allow_parameter=True)
    got = _requires_grad_get(t)
    if got is not expected:
        if expected:
            default = N_("M-fresh-leaf-connects: the copy left the autograd graph: `detach()`, `.data`, `torch.no_grad()` or `torch.tensor(t)` cut it off.")
        else:
            default = N_("M-clone-leaves-graph: the result requires grad: it is still attached to a graph, or it is a leaf "
                         "that requires grad; `detach()` it (and `clone()` if it must own its memory).")
        _fail(N_(f"{what}.requires_grad is {got}"), f"{expected}", hint or default)


def check_leaf(t: torch.Tensor, expected: bool, what: str = "the result",
               hint: str | None = None) -> None:
    """``t.is_leaf`` is ``expected``."""
    __tracebackhide__ = True  # IPython shows the test's line, not this helper's
    check_tensor(t, what, allow_parameter=True)
    got = _is_leaf_get(t)
    if got is not expected:
        _fail(N_(f"{what}.is_leaf is {got}"), f"{expected}", hint)


def check_grad_fn(t: torch.Tensor, expected: str | None, what: str = "the result",
                  hint: str | None = None) -> None:
    """``type(t.grad_fn).__name__`` is ``expected``; ``None`` means no ``grad_fn`` at all."""
    __tracebackhide__ = True  # IPython shows the test's line, not this helper's
    check_tensor(t, what, allow_parameter=True)
    fn = _grad_fn_get(t)
    got = None if fn is None else _type(fn).__name__
    if got != expected:
        if expected is None:
            _fail(N_(f"{what}.grad_fn is {got}"), N_("None (outside every graph)"),
                  hint or N_("M-clone-leaves-graph: the result was computed with gradient tracking on; use `detach()` or `torch.no_grad()`."))
        _fail(N_(f"{what}.grad_fn is {got}"), f"{expected}", hint)


def _as_float64(x: Any) -> torch.Tensor:
    if _isinstance(x, _Tensor):
        with _no_grad():
            return _to(_detach(x), device="cpu", dtype=_float64)
    return _as_tensor(x, dtype=_float64)


def check_close(actual: Any, expected: Any, what: str = "the result", atol: float = ATOL,
                rtol: float = RTOL, check_dtype: bool = True, hint: str | None = None) -> None:
    """``actual`` is a tensor with the shape (and dtype) of ``expected`` and values within tolerance."""
    __tracebackhide__ = True  # IPython shows the test's line, not this helper's
    check_tensor(actual, what, allow_parameter=True)
    exp = expected if _isinstance(expected, _Tensor) else _as_tensor(expected)
    if _shape_get(actual) != _shape_get(exp):
        _fail(N_(f"{what} has shape {tuple(_shape_get(actual))}"), N_(f"shape {tuple(_shape_get(exp))}"), hint)
    if check_dtype and _dtype_get(actual) != _dtype_get(exp):
        _fail(N_(f"{what} has dtype {_dtype_get(actual)}"), N_(f"dtype {_dtype_get(exp)}"),
              hint or N_("an operation changed the dtype; keep the input's dtype (see `Tensor.to`)."))
    a = _as_float64(actual)
    e = _as_float64(exp)
    if not _allclose(a, e, atol=atol, rtol=rtol, equal_nan=True):
        diff = _float(_max(_abs(a - e))) if a.numel() else 0.0
        _fail(N_(f"{what} has values {_short(actual)} (max difference {diff:.3g})"),
              N_(f"{_short(exp)} (within atol={atol:g})"), hint)


def check_grad(t: torch.Tensor, expected: Any, what: str = "x.grad", atol: float = ATOL,
               rtol: float = RTOL, hint: str | None = None) -> None:
    """Karpathy-style gradient check: ``t.grad`` exists and is exact, close, or how far off."""
    __tracebackhide__ = True  # IPython shows the test's line, not this helper's
    check_tensor(t, what.removesuffix(".grad") or "the tensor", allow_parameter=True)
    g = _grad_get(t)
    if expected is None:
        if g is not None:
            _fail(N_(f"{what} is {_short(g)}"), N_("None (no gradient reaches it)"),
                  hint or N_("a path in the graph still leads to it; cut it with `detach()`."))
        return
    if g is None:
        _fail(N_(f"{what} is None"), f"{_short(expected)}",
              hint or N_("M-fresh-leaf-connects: no gradient reached this tensor: the graph was cut (`detach()`, `.data`, `torch.no_grad()`, `torch.tensor(t)`) on the way."))
    exp = _as_float64(expected)
    got = _as_float64(g)
    if _shape_get(got) != _shape_get(exp):
        _fail(N_(f"{what} has shape {tuple(_shape_get(got))}"), N_(f"shape {tuple(_shape_get(exp))}"), hint)
    if _equal(got, exp):
        return
    if _allclose(got, exp, atol=atol, rtol=rtol):
        return
    diff = _float(_max(_abs(got - exp)))
    _fail(N_(f"{what} is {_short(g)} (max difference {diff:.3g})"), f"{_short(expected)}", hint)


def check_equal(actual: Any, expected: Any, what: str = "the result",
                hint: str | None = None) -> None:
    """Plain Python values (bool, int, float, str, set, list) are equal, with their exact type.

    Floats are compared with a tolerance; the type check stops objects whose ``__eq__`` lies.
    """
    __tracebackhide__ = True  # IPython shows the test's line, not this helper's
    exp_type = _type(expected)
    if _isinstance(actual, _Tensor) and not (hint or "").startswith("M-tensor-is-a-number:"):
        hint = _TENSOR_FOR_VALUE  # a wrong type is its own mistake, whatever a wrong value would mean
    if exp_type is _float:
        if _type(actual) is not _float:
            _fail(N_(f"{what} is a {_type_name(actual)}"), N_("a Python float"), hint or _TENSOR_FOR_VALUE)
        if not math.isclose(actual, expected, rel_tol=RTOL, abs_tol=ATOL):
            _fail(N_(f"{what} is {actual!r}"), f"{expected!r}", hint)
        return
    if _type(actual) is not exp_type:
        _fail(N_(f"{what} is a {_type_name(actual)} ({_safe_repr(actual)})"), N_(f"a {exp_type.__name__} ({expected!r})"), hint)
    odd = _shape_problem(actual, expected)
    if odd:
        _fail(N_(f"{what} holds {odd}"), N_("the same kinds of values all the way down"), hint)
    if not (expected == actual):
        _fail(N_(f"{what} is {_safe_repr(actual)}"), _sorted_set_repr(expected) if _type(expected) is set and all(
            _type(x) is str for x in expected) else f"{expected!r}", hint)


_TENSOR_FOR_VALUE = N_("M-tensor-is-a-number: return a plain Python value: `.item()` turns a one-element tensor "
                        "into a number, `bool(...)` into a bool.")


def _form(found: Any) -> Any:
    """The letters ``predictions.letters`` or ``predictions.letter`` found; fails with their problem."""
    __tracebackhide__ = True  # IPython shows the test's line, not this helper's
    if _type(found) is _pred.Problem:
        if found.not_started:
            raise _NotStarted(found.observed)
        _fail(found.observed, found.expected, found.hint)
    return found


def check_predictions(answers: Any, choices: dict[str, str], feedback: dict[str, dict[str, str]], salt: str,
                      name: str = "PREDICTIONS") -> None:
    """The visible half of a prediction set: each question has one of its letters, and a letter whose
    diagnosis the release stores (``feedback``, written by ``python -m autograder predictions``)
    fails with it.  The release holds no right letter, so any other letter passes here unjudged."""
    __tracebackhide__ = True  # IPython shows the test's line, not this helper's
    letters = _form(_pred.letters(answers, choices, name))
    for q, letter in letters.items():
        diagnosis = _pred.unseal(_dict.get(feedback, q), salt, q, letter)
        if diagnosis is not None:
            _fail(N_(f"{q}: you predicted ({letter})"), N_("another choice"), diagnosis)
    shown = ", ".join(f"{q} ({letter})" for q, letter in letters.items())
    print("\u00b7 " + _tr(N_(f"no stored diagnosis for {shown}: your instructor's grading, or `check --full`, tells "
                             "whether they are right"), _kernel_lang()))


def grade_predictions(answers: Any, key: dict[str, str], choices: dict[str, str],
                      why: dict[str, dict[str, str]] | None = None, graded_only: dict[str, str] | None = None,
                      name: str = "PREDICTIONS") -> None:
    """The hidden half: every letter is the right one (``key``); a wrong one fails with its diagnosis
    from ``why`` (question -> letter -> text), where the author wrote one.  ``graded_only`` (question
    -> letters) is for the predictions command: those diagnoses stay out of the release."""
    __tracebackhide__ = True  # IPython shows the test's line, not this helper's
    letters = _form(_pred.letters(answers, choices, name))
    for q, right in key.items():
        if letters[q] != right:
            _fail(N_(f"{q}: you predicted ({letters[q]})"), N_("another choice"), (why or {}).get(q, {}).get(letters[q]))
    ok(N_(f"all {len(key)} predictions right"))


def check_choice(answer: Any, name: str, choices: str, feedback: dict[str, str], salt: str) -> None:
    """The visible half of one question with a right letter (``graph_answer``), as ``check_predictions``."""
    __tracebackhide__ = True  # IPython shows the test's line, not this helper's
    letter = _form(_pred.letter(answer, name, choices))
    diagnosis = _pred.unseal(feedback, salt, name, letter)
    if diagnosis is not None:
        _fail(N_(f"{name} is {letter!r}"), N_("another choice"), diagnosis)
    print("\u00b7 " + _tr(N_(f"no stored diagnosis for {name} = {letter!r}: your instructor's grading, or "
                             "`check --full`, tells whether it is right"), _kernel_lang()))


def grade_choice(answer: Any, name: str, key: str, choices: str, why: dict[str, str] | None = None,
                 graded_only: str = "") -> None:
    """The hidden half of one question with a right letter: ``answer`` names ``key``."""
    __tracebackhide__ = True  # IPython shows the test's line, not this helper's
    letter = _form(_pred.letter(answer, name, choices))
    if letter != key:
        _fail(N_(f"{name} is {letter!r}"), N_("another choice"), (why or {}).get(letter))
    ok(N_(f"{name} is right"))


_PLAIN = (str, _int, _float, _bool, type(None))


def _shape_problem(actual: Any, expected: Any, depth: int = 0) -> str | None:
    """What inside ``actual`` differs in exact type from the same place in ``expected`` (None if
    nothing): ``==`` on containers asks each element, so an element whose ``__eq__`` lies (or a
    tensor) must not get that far."""
    if _type(actual) is not _type(expected):
        return f"a {_type_name(actual)} where {_type(expected).__name__} was expected"
    if depth > 50:
        return "values nested more than 50 deep"
    kind = _type(expected)
    if kind in (list, tuple):
        for a, e in zip(actual, expected):
            problem = _shape_problem(a, e, depth + 1)
            if problem:
                return problem
    elif kind is dict:
        for key in list(actual):
            if _type(key) not in _PLAIN:
                return f"a {_type_name(key)} key"
        for key in expected:
            if key in actual:
                problem = _shape_problem(actual[key], expected[key], depth + 1)
                if problem:
                    return problem
    elif kind in (set, frozenset):
        for item in actual:
            if _type(item) not in _PLAIN:
                return f"a {_type_name(item)}"
    return None


def _safe_repr(obj: Any) -> str:
    try:
        # a set of str in sorted order: its own order changes with the process's hash seed, and a
        # message should read the same in every run (in the kernel or judged outside it)
        text = _sorted_set_repr(obj) if _type(obj) is set and all(_type(x) is str for x in obj) else _repr(obj)
    except Exception:  # a hostile __repr__ must not hide the real failure
        text = f"<{_type_name(obj)}>"
    return text if len(text) <= 120 else text[:117] + "..."


def _sorted_set_repr(items: set) -> str:
    return "{" + ", ".join(sorted(_repr(x) for x in items)) + "}" if items else "set()"


def _short(t: Any) -> str:
    if _isinstance(t, _Tensor):
        with _no_grad():
            values = _tolist(_detach(t))
        text = f"tensor({values})"
    else:
        text = _safe_repr(t)
    return text if len(text) <= 120 else text[:117] + "..."

