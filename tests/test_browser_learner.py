"""The learner's loop in a real JupyterLab (``copy-that lab``), with real clicks: an answer and its
explanation hidden until asked for, a diagnosis whose "read again" opens the lecture at the heading,
a test that never returns shown as failed by ``check`` in the lab's terminal, a wrong picture answer
shown as wrong, Run All reaching the end of a fresh exercise, and a lab that opens notebooks
unmodified, without a question about Jupyter news.

Screenshots go to ``$COPY_THAT_SCREENSHOTS`` (or a temporary folder, printed in the test output).
"""
from __future__ import annotations

import json
import time
import urllib.request

import nbformat
import pytest

from autograder.learner.cells import RELEASE_DIR, role
from autograder.kernel.misconceptions import BY_ID
from browser import (PANEL, browser, lab, open_notebook, page, run_in_terminal, screenshot, shots)  # noqa: F401
from harness import reference_answers, submission

pytestmark = pytest.mark.browser

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def write(lab, rel: str, nb: nbformat.NotebookNode) -> str:
    path = lab[2] / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    nb.metadata.setdefault("kernelspec", KERNELSPEC)
    nbformat.write(nb, path)
    return rel


def cells_of(page):
    return page.locator(f"{PANEL} .jp-Notebook .jp-Cell")


def run_cells(page, cells, indices: list[int]) -> None:
    """Run these cells one by one (select, Shift+Enter), each to its end."""
    for i in indices:
        cells.nth(i).locator(".jp-InputPrompt").first.click()
        page.keyboard.press("Shift+Enter")
        page.wait_for_function("c => /\\[\\d+\\]/.test(c.querySelector('.jp-InputPrompt')?.textContent || '')",
                               arg=cells.nth(i).element_handle(), timeout=120_000)


def idle_after_run_all(page, timeout_s: int = 180) -> None:
    """Wait until Run All has stopped, at the end or at a cell that failed."""
    deadline = time.monotonic() + timeout_s
    quiet = 0
    while time.monotonic() < deadline:
        busy = page.evaluate(f"""() => [...document.querySelectorAll('{PANEL} .jp-CodeCell .jp-InputPrompt')]
                                   .some(p => p.textContent.includes('*'))""")
        quiet = 0 if busy else quiet + 1
        if quiet >= 4:
            return
        page.wait_for_timeout(500)
    pytest.fail(f"Run All was still running after {timeout_s} s")


def rendered(page, text: str):
    """The rendered markdown that holds ``text`` (not the cell's editor, which holds it too)."""
    return page.locator(f"{PANEL} .jp-RenderedMarkdown", has_text=text).first


def output(page, text: str):
    return page.locator(f"{PANEL} .jp-OutputArea-output", has_text=text).first


def test_a_collapsed_explanation_is_hidden_when_the_notebook_opens_and_shown_by_a_click(page, lab, shots):
    """JupyterLab honours ``source_hidden`` on a markdown cell at load; its placeholder previews nothing."""
    code = nbformat.v4.new_code_cell("print(7)", outputs=[nbformat.v4.new_output("stream", name="stdout",
                                                                               text="OUTPUT-SEVEN\n")])
    code.metadata["jupyter"] = {"outputs_hidden": True}
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("**Predict:** what does QUESTION-TEXT print?"), code,
        nbformat.v4.new_markdown_cell("EXPLAINED-ANSWER: it prints seven.",
                                      metadata={"tags": ["answer"], "jupyter": {"source_hidden": True}}),
        nbformat.v4.new_markdown_cell("NEXT-STEP: now change it.", metadata={"tags": ["no-spoiler"]}),
    ])
    open_notebook(page, lab, write(lab, "scratch/reveal.ipynb", nb))
    cells = cells_of(page)
    answer = cells.nth(2)
    for shown in ("QUESTION-TEXT", "NEXT-STEP"):      # the question and what follows it stay in view
        rendered(page, shown).wait_for(state="visible", timeout=30_000)
    assert not rendered(page, "EXPLAINED-ANSWER").is_visible(), "the explanation is in view before the guess"
    assert not output(page, "OUTPUT-SEVEN").is_visible(), "the answer is in view before the guess"
    placeholder = answer.locator(".jp-InputPlaceholder").first
    assert placeholder.is_visible(), "the collapsed explanation shows no placeholder to click"
    preview = answer.locator(".jp-InputPlaceholder .jp-PlaceholderText")
    assert preview.count() == 0 or not preview.first.is_visible(), \
        f"the placeholder previews the explanation: {preview.first.inner_text()!r}"
    screenshot(page, shots / "10_explanation_collapsed.png", cells.first)
    placeholder.click()
    rendered(page, "EXPLAINED-ANSWER").wait_for(state="visible", timeout=30_000)
    cells.nth(1).locator(".jp-OutputPlaceholder").first.click()
    output(page, "OUTPUT-SEVEN").wait_for(state="visible", timeout=30_000)
    screenshot(page, shots / "11_explanation_revealed.png", cells.first)


