"""Driving JupyterLab in a real browser for the browser tests: start ``copy-that lab`` on a copy of
the course, open notebooks and terminals in Debian's Chromium with Playwright, take screenshots.

The fixtures (``lab``, ``instructor_lab``, ``browser``, ``page``, ``shots``) are imported by each
browser test module, which then gets its own lab (module scope)."""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import nbformat
import pytest

from autograder.learner.cells import RELEASE_DIR
from autograder.course.layout import LECTURE_DIR, SOURCE_DIR
from harness import ROOT, free_port, stop

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
SERVER_START_S = 90
RUN_ALL_S = 300      # a limit for a loaded machine, never a measure of speed
START = "00_start_here.ipynb"


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


def require_browser() -> str:
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



def course_copy(dest: Path) -> Path:
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    for folder in (LECTURE_DIR, RELEASE_DIR, SOURCE_DIR, "zh"):  # solutions/ for the formgrader's list
        if (ROOT / folder).is_dir():
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


def start_lab(work: Path, instructor: bool, lang: str | None = None, prepare=None):
    """Start ``copy-that lab`` (the command behind ``make lab`` and ``make lab-instructor``; with
    ``lang="zh"``, ``make lab EDITION=zh``: the Chinese edition) on a copy of the course, after
    ``prepare(course)``; yield (base URL, token, the folder served)."""
    from autograder.kernel.i18n import LANG_ENV
    from autograder.learner.lab import edition_folder, lab_command, lab_environment

    course = course_copy(work / "course-copy")
    if prepare is not None:
        prepare(course)
    course = edition_folder(course, lang)
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
    if lang and lang != "en":
        env[LANG_ENV] = lang
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
    require_browser()
    yield from start_lab(tmp_path_factory.mktemp("lab"), instructor=False)


@pytest.fixture(scope="module")
def instructor_lab(tmp_path_factory):
    """The instructor's lab (``make lab-instructor``): formgrader and all."""
    require_browser()
    yield from start_lab(tmp_path_factory.mktemp("instructor-lab"), instructor=True)


@pytest.fixture(scope="module")
def browser(lab):
    from playwright.sync_api import sync_playwright

    chromium = require_browser()
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


def wait_all_executed(page, path: Path | None = None, timeout_s: int = RUN_ALL_S, again=None) -> None:
    """Wait until every code cell of the open notebook has run.  The prompts say so; where the
    kernel has gone idle and some prompts still do not (a cell scrolled out of view may keep its
    old prompt, or the run stopped at an error), the notebook is saved and ``path`` read: once the
    save is seen on disk, the saved execution counts decide, and a run that stopped at an error
    fails at once, saying where.  A save not seen on disk decides nothing (the file then still holds
    the lecture as stored, every cell numbered: a whole run failed so, its pictures never drawn).
    A run that stopped without an error, or whose save was not seen (seen on a loaded machine: the
    kernel idle and the cells' counts cleared, as when the request is lost or the kernel restarted,
    a dialog perhaps in the way), is asked for again, once, through ``again``, after any dialog is
    closed."""
    all_numbered = """(panel) => {
        const prompts = [...document.querySelectorAll(panel + ' .jp-CodeCell .jp-InputArea-prompt')];
        return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
    }"""
    indicator = page.locator(f"{PANEL} .jp-Notebook-ExecutionIndicator")
    deadline = time.monotonic() + timeout_s
    idle_since, seen = None, []
    while not page.evaluate(all_numbered, PANEL):
        now = time.monotonic()
        idle = indicator.get_attribute("data-status") == "idle"
        idle_since = (idle_since or now) if idle else None
        if idle_since is not None and now - idle_since > 15 and path is not None:
            seen += close_dialogs(page)
            saved = _not_run_when_saved(page, path)
            if saved is not None and not saved[0]:
                break
            errors = saved[1] if saved is not None else []
            if again is not None and not errors:
                again()
                again, idle_since = None, None
                continue
            if saved is not None:
                raise AssertionError(f"{path.name}: the kernel is idle but code cells {saved[0][:8]} never ran"
                                     + (f"; the run stopped at: {errors[0][:1500]}" if errors else "")
                                     + (f"; dialogs: {seen}" if seen else ""))
            idle_since = None      # the save was not seen: look again after another quiet spell
        if now > deadline:
            raise TimeoutError(f"Run All did not finish in {timeout_s} s (kernel {'idle' if idle else 'busy'})"
                               + (f"; dialogs: {seen}" if seen else ""))
        page.wait_for_timeout(2_000)
    page.wait_for_selector(f'{PANEL} .jp-Notebook-ExecutionIndicator[data-status="idle"]')


