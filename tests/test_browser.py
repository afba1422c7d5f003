"""What a learner and an instructor do, in JupyterLab, in a real browser.

The test starts ``jupyter lab`` on loopback in a temporary copy of the course (the repository's
notebooks are never touched) and drives Debian's Chromium, headless, with Playwright:

- a learner opens the start notebook and a lecture, runs all cells, and sees the memory diagram
  and the torchviz graph rendered as pictures, with no cell in error;
- a learner types a wrong answer into an exercise, runs it, and reads the diagnostic of the
  failing test: the myth behind it and a link to the lecture heading that refutes it;
- an instructor opens nbgrader's formgrader.

Screenshots go to ``$COPY_THAT_SCREENSHOTS`` (or a temporary folder, printed in the test output).
Without Chromium or Playwright the test is skipped, except under CI (``$CI`` set), where it fails.
``$COPY_THAT_CHROMIUM`` picks another Chromium or Chrome executable.
"""
from __future__ import annotations

import base64
import json
import re
import time
import urllib.parse
import urllib.request
from pathlib import Path

import nbformat
import pytest

from autograder.learner.cells import RELEASE_DIR, role
from autograder.course.layout import LECTURE_DIR, SOURCE_DIR, lectures
from browser import (PANEL, RUN_ALL_S, START, browser, dismiss_news, error_outputs, instructor_lab, lab,  # noqa: F401
                     menu, open_notebook, page, rendered_images, run_in_terminal, run_lecture, screenshot, shots,
                     svg_text)

# The browser tests run after the parallel suite, alone on the machine (see the Makefile): beside
# parallel grading a JupyterLab kernel took over 150 s to run the start notebook.
pytestmark = pytest.mark.browser

EXERCISE = "a1_views"


# --- the tests ------------------------------------------------------------------------------

def test_learner_runs_the_start_notebook_and_a_lecture_and_sees_the_pictures(page, lab, shots):
    images = run_lecture(page, lab, f"{LECTURE_DIR}/{START}")
    texts = [svg_text(i) for i in images]
    diagram = [i for i, t in zip(images, texts) if "storage" in t]
    graph = [i for i, t in zip(images, texts) if "AccumulateGrad" in t]
    assert diagram, "the memory diagram is not shown as a picture (is Graphviz's dot installed?)"
    assert graph, "the torchviz autograd graph is not shown as a picture"
    outputs = page.locator(f"{PANEL} .jp-OutputArea-output img")
    srcs = [i["src"] for i in images]
    cell_of = lambda img: outputs.nth(srcs.index(img["src"])).locator("xpath=ancestor::div[contains(@class, 'jp-CodeCell')]")
    screenshot(page, shots / "1_start_here_memory_diagram.png", cell_of(diagram[0]))
    screenshot(page, shots / "2_start_here_autograd_graph.png", cell_of(graph[0]))

    # The first lecture after the start notebook, whichever it is: run it whole.
    lecture = next(p for p in lectures(lab[2]) if p.name != START)
    images = run_lecture(page, lab, f"{LECTURE_DIR}/{lecture.name}")
    assert images, f"{lecture.name} shows no picture"
    first_picture = page.locator(f"{PANEL} .jp-CodeCell").filter(has=page.locator(".jp-OutputArea-output img")).first
    screenshot(page, shots / f"3_lecture_{lecture.stem}.png", first_picture)


