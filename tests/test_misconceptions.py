"""The course's one misconception list: every anchor is a real heading, every diagnosis names a known
misconception, distinct mistakes get distinct ones, and a grading run can count them."""
from __future__ import annotations

import ast
import re
from functools import lru_cache

import nbformat
import pytest

from autograder.grading.misconception_counts import misconception_counts, misconceptions_in
from autograder.kernel import checks as ck
from autograder.kernel.misconceptions import BY_ID, MISCONCEPTIONS, TAG, anchor_of, ids_in, split_tag
from autograder.learner.cells import role
from harness import ROOT, source_notebook
from corpus import ASSIGNMENTS

CHECKS_SOURCE = (ROOT / "autograder" / "kernel" / "checks.py").read_text()


@lru_cache(maxsize=None)
def headings(lecture: str) -> dict[str, int]:
    """Every markdown heading of a lecture (text without the #s) -> its level."""
    nb = nbformat.read(ROOT / lecture, as_version=4)
    found = {}
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                m = re.match(r"^(#{1,6})\s+(.*\S)\s*$", line)
                if m:
                    found[m.group(2)] = len(m.group(1))
    return found


def tagged_strings(source: str) -> list[str]:
    """Every string constant of a cell's code that starts with a misconception tag."""
    return [n.value for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and re.match(r"^M-[\w-]+:", n.value)]


def test_ids_are_unique_tags_and_each_myth_is_one_line():
    assert len(BY_ID) == len(MISCONCEPTIONS) >= 40
    for m in MISCONCEPTIONS:
        assert TAG.match(m.id + ": x"), m.id
        assert "\n" not in m.myth and 10 < len(m.myth) <= 120, m.id


@pytest.mark.parametrize("m", MISCONCEPTIONS, ids=lambda m: m.id)
def test_every_anchor_is_a_heading_of_its_lecture(m):
    assert (ROOT / m.lecture).is_file(), f"{m.id}: no lecture {m.lecture}"
    assert m.heading in headings(m.lecture), f"{m.id}: {m.lecture} has no heading {m.heading!r}"
    assert m.link == f"{m.lecture}#{anchor_of(m.heading)}"


def test_anchors_are_the_ids_nbconvert_and_jupyterlab_give_the_headings():
    from nbconvert.filters.markdown import markdown2html

    for m in MISCONCEPTIONS:
        html = markdown2html("#" * headings(m.lecture)[m.heading] + " " + m.heading)
        # nbconvert percent-encodes what a URL fragment cannot hold; JupyterLab does not: equal
        # ids mean the heading needed no encoding, so one link works in both
        assert f'id="{anchor_of(m.heading)}"' in html, (m.id, html)


def test_every_tag_in_the_assignments_and_the_checks_names_a_known_misconception():
    seen = set()
    for assignment in ASSIGNMENTS:
        nb = nbformat.read(source_notebook(assignment), as_version=4)
        for cell in nb.cells:
            if role(cell).is_test:
                for text in tagged_strings(cell.source):
                    tag = TAG.match(text).group(1)
                    assert tag in BY_ID, f"{assignment}/{role(cell).grade_id}: unknown misconception {tag}"
                    seen.add(tag)
    for text in tagged_strings(CHECKS_SOURCE):
        assert TAG.match(text).group(1) in BY_ID, text
    assert len(seen) >= 40, "most of the list is used by the assignments"


def test_every_wrong_prediction_is_diagnosed_with_a_misconception():
    for assignment in ASSIGNMENTS:
        nb = nbformat.read(source_notebook(assignment), as_version=4)
        [cell] = [c for c in nb.cells if role(c).grade_id == "test_predictions"]
        call = next(n for n in ast.walk(ast.parse(cell.source))      # the author's half, in the hidden part
                    if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "grade_predictions")
        why = ast.literal_eval(next(k.value for k in call.keywords if k.arg == "why"))
        diagnoses = [d for per_question in why.values() for d in per_question.values()]
        assert len(diagnoses) >= 4, assignment
        for d in diagnoses:
            found, text = split_tag(d)
            assert found is not None, f"{assignment}: a wrong prediction names no misconception: {d!r}"
            assert "lecture" not in text, f"{assignment}: the link replaces the prose reference: {d!r}"


