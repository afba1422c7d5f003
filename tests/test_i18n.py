"""The message catalog and its use: every learner-facing string has its Chinese form, a message
built from a template is found and translated part by part, and a kernel shows a Chinese
notebook's diagnosis in Chinese with a link to the Chinese lecture."""
from __future__ import annotations

import json
import os
import shutil

import nbformat
import pytest

from autograder.course.messages import check_catalog, code_keys, extract, load_catalog, sync_catalog, keys_of_test_cell
from autograder.kernel import i18n
from autograder.kernel.i18n import PLACEHOLDER, choose, fill, kernel_lang, tr
from harness import ROOT

CJK = "\u4e00-\u9fff"


def test_every_learner_facing_string_has_its_chinese_form():
    report = check_catalog(extract(ROOT), load_catalog())
    assert report.ok, {k: v[:5] for k, v in vars(report).items() if v}


def test_the_catalog_covers_the_package_the_myths_and_every_assignment():
    found = extract(ROOT)
    assert {"kernel/checks.py", "kernel/misconceptions.py", "learner/view.py", "learner/progress.py",
            "learner/watch.py", "learner/commands.py"} <= set(found)
    assert {f"solutions/{a}" for a in ("a1_views", "a6b_boundaries", "a9_capstone")} <= set(found)
    assert "{what} has its own storage, not the storage of {other}" in found["kernel/checks.py"]


def test_keys_are_read_where_they_are_written():
    assert code_keys('x = N_(f"{what} is None")\ny = say(lang, "{n} tests to fix", n=2)\nz = N_(f"{e}")\n') == [
        "{what} is None", "{n} tests to fix"]
    keys = keys_of_test_cell('ck.check_equal(f(a), 1, "a view and its base", hint="M-views-copy: a slice is a view.")\n'
                          'ck.check_close(x, y, what + " after the update")\nck.ok(f"{name!r} done in place")\n'
                          'ck.check_equal(g(x), 2, "g(x)")\nZ = {"q1": "abcd"}\n')
    assert sorted(keys) == sorted(["a view and its base", "a slice is a view.", "{what} after the update",
                                   "{name!r} done in place"])


def test_sync_adds_new_keys_untranslated_and_drops_unused_ones():
    found = {"kernel/checks.py": ["old", "new one"]}
    catalog, added, dropped = sync_catalog(found, {"kernel/checks.py": {"old": "旧", "gone": "没了"}})
    assert catalog == {"kernel/checks.py": {"old": "旧", "new one": None}}
    assert added == [("kernel/checks.py", "new one")] and dropped == {"gone": "没了"}
    report = check_catalog(found, catalog)
    assert report.untranslated == [("kernel/checks.py", "new one")] and not report.ok
    catalog["kernel/checks.py"]["new one"] = "新的 {x}"
    assert check_catalog(found, catalog).placeholders == [("kernel/checks.py", "new one")]


@pytest.mark.parametrize("key", sorted({k for s in load_catalog().values() for k in s if PLACEHOLDER.search(k)}))
def test_each_template_is_recognised_in_a_message_built_from_it(key):
    """Filled with code-like values, a template comes back as its translation with the same values."""
    values = {m.group(0): f"v{i}" if not m.group(2) else f"'v{i}'" for i, m in enumerate(PLACEHOLDER.finditer(key))}
    for m in PLACEHOLDER.finditer(key):
        if m.group(3):             # a number format: a number
            values[m.group(0)] = "7"
    text = PLACEHOLDER.sub(lambda m: values[m.group(0)], key)
    if i18n._is_code(text):            # "v0 (v1)" reads as a call: left alone, as code is
        return
    expected = i18n._CJK_GAP.sub("", PLACEHOLDER.sub(lambda m: values[m.group(0)], i18n._flat("zh")[key]))
    assert tr(text, "zh") == expected, (text, tr(text, "zh"), expected)


def test_a_check_failure_is_translated_part_by_part():
    message = ("shares_memory(a, a[1]) is False; expected True. Likely mistake: a[1] is a view of a: it shows part "
               "of the same storage, 4 elements in, so its data_ptr() differs from a's; compare the storages. "
               "Myth: `t.data_ptr()` is the address of `t`'s storage. [M-data-ptr-is-storage: "
               "course/01_names_views_storage.ipynb#data_ptr()-is-where-a-tensor-starts,-not-its-storage]")
    got = tr(message, "zh")
    assert got.startswith("shares_memory(a, a[1]) 为 False；应为：True。可能的错误：a[1] 是 a 的视图"), got
    assert "误区：`t.data_ptr()` 就是 `t` 的存储的地址。" in got and "[M-data-ptr-is-storage: course/01" in got
    nested = "shadow parameter 'w' after the update has its own storage, not the storage of before; " \
             "expected shadow parameter 'w' after the update to share memory with before."
    assert tr(nested, "zh") == ("更新之后的影子参数 'w' 有自己的存储，不是 before 的存储；"
                                "应为：更新之后的影子参数 'w' 与 before 共享内存。")
    assert tr(message, "en") == message


def test_an_unknown_text_is_left_as_it_is_not_half_translated():
    for text in ("the rain in spain is on the plain", "x is <Foo object at 0x7f>; expected 3.",
                 "SyntaxError: invalid syntax (line 2)", "a brand new sentence"):
        assert tr(text, "zh") == text
    assert tr("answer cell plus_one: SyntaxError: invalid syntax (line 2)", "zh") == \
        "答案单元格 plus_one：SyntaxError: invalid syntax (line 2)"


