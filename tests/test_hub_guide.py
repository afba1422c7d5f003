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


# --- The Littlest JupyterHub ---------------------------------------------------------------------

TOKEN = "0123456789abcdef" * 4
# the keys a JupyterHub service accepts (jupyterhub.services.service.Service, JupyterHub 5 and 6)
SERVICE_KEYS = {"name", "url", "api_token", "admin", "info", "display", "oauth_no_confirm", "oauth_client_id",
                "oauth_redirect_uri", "oauth_roles", "oauth_client_allowed_scopes", "command", "environment",
                "user", "cwd"}
TLJH_MAIN = '''c = get_config()
# what TLJH's own jupyterhub_config.py does before the drop-ins (tljh.configurer.apply_config):
c.Authenticator.allowed_users = set({allowed!r})       # tljh-config add-item users.allowed ...
c.Authenticator.admin_users = set({admins!r})          # tljh-config add-item users.admin ...
c.JupyterHub.services = [{{"name": "cull-idle", "admin": True, "command": ["python3", "-m", "jupyterhub_idle_culler"]}}]
c.SystemdSpawner.extra_paths = ["/opt/tljh/user/bin"]
c.JupyterHub.hub_port = 15001
from glob import glob
for ec in sorted(glob({dropins!r} + "/*.py")):
    load_subconfig(ec)
'''


def tljh_config(tmp_path: Path, allowed=("alice-tljh",), admins=("root-admin",)):
    """The hub's configuration as TLJH builds it: its own settings, then our drop-in."""
    dropins = tmp_path / "jupyterhub_config.d"
    dropins.mkdir(exist_ok=True)
    shutil.copy2(EXAMPLES / "tljh" / "copy-that.py", dropins / "copy-that.py")
    (tmp_path / "jupyterhub_config.py").write_text(TLJH_MAIN.format(allowed=list(allowed), admins=list(admins),
                                                                    dropins=str(dropins)))
    return load_py(tmp_path / "jupyterhub_config.py")


@pytest.fixture
def roster(tmp_path, monkeypatch) -> list[str]:
    names = ["s001", "s002", "s150"]
    (tmp_path / "students.txt").write_text("\n".join(names) + "\n")
    monkeypatch.setenv("COPY_THAT_ROSTER", str(tmp_path / "students.txt"))
    monkeypatch.setenv("COPY_THAT_GRADER_TOKEN", TOKEN)
    for name in ("COPY_THAT_GRADER_URL", "COPY_THAT_COURSE_ENV"):
        monkeypatch.delenv(name, raising=False)
    return names


def test_tljh_dropin_adds_to_tljh_config_users_and_services_instead_of_replacing_them(tmp_path, roster):
    cfg = tljh_config(tmp_path)
    groups = cfg.JupyterHub.load_groups
    instructors = groups["formgrade-copy-that"]["users"]
    assert groups["nbgrader-copy-that"]["users"] == roster and instructors
    assert cfg.Authenticator.allowed_users == {"alice-tljh", *instructors, *roster}
    assert cfg.Authenticator.admin_users == {"root-admin"}          # grading needs no hub admin
    culler, grader = cfg.JupyterHub.services
    assert culler["name"] == "cull-idle"
    assert set(grader) <= SERVICE_KEYS and "command" not in grader, "an external service: the hub starts nothing"
    assert grader == {"name": "copy-that", "url": "http://127.0.0.1:9999", "api_token": TOKEN,
                      "oauth_no_confirm": True, "display": True}
    assert cfg.Spawner.cmd == ["/opt/tljh/user/bin/jupyterhub-singleuser"]
    assert cfg.SystemdSpawner.extra_paths == ["/opt/tljh/user/bin"]


def test_tljh_dropin_roles_give_instructors_the_formgrader_and_students_only_the_listing(tmp_path, roster):
    roles = {r["name"]: r for r in tljh_config(tmp_path).JupyterHub.load_roles}
    assert roles["formgrade-copy-that"]["groups"] == ["formgrade-copy-that"]
    assert "access:services!service=copy-that" in roles["formgrade-copy-that"]["scopes"]
    assert roles["nbgrader-copy-that"]["groups"] == ["nbgrader-copy-that"]
    assert not any(s.startswith("access:") for s in roles["nbgrader-copy-that"]["scopes"])
    assert roles["server"]["scopes"] == ["inherit"]