def test_learner_runs_an_exercise_and_reads_the_diagnostic_of_a_failing_test(page, lab, shots):
    from answers import a1_views as corpus
    from autograder.kernel.misconceptions import BY_ID

    wrong = next(a for a in corpus.WRONG if a.cell == "shares_memory" and "`is`" in a.why)
    misconception = BY_ID["M-id-is-memory"]
    rel = f"{RELEASE_DIR}/{EXERCISE}/{EXERCISE}.ipynb"
    nb = nbformat.read(lab[2] / rel, as_version=4)
    index = {role(c).grade_id: i for i, c in enumerate(nb.cells) if role(c).grade_id}
    cells = open_notebook(page, lab, rel)

    # Type the wrong answer over the function's stub, as a learner would.
    answer = cells.nth(index[wrong.cell])
    answer.locator(".cm-content").click()
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.insert_text(wrong.source.strip() + "\n")
    page.keyboard.press("Escape")
    assert wrong.source.strip().splitlines()[-1].strip() in answer.locator(".cm-content").inner_text()

    # Run everything: every test cell carries raises-exception, so the run goes on to the end;
    # the test of this function shows its failure.
    menu(page, "Run", "Run All Cells")
    test = cells.nth(index[f"test_{wrong.cell}"])
    test.locator(".jp-OutputArea-output").first.wait_for(timeout=RUN_ALL_S * 1000)
    # Run All went on past the failing tests (and the unanswered predictions) to the last code cell
    last = cells.nth(max(i for i, c in enumerate(nb.cells) if c.cell_type == "code")).locator(".jp-InputPrompt")
    deadline = time.monotonic() + RUN_ALL_S
    while not re.search(r"\[\d+\]", last.text_content() or "") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert re.search(r"\[\d+\]", last.text_content() or ""), f"Run All stopped before the last code cell: {last.text_content()!r}"
    page.wait_for_selector(f'{PANEL} .jp-Notebook-ExecutionIndicator[data-status="idle"]')
    test.scroll_into_view_if_needed()      # the run ended at the bottom of the notebook
    # JupyterLab renders a cell scrolled back into view a moment later (the notebook is windowed)
    deadline = time.monotonic() + 30
    text = ""
    while "is False" not in text and time.monotonic() < deadline:
        time.sleep(0.5)
        text = "\n".join(test.locator(".jp-OutputArea-output").all_inner_texts())
    assert "shares_memory(a, a.detach()) is False" in text, f"the failing test shows:\n{text[:2000]}"
    # the misconception behind the mistake, and the lecture heading that refutes it
    assert f"Myth: {misconception.myth}" in text and "misconception" not in text, text[:2000]
    assert f"read again: {misconception.link}" in text, text[:2000]
    # the diagnosis alone, a few lines: no traceback, no test source, no frame of checks.py
    assert "Traceback" not in text and "checks.py" not in text and "ck.check" not in text, text[:2000]
    assert text.lstrip().startswith("\u2717") and "expected:" in text, text[:2000]
    assert len([line for line in text.splitlines() if line.strip()]) <= 6, text[:2000]
    # the diagnosis (with its link), then the error the test is scored on
    assert test.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]').count() == 1
    assert test.locator(".jp-OutputArea-output a").count() == 1
    # the failing test with its diagnosis, down to the misconception's link
    screenshot(page, shots / "4_exercise_failing_test_diagnostic.png", test)
    out = test.locator(".jp-OutputArea-output").first.bounding_box()
    assert out and out["y"] + out["height"] <= page.viewport_size["height"], "the diagnosis is cut off in the screenshot"


def test_instructor_opens_the_formgrader(page, instructor_lab, shots):
    base, token, course = instructor_lab
    page.goto(f"{base}/formgrader?token={token}")
    page.get_by_text("Manage Assignments").first.wait_for()
    first = sorted(p.name for p in (course / SOURCE_DIR).iterdir() if p.is_dir())[0]
    page.get_by_text(first, exact=True).first.wait_for(timeout=60_000)
    assert page.get_by_text("does not exist").count() == 0, "the formgrader says the exchange is missing"
    screenshot(page, shots / "5_instructor_formgrader.png")


# --- student content is inert for the instructor ----------------------------------------------

# Each payload, if it ran, would change the page title and create a file through the Jupyter API
# with the instructor's session (the XSRF token is in a cookie the page can read).
def _attack(tag: str) -> str:
    return ("document.title='PWNED-" + tag + "';"
            "fetch('/api/contents/pwned-" + tag + ".txt',{method:'PUT',headers:{'Content-Type':'application/json',"
            "'X-XSRFToken':(document.cookie.match(/_xsrf=([^;]+)/)||[])[1]},"
            "body:JSON.stringify({type:'file',format:'text',content:'pwned'})})")


