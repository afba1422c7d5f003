"""What `build` refuses in the instructor's notebooks (no kernel needed): a hidden test that would
run in the learner's kernel, a class defined inside a judged test, a fixtures file that would
hide a module."""
from __future__ import annotations

import shutil
import subprocess
import sys

import nbformat
import pytest

from autograder.course.layout import SOURCE_DIR
from autograder.grading.authoring import check_course, check_notebook
from autograder.learner.cells import RELEASE_DIR
from harness import ROOT


def notebook(*tests: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    for i, source in enumerate(tests):
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": 1,
                                     "grade_id": f"test_{i}", "schema_version": 3, "task": False}
        nb.cells.append(cell)
    return nb


HIDDEN_IN_KERNEL = "# runs in your kernel\n### BEGIN HIDDEN TESTS\nck.ok('x')\n### END HIDDEN TESTS\n"
CLASS_IN_HIDDEN = ("### BEGIN HIDDEN TESTS\nclass TwoHeads(nn.Module):\n    pass\n"
                   "ck.check_equal(count(TwoHeads()), 0, 'count')\n### END HIDDEN TESTS\n")


def test_the_course_as_committed_has_nothing_to_refuse():
    assert check_course(ROOT) == []


def test_a_hidden_test_that_asks_for_the_kernel_is_refused_with_its_cell_and_the_fix():
    [problem] = check_notebook(notebook("ck.ok('visible')", HIDDEN_IN_KERNEL), "solutions/a/a.ipynb")
    assert problem.where == "solutions/a/a.ipynb, cell test_1"
    assert "hidden test" in problem.what and "'# runs in your kernel'" in problem.fix
    # a visible test may run in the kernel
    assert check_notebook(notebook("# runs in your kernel\nck.ok('x')"), "n") == []


def test_a_class_defined_inside_a_judged_test_is_refused_and_the_fix_is_the_fixtures():
    [problem] = check_notebook(notebook(CLASS_IN_HIDDEN), "solutions/a/a.ipynb", "solutions/a/fixtures.py")
    assert "TwoHeads" in problem.what and "cannot hand a TwoHeads" in problem.what
    assert "move `class TwoHeads` to solutions/a/fixtures.py" in problem.fix
    assert "from fixtures import TwoHeads" in problem.fix
    # visible and judged: the opt-out is the other way out; run in the kernel: nothing to refuse
    [visible] = check_notebook(notebook("class A:\n    pass\n"), "n")
    assert "'# runs in your kernel'" in visible.fix
    assert check_notebook(notebook("# runs in your kernel\nclass A:\n    pass\n"), "n") == []


def test_a_fixtures_file_may_not_hide_a_module_the_kernel_imports(tmp_path):
    folder = tmp_path / SOURCE_DIR / "a"
    folder.mkdir(parents=True)
    nbformat.write(notebook("ck.ok('x')"), folder / "a.ipynb")
    (folder / "fixtures.py").write_text("X = 1\n")
    assert check_course(tmp_path) == []
    (folder / "torch.py").write_text("X = 1\n")
    [problem] = check_course(tmp_path)
    assert problem.where == "solutions/a/torch.py" and "'torch'" in problem.what


@pytest.fixture
def course(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    for folder in (SOURCE_DIR, RELEASE_DIR):
        shutil.copytree(ROOT / folder / "a2_clone", course / folder / "a2_clone")
    return course


@pytest.mark.parametrize("check", [False, True], ids=["build", "build --check"])
def test_build_refuses_a_class_in_a_hidden_test_naming_notebook_cell_class_and_fix(course, check):
    path = course / SOURCE_DIR / "a2_clone" / "a2_clone.ipynb"
    nb = nbformat.read(path, as_version=4)
    [cell] = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_edit_copy_hidden"]
    cell.source = cell.source.replace("### BEGIN HIDDEN TESTS\n", "### BEGIN HIDDEN TESTS\nclass Doubler(nn.Module):\n"
                                      "    def forward(self, x):\n        return 2 * x\n")
    nbformat.write(nb, path)
    release = (course / RELEASE_DIR / "a2_clone" / "a2_clone.ipynb").read_bytes()
    argv = ["build", "--check"] if check else ["build", "--only", "a2_clone"]
    out = subprocess.run([sys.executable, "-m", "autograder", *argv], cwd=course, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 1, out.stdout + out.stderr
    text = " ".join(out.stdout.split())
    assert "solutions/a2_clone/a2_clone.ipynb, cell test_edit_copy_hidden: the class Doubler is defined" in text
    assert ("fix: move `class Doubler` to solutions/a2_clone/fixtures.py (the assignment's fixtures, a file "
            "learners see) and write `from fixtures import Doubler` in the test") in text
    assert "1 problem in solutions/" in text
    assert (course / RELEASE_DIR / "a2_clone" / "a2_clone.ipynb").read_bytes() == release, "build wrote anyway"


def test_build_refuses_a_prediction_set_whose_released_half_is_stale(course):
    path = course / SOURCE_DIR / "a2_clone" / "a2_clone.ipynb"
    nb = nbformat.read(path, as_version=4)
    [cell] = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_predictions"]
    hidden = cell.source.index("### BEGIN HIDDEN TESTS")
    assert "why=" in cell.source[hidden:]
    # the author rewrites a diagnosis in the hidden part and forgets to run `predictions` again
    cell.source = cell.source[:hidden] + cell.source[hidden:].replace('"M-', '"M-rewritten-', 1)
    nbformat.write(nb, path)
    release = (course / RELEASE_DIR / "a2_clone" / "a2_clone.ipynb").read_bytes()
    out = subprocess.run([sys.executable, "-m", "autograder", "build", "--only", "a2_clone"], cwd=course,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 1, out.stdout + out.stderr
    text = " ".join(out.stdout.split())
    assert ("solutions/a2_clone/a2_clone.ipynb, cell test_predictions: the release's half of this prediction set is "
            "not the one its hidden part makes") in text
    assert "fix: python -m autograder predictions solutions/a2_clone/a2_clone.ipynb" in text
    assert (course / RELEASE_DIR / "a2_clone" / "a2_clone.ipynb").read_bytes() == release, "build wrote anyway"
    # once the command has written it again, build goes through
    subprocess.run([sys.executable, "-m", "autograder", "predictions", str(path)], cwd=course, check=True,
                   capture_output=True, timeout=300)
    assert check_course(course) == []
