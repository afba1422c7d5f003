"""What the hub guide's tests share: the guide and its example files, readers for each kind of
file they hold (Python configuration loaded as traitlets loads it, systemd unit and environment
files, YAML), and the hub configuration built the way The Littlest JupyterHub builds it."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from harness import ROOT

GUIDE = ROOT / "docs" / "jupyterhub.md"
EXAMPLES = ROOT / "docs" / "examples"

# the keys a JupyterHub service accepts (jupyterhub.services.service.Service, JupyterHub 5 and 6)
SERVICE_KEYS = {"name", "url", "api_token", "admin", "info", "display", "oauth_no_confirm", "oauth_client_id",
                "oauth_redirect_uri", "oauth_roles", "oauth_client_allowed_scopes", "command", "environment",
                "user", "cwd"}
TOKEN = "0123456789abcdef" * 4


def guide() -> str:
    return GUIDE.read_text()


def code_blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^ *```{lang}\n(.*?)^ *```", text, re.S | re.M)


def guide_block(containing: str) -> str:
    (block,) = [b for b in code_blocks(guide(), "bash") if containing in b]
    return block


def load_py(path: Path):
    from traitlets.config import PyFileConfigLoader

    return PyFileConfigLoader(path.name, path=str(path.parent)).load_config()


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


def yaml_docs(path: Path) -> list[dict]:
    import yaml

    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def values() -> dict:
    (doc,) = yaml_docs(EXAMPLES / "z2jh" / "config.yaml")
    return doc


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
