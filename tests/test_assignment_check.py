"""The authoring check (``python -m autograder check-assignment``): every assignment of the course
passes it, graded through the sandbox and the judge (one grading run per assignment, all its
submissions in it, on slots shared by the module); and on a broken assignment it says, in words,
everything that is off, without touching the course's own folders."""
from __future__ import annotations

import shutil
import subprocess
import sys

import nbformat
import pytest

from autograder.course.answers import corpus_file, load_corpus
from autograder.course.layout import SOURCE_DIR, assignments
from autograder.grading.assignment_check import check_assignment
from autograder.learner.cells import RELEASE_DIR
from harness import ROOT, SANDBOX


@pytest.fixture(scope="module")
def pool():
    from autograder.grading.pool import SlotPool
    from autograder.grading.bwrap import probe

    with SlotPool(3, probe() is None) as shared:
        yield shared


@SANDBOX
@pytest.mark.parametrize("assignment", assignments(ROOT))
def test_every_assignment_passes_the_authoring_check(assignment, pool):
    verdict = check_assignment(ROOT, assignment, pool=pool, log=lambda m: None)
    assert verdict.ok, "\n".join(verdict.refusals + verdict.problems)
    wrong, right = load_corpus(corpus_file(ROOT, assignment))
    assert verdict.submissions == 2 + len(wrong) + len(right)
    assert verdict.passed[:2][1] == "blank release: zero" and verdict.passed[0].startswith("reference solution: full")
    assert f"{len(wrong)}/{len(wrong)} wrong answers lose points with their message" in verdict.passed
    assert f"{len(right)}/{len(right)} right answers get full marks" in verdict.passed


BROKEN_CORPUS = '''
from autograder.course.answers import Answer

WRONG = [
    Answer("copy_to", "not wrong at all", """
def copy_to(t, device):
    return t.to(device=device, copy=True)
"""),
    Answer("copy_to", "wrong, but its diagnosis is not the one promised", """
def copy_to(t, device):
    return t
""", message="a message no test prints"),
]
RIGHT = [Answer("copy_to", "not right at all", """
def copy_to(t, device):
    return t.detach()
""")]
'''


@SANDBOX
def test_the_check_says_in_words_what_is_off_and_touches_nothing_of_the_course(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    for folder in (SOURCE_DIR, RELEASE_DIR):
        shutil.copytree(ROOT / folder / "a8_devices", course / folder / "a8_devices")
    (course / "tests" / "answers").mkdir(parents=True)
    (course / "tests" / "answers" / "a8_devices.py").write_text(BROKEN_CORPUS)
    path = course / SOURCE_DIR / "a8_devices" / "a8_devices.ipynb"
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "test_copy_to":   # a blank notebook passes it
            cell.source = "ck.ok('nothing checked')\n"
    # a test that hands over a value the judge cannot send: every correct answer would pay
    layer = nbformat.v4.new_code_cell("### BEGIN HIDDEN TESTS\nlayer = nn.LazyLinear(2)\n"
                                      "copy_to(layer, 'cpu')\n### END HIDDEN TESTS\n")
    layer.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": 1,
                                  "grade_id": "test_layer_hidden", "schema_version": 3, "task": False}
    nb.cells.append(layer)
    nbformat.write(nb, path)
    before = sorted(p.relative_to(course) for p in course.rglob("*"))
    out = subprocess.run([sys.executable, "-m", "autograder", "check-assignment", "a8_devices", "--jobs", "2"],
                         cwd=course, capture_output=True, text=True, timeout=900)
    text = " ".join(out.stdout.split())
    assert out.returncode == 1, out.stdout + out.stderr
    assert ("solutions/a8_devices/a8_devices.ipynb, cell test_layer_hidden: the test hands the learner's function "
            "a LazyLinear, and the judge cannot send it to the learner's kernel (the judge says: the judge cannot "
            "send a LazyLinear whose parameters are not made yet (a lazy module): run it once on an input") in text
    assert "the blank release scores 1/1 in test_copy_to: the test passes without the learner's code" in text
    assert "wrong answer 'not wrong at all' (copy_to) gets full marks on test_copy_to, test_copy_to_hidden" in text
    assert ("wrong answer 'wrong, but its diagnosis is not the one promised' (copy_to) loses points, but its tests "
            "do not say 'a message no test prints'") in text
    assert "right answer 'not right at all' (copy_to) loses points: test_copy_to_hidden:" in text
    assert "exercises/a8_devices is not what solutions/ makes (a8_devices.ipynb)" in text
    assert "a8_devices: 5 submissions graded in" in text and "things off" in text
    assert sorted(p.relative_to(course) for p in course.rglob("*")) == before, "the check wrote into the course"
