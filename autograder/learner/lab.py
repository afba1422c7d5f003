"""``copy-that lab``: JupyterLab as a learner needs it, or with the instructor's tools.

Two things differ from a bare ``jupyter lab``:

- its terminals find the course's commands: the environment's ``bin`` folder comes first on
  ``PATH``, so ``copy-that check …`` and ``python`` are the course's in File → New → Terminal
  (see :func:`terminal_command`);
- a learner's lab shows nothing of nbgrader's instructor interface (formgrader, Create
  Assignment, the course and assignment lists, Validate: a second checking route beside
  ``check``).  nbgrader stays installed, since grading needs it; its server extensions and its
  JupyterLab extension are switched off for this server only, by the lab's own Jupyter
  configuration folder (``JUPYTER_CONFIG_DIR``; the user's stays on ``JUPYTER_CONFIG_PATH``).
  The instructor's lab leaves them on.
- in both, a collapsed output shows only its "…", not a preview of its first line: the answer
  to the prediction above it stays hidden until asked for.
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
# A collapsed output's placeholder previews its first line, which would show the answer to the
# prediction above it: the placeholder shows only its "…" (click to expand).
CUSTOM_CSS = ".jp-OutputPlaceholder .jp-PlaceholderText { display: none; }\n"


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
    server: dict = {"terminado_settings": {"shell_command": terminal_command(folder, bindir, shell)}}
    if not instructor:
        server["jpserver_extensions"] = {name: False for name in NBGRADER_SERVER_EXTENSIONS}
    (folder / "custom").mkdir(exist_ok=True)
    (folder / "custom" / "custom.css").write_text(CUSTOM_CSS)
    (folder / "jupyter_server_config.json").write_text(json.dumps({"ServerApp": server}, indent=1))
    (folder / "jupyter_lab_config.json").write_text(json.dumps({"LabApp": {"custom_css": True}}, indent=1))
    disabled = {} if instructor else {NBGRADER_LAB_EXTENSION: True}
    (folder / "labconfig" / "page_config.json").write_text(json.dumps({"disabledExtensions": disabled}, indent=1))
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
    return env


def lab_command(root: Path, ip: str = "127.0.0.1", port: int = 8888, open_browser: bool = False,
                start: str | None = "course/00_start_here.ipynb") -> list[str]:
    argv = [sys.executable, "-m", "jupyterlab", "--ip", ip, "--port", str(port),
            f"--ServerApp.root_dir={root}"]
    if not open_browser:
        argv.append("--no-browser")
    if start:
        argv.append(f"--LabApp.default_url=/lab/tree/{start}")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-root")
    return argv


def run_lab(root: Path, instructor: bool, ip: str, port: int, open_browser: bool) -> int:
    """Replace this process with JupyterLab (Ctrl-C stops it as it stops ``jupyter lab``)."""
    env = lab_environment(root, instructor)
    argv = lab_command(root, ip, port, open_browser)
    who = "instructor (nbgrader's formgrader and tools shown)" if instructor else \
        "learner (nbgrader's instructor tools hidden; `make lab-instructor` shows them)"
    print(f"JupyterLab for the {who}. In its terminals: copy-that check exercises/<a>/<a>.ipynb", flush=True)
    os.execve(argv[0], argv, env)
    return 0  # not reached
