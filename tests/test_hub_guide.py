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


# --- the guide itself ---------------------------------------------------------------------------

OFFICIAL_HOSTS = {"kubernetes.io", "download.pytorch.org", "hub.jupyter.org"}   # named sources
EXAMPLE_HOSTS = {"hub.example.org", "registry.example.org"}                     # placeholders


def guide() -> str:
    return GUIDE.read_text()


def code_blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^ *```{lang}\n(.*?)^ *```", text, re.S | re.M)


def slug(heading: str) -> str:
    """A heading's anchor, as GitHub makes it."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_the_guide_lists_every_example_file_and_only_existing_ones():
    named = set(re.findall(r"\(examples/([^)#\s]+)\)", guide()))
    files = {str(p.relative_to(EXAMPLES)) for p in EXAMPLES.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert named == files


def test_links_lead_to_files_headings_or_official_sources():
    text = guide()
    anchors = {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links
    for link in links:
        target, _, anchor = link.partition("#")
        if target.startswith(("http://", "https://")):
            continue
        if target:
            assert (GUIDE.parent / target).exists(), link
        else:
            assert anchor in anchors, f"no heading for #{anchor}"
    hosts = {re.match(r"https?://([^/:]+)", u).group(1) for u in re.findall(r"https?://[^\s)`\"']+", text)}
    sites = {h for h in hosts if not _private_address(h)}      # a listening address names no site
    assert sites <= OFFICIAL_HOSTS | EXAMPLE_HOSTS, sites - OFFICIAL_HOSTS - EXAMPLE_HOSTS


def _private_address(host: str) -> bool:
    import ipaddress

    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_private or address.is_unspecified or address.is_loopback


def test_every_shell_block_and_script_parses():
    blocks = code_blocks(guide(), "bash")
    assert len(blocks) >= 10
    for block in blocks:
        proc = subprocess.run(["bash", "-n"], input=block, capture_output=True, text=True)
        assert proc.returncode == 0, f"{proc.stderr}\n{block}"
    for script in EXAMPLES.rglob("*.sh"):
        proc = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


def test_the_guides_disable_lines_are_the_scripts():
    script = [line for line in (EXAMPLES / "learner-lab.sh").read_text().splitlines()
              if re.match(r"jupyter (server extension|labextension) disable", line)]
    shown = [line for block in code_blocks(guide(), "bash") for line in block.splitlines()
             if re.match(r"jupyter (server extension|labextension) disable", line)]
    assert script and shown == script


def test_guide_and_code_agree_on_the_default_number_of_jobs(monkeypatch):
    from autograder.grading import config

    monkeypatch.setattr(os, "cpu_count", lambda: 7)
    assert config.default_jobs() == 8
    text = " ".join(guide().split())
    assert "one more than the number of cores" in text
    assert not re.search(r"default:? (is )?the number of cores", text)
    assert "one more than the number of cores" in config.GradeOptions.jobs.help


def test_class_data_and_grading_output_are_ignored_by_git():
    paths = ["reports/a1_views/report.html", "reports/a1_views/report.csv", "canvas.csv", "grades.csv",
             "students.csv", ".copy-that-staging-a1_views-x1y2/alice/a1_views.ipynb", ".nbgrader.log",
             "gradebook.db", "submitted/alice/a1_views/a1_views.ipynb", "autograded/alice/a1_views/a1_views.ipynb",
             "feedback/alice/a1_views/a1_views.html", "release/a1_views/a1_views.ipynb"]
    proc = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=ROOT, capture_output=True, text=True)
    assert sorted(proc.stdout.split()) == sorted(paths)
    # and nothing the repository tracks
    tracked = subprocess.run(["git", "ls-files", "-ci", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True)
    assert tracked.stdout == ""
    for kept in ("exercises/a1_views/a1_views.ipynb", "docs/examples/z2jh/config.yaml", "course/00_start_here.ipynb"):
        assert subprocess.run(["git", "check-ignore", "-q", "--no-index", kept], cwd=ROOT).returncode == 1, kept


def test_the_capacity_figures_script_runs_and_reports_a_kernels_memory_and_cpu(tmp_path):
    out = tmp_path / "cost.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "kernel_cost.py"), "--kernels", "1", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "import torch" in proc.stdout and "PSS" in proc.stdout
    median = json.loads(out.read_text())["median"]
    # torch is in the kernel: far more than an idle interpreter, and some CPU to load it
    assert median["rss_mib"] > 150 and 0 < median["pss_mib"] <= median["rss_mib"] and median["cpu_s"] > 0.5
    assert "bench/kernel_cost.py" in guide()


# --- nbgrader's configuration, everywhere ----------------------------------------------------

def load_py(path: Path):
    from traitlets.config import PyFileConfigLoader

    return PyFileConfigLoader(path.name, path=str(path.parent)).load_config()


def test_hub_nbgrader_config_with_the_grader_s_and_the_course_s_gives_the_settings_grading_relies_on():
    from traitlets.config import Config
    from traitlets.utils.importstring import import_item

    hub, grader = load_py(EXAMPLES / "nbgrader_config.py"), load_py(EXAMPLES / "grader_nbgrader_config.py")
    course = load_py(ROOT / "nbgrader_config.py")
    assert hub.CourseDirectory.course_id == "copy-that"
    assert hub.Exchange.root == "/srv/nbgrader/exchange" and hub.Exchange.path_includes_course is True
    assert import_item(hub.Authenticator.plugin_class).__name__ == "JupyterHubAuthPlugin"
    merged = Config()
    for layer in (hub, grader, course):  # nbgrader's order: system, user, course root
        merged.merge(layer)
    assert merged.CourseDirectory.root == "/home/grader-copy-that/copy-that"
    assert merged.CourseDirectory.source_directory == "solutions"
    assert merged.CourseDirectory.release_directory == "exercises"
    assert "nbgrader.preprocessors.ClearHiddenTests" in merged.GenerateFeedback.preprocessors
    assert merged.Exchange.root in " ".join(code_blocks(guide(), "bash")) + (EXAMPLES / "z2jh" / "grader.yaml").read_text()
