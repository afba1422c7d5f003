"""``copy-that lab``: JupyterLab as a learner needs it, or with the instructor's tools.

What differs from a bare ``jupyter lab``:

- its terminals find the course's commands: the environment's ``bin`` folder comes first on
  ``PATH``, so ``copy-that check …`` and ``python`` are the course's in File → New → Terminal
  (see :func:`terminal_command`); they know which lab they run in (``COPY_THAT_LAB``), so a
  learner's ``copy-that --help`` lists the learner's commands only;
- a learner's lab shows nothing of nbgrader's instructor interface (formgrader, Create
  Assignment, the course and assignment lists, Validate: a second checking route beside
  ``check``).  nbgrader stays installed, since grading needs it; its server extensions and its
  JupyterLab extension are switched off for this server only, by the lab's own Jupyter
  configuration folder (``JUPYTER_CONFIG_DIR``; the user's stays on ``JUPYTER_CONFIG_PATH``).
  The instructor's lab leaves them on.
- in both, a collapsed output or a collapsed explanation shows only its "…", not a preview of its
  first line: the answer to the prediction above it stays hidden until asked for;
- in both, JupyterLab's defaults suit a course (``labconfig/default_setting_overrides.json``; the
  user's own settings still win): no question about Jupyter news on the first start, and closing a
  notebook shuts its kernel down; a kernel idle for half an hour is culled (Jupyter's own
  culling), so kernels of notebooks left open do not pile up;
- notebooks open unmodified: the course's contents manager fills in, as it reads a notebook, the
  ``language_info`` the kernel is about to report (see :mod:`autograder.learner.lab_contents`);
- the command prints one line with the lab's address once it answers, instead of JupyterLab's
  start-up log, and opens the learner's browser where there is one;
- ``lang="zh"`` serves the Chinese edition (the course's ``zh/`` folder, a course tree of its own)
  at its start notebook, with ``COPY_THAT_LANG=zh`` for its terminals and kernels.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path

# nbgrader's parts that only an instructor uses (nbgrader 0.9: four server extensions and one
# JupyterLab extension holding the menu, the sidebars and the Validate button)
NBGRADER_SERVER_EXTENSIONS = (
    "nbgrader.server_extensions.formgrader",
    "nbgrader.server_extensions.assignment_list",
    "nbgrader.server_extensions.course_list",
    "nbgrader.server_extensions.validate_assignment",
)
NBGRADER_LAB_EXTENSION = "@jupyter/nbgrader"
# A collapsed output's or collapsed cell's placeholder previews its first line, which would show
# the answer to the prediction above it: the placeholder shows only its "…" (click to expand).
CUSTOM_CSS = (".jp-OutputPlaceholder .jp-PlaceholderText { display: none; }\n"
              ".jp-InputPlaceholder .jp-PlaceholderText { display: none; }\n")
# JupyterLab's defaults for the course (the user's own settings still win)
SETTING_DEFAULTS = {
    # no "get notified about Jupyter news?" question on the first start, no update check
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
    # closing a notebook shuts its kernel down: kernels of closed lectures do not pile up
    "@jupyterlab/notebook-extension:tracker": {"kernelShutdown": True},
}
# Jupyter's own culling: a kernel that ran nothing for half an hour goes, open notebook or not
# (each holds about 250 MB with torch loaded); a busy one is never culled.
CULLING = {"cull_idle_timeout": 1800, "cull_interval": 120, "cull_connected": True, "cull_busy": False}
ROLE_ENV = "COPY_THAT_LAB"            # "learner" or "instructor", in the lab's terminals
READY_S = 180
START = "course/00_start_here.ipynb"


def terminal_command(folder: Path, bindir: str, shell: str | None) -> list[str]:
    """The shell a JupyterLab terminal starts, with ``bindir`` first on its ``PATH``.

    Terminals start a login shell, and a login shell's start-up files may set ``PATH`` afresh
    (Debian's ``/etc/profile`` does): the server's ``PATH`` alone does not reach the prompt.  For
    bash (and where no shell is known) an rc file runs the usual start-up files, then puts
    ``bindir`` first.  Other shells run as login shells, with a ``PATH`` that starts with
    ``bindir`` (start-up files that append to it keep it)."""
    name = os.path.basename(shell or "bash")
    if name not in ("bash", "sh"):
        return [shell, "-l"]
    rc = folder / "bashrc"
    rc.write_text(
        "# Copy That's terminals: the usual start-up files, then the course's environment first\n"
        "[ -f /etc/profile ] && . /etc/profile\n"
        "[ -f \"$HOME/.bashrc\" ] && . \"$HOME/.bashrc\"\n"
        f"export PATH={shlex.quote(bindir)}:\"$PATH\"\n")
    return [shutil.which("bash") or "/bin/bash", "--rcfile", str(rc), "-i"]


def write_lab_config(folder: Path, instructor: bool, bindir: str, shell: str | None) -> Path:
    """A Jupyter configuration folder for this lab: its terminals' shell, and for a learner
    nbgrader's interface switched off.  Returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "labconfig").mkdir(exist_ok=True)
    server: dict = {"terminado_settings": {"shell_command": terminal_command(folder, bindir, shell)},
                    "contents_manager_class": "autograder.learner.lab_contents.CourseContentsManager"}
    if not instructor:
        server["jpserver_extensions"] = {name: False for name in NBGRADER_SERVER_EXTENSIONS}
    (folder / "custom").mkdir(exist_ok=True)
    (folder / "custom" / "custom.css").write_text(CUSTOM_CSS)
    (folder / "jupyter_server_config.json").write_text(json.dumps(
        {"ServerApp": server, "MappingKernelManager": CULLING}, indent=1))
    (folder / "jupyter_lab_config.json").write_text(json.dumps({"LabApp": {"custom_css": True}}, indent=1))
    disabled = {} if instructor else {NBGRADER_LAB_EXTENSION: True}
    (folder / "labconfig" / "page_config.json").write_text(json.dumps({"disabledExtensions": disabled}, indent=1))
    (folder / "labconfig" / "default_setting_overrides.json").write_text(json.dumps(SETTING_DEFAULTS, indent=1))
    return folder


def lab_environment(root: Path, instructor: bool = False, base: dict | None = None) -> dict[str, str]:
    """The environment ``jupyter lab`` runs with: this interpreter's ``bin`` first on ``PATH``
    (the server's and its terminals'), and the configuration folder first on
    ``JUPYTER_CONFIG_PATH``."""
    env = dict(os.environ if base is None else base)
    bindir = os.path.dirname(os.path.abspath(sys.executable))
    env["PATH"] = os.pathsep.join([bindir] + [p for p in env.get("PATH", "").split(os.pathsep) if p and p != bindir])
    kind = "instructor-lab" if instructor else "learner-lab"
    folder = write_lab_config(root / ".cache" / "copy-that" / kind, instructor, bindir, env.get("SHELL"))
    # The folder is the server's configuration folder (JUPYTER_CONFIG_DIR), since only that one's
    # custom/custom.css is served.  The user's own configuration folder stays on the path, right
    # after it, and JupyterLab's settings and workspaces stay where they were.
    from jupyter_core.paths import jupyter_config_dir

    user = env.get("JUPYTER_CONFIG_DIR") or jupyter_config_dir()
    if os.path.abspath(user) != os.path.abspath(folder):
        env.setdefault("JUPYTERLAB_SETTINGS_DIR", os.path.join(user, "lab", "user-settings"))
        env.setdefault("JUPYTERLAB_WORKSPACES_DIR", os.path.join(user, "lab", "workspaces"))
        rest = [p for p in env.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p and p != user]
        env["JUPYTER_CONFIG_PATH"] = os.pathsep.join([user] + rest)
    env["JUPYTER_CONFIG_DIR"] = str(folder)
    env[ROLE_ENV] = "instructor" if instructor else "learner"
    return env


def lab_command(root: Path, ip: str = "127.0.0.1", port: int = 8888, open_browser: bool = False,
                start: str | None = START) -> list[str]:
    argv = [sys.executable, "-m", "jupyterlab", "--ip", ip, "--port", str(port),
            f"--ServerApp.root_dir={root}"]
    if not open_browser:
        argv.append("--no-browser")
    if start:
        argv.append(f"--LabApp.default_url=/lab/tree/{start}")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-root")
    return argv


def browser_available() -> bool:
    """Whether Python's ``webbrowser`` would open a graphical browser here: the one ``$BROWSER``
    names, else on Linux and the BSDs only with a display, and never a text browser, which would
    take this terminal over."""
    import webbrowser

    if os.environ.get("BROWSER"):       # the user's own choice
        return True
    if sys.platform in ("darwin", "win32"):
        try:
            webbrowser.get()
            return True
        except webbrowser.Error:
            return False
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return False
    try:
        browser = webbrowser.get()
    except webbrowser.Error:
        return False
    return isinstance(browser, webbrowser.BackgroundBrowser) or bool(getattr(browser, "background", False))


def _server_info(pid: int, runtime_dir: str) -> dict | None:
    """What a running Jupyter server wrote about itself (``jpserver-<pid>.json``), or None yet."""
    try:
        with open(os.path.join(runtime_dir, f"jpserver-{pid}.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _answers(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


def wait_until_serving(proc, runtime_dir: str, timeout: float = READY_S) -> dict | None:
    """The server's info once it answers (None if the process ended or ``timeout`` passed)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        info = _server_info(proc.pid, runtime_dir)
        if info and _answers(f"{info['url'].rstrip('/')}/api/status?token={info.get('token', '')}"):
            return info
        time.sleep(0.3)
    return None


def start_url(info: dict, start: str | None = START) -> str:
    """The address that opens the lab (at ``start``), with its token."""
    from urllib.parse import quote

    base = info["url"].rstrip("/")
    path = f"/lab/tree/{quote(start)}" if start else "/lab"
    return f"{base}{path}?token={info['token']}" if info.get("token") else base + path


def edition_folder(root: Path, lang: str | None) -> Path:
    """The folder the lab serves: the course, or for ``lang="zh"`` its Chinese edition (``zh/``);
    a FileNotFoundError when the course has none."""
    from ..kernel.i18n import DEFAULT
    from .editions import ZH_DIR

    if not lang or lang == DEFAULT:
        return root
    folder = root / ZH_DIR if root.name != ZH_DIR else root
    if not (folder / START).is_file():
        raise FileNotFoundError(f"no Chinese edition here: {folder / START} is missing")
    return folder


def run_lab(root: Path, instructor: bool, ip: str, port: int, open_browser: bool | None,
            lang: str | None = None) -> int:
    """Serve JupyterLab until it stops (Ctrl-C, as for ``jupyter lab``); print one line with its
    address once it answers, and open the browser (``open_browser``; None: where there is one).
    ``lang="zh"``: the Chinese edition, in Chinese."""
    import secrets
    import signal
    import subprocess
    import webbrowser

    from jupyter_core.paths import jupyter_runtime_dir

    from ..kernel.i18n import DEFAULT, LANG_ENV, say

    try:
        root = edition_folder(root, lang)
    except FileNotFoundError as exc:
        print(exc)
        return 2
    lang = lang or DEFAULT
    env = lab_environment(root, instructor)
    if lang != DEFAULT:
        env[LANG_ENV] = lang
    env.setdefault("JUPYTER_TOKEN", secrets.token_hex(24))   # in the environment: not on a command line
    argv = lab_command(root, ip, port, open_browser=False) + ["--ServerApp.log_level=WARN", "--LabApp.log_level=WARN"]
    print(say(lang, "Starting JupyterLab for the instructor (nbgrader's formgrader and tools shown) ...") if instructor
          else say(lang, "Starting JupyterLab for the learner (nbgrader's instructor tools hidden; `make lab-instructor` "
                         "shows them) ..."), flush=True)
    proc = subprocess.Popen(argv, env=env)
    # Ctrl-C reaches JupyterLab too (same process group), which asks or stops as it always does;
    # this process waits for it.  A SIGTERM is passed on.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
    runtime = env.get("JUPYTER_RUNTIME_DIR") or jupyter_runtime_dir()
    info = wait_until_serving(proc, runtime)
    if info is not None:
        url = start_url(info)
        opened = (open_browser if open_browser is not None else browser_available()) and webbrowser.open(url)
        print(say(lang, "Copy That is open at {url}", url=url) if opened else say(lang, "Copy That is ready: open {url}", url=url),
              flush=True)
    return proc.wait()
