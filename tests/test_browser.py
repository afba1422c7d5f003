"""What a learner and an instructor do, in JupyterLab, in a real browser.

The test starts ``jupyter lab`` on loopback in a temporary copy of the course (the repository's
notebooks are never touched) and drives Debian's Chromium, headless, with Playwright:

- a learner opens the start notebook and a lecture, runs all cells, and sees the memory diagram
  and the torchviz graph rendered as pictures, with no cell in error;
- a learner types a wrong answer into an exercise, runs it, and reads the diagnostic of the
  failing test: the misconception behind it and the lecture heading that refutes it;
- an instructor opens nbgrader's formgrader.

Screenshots go to ``$COPY_THAT_SCREENSHOTS`` (or a temporary folder, printed in the test output).
Without Chromium or Playwright the test is skipped, except under CI (``$CI`` set), where it fails.
``$COPY_THAT_CHROMIUM`` picks another Chromium or Chrome executable.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import nbformat
import pytest

from autograder.learner.cells import RELEASE_DIR, role
from autograder.course.layout import LECTURE_DIR, SOURCE_DIR, lectures
from harness import ROOT, free_port, stop

# The browser tests run after the parallel suite, alone on the machine (see the Makefile): beside
# parallel grading a JupyterLab kernel took over 150 s to run the start notebook.
pytestmark = pytest.mark.browser

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
SERVER_START_S = 90
RUN_ALL_S = 150
START = "00_start_here.ipynb"
EXERCISE = "a1_views"


def chromium_path() -> str | None:
    """``$COPY_THAT_CHROMIUM`` when set, else Debian's ``chromium`` on PATH."""
    chosen = os.environ.get("COPY_THAT_CHROMIUM")
    if chosen:
        return chosen if os.access(chosen, os.X_OK) else None
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None


def _require_browser() -> str:
    """The Chromium executable; skip (fail under CI) when it or Playwright is missing."""
    missing = []
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("Playwright for Python (`.venv/bin/pip install -r requirements.txt`)")
    chromium = chromium_path()
    if chromium is None:
        missing.append("Chromium (`sudo apt-get install chromium`; `make test-deps` does it as root)")
    if missing:
        message = "the browser test needs " + " and ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(message + " (CI is set: the browser test must run)", pytrace=False)
        pytest.skip(message)
    return chromium



def _course_copy(dest: Path) -> Path:
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    for folder in (LECTURE_DIR, RELEASE_DIR, SOURCE_DIR):  # solutions/ for the formgrader's list
        shutil.copytree(ROOT / folder, dest / folder, ignore=ignore)
    shutil.copy2(ROOT / "nbgrader_config.py", dest / "nbgrader_config.py")
    # An exchange of its own, as on a hub: the formgrader then offers release and collect.
    exchange = dest.parent / "exchange"
    exchange.mkdir()
    exchange.chmod(0o777)
    with open(dest / "nbgrader_config.py", "a") as config:
        config.write(f"\nc.Exchange.root = {str(exchange)!r}\n")
    return dest


def screenshot(page, path: Path, show=None) -> None:
    """Scroll ``show`` (a locator) to the top of the notebook, let the cells paint, and save the page."""
    if show is not None:
        show.evaluate("e => e.scrollIntoView({block: 'start'})")
        show.wait_for(state="visible")
    # JupyterLab paints cells scrolled into view lazily (content-visibility): give it two frames.
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    page.wait_for_timeout(300)
    page.screenshot(path=str(path))
    assert path.stat().st_size > 10_000, f"{path.name} is empty"
    if show is not None:  # the notebook area shows something, not a blank panel
        from PIL import Image

        box = page.locator(f"{PANEL} .jp-WindowedPanel-outer, {PANEL} .jp-Notebook").first.bounding_box()
        area = Image.open(path).convert("L").crop((int(box["x"]), int(box["y"]),
                                                   int(box["x"] + box["width"]), int(box["y"] + box["height"])))
        histogram = area.histogram()
        assert sum(histogram[:240]) / sum(histogram) > 0.01, f"{path.name}: the notebook area is blank"


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("COPY_THAT_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots: {folder}")
    return folder