def test_tljh_dropin_follows_another_course_environment_and_grader_address(tmp_path, roster, monkeypatch):
    monkeypatch.setenv("COPY_THAT_COURSE_ENV", "/opt/copy-that/env")
    monkeypatch.setenv("COPY_THAT_GRADER_URL", "http://10.0.0.5:9999")
    cfg = tljh_config(tmp_path)
    assert cfg.Spawner.cmd == ["/opt/copy-that/env/bin/jupyterhub-singleuser"]
    assert cfg.JupyterHub.services[-1]["url"] == "http://10.0.0.5:9999"
    assert "COPY_THAT_COURSE_ENV=/opt/copy-that/env" in guide()


def test_tljh_dropin_refuses_to_start_the_hub_without_the_grader_token(tmp_path, roster, monkeypatch):
    monkeypatch.delenv("COPY_THAT_GRADER_TOKEN")
    with pytest.raises(ValueError, match="COPY_THAT_GRADER_TOKEN.*hub.env"):
        tljh_config(tmp_path)


# --- the grader as a service ---------------------------------------------------------------------

def env_file(path: Path) -> dict[str, str]:
    """A systemd EnvironmentFile: KEY=value lines, # comments."""
    pairs = [line.split("=", 1) for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    return {k: v for k, v in pairs}


def unit_file(path: Path) -> dict[str, dict[str, list[str]]]:
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for line in path.read_text().splitlines():
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
        elif line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            current.setdefault(key, []).append(value)
    return sections


def service_env_checks(env: dict[str, str], name: str) -> None:
    """What the hub gives a service it starts itself, that the grader's environment must give."""
    assert env["JUPYTERHUB_SERVICE_NAME"] == name
    assert env["JUPYTERHUB_CLIENT_ID"] == f"service-{name}"
    assert env["JUPYTERHUB_SERVICE_PREFIX"] == f"/services/{name}/"
    assert env["JUPYTERHUB_OAUTH_CALLBACK_URL"] == f"/services/{name}/oauth_callback"
    assert env["JUPYTERHUB_API_URL"].endswith("/hub/api")
    assert env["JUPYTERHUB_DEFAULT_URL"] == "/lab"


def test_grader_environment_file_matches_the_hub_s_service(tmp_path, roster):
    env = env_file(EXAMPLES / "grader" / "grader.env")
    (service,) = [s for s in tljh_config(tmp_path).JupyterHub.services if s["name"] == "copy-that"]
    service_env_checks(env, service["name"])
    assert env["JUPYTERHUB_SERVICE_URL"] == service["url"]
    assert env["JUPYTERHUB_API_URL"] == "http://127.0.0.1:15001/hub/api"   # TLJH's hub_port
    # the guide's token block writes the token into this line
    assert "s/^JUPYTERHUB_API_TOKEN=.*/JUPYTERHUB_API_TOKEN=$token/" in guide() and "JUPYTERHUB_API_TOKEN" in env


def test_grader_unit_runs_the_service_as_its_own_user_in_the_checkout_with_delegation():
    unit = unit_file(EXAMPLES / "grader" / "copy-that-grader.service")["Service"]
    root = load_py(EXAMPLES / "grader_nbgrader_config.py").CourseDirectory.root
    assert unit["User"] == ["grader-copy-that"] and unit["WorkingDirectory"] == [root]
    assert unit["EnvironmentFile"] == ["/etc/copy-that/grader.env"]
    assert unit["Delegate"] == ["yes"]
    (start,) = unit["ExecStart"]
    assert start.endswith("/bin/jupyterhub-singleuser")
    path = dict(v.split("=", 1) for v in unit["Environment"])["PATH"]
    assert path.split(":")[0] == str(Path(start).parent)
    text = guide()
    assert f"sudo {Path(start).parent}/pip install -r requirements.txt" in text
    assert "sudo useradd --create-home --user-group --shell /bin/bash grader-copy-that" in text


# --- Zero to JupyterHub ------------------------------------------------------------------------

def yaml_docs(path: Path) -> list[dict]:
    import yaml

    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def values() -> dict:
    (doc,) = yaml_docs(EXAMPLES / "z2jh" / "config.yaml")
    return doc


def test_z2jh_values_hold_the_keys_the_guide_names():
    v = values()
    text = guide()
    for dotted in ("hub.services.copy-that", "hub.loadRoles", "hub.config", "hub.extraConfig",
                   "hub.networkPolicy.interNamespaceAccessLabels", "singleuser.image",
                   "singleuser.storage.extraVolumes", "cull"):
        assert f"`{dotted}" in text, f"the guide does not name {dotted}"
        node = v
        for part in dotted.split("."):
            assert part in node, f"config.yaml has no {dotted}"
            node = node[part]
    assert v["singleuser"]["fsGid"] == 100 and "fsGid: 100" in text
    assert "apiToken" not in v["hub"]["services"]["copy-that"], "the token comes from the command line"
    assert v["hub"]["networkPolicy"]["interNamespaceAccessLabels"] == "accept"
    (mount,) = v["singleuser"]["storage"]["extraVolumeMounts"]
    assert mount["mountPath"] == load_py(EXAMPLES / "nbgrader_config.py").Exchange.root
    assert v["singleuser"]["storage"]["extraVolumes"][0]["persistentVolumeClaim"]["claimName"] == "nbgrader-exchange"


def test_z2jh_values_describe_the_same_service_roles_and_groups_as_the_tljh_file(tmp_path, roster):
    tljh = tljh_config(tmp_path)
    v = values()
    roles = [{"name": name, **{k: r[k] for k in r if k != "description"}} for name, r in v["hub"]["loadRoles"].items()]
    assert sorted(roles, key=lambda r: r["name"]) == sorted(tljh.JupyterHub.load_roles, key=lambda r: r["name"])
    service = dict(v["hub"]["services"]["copy-that"], name="copy-that")
    tljh_service = tljh.JupyterHub.services[-1]
    assert {k: service[k] for k in service if k != "url"} == {k: tljh_service[k] for k in tljh_service
                                                            if k not in ("url", "api_token")}
    assert set(v["hub"]["config"]["JupyterHub"]["load_groups"]) == set(tljh.JupyterHub.load_groups)


def test_z2jh_extra_config_gives_each_student_a_uid_of_its_own():
    from traitlets.config import Config

    (code,) = values()["hub"]["extraConfig"].values()
    c = Config()
    exec(compile(code, "hub.extraConfig", "exec"), {"c": c})

    class User:
        def __init__(self, id):
            self.id = id

    class Spawner:
        def __init__(self, id):
            self.user = User(id)

    uid = c.KubeSpawner.uid
    uids = {uid(Spawner(i)) for i in range(1, 151)}
    assert len(uids) == 150 and min(uids) > 65535 and 1000 not in uids


def test_z2jh_grader_pod_is_the_hubs_copy_that_service():
    docs = {d["kind"]: d for d in yaml_docs(EXAMPLES / "z2jh" / "grader.yaml")}
    namespace, service, sts = docs["Namespace"], docs["Service"], docs["StatefulSet"]
    url = values()["hub"]["services"]["copy-that"]["url"]
    (port,) = service["spec"]["ports"]
    assert url == f"http://{service['metadata']['name']}.{namespace['metadata']['name']}.svc.cluster.local:{port['port']}"
    pod = sts["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (container,) = pod["spec"]["containers"]
    env = {e["name"]: e.get("value", "") for e in container["env"]}
    service_env_checks(env, "copy-that")
    assert env["JUPYTERHUB_SERVICE_URL"] == f"http://0.0.0.0:{port['targetPort']}"
    token = [e for e in container["env"] if e["name"] == "JUPYTERHUB_API_TOKEN"][0]
    assert token["valueFrom"]["secretKeyRef"]["name"] in guide()
    assert container["workingDir"] == load_py(EXAMPLES / "grader_nbgrader_config.py").CourseDirectory.root
    # the label the chart's network policy admits from another namespace, on both
    assert namespace["metadata"]["labels"]["hub.jupyter.org/network-access-hub"] == "true"
    assert pod["metadata"]["labels"]["hub.jupyter.org/network-access-hub"] == "true"


# --- the grader's pod and Pod Security admission --------------------------------------------

BUBBLEWRAP_NEEDS = {"seccompProfile (baseline)", "AppArmor", "procMount"}


def grader_pod() -> dict:
    (sts,) = [d for d in yaml_docs(EXAMPLES / "z2jh" / "grader.yaml") if d["kind"] == "StatefulSet"]
    return sts["spec"]["template"]


def test_grader_pod_breaks_only_what_bubblewrap_needs_and_its_namespace_admits_it():
    from pod_security import violations

    pod = grader_pod()
    assert set(violations(pod, "baseline")) == BUBBLEWRAP_NEEDS
    assert set(violations(pod, "restricted")) == BUBBLEWRAP_NEEDS | {"seccompProfile (restricted)"}
    assert violations(pod, "privileged") == []
    (namespace,) = [d for d in yaml_docs(EXAMPLES / "z2jh" / "grader.yaml") if d["kind"] == "Namespace"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    # Kubernetes accepts an unmasked /proc only in a pod with its own user namespace
    assert pod["spec"]["hostUsers"] is False


def test_the_pod_security_rules_refuse_what_the_standards_refuse():
    """The rules of tests/pod_security.py catch each setting the standards name (so the check above
    can fail), and admit a pod written to the restricted profile."""
    import copy

    from pod_security import violations

    good = {"metadata": {}, "spec": {
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "c", "image": "i", "securityContext": {
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
        "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "x"}}]}}
    assert violations(good, "restricted") == []

    def broken(edit) -> set[str]:
        pod = copy.deepcopy(good)
        edit(pod["spec"], pod["spec"]["containers"][0]["securityContext"], pod["metadata"])
        return set(violations(pod, "restricted")), set(violations(pod, "baseline"))

    cases = {
        "privileged": lambda s, c, m: c.update(privileged=True),
        "host namespaces": lambda s, c, m: s.update(hostPID=True),
        "capabilities (baseline)": lambda s, c, m: c["capabilities"].update(add=["SYS_ADMIN"]),
        "hostPath volumes": lambda s, c, m: s["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
        "procMount": lambda s, c, m: c.update(procMount="Unmasked"),
        "seccompProfile (baseline)": lambda s, c, m: c.update(seccompProfile={"type": "Unconfined"}),
        "AppArmor": lambda s, c, m: s["securityContext"].update(appArmorProfile={"type": "Unconfined"}),
        "sysctls": lambda s, c, m: s["securityContext"].update(sysctls=[{"name": "kernel.msgmax", "value": "1"}]),
        "hostPort": lambda s, c, m: s["containers"][0].update(ports=[{"containerPort": 80, "hostPort": 80}]),
    }
    for control, edit in cases.items():
        restricted, baseline = broken(edit)
        assert control in baseline and control in restricted, control
    restricted_only = {
        "allowPrivilegeEscalation != false": lambda s, c, m: c.update(allowPrivilegeEscalation=True),
        "runAsNonRoot != true": lambda s, c, m: s["securityContext"].pop("runAsNonRoot"),
        "runAsUser=0": lambda s, c, m: c.update(runAsUser=0),
        "seccompProfile (restricted)": lambda s, c, m: s["securityContext"].pop("seccompProfile"),
        "capabilities (restricted)": lambda s, c, m: c["capabilities"].update(drop=[]),
        "volume types": lambda s, c, m: s["volumes"].append({"name": "n", "nfs": {"server": "x", "path": "/"}}),
    }
    for control, edit in restricted_only.items():
        restricted, baseline = broken(edit)
        assert control in restricted and not baseline, control


def test_z2jh_values_render_with_helm_template(tmp_path):
    """`helm template` with the values, where Helm and the chart are at hand."""
    chart = os.environ.get("COPY_THAT_Z2JH_CHART")
    if shutil.which("helm") is None or not chart:
        pytest.skip("the helm command is not in the registries this project installs from (Debian has no "
                    "helm package; PyPI's and npm's `helm` are other programs, PyPI's helm-python-sdk a "
                    "binding of Helm's Go library, not the command), and the Zero to JupyterHub chart is "
                    "published only in its own Helm repository, out of reach here: with helm on PATH and "
                    "COPY_THAT_Z2JH_CHART set to the chart (a folder or .tgz) this test renders the values")
    proc = subprocess.run(["helm", "template", "jhub", chart, "--namespace", "jhub",
                           "--values", str(EXAMPLES / "z2jh" / "config.yaml"),
                           "--set", f"hub.services.copy-that.apiToken={TOKEN}"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    import yaml

    rendered = [d for d in yaml.safe_load_all(proc.stdout) if d]
    kinds = {d["kind"] for d in rendered}
    assert {"Deployment", "ConfigMap", "Secret"} <= kinds
    assert "copy-that" in proc.stdout and "registry.example.org/copy-that/student" in proc.stdout


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


def test_the_guide_quotes_doctors_grading_limits_row_as_the_grader_writes_it(monkeypatch):
    from pathlib import PurePath

    from autograder.grading import cgroups

    text = " ".join(guide().split())
    monkeypatch.setattr(cgroups, "_v2_parent", lambda: None)
    monkeypatch.setattr(cgroups, "_v1_parents", lambda: None)
    version, nothing = cgroups.available()
    assert version is None and nothing in text
    monkeypatch.setattr(cgroups, "_v1_parents", lambda: [PurePath("/memory"), PurePath("/pids")])
    version, v1 = cgroups.available()
    assert version == "v1" and v1 in text
    monkeypatch.setattr(cgroups, "_v2_parent", lambda: PurePath("/grader"))
    version, v2 = cgroups.available()
    assert version == "v2" and v2.replace("cgroup v2", "cgroup v1") == v1   # "the same with cgroup v2"


# --- the guide's files on a real hub ---------------------------------------------------------

HUB_DIR = ROOT / ".cache" / "hub"
HUB_BIN = HUB_DIR / "venv" / "bin"
CHP = HUB_DIR / "chp" / "node_modules" / ".bin" / "configurable-http-proxy"
TLJH_LIKE_HUB = '''c = get_config()
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {public}
c.JupyterHub.hub_port = {hub}
c.ConfigurableHTTPProxy.command = [{chp!r}]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api}"
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.admin_users = {{"admin"}}
c.Authenticator.allowed_users = {{"alice-tljh"}}
c.JupyterHub.services = [{{"name": "cull-idle", "command": ["sleep", "3600"]}}]
from glob import glob
for ec in sorted(glob({dropins!r} + "/*.py")):
    load_subconfig(ec)
'''


def request(url: str, token: str | None = None, method: str = "GET", data: bytes | None = None,
            follow: bool = True) -> tuple[int, str, str]:
    """(status, final URL or Location, body)."""
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(*(() if follow else (NoRedirect,)))
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Authorization": f"token {token}"} if token else {})
    try:
        with opener.open(req, timeout=60) as r:
            return r.status, r.url, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Location", ""), ""
    except OSError:
        return 0, "", ""


def test_the_hub_routes_instructors_to_the_graders_formgrader_and_refuses_students(tmp_path, roster, monkeypatch):
    """TLJH's way of loading copy-that.py, a real JupyterHub and proxy, and the grader's server
    started apart from the hub with grader.env: an instructor's token reaches the formgrader
    through the hub, a student's is refused, a browser without one is sent to the hub's OAuth."""
    if not ((HUB_BIN / "jupyterhub").exists() and CHP.exists()):
        if os.environ.get("CI"):
            pytest.fail("make test-deps installs JupyterHub and its proxy into .cache/hub")
        pytest.skip("JupyterHub or configurable-http-proxy is missing: `make hub-test-deps` installs them "
                    "(npm is needed for the proxy)")
    public, hub_port, proxy_api, grader_port = (free_port() for _ in range(4))
    dropins = tmp_path / "jupyterhub_config.d"
    dropins.mkdir()
    shutil.copy2(EXAMPLES / "tljh" / "copy-that.py", dropins)
    (tmp_path / "jupyterhub_config.py").write_text(TLJH_LIKE_HUB.format(
        public=public, hub=hub_port, chp=str(CHP), proxy_api=proxy_api, dropins=str(dropins)))
    grader_url = f"http://127.0.0.1:{grader_port}"
    monkeypatch.setenv("COPY_THAT_GRADER_URL", grader_url)
    hub_env = dict(os.environ, JUPYTERHUB_CRYPT_KEY="", PATH=f"{HUB_BIN}:{os.environ['PATH']}")
    course = tmp_path / "course"
    for part in ("solutions", "exercises"):
        shutil.copytree(ROOT / part, course / part)
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    grader_env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY"))}
    grader_env.update(env_file(EXAMPLES / "grader" / "grader.env"))
    grader_env.update(JUPYTERHUB_API_TOKEN=TOKEN,            # what the guide's token block writes
                      JUPYTERHUB_API_URL=f"http://127.0.0.1:{hub_port}/hub/api", JUPYTERHUB_SERVICE_URL=grader_url,
                      HOME=str(tmp_path / "grader"), JUPYTER_CONFIG_PATH=str(Path(sys.prefix) / "etc" / "jupyter"),
                      JUPYTER_PATH=str(Path(sys.prefix) / "share" / "jupyter"), PATH=f"{HUB_BIN}:{os.environ['PATH']}")
    (tmp_path / "grader").mkdir()
    logs = {name: open(tmp_path / f"{name}.log", "w+") for name in ("hub", "grader")}
    procs = []
    try:
        procs.append(subprocess.Popen([str(HUB_BIN / "jupyterhub"), "-f", "jupyterhub_config.py"], cwd=tmp_path,
                                      env=hub_env, stdout=logs["hub"], stderr=subprocess.STDOUT, start_new_session=True))
        argv = [str(HUB_BIN / "jupyterhub-singleuser")] + (["--allow-root"] if os.geteuid() == 0 else [])
        procs.append(subprocess.Popen(argv, cwd=course, env=grader_env, stdout=logs["grader"],
                                      stderr=subprocess.STDOUT, start_new_session=True))
        base = f"http://127.0.0.1:{public}"
        deadline = time.monotonic() + 300

        def wait(url: str, ok) -> None:
            while not ok(request(url)):
                alive = all(p.poll() is None for p in procs)
                assert alive and time.monotonic() < deadline, "\n".join(
                    (tmp_path / f"{n}.log").read_text()[-2500:] for n in logs)
                time.sleep(1)

        wait(f"{base}/hub/api/", lambda r: r[0] == 200)
        wait(f"{grader_url}/services/copy-that/api/status", lambda r: r[0] in (200, 302, 403))
        admin = subprocess.run([str(HUB_BIN / "jupyterhub"), "token", "admin", "-f", "jupyterhub_config.py"],
                               cwd=tmp_path, env=hub_env, capture_output=True, text=True, timeout=120)
        admin_token = admin.stdout.split()[-1]
        tokens = {}
        for user in ("instructor1", roster[0]):
            status, _, body = request(f"{base}/hub/api/users/{user}/tokens", admin_token, "POST", b'{"note": "test"}')
            assert status == 201, (user, status)
            tokens[user] = json.loads(body)["token"]
        status, url, body = request(f"{base}/services/copy-that/formgrader", tokens["instructor1"])
        assert status == 200 and "/services/copy-that/formgrader/" in url and "formgrade" in body.lower()
        assert request(f"{base}/services/copy-that/formgrader", tokens[roster[0]])[0] == 403
        status, location, _ = request(f"{base}/services/copy-that/formgrader", follow=False)
        assert status == 302 and "/hub/api/oauth2/authorize" in location and "client_id=service-copy-that" in location
        # students see the course listed (nbgrader's course list asks the hub), with its groups
        status, _, body = request(f"{base}/hub/api/services", tokens[roster[0]])
        assert status == 200 and "copy-that" in json.loads(body)
        status, _, body = request(f"{base}/hub/api/user", tokens[roster[0]])
        assert json.loads(body)["groups"] == ["nbgrader-copy-that"]
    finally:
        for proc in reversed(procs):
            stop(proc, group=True, grace=30)
        for log in logs.values():
            log.close()
