"""The students' environment and image: learner-lab.sh run in a Python environment of its own
and a JupyterLab started there; the Dockerfile's stages; its pip lines (and the guide's) run
against two local package indexes that stand for PyPI and PyTorch's CPU index."""
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
from hub_guide import EXAMPLES, code_blocks, guide, values

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


# --- the images -----------------------------------------------------------------------------

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def dockerfile() -> list[tuple[str, str, str]]:
    """(stage, instruction, arguments) for each instruction, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", (EXAMPLES / "z2jh" / "Dockerfile").read_text())
    out, stage = [], None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        word, _, rest = line.strip().partition(" ")
        if word == "FROM":
            stage = rest.split(" AS ")[-1].strip() if " AS " in rest else rest
        out.append((stage, word, rest.strip()))
    return out


def pip_commands(stage: str) -> list[str]:
    return [part.strip() for s, word, rest in dockerfile() if s == stage and word == "RUN"
            for part in rest.split("&&") if part.strip().startswith("pip install")]


def test_dockerfile_builds_a_students_image_and_a_graders_from_the_course():
    instructions = dockerfile()
    stages = {rest.split(" AS ")[-1] for _, word, rest in instructions if word == "FROM"}
    assert stages == {"course", "student", "grader"}
    assert instructions[0][1:] == ("FROM", "python:3.11-slim-bookworm AS course")
    for _, word, rest in instructions:
        if word == "COPY":
            *sources, _ = rest.split()
            assert all((ROOT / src).exists() for src in sources), rest
    runs = {stage: " ".join(rest for s, w, rest in instructions if s == stage and w == "RUN") for stage in stages}
    assert "learner-lab.sh" in runs["student"] and "learner-lab.sh" not in runs["grader"] + runs["course"]
    assert "bubblewrap" in runs["grader"] and "bubblewrap" not in runs["student"] + runs["course"]
    assert ("course", "COPY", "docs/examples/nbgrader_config.py /etc/jupyter/nbgrader_config.py") in instructions
    # the user Zero to JupyterHub's fsGid expects
    assert "--uid 1000 --gid 100" in runs["course"] and values()["singleuser"]["fsGid"] == 100
    torch_first, lock, package, hub = pip_commands("course")
    assert torch_first == f"pip install --no-cache-dir --index-url {CPU_INDEX} \"$(grep '^torch==' requirements.txt)\""
    assert lock == "pip install --no-cache-dir -r requirements.txt"
    assert package == "pip install --no-cache-dir --no-deps ."
    assert hub == 'pip install --no-cache-dir "jupyterhub==${JUPYTERHUB_VERSION}"'


def test_tljh_installs_run_the_images_pip_lines():
    image = [c.replace("--no-cache-dir ", "").removeprefix("pip install ") for c in pip_commands("course")[:3]]
    for env in ("/opt/tljh/user", "/opt/copy-that/grader"):
        shown = [line.removeprefix(f"sudo {env}/bin/pip install ") for block in code_blocks(guide(), "bash")
                 for line in block.splitlines() if line.startswith(f"sudo {env}/bin/pip install ")]
        assert shown[:3] == image, env


def make_wheel(index: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> None:
    """A wheel of nothing but its metadata, in a PEP 503 folder of ``index``."""
    import zipfile

    dist = f"{name.replace('-', '_')}-{version}"
    files = {
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                      + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{dist}.dist-info/RECORD"] = "".join(f"{f},,\n" for f in files) + f"{dist}.dist-info/RECORD,,\n"
    folder = index / name
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / f"{dist}-py3-none-any.whl", "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    # pip reads a file: index's project page as its index.html
    links = "".join(f'<a href="{w.name}">{w.name}</a>\n' for w in sorted(folder.glob("*.whl")))
    (folder / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n")


@pytest.fixture(scope="module")
def indexes(tmp_path_factory):
    """Two package indexes: 'pypi' with torch's CUDA build (it needs an nvidia package) and the
    rest of a small lock, 'cpu' with torch's CPU build; a requirements.txt with the lock's torch pin."""
    base = tmp_path_factory.mktemp("indexes")
    (pin,) = [line for line in (ROOT / "requirements.txt").read_text().splitlines() if line.startswith("torch==")]
    version = pin.removeprefix("torch==")
    make_wheel(base / "pypi", "torch", version, ("nvidia-cublas-cu12==12.9.1",))
    make_wheel(base / "pypi", "nvidia-cublas-cu12", "12.9.1")
    make_wheel(base / "pypi", "tinydep", "1.0")
    make_wheel(base / "cpu", "torch", f"{version}+cpu")
    project = base / "project"
    project.mkdir()
    (project / "requirements.txt").write_text(f"{pin}\ntinydep==1.0\n")
    return base, version


def pip_env(base: Path, bindir: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_INDEX_URL=(base / "pypi").as_uri())          # "PyPI" where a command names no index
    if bindir is not None:
        env["PATH"] = f"{bindir}:{env['PATH']}"
    return env


def dry_run(base: Path, command: str) -> dict[str, str]:
    """What ``command`` (a pip install line) would install: {name: version}."""
    report = base / "report.json"
    command = command.replace(CPU_INDEX, (base / "cpu").as_uri())
    proc = subprocess.run(f"{command} --dry-run --ignore-installed --report {report}", shell=True,
                          cwd=base / "project", env=pip_env(base, Path(sys.executable).parent),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {i["metadata"]["name"]: i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}


def test_pypi_alone_gives_torch_s_cuda_build_with_its_nvidia_packages(indexes):
    """The problem the guide describes, as the local indexes stand for it."""
    base, version = indexes
    assert dry_run(base, "pip install -r requirements.txt") == {
        "torch": version, "nvidia-cublas-cu12": "12.9.1", "tinydep": "1.0"}


def test_the_guides_single_command_resolves_the_pin_to_the_cpu_build(indexes):
    base, version = indexes
    (line,) = [line.strip() for block in code_blocks(guide(), "bash") for line in block.splitlines()
               if "--extra-index-url" in line]
    assert dry_run(base, line) == {"torch": f"{version}+cpu", "tinydep": "1.0"}


def test_the_images_pip_lines_install_the_cpu_build_and_keep_it(indexes, tmp_path):
    base, version = indexes
    venv = tmp_path / "image"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=pip_env(base), timeout=300)
    torch_first, lock = pip_commands("course")[:2]
    for command in (torch_first, lock):
        proc = subprocess.run(command.replace(CPU_INDEX, (base / "cpu").as_uri()), shell=True, cwd=base / "project",
                              env=pip_env(base, venv / "bin"), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    listed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
                            env=pip_env(base), capture_output=True, text=True, check=True).stdout
    installed = {p["name"]: p["version"] for p in json.loads(listed)}
    assert installed["torch"] == f"{version}+cpu" and installed["tinydep"] == "1.0"
    assert "nvidia-cublas-cu12" not in installed


def test_the_pin_rule_the_guide_states():
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    assert Version("2.13.0+cpu") in SpecifierSet("==2.13.0") and Version("2.13.0+cpu") > Version("2.13.0")
    assert Version("2.13.0+cpu") not in SpecifierSet("==2.13.0+cu126")




def test_the_images_jupyterhub_is_the_version_the_live_test_runs():
    (arg,) = [rest for _, word, rest in dockerfile() if word == "ARG" and rest.startswith("JUPYTERHUB_VERSION=")]
    (pin,) = re.findall(r"^HUB_VERSION\s*:=\s*(\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert arg == f"JUPYTERHUB_VERSION={pin}"
