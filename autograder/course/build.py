"""exercises/ from solutions/ with nbgrader itself, and the check that they are in sync."""
from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..learner.cells import RELEASE_DIR
from .layout import SOURCE_DIR


class BuildError(RuntimeError):
    """nbgrader could not generate the release."""


def nbgrader_env() -> dict[str, str]:
    """The environment for an nbgrader child process: this interpreter's bin/ first on PATH
    (nbgrader runs ``alembic`` by name)."""
    env = dict(os.environ)
    bindir = os.path.dirname(sys.executable)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    return env


def run_nbgrader(*argv: str, cwd: Path, capture: bool = True) -> subprocess.CompletedProcess:
    """``python -m nbgrader ARGV`` in ``cwd`` with this interpreter: the one way the package starts nbgrader."""
    return subprocess.run([sys.executable, "-m", "nbgrader", *argv], cwd=cwd, env=nbgrader_env(),
                          capture_output=capture, text=True)


def generate_into(root: Path, dest: Path, assignment: str = "*") -> Path:
    """Run ``nbgrader generate_assignment`` on a copy of the course; the release lands in ``dest``.

    Nothing in ``root`` is written: no gradebook, no partial release.
    """
    with tempfile.TemporaryDirectory(prefix="copy-that-build-") as tmp:
        work = Path(tmp)
        shutil.copy2(root / "nbgrader_config.py", work / "nbgrader_config.py")
        shutil.copytree(root / SOURCE_DIR, work / SOURCE_DIR,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        proc = run_nbgrader("generate_assignment", assignment, "--force", "--no-db", cwd=work)
        if proc.returncode != 0:
            raise BuildError(f"nbgrader generate_assignment failed:\n{proc.stdout}{proc.stderr}")
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(work / RELEASE_DIR, dest)
    return dest


@dataclass
class SyncReport:
    stale: list[str] = field(default_factory=list)     # differ from what nbgrader generates
    missing: list[str] = field(default_factory=list)   # generated but absent from exercises/
    extra: list[str] = field(default_factory=list)     # in exercises/ but not generated

    @property
    def in_sync(self) -> bool:
        return not (self.stale or self.missing or self.extra)

    def describe(self) -> str:
        if self.in_sync:
            return "exercises/ is exactly what nbgrader generates from solutions/."
        lines = ["exercises/ is out of date with solutions/ (run `make exercises`):"]
        lines += [f"  changed: {p}" for p in self.stale]
        lines += [f"  missing: {p}" for p in self.missing]
        lines += [f"  not generated from solutions/: {p}" for p in self.extra]
        return "\n".join(lines)


def _files(folder: Path) -> set[str]:
    if not folder.is_dir():
        return set()
    return {str(p.relative_to(folder)) for p in folder.rglob("*")
            if p.is_file() and ".ipynb_checkpoints" not in p.parts}


def compare(generated: Path, released: Path) -> SyncReport:
    gen, rel = _files(generated), _files(released)
    report = SyncReport(missing=sorted(gen - rel), extra=sorted(rel - gen))
    for name in sorted(gen & rel):
        if not filecmp.cmp(generated / name, released / name, shallow=False):
            report.stale.append(name)
    return report


def check(root: Path) -> SyncReport:
    """Compare exercises/ byte for byte with a fresh nbgrader release of solutions/."""
    with tempfile.TemporaryDirectory(prefix="copy-that-check-") as tmp:
        generated = generate_into(root, Path(tmp) / RELEASE_DIR)
        return compare(generated, root / RELEASE_DIR)


def build(root: Path, assignment: str | None = None) -> SyncReport:
    """Regenerate exercises/ (or only ``exercises/<assignment>/``) from solutions/; say what changed."""
    with tempfile.TemporaryDirectory(prefix="copy-that-build-out-") as tmp:
        generated = generate_into(root, Path(tmp) / RELEASE_DIR, assignment or "*")
        if assignment:
            generated, target = generated / assignment, root / RELEASE_DIR / assignment
        else:
            target = root / RELEASE_DIR
        report = compare(generated, target)
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(generated, target)
    return report
