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
    for word in ("torch", "2.13.0", "nbgrader", "dot (Graphviz)", "CUDA", "grading sandbox", "grading limits",
                 "keyrings (grading sandbox)"):
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
    assert "shares_memory" in out.stdout and "NotImplementedError" in out.stdout
    assert "0/5 visible tests pass" in out.stdout
    assert "hidden tests" in out.stdout


def test_check_on_a_wrong_answer_shows_the_diagnosis(tmp_path):
    nb = tmp_path / "a1_views.ipynb"
    answer = "def shares_memory(a, b):\n    return a.data_ptr() == b.data_ptr()\n"
    nbformat.write(submission("a1_views", {"shares_memory": answer}), nb)
    out = run_cli("check", str(nb), env=dict(os.environ, COLUMNS="250"))   # wide: one table row, one line
    assert out.returncode == 1
    assert "3/4 visible tests pass" in out.stdout
    row = next(line for line in out.stdout.splitlines() if "│ shares_memory " in line)
    assert "✗" in row and "0/1" in row
    assert "shares_memory(a, a[1]) is False; expected True. Likely mistake: a[1] is a view of a" in row, row


def test_check_on_the_reference_answers_passes(tmp_path):
    nb = tmp_path / "a1_views.ipynb"
    nbformat.write(submission("a1_views"), nb)
    out = run_cli("check", str(nb))
    assert out.returncode == 0, out.stdout
    flat = " ".join(out.stdout.split())
    assert "4/4 visible tests pass, 4/4 points" in flat
    assert "not checked here: predictions (the grading tells)" in flat
    # outside a clone of the course (no solutions/ to run the hidden tests from): the instructor's grading
    assert "Your instructor's grading runs the hidden tests" in flat and "written answers are read by hand" in flat
    row = next(line for line in out.stdout.splitlines() if "│ predictions " in line)
    assert "?/1" in row and "✓" not in row, row
    assert "still empty" not in flat and "Not done yet" not in flat


def test_check_is_not_done_while_a_written_answer_is_empty(tmp_path):
    """Every function right, the written question left as handed out: `check` says so and exits 1."""
    nb = submission("a1_views", replace={"why_not_id": "YOUR ANSWER HERE"})
    nbformat.write(nb, tmp_path / "a1_views.ipynb")
    out = run_cli("check", str(tmp_path / "a1_views.ipynb"))
    flat = " ".join(out.stdout.split())
    assert out.returncode == 1, out.stdout
    assert "4/4 visible tests pass" in flat
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


# --- questions with a right letter: no answer in the release, feedback in check -----------------

def _questions(assignment: str):
    """The author's half of every question set of one assignment, with the salt its release uses."""
    from autograder.course import predictions as command

    nb = nbformat.read(ROOT / SOURCE_DIR / assignment / f"{assignment}.ipynb", as_version=4)
    for cell in nb.cells:
        if role(cell).is_test and command.BEGIN in cell.source:
            hidden = cell.source.split(command.BEGIN, 1)[1].split(command.END)[0]
            questions = command.read_questions(hidden, role(cell).grade_id)
            if questions is not None:
                yield questions, command.salt_for(assignment, questions)


@pytest.mark.parametrize("assignment", assignments(ROOT))
def test_the_release_holds_no_right_letter_and_no_readable_diagnosis(assignment):
    import hashlib

    from autograder.kernel import predictions as pred
    from autograder.kernel.misconceptions import split_tag

    text = (ROOT / RELEASE_DIR / assignment / f"{assignment}.ipynb").read_text()
    release = nbformat.read(ROOT / RELEASE_DIR / assignment / f"{assignment}.ipynb", as_version=4)
    sources = "\n".join(c.source for c in release.cells)
    found = list(_questions(assignment))
    assert found, f"{assignment} has no question set"
    for questions, salt in found:
        for q, right in questions.key.items():
            # the hash today's release held, and the tag a sealed diagnosis of the right letter would have
            for digest in (hashlib.sha256((salt + q + ":" + right).encode()).hexdigest(), pred.seal("", salt, q, right)[0]):
                assert digest not in text, f"{assignment} {q}: the release holds a hash of the right letter"
            for letter, diagnosis in questions.why.get(q, {}).items():
                for shown in (diagnosis, split_tag(diagnosis)[1]):
                    assert shown not in text and json_text(shown) not in text, f"{assignment} {q} ({letter}) is readable"
        for author_only in ("grade_predictions", "grade_choice", "key="):
            assert author_only not in sources, f"{assignment}: the release shows {author_only}"


