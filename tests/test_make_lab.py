"""`make lab` (the README's first command) serves JupyterLab on loopback at the start notebook."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from harness import ROOT, free_port, stop



def _make_lab(tmp_path: Path, env: dict, *extra: str) -> tuple[subprocess.Popen, Path]:
    if not (ROOT / ".venv" / ".installed").exists():
        pytest.skip("the tests run outside `make test`: .venv/.installed is missing")
    port = free_port()
    log = tmp_path / "lab.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(["make", "--no-print-directory", "lab", f"PORT={port}", *extra], cwd=ROOT, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                env=dict(env, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime")))
    return proc, log


def _wait_for_line(proc, log: Path, pattern: str, timeout: float = 150) -> re.Match:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(pattern, log.read_text())
        if m:
            return m
        assert proc.poll() is None, log.read_text()[-3000:]
        time.sleep(0.5)
    raise AssertionError("JupyterLab did not start: " + log.read_text()[-3000:])


def _no_browser_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER")}
    env.pop("COPY_THAT_LAB", None)
    return env


def test_make_lab_serves_the_course_root_and_ends_with_one_line_holding_its_address(tmp_path):
    proc, log = _make_lab(tmp_path, _no_browser_env())
    try:
        m = _wait_for_line(proc, log, r"Copy That is ready: open (http://127\.0\.0\.1:\d+/\S*token=([0-9a-f]+))\n")
        url, token = m.group(1), m.group(2)
        # JupyterLab's start-up log is not printed: the address is the last line, and one of two
        lines = [line for line in log.read_text().splitlines() if line.strip()]
        assert lines[-1].endswith(url) and len(lines) <= 3, lines
        assert "/lab/tree/course/00_start_here.ipynb?" in url
        base = url.split("/lab/")[0]
        # the line comes once the server answers: no wait needed
        urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=10).close()

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args, **kwargs):
                return None

        opener = urllib.request.build_opener(NoRedirect)
        try:
            opener.open(f"{base}/?token={token}", timeout=30)
            location = ""
        except urllib.error.HTTPError as redirect:
            location = redirect.headers.get("Location", "")
        assert "/lab/tree/course/00_start_here.ipynb" in location
        listing = urllib.request.urlopen(f"{base}/api/contents?token={token}", timeout=30).read()
        for folder in (b'"course"', b'"exercises"'):
            assert folder in listing, "the file browser shows the course root"
        # the exercises open unmodified: the contents manager fills in what the kernel will report
        nb = json.loads(urllib.request.urlopen(
            f"{base}/api/contents/exercises/a1_views/a1_views.ipynb?token={token}", timeout=30).read())
        from autograder.learner.lab_contents import kernel_language_info

        assert nb["content"]["metadata"]["language_info"] == kernel_language_info()
    finally:
        stop(proc, group=True, grace=30)


def test_make_lab_edition_zh_serves_the_chinese_edition_in_chinese(tmp_path):
    proc, log = _make_lab(tmp_path, _no_browser_env(), "EDITION=zh")
    try:
        m = _wait_for_line(proc, log, r"Copy That 已就绪：请打开 (http://127\.0\.0\.1:\d+/\S*token=([0-9a-f]+))\n")
        url, token = m.group(1), m.group(2)
        assert "/lab/tree/course/00_start_here.ipynb?" in url
        base = url.split("/lab/")[0]
        nb = json.loads(urllib.request.urlopen(
            f"{base}/api/contents/course/00_start_here.ipynb?token={token}", timeout=30).read())
        assert nb["content"]["metadata"]["copy_that"] == {"lang": "zh"}, "the lab serves zh/, the Chinese edition"
        listing = json.loads(urllib.request.urlopen(f"{base}/api/contents?token={token}", timeout=30).read())
        assert {"course", "exercises"} <= {item["name"] for item in listing["content"]}
        assert "solutions" in {item["name"] for item in listing["content"]}   # zh/solutions, as at the root
    finally:
        stop(proc, group=True, grace=30)


def test_make_lab_opens_the_learners_browser_where_there_is_one(tmp_path):
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser"
    browser.write_text(f"#!/bin/sh\necho \"$1\" > {opened}\n")
    browser.chmod(0o755)
    proc, log = _make_lab(tmp_path, dict(_no_browser_env(), BROWSER=str(browser)))
    try:
        m = _wait_for_line(proc, log, r"Copy That is open at (http://\S+)\n")
        assert opened.read_text().strip() == m.group(1)
        assert "/lab/tree/course/00_start_here.ipynb?token=" in m.group(1)
    finally:
        stop(proc, group=True, grace=30)


def test_a_text_browser_or_no_display_is_no_browser_to_open(monkeypatch):
    import webbrowser

    from autograder.learner import lab

    for var in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(lab.sys, "platform", "linux")
    assert not lab.browser_available()
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.setattr(webbrowser, "get", lambda *a: webbrowser.GenericBrowser("lynx"))
    assert not lab.browser_available()
    monkeypatch.setattr(webbrowser, "get", lambda *a: webbrowser.BackgroundBrowser("xdg-open"))
    assert lab.browser_available()


def test_progress_and_lab_outside_a_course_say_what_to_do_without_a_traceback(tmp_path):
    for command in (["progress"], ["lab", "--no-browser"]):
        out = subprocess.run([sys.executable, "-m", "autograder", *command], cwd=tmp_path, capture_output=True,
                             text=True, timeout=120, env=dict(_no_browser_env(), COLUMNS="200"))
        assert out.returncode == 2, out.stdout + out.stderr
        text = " ".join((out.stdout + out.stderr).split())
        assert "Traceback" not in text and "no exercises/ folder" in text and "--root" in text, text


def test_copy_that_help_in_the_learners_lab_lists_the_learners_commands_only():
    def usage(role: str | None) -> str:
        env = _no_browser_env()
        if role:
            env["COPY_THAT_LAB"] = role
        return subprocess.run([sys.executable, "-m", "autograder", "--help"], capture_output=True, text=True,
                              env=dict(env, COLUMNS="200"), timeout=60).stdout

    learner = usage("learner")
    assert "{doctor,check,answers,lab,progress}" in learner
    offered = set(re.findall(r"^    (\w+) ", learner, re.M)) | set(re.findall(r"\{([\w,]+)\}", learner)[0].split(","))
    assert offered == {"doctor", "check", "answers", "lab", "progress"}, learner
    assert re.search(r"^    grade ", usage(None), re.M) and re.search(r"^    grade ", usage("instructor"), re.M)
    # not offered, but still there: `make site` in the learner's lab still runs
    out = subprocess.run([sys.executable, "-m", "autograder", "site", "--help"], capture_output=True, text=True,
                         env=dict(_no_browser_env(), COPY_THAT_LAB="learner"), timeout=60)
    assert out.returncode == 0 and "--out" in out.stdout


def test_the_labs_configuration_hides_instructor_tools_for_learners_only(tmp_path):
    """What `copy-that lab` hands JupyterLab: its own configuration folder, the user's kept after it."""
    import json

    from autograder.learner.lab import NBGRADER_LAB_EXTENSION, NBGRADER_SERVER_EXTENSIONS, lab_environment

    base = {"PATH": "/usr/bin:/bin", "JUPYTER_CONFIG_DIR": str(tmp_path / "mine"), "SHELL": "/bin/bash"}
    learner = lab_environment(tmp_path, instructor=False, base=base)
    folder = Path(learner["JUPYTER_CONFIG_DIR"])
    assert folder != tmp_path / "mine" and learner["JUPYTER_CONFIG_PATH"].split(os.pathsep)[0] == str(tmp_path / "mine")
    assert learner["JUPYTERLAB_SETTINGS_DIR"] == str(tmp_path / "mine" / "lab" / "user-settings")
    assert learner["PATH"].split(os.pathsep)[0] == os.path.dirname(os.path.abspath(sys.executable))
    server = json.loads((folder / "jupyter_server_config.json").read_text())["ServerApp"]
    assert server["jpserver_extensions"] == {name: False for name in NBGRADER_SERVER_EXTENSIONS}
    assert json.loads((folder / "labconfig" / "page_config.json").read_text())["disabledExtensions"] == {
        NBGRADER_LAB_EXTENSION: True}
    assert json.loads((folder / "jupyter_lab_config.json").read_text()) == {"LabApp": {"custom_css": True}}
    css = (folder / "custom" / "custom.css").read_text()
    assert ".jp-OutputPlaceholder .jp-PlaceholderText { display: none; }" in css   # a collapsed output
    assert ".jp-InputPlaceholder .jp-PlaceholderText { display: none; }" in css    # a collapsed explanation
    assert server["contents_manager_class"] == "autograder.learner.lab_contents.CourseContentsManager"
    culling = json.loads((folder / "jupyter_server_config.json").read_text())["MappingKernelManager"]
    assert culling["cull_idle_timeout"] > 0 and culling["cull_connected"] is True and culling["cull_busy"] is False
    defaults = json.loads((folder / "labconfig" / "default_setting_overrides.json").read_text())
    assert defaults["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    assert defaults["@jupyterlab/notebook-extension:tracker"]["kernelShutdown"] is True
    assert learner["COPY_THAT_LAB"] == "learner"
    rc = server["terminado_settings"]["shell_command"]
    assert rc[1] == "--rcfile" and os.path.dirname(os.path.abspath(sys.executable)) in Path(rc[2]).read_text()

    instructor = lab_environment(tmp_path, instructor=True, base=base)
    folder = Path(instructor["JUPYTER_CONFIG_DIR"])
    assert "jpserver_extensions" not in json.loads((folder / "jupyter_server_config.json").read_text())["ServerApp"]
    assert json.loads((folder / "labconfig" / "page_config.json").read_text())["disabledExtensions"] == {}
