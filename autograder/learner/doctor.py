"""What ``autograder doctor`` reports: versions, Graphviz, accelerators, and what to fix."""
from __future__ import annotations

import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata

# The versions the course is pinned to (pyproject.toml / requirements.txt / environment.yml).
PINNED = {
    "torch": "2.13.0",
    "nbgrader": "0.9.6",
    "jupyterlab": "4.6.6",
    "torchviz": "0.0.3",
    "graphviz": "0.21",
    "matplotlib": "3.11.2",
}


@dataclass
class Finding:
    name: str
    value: str
    ok: bool
    fix: str = ""


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _dot_fix() -> str:
    system = platform.system()
    if system == "Darwin":
        return "brew install graphviz   (or: conda install -c conda-forge graphviz)"
    if system == "Windows":
        return "conda install -c conda-forge graphviz   (or: winget install graphviz)"
    return "sudo apt-get install graphviz   (Fedora: sudo dnf install graphviz; conda: conda install -c conda-forge graphviz)"


def diagnose() -> list[Finding]:
    findings = [Finding("python", platform.python_version(), sys.version_info[:2] == (3, 11),
                        "the course is pinned to Python 3.11: recreate .venv with python3.11")]
    for dist, pin in PINNED.items():
        got = _version(dist)
        if got is None:
            findings.append(Finding(dist, "not installed", False, "run `make lab` or `pip install -r requirements.txt`"))
        else:
            base = got.split("+")[0]
            findings.append(Finding(dist, got, base == pin,
                                    f"pinned to {pin}: `pip install -r requirements.txt` in .venv"))
    dot = shutil.which("dot")
    if dot:
        out = subprocess.run([dot, "-V"], capture_output=True, text=True)
        findings.append(Finding("dot (Graphviz)", (out.stderr or out.stdout).strip(), True))
    else:
        findings.append(Finding("dot (Graphviz)", "missing", False,
                                f"diagrams fall back to text until you install it: {_dot_fix()}"))
    try:
        import torch

        cuda = torch.cuda.is_available()
        findings.append(Finding("CUDA", f"{torch.cuda.get_device_name(0)}" if cuda else "not available", True,
                                ""))
        mps = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
        findings.append(Finding("MPS (Apple)", "available" if mps else "not available", True))
    except ImportError:
        findings.append(Finding("torch import", "failed", False, "reinstall: `pip install torch==2.13.0`"))
    bwrap = shutil.which("bwrap")
    findings.append(Finding("bubblewrap (grading sandbox)", bwrap or "missing", True,
                            "" if bwrap else "instructors only: sudo apt-get install bubblewrap"))
    return findings