def close_dialogs(page) -> list[str]:
    """Close any dialog JupyterLab shows (a kernel that restarted says so in one); their texts."""
    texts = []
    dialogs = page.locator(".jp-Dialog")
    for _ in range(3):
        if dialogs.count() == 0:
            break
        texts.append(dialogs.first.inner_text()[:300])
        page.keyboard.press("Escape")
        page.wait_for_timeout(500)
    return texts


def _not_run_when_saved(page, path: Path) -> tuple[list[int], list[str], int] | None:
    """Save the open notebook; (indexes of code cells without an execution count, error texts,
    how many code cells it has), or None when the save did not reach the disk in 15 s."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    page.keyboard.press("Escape")
    page.keyboard.press("Control+s")
    for _ in range(30):
        if path.exists() and path.stat().st_mtime_ns != before:
            break
        page.wait_for_timeout(500)
    else:
        return None
    page.wait_for_timeout(500)     # the write seen may not be the last one of the save
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    missing = [i for i, c in enumerate(code) if c.get("execution_count") is None]
    errors = [f"{o.get('ename')}: {o.get('evalue')}" for c in code for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    return missing, errors, len(code)


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
    """Open a lecture, clear its stored outputs, run all cells, check no error and every picture
    rendered; return the pictures."""
    open_notebook(page, lab, rel)
    # the stored outputs go first: what is then drawn and numbered was drawn by this run
    menu(page, "Edit", "Clear Outputs of All Cells")
    page.wait_for_function("sel => document.querySelectorAll(sel).length === 0",
                           arg=f"{PANEL} .jp-OutputArea-output img", timeout=30_000)
    menu(page, "Run", "Run All Cells")
    wait_all_executed(page, lab[2] / rel, again=lambda: menu(page, "Run", "Run All Cells"))
    errors = error_outputs(page)
    assert not errors, f"{rel}: a cell wrote an error or to stderr:\n{errors[0][:2000]}"
    expected = stored_image_outputs(lab[2] / rel)
    try:       # outputs are drawn as they arrive: give the last ones a moment
        page.wait_for_function("([sel, n]) => document.querySelectorAll(sel).length >= n",
                               arg=[f"{PANEL} .jp-OutputArea-output img", expected], timeout=30_000)
    except Exception:
        pass   # the assertion below says how many were drawn
    images = rendered_images(page)
    assert len(images) >= expected, f"{rel}: {len(images)} picture(s) rendered, the stored notebook has {expected}"
    broken = [i["src"][:60] for i in images if not (i["width"] > 0 and i["height"] > 0)]
    assert not broken, f"{rel}: picture(s) not rendered by the browser: {broken}"
    return images


def run_in_terminal(page, lab, command: str, until: str, shot: Path, timeout_s: int = RUN_ALL_S) -> str:
    """Type ``command`` into a new JupyterLab terminal (File → New → Terminal) and wait until its
    screen matches the regular expression ``until``; the screen's text.  On a timeout, a
    screenshot ``<shot>_FAILED.png`` and the screen's text in the failure."""
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
    page.keyboard.type(command + "\n")
    rows = ".jp-Terminal:not(.lm-mod-hidden) .xterm-accessibility-tree"
    try:
        page.wait_for_function(
            "([rows, until]) => new RegExp(until).test(document.querySelector(rows)?.innerText || '')",
            arg=[rows, until], timeout=timeout_s * 1000)
    except Exception:
        screenshot(page, shot.with_name(shot.name + "_FAILED.png"))
        pytest.fail(f"the terminal never showed /{until}/; it shows:\n"
                    + page.locator(".jp-Terminal:not(.lm-mod-hidden)").first.inner_text()[-3000:])
    return page.locator(rows).inner_text()