def _hostile_submission(course: Path) -> nbformat.NotebookNode:
    """a1 with correct answers, whose code displays hostile HTML, SVG, JavaScript, markdown links
    and an image whose size metadata is markup, and whose written answer writes script links in
    every markdown form (inline, reference, autolink, entity-encoded, data:, raw HTML)."""
    from harness import reference_answers
    from autograder.course.layout import fill_answers

    release = nbformat.read(course / RELEASE_DIR / EXERCISE / f"{EXERCISE}.ipynb", as_version=4)
    answers = reference_answers(EXERCISE)
    code_id = next(gid for gid, src in answers.items() if src.lstrip().startswith("def "))
    html = f'<img src=x onerror="{_attack("html")}"><script>{_attack("script")}</script>'
    svg = f'<svg xmlns="http://www.w3.org/2000/svg" onload="{_attack("svg")}"><circle r="5"/></svg>'
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGBgAAAABQABpfZFQAAAAABJRU5ErkJggg=="
    md_out = f"[out-ref][r]\n\n[r]: javascript:{_attack('mdref')}\n\n<javascript:{_attack('mdauto')}>"
    answers[code_id] += (
        "\nfrom IPython.display import HTML, SVG, Javascript, Markdown, display\n"
        f"display(HTML({html!r}))\ndisplay(SVG({svg!r}))\ndisplay(Javascript({_attack('js')!r}))\n"
        f"display(Markdown({'[open me](javascript:' + _attack('mdout') + ')'!r}))\n"
        f"display(Markdown({md_out!r}))\n"
        f"display({{'image/png': {png!r}}}, raw=True, metadata={{'image/png': "
        f"{{'width': '1 src=x onerror={_attack('width')}'}}}})\n")
    written = next(c for c in release.cells if c.cell_type == "markdown" and role(c).solution)
    data_page = base64.b64encode(f"<script>{_attack('data')}</script>".encode()).decode()
    answers[role(written).grade_id] = (
        f"My answer. <img src=x onerror=\"{_attack('answer')}\"> [see here](javascript:{_attack('link')})\n\n"
        f"[reference link][bad]\n\n[bad]: javascript:{_attack('ref')}\n\n"
        f"<javascript:{_attack('auto')}>\n\n"
        f"[encoded](&#106;avascript:{_attack('encoded')})\n\n"
        f"[data page](data:text/html;base64,{data_page})\n\n"
        f"<a href=\"javascript:{_attack('raw')}\">raw link</a>\n")
    return fill_answers(release, answers)


def _log_in_at_the_root(page, base: str, token: str) -> None:
    """As an instructor does: the token at the server's root, so the login cookie's path is /."""
    page.goto(f"{base}/?token={token}")
    page.wait_for_load_state()
    paths = {c["name"]: c["path"] for c in page.context.cookies()}
    assert any(name.startswith("username-") and path == "/" for name, path in paths.items()), paths


def _api_works_from(page, course: Path) -> None:
    """The control: a script the page itself runs does reach the Jupyter API with this session, so
    a payload that ran would have left its file."""
    page.evaluate(f"async () => {{ {_attack('control')}; await new Promise(r => setTimeout(r, 1000)); }}")
    made = course / "pwned-control.txt"
    deadline = time.monotonic() + 10
    while not made.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert made.exists(), "the control script could not write through the API: the test would see nothing"
    made.unlink()
    page.evaluate("document.title = 'clean'")


def _nothing_ran(page, course: Path, api_calls: list[str], where: str) -> None:
    title = page.title()
    assert "PWNED" not in title, f"a student's script ran in {where}: title {title!r}"
    assert not [c for c in api_calls if "pwned" in c], api_calls
    made = [p.name for p in course.glob("pwned-*.txt")]
    assert not made, f"{where}: a file was created through the Jupyter API: {made}"


def _no_live_link(page, where: str) -> None:
    """No link or frame in the page's DOM goes to a script or a data: page (the reference-style
    and autolink forms survive autograding as markdown: only the rendering's sanitizer stops them)."""
    live = page.evaluate("""() => [...document.querySelectorAll('[href], [src], [action], [formaction]')]
        .map(e => e.getAttribute('href') || e.getAttribute('src') || e.getAttribute('action') || e.getAttribute('formaction'))
        .filter(u => /^\\s*(javascript|vbscript|data:text)/i.test(u) || /script:/i.test(u))""")
    assert live == [], f"{where} has live script targets: {live[:5]}"


