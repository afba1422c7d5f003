"""The course as a whole: configuration, release in sync and leak-free, pins, command line."""
from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest
import yaml
from traitlets.config import PyFileConfigLoader

from autograder.course import build
from autograder.learner.cells import RELEASE_DIR, WARNING_PATTERN, notebooks, role
from autograder.course.layout import SOURCE_DIR, assignments, region_lines
from harness import ROOT, submission

PY = sys.executable


def run_cli(*args: str, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "autograder", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=600)


# --- nbgrader configuration -------------------------------------------------------------------

def load_config():
    return PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()


def test_nbgrader_config_sets_the_course_layout_and_safety_nets():
    c = load_config()
    assert c.CourseDirectory.source_directory == "solutions"
    assert c.CourseDirectory.release_directory == "exercises"
    assert c.IgnorePattern.enabled is True
    assert c.OverwriteCells.add_missing_cells is True
    assert 10 <= c.Execute.timeout <= 300
    assert "autograder.grading.feedback.StripHiddenTracebacks" in c.GenerateFeedback.preprocessors
    assert "nbgrader.preprocessors.ClearHiddenTests" in c.GenerateFeedback.preprocessors


def test_warning_pattern_drops_warnings_but_not_other_stderr():
    warning = "/x/y.py:12: UserWarning: TypedStorage is deprecated.\n  return a.storage()\n"
    assert re.search(WARNING_PATTERN, warning)
    assert re.search(WARNING_PATTERN, "<ipython-input-3>:2: DeprecationWarning: old\n")
    assert not re.search(WARNING_PATTERN, "Traceback (most recent call last):\n  ValueError: no\n")
    assert not re.search(WARNING_PATTERN, "I print to stderr\n")


# --- the release ------------------------------------------------------------------------------

def test_every_assignment_has_one_notebook_in_solutions_and_exercises():
    found = assignments(ROOT)
    assert "a1_views" in found
    for a in found:
        assert [p.name for p in notebooks(ROOT / SOURCE_DIR / a)] == [f"{a}.ipynb"]
        assert [p.name for p in notebooks(ROOT / RELEASE_DIR / a)] == [f"{a}.ipynb"]


def test_exercises_are_exactly_what_nbgrader_generates():
    report = build.check(ROOT)
    assert report.in_sync, report.describe()


def test_sync_check_notices_a_stale_release(tmp_path):
    course = tmp_path / "course"
    for name in ("nbgrader_config.py",):
        shutil.copy2(ROOT / name, course / name) if course.exists() else (course.mkdir(), shutil.copy2(ROOT / name, course / name))
    shutil.copytree(ROOT / SOURCE_DIR / "a1_views", course / SOURCE_DIR / "a1_views")
    shutil.copytree(ROOT / RELEASE_DIR / "a1_views", course / RELEASE_DIR / "a1_views")
    assert build.check(course).in_sync
    release = course / RELEASE_DIR / "a1_views" / "a1_views.ipynb"
    release.write_text(release.read_text().replace("Four small functions", "Five small functions"))
    (course / RELEASE_DIR / "a1_views" / "extra.txt").write_text("x")
    report = build.check(course)
    assert report.stale == ["a1_views/a1_views.ipynb"] and report.extra == ["a1_views/extra.txt"]
    build.build(course)
    assert build.check(course).in_sync


@pytest.mark.parametrize("assignment", assignments(ROOT))
def test_release_leaks_no_solution_code_and_no_hidden_tests(assignment):
    text = (ROOT / RELEASE_DIR / assignment / f"{assignment}.ipynb").read_text()
    assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    release = nbformat.read(ROOT / RELEASE_DIR / assignment / f"{assignment}.ipynb", as_version=4)
    source = nbformat.read(ROOT / SOURCE_DIR / assignment / f"{assignment}.ipynb", as_version=4)
    released_lines = {line.strip() for c in release.cells for line in c.source.splitlines()}
    leaked = region_lines(source) & released_lines
    assert not leaked, f"{assignment}: released {sorted(leaked)[:3]}"
    for cell in source.cells:
        if role(cell).is_manual:
            rel = [c for c in release.cells if role(c).grade_id == role(cell).grade_id]
            assert rel and cell.source.strip() not in rel[0].source, "model answer leaked"