def test_the_read_again_link_opens_the_lecture_at_its_heading(page, lab, shots):
    m = BY_ID["M-id-is-memory"]
    rel = write(lab, f"{RELEASE_DIR}/a1_views/link.ipynb",
                submission("a1_views", {"shares_memory": "def shares_memory(a, b):\n    return a is b\n"}))
    nb = nbformat.read(lab[2] / rel, as_version=4)
    index = {role(c).grade_id: i for i, c in enumerate(nb.cells) if role(c).grade_id}
    cells = open_notebook(page, lab, rel)
    run_cells(page, cells, [index["setup"], index["shares_memory"], index["test_shares_memory"]])
    test = cells.nth(index["test_shares_memory"])
    link = test.locator(".jp-OutputArea-output a", has_text=m.link)
    link.wait_for(timeout=30_000)
    screenshot(page, shots / "12_diagnosis_with_link.png", test)
    link.click()
    lecture = m.lecture.rsplit("/", 1)[1]
    page.locator(".lm-TabBar-tab.lm-mod-current", has_text=lecture).wait_for(timeout=60_000)
    heading = page.locator(f'{PANEL} [data-jupyter-id="{m.link.partition("#")[2]}"], '
                           f'{PANEL} [id="{m.link.partition("#")[2]}"]').first
    heading.wait_for(state="visible", timeout=60_000)
    page.wait_for_timeout(1000)          # the scroll settles
    box = heading.bounding_box()
    height = page.viewport_size["height"]
    screenshot(page, shots / "13_lecture_opened_at_the_heading.png")
    assert box is not None and 0 <= box["y"] <= height - 50, f"the heading is not in view: {box}"


def test_a_test_that_never_returns_is_a_cross_in_check_in_the_labs_terminal(page, lab, shots):
    from answers.a1_views import LOOPS

    loop = next(a for a in LOOPS if a.cell == "count_storages")
    write(lab, f"{RELEASE_DIR}/a1_views/loops.ipynb", submission("a1_views", {loop.cell: loop.source}))
    text = run_in_terminal(page, lab, f"copy-that check {RELEASE_DIR}/a1_views/loops.ipynb --timeout 10",
                           "visible tests pass", shots / "14_terminal_timeout", timeout_s=300)
    flat = " ".join(text.split())
    screenshot(page, shots / "14_terminal_timeout.png")
    assert "3/4 visible tests pass" in flat, text
    row = next(line for line in text.splitlines() if "count_storages" in line and "hidden" not in line)
    assert "\u2717" in row and "0/1" in row and "\u2713" not in row, row
    assert "timed out after 10 s" in flat, text


