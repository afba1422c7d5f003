"""autograder.learner.finish: the instructor's tests for check --full, the way on, the model answers;
and where check finds the notebook it is asked for (autograder.learner.cells.find_notebook)."""
from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest

from autograder.learner.cells import LECTURE_DIR, RELEASE_DIR, SOURCE_DIR, find_notebook, role
from autograder.learner.finish import model_answers, next_steps, source_notebook, with_instructor_tests
from autograder.learner.selfcheck import HIDDEN_KEY
from harness import ROOT, reference_answers, release_notebook, source_notebook as instructors_notebook, submission


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A clone of the course: lectures, exercises and solutions."""
    root = tmp_path_factory.mktemp("clone")
    for part in (LECTURE_DIR, RELEASE_DIR, SOURCE_DIR):
        shutil.copytree(ROOT / part, root / part)
    return root


def test_the_instructors_notebook_is_found_in_a_clone_and_not_in_a_handout(clone, tmp_path):
    mine = clone / RELEASE_DIR / "a2_clone" / "a2_clone.ipynb"
    assert source_notebook(mine) == clone / SOURCE_DIR / "a2_clone" / "a2_clone.ipynb"
    renamed = mine.with_name("my copy.ipynb")
    shutil.copy2(mine, renamed)
    assert source_notebook(renamed) == clone / SOURCE_DIR / "a2_clone" / "a2_clone.ipynb"
    handout = tmp_path / "copy-that"
    shutil.copytree(clone / RELEASE_DIR / "a2_clone", handout / RELEASE_DIR / "a2_clone")
    assert source_notebook(handout / RELEASE_DIR / "a2_clone" / "a2_clone.ipynb") is None


def test_with_instructor_tests_keeps_the_learners_answers_and_puts_in_every_test_as_written():
    source = nbformat.read(instructors_notebook("a1_views"), as_version=4)
    learner = submission("a1_views", {"plus_one": "def plus_one(t):\n    return t  # mine\n"})
    learner.cells.append(nbformat.v4.new_code_cell("print('my own cell')"))
    # a deleted test cell comes back where the instructor's notebook has it
    learner.cells = [c for c in learner.cells if role(c).grade_id != "test_count_storages_hidden"]
    full = with_instructor_tests(learner, source)
    by_id = {role(c).grade_id: c for c in full.cells if role(c).grade_id}
    theirs = {role(c).grade_id: c for c in source.cells if role(c).grade_id}
    assert by_id["plus_one"].source == "def plus_one(t):\n    return t  # mine\n"
    for gid, cell in theirs.items():
        if role(cell).is_test:
            assert by_id[gid].source == cell.source, gid
            # a cell of hidden tests only (the learner's copy holds them as comments) is marked hidden;
            # a visible test with a hidden part (the prediction sets) is a visible test
            learners = next((c for c in learner.cells if role(c).grade_id == gid), None)
            only_hidden = learners is None or all(not line.strip() or line.lstrip().startswith("#")
                                                  for line in learners.source.splitlines())
            assert bool(by_id[gid].metadata.get(HIDDEN_KEY)) == ("BEGIN HIDDEN TESTS" in cell.source and only_hidden), gid
    assert "print('my own cell')" in full.cells[-1].source
    order = [role(c).grade_id for c in full.cells if role(c).grade_id]
    assert order.index("test_count_storages_hidden") == order.index("test_count_storages") + 1
    # visible tests are not marked hidden
    assert not by_id["test_plus_one"].metadata.get(HIDDEN_KEY)


def test_next_steps_are_the_next_lecture_and_assignment_and_then_what_is_left_to_read(clone):
    after_a1 = next_steps(clone / RELEASE_DIR / "a1_views" / "a1_views.ipynb")
    assert after_a1.lecture.name.startswith("02_") and after_a1.assignment.parent.name.startswith("a2_")
    after_a6 = next_steps(clone / RELEASE_DIR / "a6_deepcopy" / "a6_deepcopy.ipynb")
    assert after_a6.lecture.name.startswith("06b_") and after_a6.assignment.parent.name == "a6b_boundaries"
    last = sorted(p.name for p in (clone / RELEASE_DIR).iterdir() if p.is_dir())[-1]
    final = next_steps(clone / RELEASE_DIR / last / f"{last}.ipynb")
    assert final.assignment is None and [p.name for p in final.other_lectures] == ["10_myths.ipynb"]


def test_model_answers_are_the_instructors_answers_without_the_solution_markers():
    source = nbformat.read(instructors_notebook("a3_detach"), as_version=4)
    answers = model_answers(source)
    expected = reference_answers("a3_detach")
    assert [a.grade_id for a in answers] == list(expected)
    for a in answers:
        assert a.text == expected[a.grade_id].strip() and "BEGIN SOLUTION" not in a.text
    assert {a.kind for a in answers} == {"code", "written"}


def test_check_finds_the_notebook_from_inside_its_folder_or_says_what_to_type(clone):
    folder = clone / RELEASE_DIR / "a1_views"
    typed = f"{RELEASE_DIR}/a1_views/a1_views.ipynb"            # as the notebooks print it
    assert find_notebook(typed, clone) == (clone / typed, None)
    path, note = find_notebook(typed, folder)                    # typed inside exercises/a1_views
    assert path == clone / typed and "course folder" in note
    assert find_notebook(None, folder) == (folder / "a1_views.ipynb", None)
    assert find_notebook(f"{RELEASE_DIR}/a1_views", clone)[0] == clone / typed
    with pytest.raises(FileNotFoundError, match="it is .*a2_clone.ipynb"):
        find_notebook("a2_clone.ipynb", folder)
    with pytest.raises(FileNotFoundError, match="name the notebook"):
        find_notebook(None, clone)
    with pytest.raises(FileNotFoundError, match="run it from the course folder"):
        find_notebook("nothing.ipynb", folder)
    assert release_notebook("a1_views").name == "a1_views.ipynb"
