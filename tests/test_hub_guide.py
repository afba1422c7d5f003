"""docs/jupyterhub.md and docs/examples/: every command and configuration file of the hub guide,
checked the way it can be here.

- Python configuration files load with traitlets, with what a hub provides stubbed
  (``get_config()``, TLJH's ``load_subconfig`` after its own settings);
- the scripts an environment runs (``learner-lab.sh``, ``instructor-tools.sh``) run for real in a
  Python environment of their own, and a JupyterLab started there serves what the guide says;
- the image's ``pip`` lines run against two local package indexes that stand for PyPI and
  PyTorch's CPU index;
- YAML files parse and hold the keys the guide names; the grader's pod passes every rule of the
  Pod Security Standards it claims to (tests/pod_security.py holds the rules as data);
- shell blocks pass ``bash -n``; links lead to files of the repository or to official sources.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from harness import ROOT, free_port, stop

GUIDE = ROOT / "docs" / "jupyterhub.md"
EXAMPLES = ROOT / "docs" / "examples"

# What the hub keeps on in students' servers although `copy-that lab` turns it off: the Assignments
# tab (its server extension, its Lab plugin and nbgrader's menu that opens it), through which
# students fetch, submit and fetch feedback.
HUB_KEEPS_SERVER = {"nbgrader.server_extensions.assignment_list"}
HUB_KEEPS_PLUGINS = {"@jupyter/nbgrader:assignment-list", "@jupyter/nbgrader:menu"}


# --- an environment like the image's or TLJH's ----------------------------------------------

WRAPPERS = {"jupyter": "jupyter_core.command", "jupyter-server": "jupyter_server.serverapp",
            "jupyter-labextension": "jupyterlab.labextensions", "jupyter-lab": "jupyterlab.labapp"}


def installed_plugins() -> set[str]:
    """The Lab plugin ids of the installed @jupyter/nbgrader extension, read from its bundle."""
    from autograder.learner.lab import NBGRADER_LAB_EXTENSION

    bundle = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / NBGRADER_LAB_EXTENSION / "static"
    found = set()
    for js in bundle.glob("*.js"):
        found |= set(re.findall(re.escape(NBGRADER_LAB_EXTENSION) + r":[a-z][a-z-]*", js.read_text(errors="replace")))
    return found


class Env:
    """A Python environment with a ``sys.prefix`` of its own that imports the course's packages:
    ``--sys-prefix`` switches land in it, not in the .venv the tests run from."""

    def __init__(self, base: Path):
        self.prefix = base / "env"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(self.prefix)], check=True)
        purelib = Path(sysconfig.get_paths(vars={"base": str(self.prefix)})["purelib"])
        (purelib / "copy_that_course.pth").write_text(
            f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
        for name, module in WRAPPERS.items():
            script = self.prefix / "bin" / name
            script.write_text(f"#!{self.prefix / 'bin' / 'python'}\nimport sys\nfrom {module} import main\nsys.exit(main())\n")
            script.chmod(0o755)
        # what installing the packages wrote in the environment's configuration (nbgrader's
        # server extensions switched on, jupyterlab's own), as in an image
        shutil.copytree(Path(sys.prefix) / "etc" / "jupyter" / "jupyter_server_config.d",
                        self.prefix / "etc" / "jupyter" / "jupyter_server_config.d")
        self.base = base

    def environ(self, user: str) -> dict[str, str]:
        home = self.base / user
        home.mkdir(exist_ok=True)
        return {"HOME": str(home), "PATH": f"{self.prefix / 'bin'}:/usr/bin:/bin", "LANG": "C.UTF-8",
                "JUPYTER_CONFIG_DIR": str(home / ".jupyter"), "JUPYTER_DATA_DIR": str(home / ".local-jupyter"),
                "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
                # the lab extensions installed with the course's packages
                "JUPYTER_PATH": str(Path(sys.prefix) / "share" / "jupyter")}

    def run(self, argv: list[str], user: str) -> subprocess.CompletedProcess:
        proc = subprocess.run(argv, env=self.environ(user), capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return proc

    def server_extensions(self, user: str) -> dict[str, bool]:
        """What ``jupyter server extension list`` says, as this user sees it."""
        out = self.run(["jupyter", "server", "extension", "list"], user)
        text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
        return {m.group(1): m.group(2) == "enabled" for m in re.finditer(r"^\s+(\S+) (enabled|disabled)\s*$", text, re.M)}


@pytest.fixture(scope="module")
def hub_env(tmp_path_factory) -> Env:
    env = Env(tmp_path_factory.mktemp("hub-env"))
    env.run(["sh", str(EXAMPLES / "learner-lab.sh")], user="root")
    return env


def test_learner_lab_script_turns_off_what_copy_that_lab_does_but_the_assignments_tab(hub_env):
    from autograder.learner.lab import NBGRADER_SERVER_EXTENSIONS

    student = hub_env.server_extensions("student")
    assert set(NBGRADER_SERVER_EXTENSIONS) <= set(student), student
    assert {name for name in NBGRADER_SERVER_EXTENSIONS if not student[name]} == set(NBGRADER_SERVER_EXTENSIONS) - HUB_KEEPS_SERVER
    assert all(student[name] for name in HUB_KEEPS_SERVER)
    page = json.loads((hub_env.prefix / "etc" / "jupyter" / "labconfig" / "page_config.json").read_text())
    plugins = installed_plugins()
    assert HUB_KEEPS_PLUGINS < plugins, f"nbgrader's Lab plugins are not what the guide knows: {sorted(plugins)}"
    # every plugin nbgrader ships is either kept for the Assignments tab or off and locked: a plugin
    # a new nbgrader adds fails here until the guide decides about it
    off = {name for name, disabled in page["disabledExtensions"].items() if disabled}
    assert off == plugins - HUB_KEEPS_PLUGINS
    assert {name for name, locked in page["lockedExtensions"].items() if locked} == off


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, ""
    except OSError:        # not listening yet
        return 0, ""


def test_a_students_jupyterlab_in_that_environment_hides_the_tools_and_serves_the_courses_css(hub_env, tmp_path):
    from autograder.learner.lab import CUSTOM_CSS

    port, token = free_port(), "hub-guide-test"
    argv = ["jupyter", "lab", "--no-browser", "--ip", "127.0.0.1", "--port", str(port),
            f"--ServerApp.root_dir={tmp_path}", f"--IdentityProvider.token={token}"]
    if os.geteuid() == 0:
        argv.append("--allow-root")
    log = open(tmp_path / "lab.log", "w+")
    proc = subprocess.Popen(argv, env=hub_env.environ("student"), stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while get(f"{base}/api/status?token={token}")[0] != 200:
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "lab.log").read_text()[-3000:]
            time.sleep(1)
        status, css = get(f"{base}/custom/custom.css?token={token}")
        assert (status, css) == (200, CUSTOM_CSS)
        assert get(f"{base}/formgrader/api/status?token={token}")[0] == 404      # the formgrader is off
        assert get(f"{base}/nbgrader_version?version=0&token={token}")[0] != 404  # the Assignments tab's API is on
        status, page = get(f"{base}/lab?token={token}")
        config = json.loads(re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>',
                                      page, re.S).group(1))
        disabled = set(config["disabled_labextensions"]) if "disabled_labextensions" in config else set()
        disabled |= {k for k, v in config.get("disabledExtensions", {}).items() if v} if isinstance(
            config.get("disabledExtensions"), dict) else set(config.get("disabledExtensions", []))
        assert installed_plugins() - HUB_KEEPS_PLUGINS <= disabled, sorted(disabled)
        assert not HUB_KEEPS_PLUGINS & disabled
    finally:
        stop(proc, group=True, grace=30)
        log.close()