def _click_every_link(page, url: str, course: Path, api_calls: list[str], where: str, scope: str = "body") -> int:
    """Open ``url`` afresh for each link in ``scope`` and click it; nothing may run."""
    page.goto(url)
    page.wait_for_load_state()
    count = page.locator(f"{scope} a").count()
    for i in range(count):
        page.goto(url)
        page.wait_for_load_state()
        page.evaluate("document.title = 'clean'")
        link = page.locator(f"{scope} a").nth(i)
        if not link.is_visible():
            continue
        try:
            link.click(timeout=5_000, no_wait_after=True)
        except Exception:        # covered, detached: nothing was clicked
            continue
        page.wait_for_timeout(700)
        _nothing_ran(page, course, api_calls, f"{where}, after a click on link {i}")
    return count


def test_student_content_is_inert_in_the_formgrader_and_the_feedback(page, instructor_lab, shots):
    """Autograded with the course configuration, then opened as an instructor logged in at the
    server's root: the formgrader's manual grading page and the feedback file.  No script of the
    student's runs, with no click or after a click on any link; no file is created through the
    Jupyter API; the student's markup is still shown, as text."""
    from autograder.course.build import run_nbgrader
    from nbgrader.api import Gradebook

    base, token, course = instructor_lab
    assert run_nbgrader("generate_assignment", EXERCISE, "--force", cwd=course).returncode == 0
    target = course / "submitted" / "mallory" / EXERCISE / f"{EXERCISE}.ipynb"
    target.parent.mkdir(parents=True)
    nbformat.write(_hostile_submission(course), target)
    graded = run_nbgrader("autograde", EXERCISE, "--student", "mallory", cwd=course)
    assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-3000:]
    stored = nbformat.read(course / "autograded" / "mallory" / EXERCISE / f"{EXERCISE}.ipynb", as_version=4)
    shown = "".join(json.dumps(c.get("outputs", [])) if c.cell_type == "code" else c.source for c in stored.cells)
    for live in ("<img src=x onerror", "<script>", "<svg", "application/javascript", "](javascript:"):
        assert live not in shown, f"what the stored notebook shows still holds {live!r}"
    assert "onerror" in shown, "the hostile outputs and answer were stored, made inert"
    feedback = run_nbgrader("generate_feedback", EXERCISE, "--student", "mallory", "--force", cwd=course)
    assert feedback.returncode == 0, feedback.stdout[-3000:] + feedback.stderr[-3000:]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        submission_id = gb.find_submission_notebook(EXERCISE, EXERCISE, "mallory").id

    api_calls: list[str] = []
    page.on("request", lambda r: api_calls.append(r.method + " " + r.url) if "/api/contents" in r.url else None)
    _log_in_at_the_root(page, base, token)
    grading = f"{base}/formgrader/submissions/{submission_id}/"
    page.goto(grading)
    page.get_by_text("My answer.").first.wait_for(timeout=60_000)
    _api_works_from(page, course)
    api_calls.clear()             # the control's own request
    page.goto(grading)
    page.get_by_text("My answer.").first.wait_for(timeout=60_000)
    page.wait_for_timeout(3000)   # time for an onerror or onload to fire, had it been live
    screenshot(page, shots / "6_formgrader_hostile_submission_inert.png")
    _nothing_ran(page, course, api_calls, "the formgrader")
    body = page.locator("body").inner_text()
    assert "onerror" in body, "the student's markup is shown to the instructor as text"
    _no_live_link(page, "the formgrader")
    clicked = _click_every_link(page, grading, course, api_calls, "the formgrader", scope="#notebook-container")
    assert clicked >= 6, f"the student's links are gone rather than disarmed ({clicked} links)"

    # the feedback file as its learner opens it: a file of their own, in the browser
    report = (course / "feedback" / "mallory" / EXERCISE / f"{EXERCISE}.html").as_uri()
    page.goto(report)
    page.wait_for_load_state()
    assert "My answer." in page.locator("body").inner_text(), "the feedback file shows the written answer"
    page.wait_for_timeout(3000)
    _nothing_ran(page, course, api_calls, "the feedback file")
    _no_live_link(page, "the feedback file")
    assert _click_every_link(page, report, course, api_calls, "the feedback file") >= 6


