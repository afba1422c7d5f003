"""The Chinese edition in a real JupyterLab (``make lab EDITION=zh``: the course's ``zh/`` served,
its terminals and kernels told Chinese): a Chinese lecture opens and runs, a Chinese assignment's
failing test shows its diagnosis in Chinese with a "read again" link that opens the Chinese lecture
at its heading, and ``check`` in the lab's terminal prints its table and the diagnosis in Chinese.

The notebooks are the course's own translated ones; the test only adds, in its copy, a Chinese a1
with one wrong answer.  Screenshots go to ``$COPY_THAT_SCREENSHOTS`` (or a temporary folder).
"""
from __future__ import annotations

import nbformat
import pytest

from autograder.course.layout import fill_answers, solution_sources
from autograder.learner.cells import RELEASE_DIR, role
from browser import (PANEL, browser, open_notebook, page, require_browser, run_in_terminal, run_lecture,  # noqa: F401
                     screenshot, shots, start_lab)

pytestmark = pytest.mark.browser

LECTURE = "01_names_views_storage.ipynb"
HEADING = "`data_ptr()` 是张量的起始位置，不是它的存储"     # lecture 01's, as translated
WRONG = "def shares_memory(a, b):\n    return a.data_ptr() == b.data_ptr()\n"
EXERCISE = f"{RELEASE_DIR}/a1_views/chinese.ipynb"


def wrong_a1(course) -> None:
    """In the copy: a Chinese a1 with a wrong answer, the rest the reference's."""
    release = nbformat.read(course / "zh" / RELEASE_DIR / "a1_views" / "a1_views.ipynb", as_version=4)
    source = nbformat.read(course / "zh" / "solutions" / "a1_views" / "a1_views.ipynb", as_version=4)
    nbformat.write(fill_answers(release, {**solution_sources(source), "shares_memory": WRONG}),
                   course / "zh" / EXERCISE)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The learner's lab of the Chinese edition (``make lab EDITION=zh``)."""
    require_browser()
    yield from start_lab(tmp_path_factory.mktemp("zh-lab"), instructor=False, lang="zh", prepare=wrong_a1)


def test_a_chinese_lecture_opens_and_runs(page, lab, shots):
    run_lecture(page, lab, f"course/{LECTURE}")
    title = page.locator(f"{PANEL} .jp-RenderedMarkdown h1", has_text="名字、视图与存储").first
    title.wait_for(state="visible", timeout=30_000)
    screenshot(page, shots / "zh_01_lecture.png", title)


def test_a_chinese_assignment_shows_its_diagnosis_in_chinese_and_links_to_the_chinese_heading(page, lab, shots):
    nb = nbformat.read(lab[2] / EXERCISE, as_version=4)
    index = {role(c).grade_id: i for i, c in enumerate(nb.cells) if role(c).grade_id}
    cells = open_notebook(page, lab, EXERCISE)
    for i in (index["setup"], index["shares_memory"], index["test_shares_memory"]):
        cells.nth(i).locator(".jp-InputPrompt").first.click()
        page.keyboard.press("Shift+Enter")
        page.wait_for_function("c => /\\[\\d+\\]/.test(c.querySelector('.jp-InputPrompt')?.textContent || '')",
                               arg=cells.nth(i).element_handle(), timeout=120_000)
    test = cells.nth(index["test_shares_memory"])
    diagnosis = test.locator(".jp-OutputArea-output .ct-diagnosis").first
    diagnosis.wait_for(timeout=60_000)
    text = diagnosis.inner_text()
    screenshot(page, shots / "zh_02_diagnosis.png", test)
    assert "应为" in text and "可能的错误" in text and "误区" in text and "重读" in text, text
    assert "shares_memory(a, a[1]) 为 False" in text and "就是 `t` 的存储的地址" in text, text
    link = diagnosis.locator("a", has_text=HEADING.replace("`", "").replace(" ", "-"))
    link.click()
    page.locator(".lm-TabBar-tab.lm-mod-current", has_text=LECTURE).wait_for(timeout=60_000)
    heading = page.locator(f"{PANEL} .jp-RenderedMarkdown h3", has_text="是张量的起始位置").first
    heading.wait_for(state="visible", timeout=60_000)
    page.wait_for_timeout(1000)          # the scroll settles
    box = heading.bounding_box()
    screenshot(page, shots / "zh_03_lecture_at_the_heading.png")
    assert box is not None and 0 <= box["y"] <= page.viewport_size["height"] - 50, f"the heading is not in view: {box}"


def test_check_in_the_labs_terminal_speaks_chinese(page, lab, shots):
    text = run_in_terminal(page, lab, f"copy-that check {EXERCISE}", "个可见测试通过", shots / "zh_04_terminal")
    flat = " ".join(text.split())
    screenshot(page, shots / "zh_04_terminal.png")
    assert "3/4 个可见测试通过" in flat, text
    assert "误区" in flat and "就是 `t` 的存储的地址" in flat, text
    row = next(line for line in text.splitlines() if "shares_memory" in line and "隐藏" not in line)
    assert "\u2717" in row and "0/1" in row, row
    assert "\u2713 add_one_ 写入张量自己的内存" in flat, text      # a passed test's line, in Chinese too
