"""Scratch courses for the tests: the release in a gradebook, submissions where nbgrader collects
them, plain ``nbgrader autograde``, and what a grading run left in the gradebook and on disk."""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import nbformat
import pytest

from autograder.course.answers import Answer, cells_testing  # noqa: F401  (the corpus files import them from here)
from autograder.course.build import run_nbgrader
from autograder.learner.cells import RELEASE_DIR, notebooks, role
from autograder.course.layout import SOURCE_DIR, assignments, fill_answers, solution_sources

ROOT = Path(__file__).resolve().parent.parent


def _no_bubblewrap() -> bool:
    from autograder.grading.bwrap import bwrap_path

    return bwrap_path() is None and not os.environ.get("CI")


# tests that grade in the sandbox: skipped, saying why, only outside CI where bubblewrap is missing
SANDBOX = pytest.mark.skipif(_no_bubblewrap(), reason="bubblewrap is not installed (make test-deps installs it as root)")


@dataclass
class Graded:
    """Scores per student: grade_id -> (score, max_score); plus the autograded notebooks."""

    scores: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)
    notebooks: dict[str, nbformat.NotebookNode] = field(default_factory=dict)
    feedback: dict[str, str] = field(default_factory=dict)   # student -> feedback HTML
    log: str = ""

    def total(self, student: str, cells: set[str] | None = None) -> tuple[float, float]:
        items = [v for k, v in self.scores[student].items() if cells is None or k in cells]
        return sum(s for s, _ in items), sum(m for _, m in items)

    def outputs_of(self, student: str, grade_id: str) -> str:
        for cell in self.notebooks[student].cells:
            if role(cell).grade_id == grade_id:
                parts = []
                for o in cell.get("outputs", []):
                    if o.output_type == "stream":
                        parts.append(o.text)
                    elif o.output_type == "error":
                        parts.append(f"{o.ename}: {o.evalue}")
                return "\n".join(parts)
        raise KeyError(grade_id)


def release_notebook(assignment: str) -> Path:
    [path] = notebooks(ROOT / RELEASE_DIR / assignment)
    return path


def source_notebook(assignment: str) -> Path:
    [path] = notebooks(ROOT / SOURCE_DIR / assignment)
    return path


def reference_answers(assignment: str) -> dict[str, str]:
    return solution_sources(nbformat.read(source_notebook(assignment), as_version=4))


def submission(assignment: str, replace: dict[str, str] | None = None, blank: bool = False) -> nbformat.NotebookNode:
    """The released notebook filled with the reference answers, some replaced (or none: ``blank``)."""
    release = nbformat.read(release_notebook(assignment), as_version=4)
    if blank:
        return release
    answers = reference_answers(assignment)
    answers.update(replace or {})
    return fill_answers(release, answers)


# A folder that every pytest-xdist worker of one run sees (tests/conftest.py sets it): what
# several test files need alike is made there once, by whichever worker asks first.
SHARED: Path | None = None


def made_once(name: str, make: Callable[[Path], None]) -> Path:
    """``SHARED/name``, made by ``make(folder)`` on first use in this run (a file lock keeps the
    other workers waiting until it is complete)."""
    from filelock import FileLock

    assert SHARED is not None, "tests/conftest.py sets harness.SHARED for the run"
    folder = SHARED / name
    with FileLock(str(folder) + ".lock"):
        if not folder.exists():
            partial = SHARED / f"{name}.partial"
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir(parents=True)
            make(partial)
            partial.rename(folder)
    return folder


def scratch_course(workdir: Path, assignment: str = "*", db_url: str | None = None) -> Path:
    """A course root with one assignment (or every one: ``"*"``) released into its gradebook,
    as an instructor has it after ``nbgrader generate_assignment``.

    With the default SQLite gradebook the course is a copy of one made once per test run."""
    if db_url is None and SHARED is not None:
        name = "course-" + ("all" if assignment == "*" else assignment)
        shutil.copytree(made_once(name, lambda d: _new_course(d, assignment)), workdir, dirs_exist_ok=True)
        return workdir
    return _new_course(workdir, assignment, db_url)


def _new_course(workdir: Path, assignment: str, db_url: str | None = None) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    config = (ROOT / "nbgrader_config.py").read_text()
    if db_url:
        config += f"\nc.CourseDirectory.db_url = {db_url!r}\n"
    (workdir / "nbgrader_config.py").write_text(config)
    for name in (assignments(ROOT) if assignment == "*" else [assignment]):
        shutil.copytree(ROOT / SOURCE_DIR / name, workdir / SOURCE_DIR / name)
    proc = run_nbgrader("generate_assignment", assignment, "--force", cwd=workdir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return workdir


def plain_autograde(root: Path, assignment: str = "*", feedback: bool = False) -> str:
    """Plain ``nbgrader autograde`` (then ``generate_feedback``) on everything submitted; the log."""
    log = []
    for cmd in [["autograde", assignment, "--force"]] + ([["generate_feedback", assignment, "--force"]] if feedback else []):
        proc = run_nbgrader(*cmd, cwd=root)
        log.append(proc.stdout + proc.stderr)
    return "\n".join(log)


def read_grades(root: Path, assignment: str, students) -> Graded:
    """What the gradebook, ``autograded/`` and ``feedback/`` hold for these students."""
    from nbgrader.api import Gradebook

    nb_name = release_notebook(assignment).name
    graded = Graded()
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for student in students:
            try:
                sub = gb.find_submission_notebook(Path(nb_name).stem, assignment, student)
            except Exception:
                continue  # not graded at all: the test that looks for it fails and shows why
            graded.scores[student] = {g.name: (float(g.score or 0), float(g.max_score)) for g in sub.grades}
            path = root / "autograded" / student / assignment / nb_name
            if path.exists():
                graded.notebooks[student] = nbformat.read(path, as_version=4)
            page = root / "feedback" / student / assignment / (Path(nb_name).stem + ".html")
            if page.exists():
                graded.feedback[student] = page.read_text()
    return graded


def submit(root: Path, assignment: str, student: str, content: nbformat.NotebookNode | bytes) -> Path:
    """Put a submission where nbgrader collects them: submitted/<student>/<assignment>/."""
    target = root / "submitted" / student / assignment / release_notebook(assignment).name
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        target.write_bytes(content)
    else:
        nbformat.write(content, target)
    return target



def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc, group: bool = False, grace: float = 20) -> None:
    """End a server the test started: SIGTERM (to its process group with ``group``), then SIGKILL."""
    import os
    import signal
    import subprocess

    def send(sig: int) -> None:
        try:
            os.killpg(proc.pid, sig) if group else proc.send_signal(sig)
        except ProcessLookupError:
            pass

    send(signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        send(signal.SIGKILL)
        proc.wait()