@pytest.mark.parametrize("assignment", assignments(ROOT))
def test_release_cells_carry_consistent_nbgrader_metadata(assignment):
    nb = nbformat.read(ROOT / RELEASE_DIR / assignment / f"{assignment}.ipynb", as_version=4)
    ids = [role(c).grade_id for c in nb.cells if role(c).grade_id]
    assert len(ids) == len(set(ids)), "grade ids are unique"
    for cell in nb.cells:
        r = role(cell)
        if r.grade_id:
            assert re.fullmatch(r"[a-zA-Z0-9_\-]+", r.grade_id)
        if r.is_test:
            assert r.locked and r.points > 0, r.grade_id
    setup = [c for c in nb.cells if role(c).locked and not role(c).grade]
    assert setup and "from autograder.kernel import checks as ck" in setup[0].source


@pytest.mark.parametrize("assignment", assignments(ROOT))
def test_test_cells_never_end_with_a_bare_value(assignment):
    """nbgrader reads a number shown by a test cell as partial credit: tests end in statements."""
    nb = nbformat.read(ROOT / SOURCE_DIR / assignment / f"{assignment}.ipynb", as_version=4)
    for cell in nb.cells:
        if role(cell).is_test:
            body = ast.parse(cell.source).body
            assert body, f"{role(cell).grade_id} is empty in the instructor's notebook"
            last = body[-1]
            assert not (isinstance(last, ast.Expr) and not isinstance(last.value, ast.Call)), role(cell).grade_id


# --- pins -------------------------------------------------------------------------------------