def test_a_tagged_failure_shows_its_misconception_and_link_and_an_untagged_one_a_hint():
    m = BY_ID["M-detach-copies"]
    with pytest.raises(ck.CheckFailed) as tagged:
        ck.check_equal(1, 2, "x", hint="M-detach-copies: add .clone().")
    assert str(tagged.value) == f"x is 1; expected 2. Likely mistake: add .clone(). Myth: {m.myth} [{m.id}: {m.link}]"
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in tagged.value._render_traceback_()]
    assert lines == ["\u2717 x is 1", "  expected: 2", "  likely mistake: add .clone().",
                     f"  Myth: {m.myth}", f"  read again: {m.link}"]
    assert ids_in(str(tagged.value)) == [m.id]
    with pytest.raises(ck.CheckFailed) as plain:
        ck.check_equal(1, 2, "x", hint="one entry per epoch.")
    assert str(plain.value) == "x is 1; expected 2. Hint: one entry per epoch." and not ids_in(str(plain.value))


def _visible_test(assignment: str, grade_id: str) -> str:
    nb = nbformat.read(source_notebook(assignment), as_version=4)
    return next(c.source for c in nb.cells if role(c).grade_id == grade_id)


SHARES_MEMORY = {
    "is": ("lambda a, b: a is b", "M-id-is-memory"),
    "id": ("lambda a, b: id(a) == id(b)", "M-id-is-memory"),
    "id of a temporary": ("lambda a, b: id(a.data) == id(b.data)", "M-id-of-temporary"),
    "torch.equal": ("lambda a, b: a.shape == b.shape and torch.equal(a, b)", "M-equal-values-shared"),
    "data_ptr": ("lambda a, b: a.data_ptr() == b.data_ptr()", "M-data-ptr-is-storage"),
    "a tensor": ("lambda a, b: torch.tensor(a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())",
                 "M-tensor-is-a-number"),
}


@pytest.mark.parametrize("name", SHARES_MEMORY)
def test_a1s_visible_test_tells_the_common_wrong_shares_memory_apart(name):
    import torch

    code, expected = SHARES_MEMORY[name]
    namespace = {"torch": torch, "ck": ck, "shares_memory": eval(code, {"torch": torch})}
    with pytest.raises(ck.CheckFailed) as failed:
        exec(_visible_test("a1_views", "test_shares_memory"), namespace)
    assert ids_in(str(failed.value)) == [expected], str(failed.value)


def _graded(errors: dict[str, str]) -> nbformat.NotebookNode:
    """A graded notebook whose test cells failed with the given messages (grade_id -> evalue)."""
    nb = nbformat.v4.new_notebook()
    for gid, evalue in errors.items():
        cell = nbformat.v4.new_code_cell("ck.check_equal(...)")
        cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": gid, "points": 1}
        cell.outputs = [nbformat.v4.new_output("error", ename="CheckFailed", evalue=evalue, traceback=[])]
        nb.cells.append(cell)
    answer = nbformat.v4.new_code_cell("raise AssertionError('[M-grad-overwritten: x]')")
    answer.metadata["nbgrader"] = {"grade": False, "solution": True, "grade_id": "f"}
    answer.outputs = [nbformat.v4.new_output("error", ename="AssertionError", evalue="[M-grad-overwritten: x]",
                                             traceback=[])]
    nb.cells.append(answer)
    return nb


def test_misconception_counts_counts_each_student_once_per_misconception(tmp_path):
    def tagged(mid: str) -> str:
        return f"x is 1; expected 2. Likely mistake: y. [{mid}: {BY_ID[mid].link}]"

    alice = _graded({"t1": tagged("M-detach-copies"), "t2": tagged("M-detach-copies"), "t3": tagged("M-id-is-memory")})
    bob = _graded({"t1": tagged("M-detach-copies"), "t2": "x is 1; expected 2. Hint: z. [M-not-in-the-list: q]"})
    path = tmp_path / "carol.ipynb"
    nbformat.write(_graded({"t1": tagged("M-id-is-memory")}), path)
    assert misconceptions_in(alice) == {"M-detach-copies", "M-id-is-memory"}
    assert misconception_counts([alice, bob, path]) == {"M-detach-copies": 2, "M-id-is-memory": 2}
    assert list(misconception_counts({"alice": alice, "bob": bob})) == ["M-detach-copies", "M-id-is-memory"]
    assert misconception_counts([]) == {}