# --- the learner's lab and its terminal -------------------------------------------------------

def _nbgrader_ui(page) -> dict[str, int]:
    """How many of nbgrader's instructor controls the page shows."""
    return {
        "Nbgrader menu": page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Nbgrader$")).count(),
        "Validate button": page.locator(".jp-Toolbar-item", has_text=re.compile(r"Validate")).count(),
        "Create Assignment panel": page.locator("[title*='Create Assignment' i], [data-id*='create-assignment' i]").count(),
    }


def test_the_learner_lab_hides_the_instructor_tools_the_instructor_lab_shows_them(page, lab, instructor_lab, shots):
    rel = f"{RELEASE_DIR}/{EXERCISE}/{EXERCISE}.ipynb"
    # control first: the same notebook in the instructor's lab shows nbgrader's tools
    open_notebook(page, instructor_lab, rel)
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Nbgrader$")).first.wait_for(timeout=60_000)
    shown = _nbgrader_ui(page)
    assert shown["Nbgrader menu"] and shown["Validate button"] and shown["Create Assignment panel"], shown
    base, token, _ = instructor_lab
    assert urllib.request.urlopen(f"{base}/formgrader?token={token}", timeout=30).status == 200

    open_notebook(page, lab, rel)
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).first.wait_for()
    page.wait_for_timeout(2000)   # extensions are all loaded by now: the menu bar is complete
    hidden = _nbgrader_ui(page)
    assert not any(hidden.values()), f"the learner's lab shows instructor tools: {hidden}"
    base, token, _ = lab
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{base}/formgrader?token={token}", timeout=30)
    assert refused.value.code == 404, "the learner's server has no formgrader"
    screenshot(page, shots / "7_learner_lab_without_instructor_tools.png",
               page.locator(f"{PANEL} .jp-Notebook .jp-Cell").first)


def test_the_printed_check_command_works_in_a_jupyterlab_terminal(page, lab, shots):
    """What the notebooks print (`copy-that check …`), typed into File → New → Terminal."""
    text = run_in_terminal(page, lab, f"copy-that check {RELEASE_DIR}/{EXERCISE}/{EXERCISE}.ipynb",
                           "visible tests pass", shots / "8_terminal_check_table")
    flat = " ".join(text.split())
    assert "command not found" not in flat and "ModuleNotFoundError" not in flat, text
    assert "0/5 visible tests pass" in flat, text       # the blank release: nothing done yet
    assert "shares_memory" in flat and "test_shares_memory" not in flat, "the table lists the visible tests by name"
    screenshot(page, shots / "8_terminal_check_table.png")


def test_the_answer_to_a_prediction_is_collapsed_until_the_learner_asks(page, lab, shots):
    """A revealing cell's stored output is not on screen before the guess: one click shows it."""
    lecture = next(p for p in lectures(lab[2]) if p.name != START)
    nb = nbformat.read(lecture, as_version=4)
    collapsed = [c for c in nb.cells if c.cell_type == "code" and c.metadata.get("jupyter", {}).get("outputs_hidden")]
    assert collapsed, f"{lecture.name} has no collapsed answer"
    open_notebook(page, lab, f"{LECTURE_DIR}/{lecture.name}")
    placeholders = page.locator(f"{PANEL} .jp-OutputPlaceholder")
    placeholders.first.wait_for(timeout=60_000)
    cell = placeholders.first.element_handle().evaluate_handle("e => e.closest('.jp-CodeCell')").as_element()
    shown = lambda: cell.evaluate("c => [...c.querySelectorAll('.jp-OutputArea-output')].some(o => o.offsetParent !== null)")
    assert not shown(), "the answer is on screen before the learner asked for it"
    preview = cell.query_selector(".jp-OutputPlaceholder .jp-PlaceholderText")
    assert preview is None or not preview.is_visible(), \
        f"the collapsed output previews its first line: {preview.inner_text()[:80]!r}"
    cell.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    page.screenshot(path=str(shots / "9_prediction_answer_collapsed.png"))
    cell.query_selector(".jp-OutputPlaceholder").click()
    page.wait_for_function("c => [...c.querySelectorAll('.jp-OutputArea-output')].some(o => o.offsetParent !== null)",
                           arg=cell, timeout=30_000)