def pinned(lines) -> dict[str, str]:
    out = {}
    for line in lines:
        m = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)\s*==\s*([^\s;#]+).*", line)
        if m:
            out[m.group(1).lower().replace("_", "-")] = m.group(2)
    return out


def test_pins_agree_across_pyproject_requirements_and_environment_yml():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    top = pinned(project["dependencies"] + project["optional-dependencies"]["test"])
    lock = pinned((ROOT / "requirements.txt").read_text().splitlines())
    for name, version in top.items():
        assert lock.get(name) == version, f"requirements.txt pins {name}=={lock.get(name)}, pyproject {version}"
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = {}
    for dep in env["dependencies"]:
        if isinstance(dep, str) and "=" in dep:
            name, version = dep.split("=", 1)
            conda[name] = version
        elif isinstance(dep, dict):
            conda.update({k: v for k, v in pinned(dep["pip"]).items()})
    conda_names = {"torch": "pytorch", "graphviz": "python-graphviz", "psycopg2-binary": "psycopg2"}
    for name, version in top.items():
        assert conda.get(conda_names.get(name, name)) == version, f"environment.yml: {name} is not pinned to {version}"
    assert conda["python"] == "3.11" and project["requires-python"] == "==3.11.*"
    assert "graphviz" in env["dependencies"], "conda brings Graphviz's dot"


def test_installed_versions_are_the_pinned_ones():
    from autograder.learner.doctor import PINNED, _version

    for dist, pin in PINNED.items():
        assert (_version(dist) or "").split("+")[0] == pin, dist


def test_the_lock_is_complete_and_leaves_out_the_slow_iri_checker():
    """`make` installs requirements.txt with --no-deps: the lock must hold everything it needs.

    It leaves out rfc3987-syntax (and lark), jsonschema's optional IRI-format checker: it builds
    a parser when imported, which added 2.7 s to every process that loads nbformat."""
    check = subprocess.run([PY, "-m", "pip", "check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    lock = (ROOT / "requirements.txt").read_text().lower()
    assert "rfc3987-syntax" not in lock and "\nlark==" not in lock
    probe = subprocess.run([PY, "-c", "import nbformat.validator, sys; "
                                      "print('rfc3987_syntax' in sys.modules)"], capture_output=True, text=True)
    assert probe.stdout.strip() == "False", probe.stderr


# --- command line -----------------------------------------------------------------------------

def test_python_m_autograder_shows_its_commands():
    out = run_cli("--help")
    assert out.returncode == 0
    for command in ("doctor", "build", "check"):
        assert command in out.stdout


def test_doctor_reports_versions_and_graphviz():
    out = run_cli("doctor")
    assert out.returncode == 0, out.stderr
    for word in ("torch", "2.13.0", "nbgrader", "dot (Graphviz)", "CUDA", "grading sandbox", "grading limits"):
        assert word in out.stdout
    from autograder.grading.cgroups import available
    from autograder.grading.bwrap import probe

    text = " ".join(out.stdout.split())
    assert ("works" if probe() is None else "bubblewrap") in text
    assert ("cgroup " + available()[0]) in text if available()[0] else "per process only" in text


def test_build_check_passes_on_the_committed_release():
    out = run_cli("build", "--check")
    assert out.returncode == 0 and "exactly what nbgrader generates" in out.stdout


def test_check_on_the_blank_release_says_not_started(tmp_path):
    nb = tmp_path / "a1_views.ipynb"
    shutil.copy2(ROOT / RELEASE_DIR / "a1_views" / "a1_views.ipynb", nb)
    out = run_cli("check", str(nb))
    assert out.returncode == 1
    assert "test_shares_memory" in out.stdout and "NotImplementedError" in out.stdout
    assert "0/5 visible tests pass" in out.stdout
    assert "hidden tests" in out.stdout


def test_check_on_a_wrong_answer_shows_the_diagnosis(tmp_path):
    nb = tmp_path / "a1_views.ipynb"
    answer = "def shares_memory(a, b):\n    return a.data_ptr() == b.data_ptr()\n"
    nbformat.write(submission("a1_views", {"shares_memory": answer}), nb)
    out = run_cli("check", str(nb), env=dict(os.environ, COLUMNS="250"))   # wide: one table row, one line
    assert out.returncode == 1
    assert "4/5 visible tests pass" in out.stdout
    row = next(line for line in out.stdout.splitlines() if "test_shares_memory " in line)
    assert "✗" in row and "0/1" in row
    assert "shares_memory(a, a[1]) is False; expected True. Likely mistake: a[1] is a view of a" in row, row


def test_check_on_the_reference_answers_passes(tmp_path):
    nb = tmp_path / "a1_views.ipynb"
    nbformat.write(submission("a1_views"), nb)
    out = run_cli("check", str(nb))
    assert out.returncode == 0, out.stdout
    flat = " ".join(out.stdout.split())
    assert "5/5 visible tests pass, 5/5 points" in flat
    assert "Hidden tests run when the assignment is graded; written answers are read by hand." in flat
    assert "still empty" not in flat and "Not done yet" not in flat


def test_check_is_not_done_while_a_written_answer_is_empty(tmp_path):
    """Every function right, the written question left as handed out: `check` says so and exits 1."""
    nb = submission("a1_views", replace={"why_not_id": "YOUR ANSWER HERE"})
    nbformat.write(nb, tmp_path / "a1_views.ipynb")
    out = run_cli("check", str(tmp_path / "a1_views.ipynb"))
    flat = " ".join(out.stdout.split())
    assert out.returncode == 1, out.stdout
    assert "5/5 visible tests pass" in flat
    assert "1 written answer is still empty (graded by hand): why_not_id" in flat
    assert "Not done yet: 1 written answer to write." in flat


def test_nbgrader_works_without_activating_the_venv(tmp_path):
    """nbgrader runs `alembic` by name; the config makes it findable from `.venv/bin/python -m`."""
    shutil.copy2(ROOT / "nbgrader_config.py", tmp_path / "nbgrader_config.py")
    shutil.copytree(ROOT / SOURCE_DIR / "a1_views", tmp_path / SOURCE_DIR / "a1_views")
    bindir = os.path.dirname(PY)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if os.path.realpath(p) != os.path.realpath(bindir) and p)
    env.pop("VIRTUAL_ENV", None)
    out = subprocess.run([PY, "-m", "nbgrader", "generate_assignment", "a1_views"], cwd=tmp_path,
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "gradebook.db").exists()
    assert (tmp_path / RELEASE_DIR / "a1_views" / "a1_views.ipynb").exists()
