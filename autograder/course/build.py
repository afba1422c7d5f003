"""exercises/ from solutions/ with nbgrader itself, and the check that they are in sync; for each
edition of the course (the Chinese one: zh/exercises/ from zh/solutions/)."""
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
from ..learner.editions import EDITION_ENV, EDITIONS, SOURCE_EDITION, edition_root, folder


class BuildError(RuntimeError):
    """nbgrader could not generate the release."""


def nbgrader_env(edition: str | None = None) -> dict[str, str]:
    """The environment for an nbgrader child process: this interpreter's bin/ first on PATH
    (nbgrader runs ``alembic`` by name); with ``edition``, the edition the course's configuration
    selects (``$COPY_THAT_EDITION``)."""
    env = dict(os.environ)
    bindir = os.path.dirname(sys.executable)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    if edition is not None:
        env[EDITION_ENV] = edition
    return env


def run_nbgrader(*argv: str, cwd: Path, capture: bool = True, edition: str | None = None) -> subprocess.CompletedProcess:
    """``python -m nbgrader ARGV`` in ``cwd`` with this interpreter: the one way the package starts nbgrader."""
    return subprocess.run([sys.executable, "-m", "nbgrader", *argv], cwd=cwd, env=nbgrader_env(edition),
                          capture_output=capture, text=True)


def editions(root: Path) -> list[str]:
    """The editions this course has: English, and the Chinese one where ``zh/solutions/`` exists."""
    return [e for e in EDITIONS if e == SOURCE_EDITION or (root / folder(e, "source")).is_dir()]


def generate_into(root: Path, dest: Path, assignment: str = "*", edition: str = SOURCE_EDITION) -> Path:
    """Run ``nbgrader generate_assignment`` on a copy of the course's ``edition``; the release lands
    in ``dest``.

    Only that edition's source folder is copied, so one edition's notebooks never reach the
    other's release.  Nothing in ``root`` is written: no gradebook, no partial release.
    """
    source, release = folder(edition, "source"), folder(edition, "release")
    with tempfile.TemporaryDirectory(prefix="copy-that-build-") as tmp:
        work = Path(tmp)
        shutil.copy2(root / "nbgrader_config.py", work / "nbgrader_config.py")
        shutil.copytree(root / source, work / source,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        proc = run_nbgrader("generate_assignment", assignment, "--force", "--no-db", cwd=work, edition=edition)
        if proc.returncode != 0:
            raise BuildError(f"nbgrader generate_assignment failed:\n{proc.stdout}{proc.stderr}")
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(work / release, dest)
    return dest


@dataclass
class SyncReport:
    stale: list[str] = field(default_factory=list)     # differ from what nbgrader generates
    missing: list[str] = field(default_factory=list)   # generated but absent from exercises/
    extra: list[str] = field(default_factory=list)     # in exercises/ but not generated
    edition: str = SOURCE_EDITION                       # whose exercises/: the root's or zh/'s

    @property
    def in_sync(self) -> bool:
        return not (self.stale or self.missing or self.extra)

    def describe(self) -> str:
        release, source = folder(self.edition, "release"), folder(self.edition, "source")
        if self.in_sync:
            return f"{release}/ is exactly what nbgrader generates from {source}/."
        lines = [f"{release}/ is out of date with {source}/ (run `make exercises`):"]
        lines += [f"  changed: {p}" for p in self.stale]
        lines += [f"  missing: {p}" for p in self.missing]
        lines += [f"  not generated from {source}/: {p}" for p in self.extra]
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


def check(root: Path, edition: str = SOURCE_EDITION) -> SyncReport:
    """Compare the edition's exercises/ byte for byte with a fresh nbgrader release of its solutions/."""
    with tempfile.TemporaryDirectory(prefix="copy-that-check-") as tmp:
        generated = generate_into(root, Path(tmp) / RELEASE_DIR, edition=edition)
        report = compare(generated, edition_root(root, edition) / RELEASE_DIR)
        report.edition = edition
        return report


def build(root: Path, assignment: str | None = None, edition: str = SOURCE_EDITION) -> SyncReport:
    """Regenerate the edition's exercises/ (or only ``exercises/<assignment>/``) from its solutions/;
    say what changed."""
    release = edition_root(root, edition) / RELEASE_DIR
    with tempfile.TemporaryDirectory(prefix="copy-that-build-out-") as tmp:
        generated = generate_into(root, Path(tmp) / RELEASE_DIR, assignment or "*", edition)
        if assignment:
            generated, target = generated / assignment, release / assignment
        else:
            target = release
        report = compare(generated, target)
        report.edition = edition
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(generated, target)
    return report
