"""The Chinese edition (zh/) against the English one: the parity gate, ``zh sync`` and ``zh stamp``.

The gate passes only when every cell is translated and current: until the notebooks' prose is
translated ``test_the_parity_gate_passes`` fails, by design.  The structure (cells, code, outputs,
metadata, grading) is held apart and must pass at every commit.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.course.parity import TRANSLATION_KINDS, check_course
from autograder.course.translation import (HASH, META, SAME, STALE, TRANSLATED, UNSTAMPED, UNTRANSLATED, cell_state,
                                           code_tokens, english_hash, pairs, stamp_file, sync_course)
from autograder.learner.cells import LECTURE_DIR, RELEASE_DIR, SOURCE_DIR
from harness import ROOT

LECTURE = "03_detach.ipynb"
ASSIGNMENT = "a1_views"


def run_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


# --- the repository ---------------------------------------------------------------------------

def test_every_english_notebook_has_a_chinese_counterpart_with_the_same_cells_code_and_outputs():
    report = check_course(ROOT)
    structural = [p.describe() for p in report.problems if p.kind not in TRANSLATION_KINDS]
    assert not structural, "\n".join(structural[:20])
    assert len(pairs(ROOT)) == len(list((ROOT / LECTURE_DIR).glob("*.ipynb"))) + len(list((ROOT / SOURCE_DIR).glob("*/*.ipynb")))


def test_the_parity_gate_passes():
    """The whole gate, translation included: `python -m autograder zh check` exits 0."""
    proc = run_cli("zh", "check")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_the_chinese_release_is_what_nbgrader_generates_from_the_chinese_solutions():
    from autograder.course import build

    report = build.check(ROOT, "zh")
    assert report.in_sync, report.describe()
    assert sorted(p.name for p in (ROOT / "zh" / RELEASE_DIR).iterdir()) == sorted(
        p.name for p in (ROOT / RELEASE_DIR).iterdir() if p.is_dir())


def test_each_release_holds_its_own_editions_notebooks_only():
    import json

    from autograder.course.layout import assignments
    from autograder.kernel.i18n import notebook_lang

    english = sorted((ROOT / RELEASE_DIR).rglob("*.ipynb"))
    chinese = sorted((ROOT / "zh" / RELEASE_DIR).rglob("*.ipynb"))
    assert english and chinese and not [p for p in english if "zh" in p.relative_to(ROOT / RELEASE_DIR).parts]
    assert {notebook_lang(json.loads(p.read_text())) for p in english} == {"en"}
    assert {notebook_lang(json.loads(p.read_text())) for p in chinese} == {"zh"}
    assert "zh" not in assignments(ROOT)


# --- a small course to change ----------------------------------------------------------------

@pytest.fixture
def course(tmp_path):
    """A course with one lecture and one assignment in both editions, as `zh sync` makes them."""
    root = tmp_path / "course"
    (root / LECTURE_DIR).mkdir(parents=True)
    shutil.copy2(ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    shutil.copy2(ROOT / LECTURE_DIR / LECTURE, root / LECTURE_DIR / LECTURE)
    shutil.copytree(ROOT / SOURCE_DIR / ASSIGNMENT, root / SOURCE_DIR / ASSIGNMENT)
    sync_course(root)
    return root


def lecture(root: Path, edition: str = "zh") -> Path:
    return root / ("zh/" if edition == "zh" else "") / LECTURE_DIR / LECTURE


def assignment(root: Path, edition: str = "zh") -> Path:
    return root / ("zh/" if edition == "zh" else "") / SOURCE_DIR / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"


def edit(path: Path, cell_id: str, change) -> None:
    nb = nbformat.read(path, as_version=4)
    [cell] = [c for c in nb.cells if c.id == cell_id]
    change(cell)
    nbformat.write(nb, path)


def translate(path: Path, cell_id: str, text: str) -> None:
    def change(cell):
        cell.source = text
    edit(path, cell_id, change)


def kinds(root: Path, only=None) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for p in check_course(root, only).problems:
        found.setdefault(p.kind, set()).add(p.cell or p.where)
    return found


def test_sync_makes_notebooks_marked_chinese_whose_prose_is_untranslated(course):
    found = kinds(course)
    assert set(found) == {UNTRANSLATED}, found
    nb = nbformat.read(lecture(course), as_version=4)
    assert nb.metadata[META] == {"lang": "zh"}
    assert "cell-00" in found[UNTRANSLATED]          # the title
    assert "setup" not in found[UNTRANSLATED]        # a locked cell: nothing to translate


def test_a_test_changed_in_one_edition_only_fails_the_gate(course):
    edit(assignment(course), "test_shares_memory", lambda c: setattr(c, "source", c.source.replace("a[1]", "a[2]")))
    assert "test_shares_memory" in kinds(course).get("code", set())
    sync_course(course)                         # back in step: English wins
    edit(assignment(course, "en"), "test_add_one_", lambda c: setattr(c, "source", c.source + "\nck.ok('more')"))
    assert "test_add_one_" in kinds(course).get("code", set())


def test_a_translated_comment_in_a_test_cell_fails_but_one_in_an_answer_cell_passes(course):
    edit(assignment(course), "test_plus_one", lambda c: setattr(c, "source", c.source.replace(
        "# graded outside your kernel", "# 在你的内核之外评分")))
    assert "test_plus_one" in kinds(course).get("code", set())
    sync_course(course)
    edit(assignment(course), "plus_one", lambda c: setattr(c, "source", c.source.replace(
        "Return a new tensor equal to t + 1; leave t exactly as it was.", "返回等于 t + 1 的新张量；t 保持原样。")))
    found = kinds(course)
    assert "code" not in found and "plus_one" in found[UNSTAMPED]
    assert stamp_file(course, assignment(course)) == ["plus_one"]
    assert "plus_one" not in kinds(course).get(UNTRANSLATED, set()) | kinds(course).get(UNSTAMPED, set())


def test_changed_code_in_an_answer_cell_fails(course):
    edit(assignment(course), "plus_one", lambda c: setattr(c, "source", c.source.replace("return t + 1", "return t.add(1)")))
    assert "plus_one" in kinds(course)["code"]


def test_a_stale_paragraph_fails_until_translated_again(course):
    translate(lecture(course), "cell-02", "## 1. `detach()` 返回什么\n\n**预测：**……")
    stamp_file(course, lecture(course))
    only = [lecture(course)]
    assert "cell-02" not in set().union(*kinds(course, only).values())
    edit(lecture(course, "en"), "cell-02", lambda c: setattr(c, "source", c.source + " And its version counter?"))
    assert kinds(course, only)[STALE] == {"cell-02"}
    sync_course(course)                                     # sync keeps the (stale) translation
    assert "预测" in nbformat.read(lecture(course), as_version=4).cells[2].source
    assert kinds(course, only)[STALE] == {"cell-02"}
    assert stamp_file(course, lecture(course), ["cell-02"]) == ["cell-02"]
    assert STALE not in kinds(course)


def test_a_changed_output_tag_or_point_fails(course):
    def output(cell):
        cell.outputs[0]["text"] = cell.outputs[0]["text"].replace("True", "False")
    edit(lecture(course), "cell-03", output)
    edit(lecture(course), "cell-04", lambda c: c.metadata["jupyter"].pop("outputs_hidden"))
    edit(assignment(course), "test_count_storages", lambda c: c.metadata["nbgrader"].update(points=5))
    found = kinds(course)
    assert "cell-03" in found["outputs"]
    assert {"cell-04", "test_count_storages"} <= found["metadata"]


def test_cells_added_removed_or_reordered_in_one_edition_fail_and_sync_repairs_them(course):
    nb = nbformat.read(lecture(course), as_version=4)
    nb.cells[1], nb.cells[2] = nb.cells[2], nb.cells[1]
    nb.cells.append(nbformat.v4.new_markdown_cell("多出来的一段", id="zh-only"))
    nbformat.write(nb, lecture(course))
    assert "cells" in kinds(course)
    translate(lecture(course), "cell-00", "# 03 — `detach()`：同一块内存，离开计算图")
    stamp_file(course, lecture(course), ["cell-00"])
    notes = sync_course(course)[f"zh/{LECTURE_DIR}/{LECTURE}"]
    assert notes.removed == ["zh-only"]
    assert set(kinds(course)) == {UNTRANSLATED}
    assert nbformat.read(lecture(course), as_version=4).cells[0].source.startswith("# 03 — `detach()`：")


def test_sync_adds_a_new_english_cell_untranslated_and_resets_comments_when_code_changes(course):
    edit(lecture(course), "cell-01", lambda c: setattr(c, "source", c.source.replace(
        '"""Run fn and print the exception it raises (first sentence of long messages)."""',
        '"""运行 fn 并打印它抛出的异常（长消息只取第一句）。"""')))
    stamp_file(course, lecture(course))
    nb = nbformat.read(lecture(course, "en"), as_version=4)
    nb.cells.insert(3, nbformat.v4.new_markdown_cell("A new paragraph.", id="new-one"))
    nbformat.write(nb, lecture(course, "en"))
    notes = sync_course(course)[f"zh/{LECTURE_DIR}/{LECTURE}"]
    assert notes.added == ["new-one"] and "new-one" in notes.untranslated
    assert "运行 fn" in nbformat.read(lecture(course), as_version=4).cells[1].source
    edit(lecture(course, "en"), "cell-01", lambda c: setattr(c, "source", c.source.replace("torch.manual_seed(0)", "torch.manual_seed(1)")))
    notes = sync_course(course)[f"zh/{LECTURE_DIR}/{LECTURE}"]
    assert notes.reset == ["cell-01"]
    assert "运行 fn" not in nbformat.read(lecture(course), as_version=4).cells[1].source
    assert "code" not in kinds(course)


def test_a_translation_without_the_glossarys_core_term_fails(course):
    shutil.copytree(ROOT / "docs", course / "docs")
    translate(lecture(course), "cell-05", "两个张量对象，同一块存储。`d` 不带历史（`grad_fn` 为 `None`），所以它算作"
                                          "一个不需要梯度的叶子；用 `d` 算出的任何东西都到不了 `x`。")
    stamp_file(course, lecture(course))
    assert "glossary" not in kinds(course, [lecture(course)])
    translate(lecture(course), "cell-05", "两个对象，一块内存。")
    stamp_file(course, lecture(course), ["cell-05"])
    problems = [p for p in check_course(course, [lecture(course)]).problems if p.kind == "glossary"]
    assert {p.cell for p in problems} == {"cell-05"}
    assert {p.text.split("term is ")[1].split()[0] for p in problems} == {"张量", "存储", "叶子"}


def test_the_fixtures_and_extra_notebooks_are_checked(course):
    (assignment(course).parent / "fixtures.py").write_text("X = 1\n")
    (course / "zh" / LECTURE_DIR / "99_extra.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    found = kinds(course)
    assert found["files"] and found["extra"]
    sync_course(course, prune=True)
    assert set(kinds(course)) == {UNTRANSLATED}
    assert not (assignment(course).parent / "fixtures.py").exists()


def test_one_notebook_is_checked_alone_from_either_edition(course):
    edit(assignment(course), "test_shares_memory", lambda c: setattr(c, "source", "pass"))
    alone = check_course(course, [lecture(course)])
    assert {p.where for p in alone.problems} == {f"zh/{LECTURE_DIR}/{LECTURE}"}
    assert "code" in kinds(course, [assignment(course, "en")])


def test_cell_states():
    md = nbformat.v4.new_markdown_cell("The view shares storage.")
    zh = nbformat.v4.new_markdown_cell("The view shares storage.")
    assert cell_state(md, zh, "lecture") == UNTRANSLATED
    zh.source = "视图与原张量共享存储。"
    assert cell_state(md, zh, "lecture") == UNSTAMPED
    zh.metadata[META] = {HASH: english_hash(md.source)}
    assert cell_state(md, zh, "lecture") == TRANSLATED
    md.source += " Always."
    assert cell_state(md, zh, "lecture") == STALE
    code = nbformat.v4.new_code_cell("x = 1  # int64")
    assert cell_state(code, nbformat.v4.new_code_cell("x = 1  # int64"), "lecture") == SAME
    assert code_tokens('def f():\n    """Doc."""\n    return 1  # one\n') == code_tokens('def f():\n    """文档。"""\n\n    return 1\n')
    assert code_tokens("x = 1") != code_tokens("x = 2")
    # an older English text, stamped against the English as it is now, is still no translation
    old = nbformat.v4.new_markdown_cell("The view shares its storage.")
    old.metadata[META] = {HASH: english_hash(md.source)}
    assert cell_state(md, old, "lecture") == UNTRANSLATED
    # a cell kept identical on purpose (stamped by name) stays translated
    same = nbformat.v4.new_markdown_cell(md.source)
    same.metadata[META] = {HASH: english_hash(md.source)}
    assert cell_state(md, same, "lecture") == TRANSLATED


# --- nbgrader and the build, per edition -----------------------------------------------------------

def test_the_edition_variable_selects_the_folders_of_nbgrader_and_refuses_other_values(tmp_path):
    from traitlets.config import PyFileConfigLoader

    def load(value):
        code = ("import os\nif {v!r} is not None: os.environ['COPY_THAT_EDITION'] = {v!r}\n"
                "from traitlets.config import PyFileConfigLoader\n"
                "c = PyFileConfigLoader('nbgrader_config.py', path={root!r}).load_config()\n"
                "print(c.CourseDirectory.source_directory, c.CourseDirectory.release_directory)").format(v=value, root=str(ROOT))
        env = {k: v for k, v in __import__("os").environ.items() if k != "COPY_THAT_EDITION"}
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)

    assert load(None).stdout.split() == ["solutions", "exercises"]
    assert load("zh").stdout.split() == ["zh/solutions", "zh/exercises"]
    bad = load("fr")
    assert bad.returncode != 0 and "COPY_THAT_EDITION='fr'" in bad.stderr
    assert "zh" in PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config().CourseDirectory.ignore


def test_plain_nbgrader_releases_each_edition_into_its_own_folder(course):
    from autograder.course.build import run_nbgrader

    proc = run_nbgrader("generate_assignment", ASSIGNMENT, "--force", cwd=course, edition="zh")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (course / "zh" / RELEASE_DIR / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").is_file()
    assert not (course / RELEASE_DIR).exists()
    released = nbformat.read(course / "zh" / RELEASE_DIR / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    assert released.metadata[META] == {"lang": "zh"}
    proc = run_nbgrader("generate_assignment", "*", "--force", cwd=course, edition="en")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in (course / RELEASE_DIR).iterdir()) == [ASSIGNMENT]


def test_build_check_covers_both_editions(course):
    proc = run_cli("build", cwd=course)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "zh/exercises/" in proc.stdout
    assert run_cli("build", "--check", cwd=course).returncode == 0
    release = course / "zh" / RELEASE_DIR / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    release.write_text(release.read_text().replace("Four small functions", "Five small functions"))
    proc = run_cli("build", "--check", cwd=course)
    assert proc.returncode == 1 and f"changed: {ASSIGNMENT}/{ASSIGNMENT}.ipynb" in proc.stdout, proc.stdout
    assert "exercises/ is exactly what nbgrader generates from solutions/" in proc.stdout