def json_text(text: str) -> str:
    import json

    return json.dumps(text)[1:-1]


def test_every_test_cell_and_every_cell_that_raises_in_a_blank_release_lets_run_all_go_on(tmp_path):
    """JupyterLab's Run All (and nbclient) go on past a cell tagged raises-exception: every test cell
    carries it, and so does every other cell of a fresh release that raises while the learner's
    functions are still blank (each release run here cell by cell), so every picture below is drawn."""
    for assignment in assignments(ROOT):
        release = nbformat.read(ROOT / RELEASE_DIR / assignment / f"{assignment}.ipynb", as_version=4)
        for cell in release.cells:
            if role(cell).is_test:
                assert "raises-exception" in cell.metadata.get("tags", []), f"{assignment}/{role(cell).grade_id}"
        nbformat.write(release, tmp_path / f"{assignment}.ipynb")
    out = subprocess.run([PY, str(ROOT / "tests" / "inprocess.py"), str(tmp_path)], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    raising = []
    for assignment in assignments(ROOT):
        ran = nbformat.read(tmp_path / f"{assignment}.out.ipynb", as_version=4)
        assert all(c.get("execution_count") for c in ran.cells if c.cell_type == "code"), f"{assignment} did not finish"
        for cell in ran.cells:
            if any(o.output_type == "error" for o in cell.get("outputs", [])):
                raising.append(role(cell).grade_id)
                assert "raises-exception" in cell.metadata.get("tags", []), \
                    f"{assignment}: cell {role(cell).grade_id or cell.get('id')} raises in the blank release, untagged"
    assert {"test_predictions", "predictions", "graph_answer"} <= set(raising)


def test_check_shows_a_wrong_letters_diagnosis_and_calls_no_letter_right(tmp_path):
    """A prediction and the picture question in a7: a diagnosed wrong letter fails in `check` with
    its misconception; a right letter is "not checked here", never a pass."""
    nb = tmp_path / "a7_graphs.ipynb"
    nbformat.write(submission("a7_graphs", {
        "predictions": 'PREDICTIONS = {"q1": "a", "q2": "a", "q3": "b", "q4": "a", "q5": "b"}\n',
        "graph_answer": 'graph_answer = "d"\n'}), nb)
    out = run_cli("check", str(nb), env=dict(os.environ, COLUMNS="400"))
    assert out.returncode == 1, out.stdout
    row = lambda label: next(line for line in out.stdout.splitlines() if f"\u2502 {label} " in line)
    assert "✗" in row("predictions") and "graph nodes are backward functions, not tensors" in row("predictions")
    assert "✗" in row("graph_answer") and "graph_answer is 'D'; expected another choice" in row("graph_answer")
    assert "a second arrow comes into it straight from x's `AccumulateGrad`" in row("graph_answer")
    assert "predictions: Myth: the nodes of the graph are tensors" in out.stdout
    assert "graph_answer: Myth: a branch through `detach()` still leads back to the leaf" in out.stdout
    nbformat.write(submission("a7_graphs", {"graph_answer": 'graph_answer = "b"\n'}), nb)
    out = run_cli("check", str(nb), env=dict(os.environ, COLUMNS="400"))
    assert out.returncode == 0, out.stdout
    assert "?/3" in row("graph_answer") and "not checked here: no stored diagnosis for graph_answer = 'B'" in row("graph_answer")
    assert "✓" not in row("graph_answer")
