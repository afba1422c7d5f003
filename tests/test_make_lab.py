"""`make lab` (the README's first command) serves JupyterLab on loopback at the start notebook."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from harness import ROOT, free_port, stop



def test_make_lab_serves_the_course_root_and_opens_the_start_notebook(tmp_path):
    if not (ROOT / ".venv" / ".installed").exists():
        pytest.skip("the tests run outside `make test`: .venv/.installed is missing")
    port = free_port()
    log = open(tmp_path / "lab.log", "w+")
    proc = subprocess.Popen(["make", "--no-print-directory", "lab", f"PORT={port}"], cwd=ROOT, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            env=dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime")))
    try:
        token = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and token is None:
            time.sleep(1)
            log.seek(0)
            m = re.search(rf"http://127\.0\.0\.1:{port}/\S*token=([0-9a-f]+)", log.read())
            token = m.group(1) if m else None
            assert proc.poll() is None, Path(log.name).read_text()
        assert token, "JupyterLab did not start: " + Path(log.name).read_text()[-2000:]
        # jupyter_server prints its URL before it listens (it binds in a callback of its event
        # loop): wait until it answers
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=5).close()
                break
            except urllib.error.URLError:
                assert proc.poll() is None and time.monotonic() < deadline, Path(log.name).read_text()[-2000:]
                time.sleep(0.5)

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args, **kwargs):
                return None

        opener = urllib.request.build_opener(NoRedirect)
        try:
            opener.open(f"http://127.0.0.1:{port}/?token={token}", timeout=30)
            location = ""
        except urllib.error.HTTPError as redirect:
            location = redirect.headers.get("Location", "")
        assert "/lab/tree/course/00_start_here.ipynb" in location
        listing = urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents?token={token}", timeout=30).read()
        for folder in (b'"course"', b'"exercises"'):
            assert folder in listing, "the file browser shows the course root"
    finally:
        stop(proc, group=True, grace=30)
        log.close()


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
    assert ".jp-PlaceholderText { display: none; }" in (folder / "custom" / "custom.css").read_text()
    rc = server["terminado_settings"]["shell_command"]
    assert rc[1] == "--rcfile" and os.path.dirname(os.path.abspath(sys.executable)) in Path(rc[2]).read_text()

    instructor = lab_environment(tmp_path, instructor=True, base=base)
    folder = Path(instructor["JUPYTER_CONFIG_DIR"])
    assert "jpserver_extensions" not in json.loads((folder / "jupyter_server_config.json").read_text())["ServerApp"]
    assert json.loads((folder / "labconfig" / "page_config.json").read_text())["disabledExtensions"] == {}