def test_fill_formats_as_python_does():
    assert fill("{what} has {n:,} bytes ({x!r})", what="t", n=12345, x="a") == "t has 12,345 bytes ('a')"
    assert fill('a dict, such as {"q1": "a"}') == 'a dict, such as {"q1": "a"}'


def test_the_language_comes_from_the_option_the_environment_or_the_notebook():
    zh_nb = {"metadata": {"copy_that": {"lang": "zh"}}}
    assert choose(None, zh_nb, {}) == "zh" and choose(None, {}, {}) == "en"
    assert choose(None, zh_nb, {"COPY_THAT_LANG": "en"}) == "en"
    assert choose("zh", {}, {"COPY_THAT_LANG": "en"}) == "zh"
    with pytest.raises(ValueError, match="unknown language 'fr'"):
        choose("fr", {}, {})


def test_a_kernel_speaks_the_language_of_its_notebook(monkeypatch, tmp_path):
    nb = tmp_path / "x.ipynb"
    nb.write_text(json.dumps({"metadata": {"copy_that": {"lang": "zh"}}, "cells": []}))
    monkeypatch.delenv("COPY_THAT_LANG", raising=False)
    monkeypatch.setenv("JPY_SESSION_NAME", str(nb))
    assert kernel_lang() == "zh"
    monkeypatch.setenv("COPY_THAT_LANG", "en")          # what check's kernel gets
    assert kernel_lang() == "en"
    monkeypatch.delenv("COPY_THAT_LANG")
    monkeypatch.delenv("JPY_SESSION_NAME")
    assert kernel_lang() == "en"


@pytest.fixture
def zh_course(tmp_path):
    """A course with lecture 01 in both editions and a1's Chinese release; the id of the Chinese
    heading's cell."""
    root = tmp_path / "course"
    (root / "course").mkdir(parents=True)
    shutil.copy2(ROOT / "course" / "01_names_views_storage.ipynb", root / "course")
    shutil.copytree(ROOT / "zh" / "course", root / "zh" / "course", ignore=lambda d, n: [x for x in n if not x.startswith("01_")])
    shutil.copytree(ROOT / "zh" / "exercises" / "a1_views", root / "zh" / "exercises" / "a1_views")
    nb = nbformat.read(root / "zh" / "course" / "01_names_views_storage.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "markdown" and "### `data_ptr()` 是张量的起始位置" in c.source)
    return root, cell.id


def test_in_a_chinese_notebook_the_kernel_shows_the_diagnosis_in_chinese_linking_to_the_chinese_lecture(
        monkeypatch, zh_course):
    from IPython.core.interactiveshell import InteractiveShell

    from autograder.kernel import checks as ck

    root, cell_id = zh_course
    shell = InteractiveShell.instance()
    published: list[dict] = []
    monkeypatch.setattr(shell.display_pub, "publish", lambda data, metadata=None, **kw: published.append(data),
                        raising=False)
    monkeypatch.setattr(shell, "kernel", object(), raising=False)
    monkeypatch.setenv("COPY_THAT_LANG", "zh")
    monkeypatch.chdir(root / "zh" / "exercises" / "a1_views")
    with pytest.raises(ck.CheckFailed) as failed:
        ck.check_equal(False, True, "shares_memory(a, a[1])",
                       hint="M-data-ptr-is-storage: a[1] is a view of a: it shows part of the same storage, 4 elements "
                            "in, so its data_ptr() differs from a's; compare the storages.")
    assert str(failed.value).startswith("shares_memory(a, a[1]) is False; expected True.")   # what is scored
    [line] = failed.value._render_traceback_()
    assert "此测试未通过" in line
    [data] = published
    html = data["text/html"]
    assert "../../course/01_names_views_storage.ipynb#cell-id=" + cell_id in html
    assert "course/01_names_views_storage.ipynb#data_ptr()-是张量的起始位置，不是它的存储" in html
    assert "误区" in html and "就是 `t` 的存储的地址" in html.replace("&#x27;", "'").replace("&#96;", "`")
    assert "shares_memory(a, a[1]) 为 False" in data["text/plain"] and "应为" in data["text/plain"]


def test_ok_lines_print_in_the_kernels_language(monkeypatch, capsys):
    from autograder.kernel import checks as ck

    monkeypatch.setenv("COPY_THAT_LANG", "zh")
    ck.ok("count_storages counts memory, not names")
    monkeypatch.setenv("COPY_THAT_LANG", "en")
    ck.ok("count_storages counts memory, not names")
    assert capsys.readouterr().out.splitlines() == ["\u2713 count_storages 数的是内存，不是名字",
                                                    "\u2713 count_storages counts memory, not names"]


def test_every_diagnosis_of_the_answer_corpus_is_shown_in_chinese():
    """Each failure the corpus's wrong answers produce (fast path: the instructor's notebooks, hidden
    tests included) is accounted for by the catalog, its parts translated."""
    from corpus import fast_path

    untranslated = []
    seen = 0
    for assignment, graded in fast_path().items():
        for student, nb in graded.notebooks.items():
            for cell in nb.cells:
                for out in cell.get("outputs", []):
                    if out.get("output_type") == "error" and out.get("ename") == "CheckFailed":
                        seen += 1
                        text, covered = i18n._translated(out["evalue"], "zh", 0)
                        if not covered or not any("\u4e00" <= ch <= "\u9fff" for ch in text):
                            untranslated.append((assignment, student, out["evalue"][:160]))
    assert seen > 200
    assert not untranslated, untranslated[:10]
