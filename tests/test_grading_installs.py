"""Grading works however the package is installed and reached: from a course folder holding
another checkout's package than the environment's editable install, through links, and with a
plain (non-editable) install in an environment of its own.

Each test grades one submission of a1 (judged: the kernel's sandbox and the judge's both start)
with ``python -m autograder grade`` as an instructor types it.  Before the fix, the first failed
with "No module named 'autograder'" in the fork server (the sandbox showed the course folder's
package, the environment's finder pointed at a checkout the sandbox hides), the second with the
fork server's file not found (its path went through a link the sandbox does not have).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import autograder
from harness import SANDBOX, scratch_course, submission, submit

PACKAGE = Path(autograder.__file__).resolve().parent


def _grade(python: Path | str, root: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(python), "-m", "autograder", "grade", "a1_views", "--jobs", "1"], cwd=root,
                          capture_output=True, text=True, timeout=600, env=env)


def _scores(root: Path) -> float:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        return float(gb.find_submission("a1_views", "alice").score)


@SANDBOX
def test_a_course_folder_holding_another_checkouts_package_through_a_link(tmp_path):
    """The course folder's ``autograder`` is a link to a second checkout's package; the environment's
    editable install points at this checkout.  ``python -m`` imports the course folder's package,
    and so must both sandboxes."""
    other = tmp_path / "other-checkout"
    shutil.copytree(PACKAGE, other / "autograder", ignore=shutil.ignore_patterns("__pycache__"))
    root = scratch_course(tmp_path / "course", "a1_views")
    (root / "autograder").symlink_to(other / "autograder")
    submit(root, "a1_views", "alice", submission("a1_views"))
    out = _grade(sys.executable, root)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert "No module named" not in out.stderr and "can't open file" not in out.stderr
    assert _scores(root) == 13.0, out.stdout[-2000:]


@SANDBOX
def test_a_plain_install_in_an_environment_reached_through_a_link(tmp_path):
    """The wheel installed (not editable) in an environment of its own, started through a link
    to it; the course folder holds no package."""
    wheels = tmp_path / "wheel"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(wheels), str(PACKAGE.parent)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = wheels.glob("copy_that_autograder-*.whl")
    venv = tmp_path / "envs" / "grading"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                                "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-3000:]
    # the dependencies come from the course's environment, as a plain path (its .pth files, the
    # editable install of this checkout among them, are not run)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "course-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    link = tmp_path / "env-link"
    link.symlink_to(venv)
    root = scratch_course(tmp_path / "course", "a1_views")
    submit(root, "a1_views", "alice", submission("a1_views"))
    out = _grade(link / "bin" / "python", root)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert _scores(root) == 13.0, out.stdout[-2000:]
    where = subprocess.run([str(link / "bin" / "python"), "-c", "import autograder; print(autograder.__file__)"],
                           cwd=root, capture_output=True, text=True).stdout.strip()
    assert Path(where).is_relative_to(venv.resolve()) or Path(where).is_relative_to(link), where
