"""The guide's files on a real JupyterHub and proxy (make hub-test-deps installs them): copy-that.py
loaded as TLJH loads it, the grader's server started apart with grader.env."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from harness import ROOT, free_port, stop
from hub_guide import EXAMPLES, TOKEN, env_file, roster  # noqa: F401  (roster: a fixture)


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