def test_exercises_open_unmodified_and_close_with_their_kernel_without_a_news_question(page, lab, shots):
    from autograder.learner.lab_contents import kernel_language_info

    base, token, course = lab
    rel = f"{RELEASE_DIR}/a2_clone/a2_clone.ipynb"
    stored = nbformat.read(course / rel, as_version=4).metadata.get("language_info")
    assert stored != kernel_language_info(), "the stored notebook already says what the kernel reports"
    page.goto(f"{base}/lab/tree/{rel}?reset&token={token}")
    page.wait_for_selector(f'{PANEL} .jp-Notebook-ExecutionIndicator[data-status="idle"]', timeout=90_000)
    page.wait_for_timeout(4000)          # the kernel's info has arrived; a news toast would be up
    news = page.locator(".jp-Notification-Toast-content, .Toastify__toast").filter(has_text="news")
    assert news.count() == 0, "JupyterLab asks about Jupyter news"
    tab = page.locator(".lm-TabBar-tab.lm-mod-current", has_text="a2_clone.ipynb")
    assert "jp-mod-dirty" not in (tab.get_attribute("class") or ""), "the notebook opened marked unsaved"
    screenshot(page, shots / "15_exercise_opened_unmodified.png")

    def sessions() -> list[str]:
        with urllib.request.urlopen(f"{base}/api/sessions?token={token}", timeout=30) as reply:
            return [s["path"] for s in json.loads(reply.read())]

    assert rel in sessions()
    tab.locator(".lm-TabBar-tabCloseIcon").click()
    deadline = time.monotonic() + 30
    while rel in sessions() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert rel not in sessions(), "closing the notebook left its kernel running"
    log = (course.parent / "jupyter.log").read_text()
    assert "Culling kernels with idle durations > 1800 seconds" in log, "the lab culls no idle kernel"


def test_a_wrong_picture_answer_is_shown_as_wrong(page, lab, shots):
    """a7's picture question: a wrong letter is not shown as passed, in the notebook or by check."""
    import re

    right = re.search(r'^graph_answer\s*=\s*"(\w)"', reference_answers("a7_graphs")["graph_answer"], re.M).group(1)
    wrong = next(x for x in "ABCD" if x != right)
    rel = write(lab, f"{RELEASE_DIR}/a7_graphs/picture.ipynb",
                submission("a7_graphs", {"graph_answer": f'graph_answer = "{wrong}"\n'}))
    nb = nbformat.read(lab[2] / rel, as_version=4)
    index = {role(c).grade_id: i for i, c in enumerate(nb.cells) if role(c).grade_id}
    cells = open_notebook(page, lab, rel)
    run_cells(page, cells, [index["setup"], index["graph_answer"], index["test_graph_answer"]])
    test = cells.nth(index["test_graph_answer"])
    shown = "\n".join(test.locator(".jp-OutputArea-output").all_inner_texts())
    screenshot(page, shots / "16_wrong_picture_answer.png", test)
    assert "\u2713" not in shown, f"a wrong letter is shown as passed:\n{shown}"
    text = run_in_terminal(page, lab, f"copy-that check {rel}", "visible tests pass", shots / "17_picture_check")
    row = next(line for line in text.splitlines() if "graph_answer" in line and "hidden" not in line)
    assert "\u2713" not in row, f"check counts a wrong letter as passed: {row}"


def test_run_all_reaches_the_end_of_a_fresh_exercise(page, lab, shots):
    """In a7 as handed out, Run All draws the mystery graph of §3 and runs every cell, the unfinished
    functions' tests included."""
    rel = f"{RELEASE_DIR}/a7_graphs/a7_graphs.ipynb"
    cells = open_notebook(page, lab, rel)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    idle_after_run_all(page)
    nb = nbformat.read(lab[2] / rel, as_version=4)
    prompts = page.evaluate(f"""() => [...document.querySelectorAll('{PANEL} .jp-Notebook > .jp-WindowedPanel-viewport > .jp-Cell, {PANEL} .jp-Notebook .jp-Cell')]
                                .filter(c => c.classList.contains('jp-CodeCell'))
                                .map(c => c.querySelector('.jp-InputPrompt')?.textContent || '')""")
    first_unrun = next((i for i, p in enumerate(prompts) if "[ ]" in p or not any(ch.isdigit() for ch in p)), None)
    mystery = cells.nth(next(i for i, c in enumerate(nb.cells) if role(c).grade_id == "mystery_graph"))
    screenshot(page, shots / "18_run_all_fresh_exercise.png", mystery)
    assert first_unrun is None, f"Run All stopped: code cell {first_unrun} of {len(prompts)} never ran"
    assert mystery.locator(".jp-OutputArea-output img").count() >= 1, "the mystery graph is not drawn"
