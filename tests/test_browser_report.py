"""The grading report as an instructor uses it, in Chromium (Playwright): the rows sorted by a
column, filtered by text and by kind, a student's feedback opened from the page; the page's one
script allowed by its hash and nothing else run, and the page whole without JavaScript."""
from __future__ import annotations

import subprocess
import sys

import pytest

from browser import CHROMIUM_FLAGS, require_browser
from harness import SANDBOX, reference_answers, scratch_course, submission, submit

PAYLOAD = "<img src=x onerror=\"document.title='pwned'\">"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Three students graded, their feedback generated: the report and what it links to."""
    root = scratch_course(tmp_path_factory.mktemp("report") / "c", "a1_views")
    submit(root, "a1_views", "alice", submission("a1_views"))
    submit(root, "a1_views", "bob", submission("a1_views", blank=True))
    wrong = reference_answers("a1_views")["plus_one"].replace("return", "return 1 + ", 1)
    submit(root, "a1_views", "carol", submission("a1_views", {
        "plus_one": wrong, "shares_memory": f"def shares_memory(a, b):\n    raise ValueError({PAYLOAD!r})\n"}))
    for command in (["grade", "a1_views", "--jobs", "1"], ["feedback", "a1_views"]):
        proc = subprocess.run([sys.executable, "-m", "autograder", *command], cwd=root, capture_output=True,
                              text=True, timeout=900)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return root


@pytest.fixture(scope="module")
def chromium():
    executable = require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


def names(page) -> list[str]:
    """The students' names of the rows shown, top to bottom."""
    return page.eval_on_selector_all("#students tbody tr:not([hidden]) td:first-child", "cells => cells.map(c => c.textContent)")


@SANDBOX
def test_the_report_sorts_filters_and_opens_a_students_feedback(graded, chromium):
    page = chromium.new_page()
    refused: list[str] = []
    page.on("console", lambda msg: refused.append(msg.text) if "Content Security Policy" in msg.text else None)
    page.goto((graded / "reports" / "a1_views" / "report.html").as_uri())
    assert page.is_visible("#controls"), "the script ran: its hash is in the policy"
    assert refused == [], refused
    assert sorted(names(page)) == ["alice", "bob", "carol"]

    score = page.locator("#students thead th", has_text="score").first
    score.locator("button").click()
    assert names(page) == ["bob", "carol", "alice"], "lowest score first"
    score.locator("button").click()
    assert names(page) == ["alice", "carol", "bob"], "then highest first"
    assert score.get_attribute("aria-sort") == "descending"

    page.fill("#filter", "car")
    assert names(page) == ["carol"]
    assert page.text_content("#shown") == "1 of 3 students shown"
    page.fill("#filter", "")
    page.select_option("#only", "pending")
    assert sorted(names(page)) == ["alice", "carol"], "bob left the written answer as handed out"
    page.select_option("#only", "")

    assert page.title() != "pwned" and PAYLOAD in page.text_content("body"), "student text stays text"
    row = page.locator("#students tbody tr", has_text="alice")
    row.locator("a", has_text="feedback").click()
    page.wait_for_load_state()
    assert page.url.endswith("/feedback/alice/a1_views/a1_views.html")
    assert "a1_views (Score: 13.0 / 15.0)" in page.content()
    page.close()


@SANDBOX
def test_without_javascript_the_report_shows_every_row(graded, chromium):
    context = chromium.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto((graded / "reports" / "a1_views" / "report.html").as_uri())
    assert not page.is_visible("#controls"), "no controls that would do nothing"
    assert sorted(names(page)) == ["alice", "bob", "carol"]
    assert page.locator("#students a", has_text="feedback").count() == 3
    context.close()
