"""The learner's commands in the Chinese edition: ``check``, ``--watch``, ``progress``, ``answers``
and ``lab`` speak Chinese for a Chinese notebook (its metadata says so), English with ``--lang en``
or ``COPY_THAT_LANG=en``, and "read again" names the Chinese lecture's heading."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.course.layout import fill_answers, solution_sources
from autograder.learner.selfcheck import CheckReport
from autograder.learner.selfcheck import TestResult as Result
from harness import ROOT

WRONG = "def shares_memory(a, b):\n    return a.data_ptr() == b.data_ptr()\n"
HEADING = "`data_ptr()` 是张量的起始位置，不是它的存储"     # lecture 01's, as translated


def run(args: list[str], cwd: Path, env: dict | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "COPY_THAT_LANG"}
    return subprocess.run([sys.executable, "-m", "autograder", *args], cwd=cwd, capture_output=True, text=True,
                          env={**base, "COLUMNS": "250", **(env or {})}, input=stdin, timeout=600)


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """A clone of the course with both editions, and a Chinese a1 whose shares_memory is wrong (the other answers are the reference's)."""
    root = tmp_path_factory.mktemp("zh-learner") / "course"
    shutil.copytree(ROOT / "course", root / "course")
    for folder in ("course", "solutions", "exercises"):
        shutil.copytree(ROOT / "zh" / folder, root / "zh" / folder)
    release = root / "zh" / "exercises" / "a1_views" / "a1_views.ipynb"
    source = nbformat.read(root / "zh" / "solutions" / "a1_views" / "a1_views.ipynb", as_version=4)
    answers = {**solution_sources(source), "shares_memory": WRONG}
    nbformat.write(fill_answers(nbformat.read(release, as_version=4), answers), release)
    return root


def test_check_speaks_chinese_for_a_chinese_notebook_and_names_the_chinese_heading(course):
    out = run(["check", "exercises/a1_views/a1_views.ipynb"], course / "zh")
    text = flat(out.stdout)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "可见测试" in text and "3/4 个可见测试通过" in text, text
    assert "shares_memory(a, a[1]) 为 False；应为：True。可能的错误：a[1] 是 a 的视图" in text, text
    assert "误区: `t.data_ptr()` 就是 `t` 的存储的地址。" in text
    assert f"重读: course/01_names_views_storage.ipynb#{HEADING.replace('`', '').replace(' ', '-')}" in text, text
    assert "尚未完成: 1 个测试待修正。" in text
    assert "\u2713 add_one_ 写入张量自己的内存" in text, text


def test_check_speaks_english_when_asked(course):
    for args, env in ((["--lang", "en"], None), ([], {"COPY_THAT_LANG": "en"})):
        out = run(["check", "exercises/a1_views/a1_views.ipynb", *args], course / "zh", env)
        text = flat(out.stdout)
        assert "3/4 visible tests pass" in text and "Myth: `t.data_ptr()` is the address" in text, text
        assert "可见测试" not in text


def test_an_english_notebook_gets_chinese_with_the_option(course, tmp_path):
    from harness import submission

    nb = tmp_path / "a1_views.ipynb"
    nbformat.write(submission("a1_views", {"shares_memory": WRONG}), nb)
    text = flat(run(["check", str(nb), "--lang", "zh"], tmp_path).stdout)
    assert "3/4 个可见测试通过" in text and "误区" in text, text


def test_progress_speaks_the_language_of_the_exercises(course):
    out = run(["progress", "--no-cache"], course / "zh")
    text = flat(out.stdout)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "你的进度" in text and "未开始" in text and "未通过" in text, text
    assert "shares_memory：CheckFailed：shares_memory(a, a[1]) 为 False" in text, text
    assert "已完成 0/10 个练习" in text
    assert "your progress" in run(["progress", "--lang", "en"], course / "zh").stdout


def test_answers_asks_and_labels_in_chinese(course):
    folder = course / "zh" / "exercises" / "a2_clone"
    out = run(["answers"], folder, stdin="")
    assert out.returncode == 2 and "--yes" in out.stdout and "参考答案会直接揭晓解法" in out.stdout, out.stdout
    out = run(["answers", "--yes"], folder)
    assert out.returncode == 0 and "def graph_copy" in out.stdout and "书面回答的参考答案" in out.stdout
    assert "zh/solutions/a2_clone/a2_clone.ipynb" in flat(out.stdout).replace(" ", "")


def test_watch_prints_its_lines_and_the_hint_in_chinese(tmp_path):
    from rich.console import Console

    from autograder.learner.watch import watch_check

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell('def f(t):\n    """Do it.\n\n    Hint: 原地修改 t。\n    """\n    return t\n')
    cell.metadata["nbgrader"] = {"grade_id": "f", "solution": True, "grade": False, "locked": False}
    nb.cells.append(cell)
    path = tmp_path / "x.ipynb"
    nbformat.write(nb, path)
    report = CheckReport(path, [Result("test_f", 0.0, 1.0, "failed", "CheckFailed: x")], [], [])
    console = Console(record=True, width=200)
    watch_check(path, lambda: report, console, interval=0.01, max_runs=1, lang="zh")
    text = console.export_text()
    assert "f() 的提示： 原地修改 t。" in text and "正在监视 x.ipynb" in text, text


def test_the_lab_serves_the_chinese_edition_from_its_own_folder(course, tmp_path):
    from autograder.learner.lab import START, edition_folder

    assert edition_folder(course, "zh") == course / "zh" and edition_folder(course, None) == course
    assert edition_folder(course / "zh", "zh") == course / "zh"
    assert (course / "zh" / START).is_file()
    with pytest.raises(FileNotFoundError, match="no Chinese edition"):
        edition_folder(tmp_path, "zh")