def _start_lab(work: Path, instructor: bool):
    """Start ``copy-that lab`` (the command behind ``make lab`` and ``make lab-instructor``) on a
    copy of the course; yield (base URL, token, course folder)."""
    from autograder.learner.lab import lab_command, lab_environment

    course = _course_copy(work / "course-copy")
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ)
    env.pop("JUPYTER_CONFIG_PATH", None)
    for var, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_RUNTIME_DIR", "runtime"),
                     ("JUPYTERLAB_SETTINGS_DIR", "settings"), ("JUPYTERLAB_WORKSPACES_DIR", "workspaces")):
        env[var] = str(work / sub)
    # the terminal draws on a canvas; its screen-reader mode also writes the rows into the page
    settings = work / "settings" / "@jupyterlab" / "terminal-extension"
    settings.mkdir(parents=True)
    (settings / "plugin.jupyterlab-settings").write_text(json.dumps({"screenReaderMode": True}))
    # the lab's own PATH, without the test run's: the terminal must find copy-that by itself
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    env.pop("VIRTUAL_ENV", None)
    env = lab_environment(course, instructor=instructor, base=env)
    cmd = lab_command(course, port=port, start=None) + [
        f"--IdentityProvider.token={token}", "--LabServerApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    log = open(work / "jupyter.log", "w")
    server = subprocess.Popen(cmd, cwd=course, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if server.poll() is not None:
                pytest.fail(f"jupyter lab exited with {server.returncode}:\n{(work / 'jupyter.log').read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"jupyter lab did not answer in {SERVER_START_S} s:\n{(work / 'jupyter.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield base, token, course
    finally:
        stop(server)
        log.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The learner's lab (``make lab``): nbgrader's instructor tools hidden."""
    _require_browser()
    yield from _start_lab(tmp_path_factory.mktemp("lab"), instructor=False)


@pytest.fixture(scope="module")
def instructor_lab(tmp_path_factory):
    """The instructor's lab (``make lab-instructor``): formgrader and all."""
    _require_browser()
    yield from _start_lab(tmp_path_factory.mktemp("instructor-lab"), instructor=True)


@pytest.fixture(scope="module")
def browser(lab):
    from playwright.sync_api import sync_playwright

    chromium = _require_browser()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_FLAGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(60_000)
    try:
        yield pg
    finally:
        context.close()


# --- driving JupyterLab ---------------------------------------------------------------------

PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"


def dismiss_news(page) -> None:
    """Answer "No" to JupyterLab's first-start question about Jupyter news, if it is showing."""
    toast = page.locator(".jp-Notification-Toast-content, .Toastify__toast").filter(has_text="news")
    try:
        toast.first.wait_for(state="visible", timeout=3_000)
    except Exception:  # no toast this time
        return
    toast.first.get_by_role("button", name="No", exact=True).click()
    toast.first.wait_for(state="hidden", timeout=10_000)


def open_notebook(page, lab, rel: str):
    base, token, _ = lab
    page.goto(f"{base}/lab/tree/{urllib.parse.quote(rel)}?reset&token={token}")
    page.wait_for_selector(f"{PANEL} .jp-Cell", timeout=90_000)
    dismiss_news(page)
    page.wait_for_selector(f'{PANEL} .jp-Notebook-ExecutionIndicator[data-status="idle"]', timeout=90_000)
    return page.locator(f"{PANEL} .jp-Notebook .jp-Cell")


def menu(page, top: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(rf"^{re.escape(top)}$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(rf"^{re.escape(item)}$")).click()


def wait_all_executed(page, timeout_s: int = RUN_ALL_S) -> None:
    page.wait_for_function(
        """(panel) => {
            const prompts = [...document.querySelectorAll(panel + ' .jp-CodeCell .jp-InputArea-prompt')];
            return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
        }""", arg=PANEL, timeout=timeout_s * 1000)
    page.wait_for_selector(f'{PANEL} .jp-Notebook-ExecutionIndicator[data-status="idle"]')


def error_outputs(page) -> list[str]:
    return page.locator(f'{PANEL} .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]').all_inner_texts()


def rendered_images(page) -> list[dict]:
    """Every picture in the notebook's outputs: its data URL and whether the browser decoded it."""
    images = page.locator(f"{PANEL} .jp-OutputArea-output img")
    out = []
    for i in range(images.count()):
        img = images.nth(i)
        img.scroll_into_view_if_needed()
        img.evaluate("i => i.decode ? i.decode().catch(() => null) : null")
        out.append(img.evaluate("i => ({src: i.getAttribute('src') || '', width: i.naturalWidth, height: i.naturalHeight})"))
    return out


def svg_text(image: dict) -> str:
    src = image["src"]
    if src.startswith("data:image/svg+xml;base64,"):
        import base64
        return base64.b64decode(src.split(",", 1)[1]).decode("utf-8", "replace")
    return urllib.parse.unquote(src.split(",", 1)[1]) if "," in src else ""


def stored_image_outputs(path: Path) -> int:
    nb = nbformat.read(path, as_version=4)
    return sum(1 for c in nb.cells for o in c.get("outputs", [])
               if any(k.startswith("image/") for k in o.get("data", {})))


def run_lecture(page, lab, rel: str) -> list[dict]:
    """Open a lecture, run all cells, check no error and every picture rendered; return the pictures."""
    open_notebook(page, lab, rel)
    menu(page, "Run", "Run All Cells")
    wait_all_executed(page)
    errors = error_outputs(page)
    assert not errors, f"{rel}: a cell wrote an error or to stderr:\n{errors[0][:2000]}"
    images = rendered_images(page)
    expected = stored_image_outputs(lab[2] / rel)
    assert len(images) >= expected, f"{rel}: {len(images)} picture(s) rendered, the stored notebook has {expected}"
    broken = [i["src"][:60] for i in images if not (i["width"] > 0 and i["height"] > 0)]
    assert not broken, f"{rel}: picture(s) not rendered by the browser: {broken}"
    return images


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
    shown = test.locator(".jp-OutputArea-output").all_inner_texts()
    text = "\n".join(shown)
    assert "shares_memory(a, a.detach()) is False" in text, f"the failing test shows:\n{text[:2000]}"
    # the misconception behind the mistake, and the lecture heading that refutes it
    assert f"misconception {misconception.id}: {misconception.myth}" in text, text[:2000]
    assert f"read again: {misconception.link}" in text, text[:2000]
    # the diagnosis alone, a few lines: no traceback, no test source, no frame of checks.py
    assert "Traceback" not in text and "checks.py" not in text and "ck.check" not in text, text[:2000]
    assert text.lstrip().startswith("\u2717") and "expected:" in text, text[:2000]
    assert len([line for line in text.splitlines() if line.strip()]) <= 5, text[:2000]
    assert test.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]').count() == 1
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
    """a1 with correct answers, whose code displays hostile HTML, SVG and JavaScript, and whose
    written answer carries hostile markup and a javascript: link."""
    from harness import reference_answers
    from autograder.course.layout import fill_answers

    release = nbformat.read(course / RELEASE_DIR / EXERCISE / f"{EXERCISE}.ipynb", as_version=4)
    answers = reference_answers(EXERCISE)
    code_id = next(gid for gid, src in answers.items() if src.lstrip().startswith("def "))
    html = f'<img src=x onerror="{_attack("html")}"><script>{_attack("script")}</script>'
    svg = f'<svg xmlns="http://www.w3.org/2000/svg" onload="{_attack("svg")}"><circle r="5"/></svg>'
    answers[code_id] += (
        "\nfrom IPython.display import HTML, SVG, Javascript, Markdown, display\n"
        f"display(HTML({html!r}))\ndisplay(SVG({svg!r}))\ndisplay(Javascript({_attack('js')!r}))\n"
        f"display(Markdown({'[open me](javascript:' + _attack('mdout') + ')'!r}))\n")
    written = next(c for c in release.cells if c.cell_type == "markdown" and role(c).solution)
    answers[role(written).grade_id] = (f"My answer. <img src=x onerror=\"{_attack('answer')}\"> "
                                       f"[see here](javascript:{_attack('link')})")
    return fill_answers(release, answers)


def test_student_content_is_inert_in_the_formgrader(page, instructor_lab, shots):
    """Autograded with the course configuration, then opened in the formgrader's manual grading:
    no script of the student's runs, no file is created through the Jupyter API, no API request
    leaves the page, and the student's markup is still shown, as text."""
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
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        submission_id = gb.find_submission_notebook(EXERCISE, EXERCISE, "mallory").id

    api_calls: list[str] = []
    page.on("request", lambda r: api_calls.append(r.method + " " + r.url) if "/api/contents" in r.url else None)
    page.goto(f"{base}/formgrader/submissions/{submission_id}/?token={token}")
    page.get_by_text("My answer.").first.wait_for(timeout=60_000)
    page.wait_for_timeout(3000)   # time for an onerror or onload to fire, had it been live
    title = page.title()
    screenshot(page, shots / "6_formgrader_hostile_submission_inert.png")
    assert "PWNED" not in title, f"a student's script ran in the formgrader: title {title!r}"
    assert not [c for c in api_calls if "pwned" in c], api_calls
    assert not list(course.glob("pwned-*.txt")), "a file was created through the Jupyter API"
    body = page.locator("body").inner_text()
    assert "onerror" in body, "the student's markup is shown to the instructor as text"


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
    base, token, _ = lab
    page.goto(f"{base}/lab?reset&token={token}")
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^File$")).first.wait_for(timeout=90_000)
    dismiss_news(page)
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^File$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^New$")).hover()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Terminal$")).click()
    terminal = page.locator(".jp-Terminal:not(.lm-mod-hidden) .xterm").first
    terminal.wait_for(timeout=60_000)
    terminal.click()
    page.wait_for_timeout(1500)   # the shell's prompt
    page.keyboard.type(f"copy-that check {RELEASE_DIR}/{EXERCISE}/{EXERCISE}.ipynb\n")
    rows = ".jp-Terminal:not(.lm-mod-hidden) .xterm-accessibility-tree"
    try:
        page.wait_for_function(
            f"() => /visible tests pass/.test(document.querySelector({rows!r})?.innerText || '')",
            timeout=RUN_ALL_S * 1000)
    except Exception:
        screenshot(page, shots / "8_terminal_check_table_FAILED.png")
        pytest.fail("the terminal never showed the check table; it shows:\n"
                    + page.locator(".jp-Terminal:not(.lm-mod-hidden)").first.inner_text()[-3000:])
    text = page.locator(rows).inner_text()
    flat = " ".join(text.split())
    assert "command not found" not in flat and "ModuleNotFoundError" not in flat, text
    assert "0/5 visible tests pass" in flat, text       # the blank release: nothing done yet
    assert "test_shares_memory" in flat, "the table lists the visible tests"
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
