"""The gradebook follows solutions/ (grading/sync.py): after an edit of the instructor's notebook,
``grade`` grades with the new tests, adds and removes cells that nbgrader refuses to touch once
there are submissions, keeps hand grades, and grades again exactly the submissions whose tests
changed."""
from __future__ import annotations

import nbformat
import pytest

from autograder.grading import sync
from autograder.grading.config import load_config
from autograder.grading.runner import Grader
from harness import SANDBOX, scratch_course, submission, submit

A = "a2_clone"


def gid(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def grade_cell(name: str, source: str, points: float = 1) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": points,
                                 "grade_id": name, "schema_version": 3, "task": False}
    return cell


def edit_source(root, edit) -> None:
    path = root / "solutions" / A / f"{A}.ipynb"
    nb = nbformat.read(path, as_version=4)
    edit(nb)
    nbformat.write(nb, path)


def new_function(nb) -> None:
    """A new exercise at the end: a solution cell and its visible and hidden tests."""
    answer = nbformat.v4.new_code_cell("def twice(t):\n    ### BEGIN SOLUTION\n    return 2 * t\n    ### END SOLUTION\n")
    answer.metadata["nbgrader"] = {"grade": False, "solution": True, "locked": False, "grade_id": "twice",
                                   "schema_version": 3, "task": False}
    nb.cells += [answer, grade_cell("test_twice", "ck.check_close(twice(torch.ones(2)), torch.full((2,), 2.0), 'twice')\n"),
                 grade_cell("test_twice_hidden", "### BEGIN HIDDEN TESTS\nck.check_close(twice(torch.arange(3.0)), "
                                                "torch.arange(3.0) * 2, 'twice(arange)')\n### END HIDDEN TESTS\n", 2)]


def change_points_and_drop_a_test(nb) -> None:
    for cell in nb.cells:
        if gid(cell) == "test_edit_copy":
            cell.metadata.nbgrader["points"] = 3
    nb.cells = [c for c in nb.cells if gid(c) != "test_graph_copy"]


def in_sync(root) -> bool:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        current = sync.from_gradebook(gb, A)
    return sync.compare(sync.from_source(root / "solutions" / A, A, load_config(root)), current).none


def grades(root, student: str) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        return {g.name: (g.auto_score, g.manual_score, g.max_score)
                for g in gb.find_submission_notebook(A, A, student).grades}


def hand_grade(root, student: str, cell: str, score: float) -> None:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        grade = gb.find_grade(cell, A, A, student)
        grade.manual_score, grade.needs_manual_grade = score, False
        gb.db.commit()


def test_a_fresh_gradebook_is_what_the_source_makes_for_every_assignment(tmp_path):
    root = scratch_course(tmp_path / "c")
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for folder in sorted((root / "solutions").iterdir()):
            changes = sync.compare(sync.from_source(folder, folder.name, load_config(root)),
                                   sync.from_gradebook(gb, folder.name))
            assert changes.none, (folder.name, changes.describe())


def test_cells_added_removed_and_changed_reach_a_gradebook_with_submissions_and_hand_grades_stay(tmp_path):
    """What nbgrader's generate_assignment --force refuses ("Cannot add or remove cells ... because
    there are submissions"): done without grading anyone."""
    from nbgrader.api import Gradebook

    root = scratch_course(tmp_path / "c", A)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        gb.add_student("alice")
        gb.add_submission(A, "alice")
    hand_grade(root, "alice", "why_clone_before_edit", 1.5)
    hand_grade(root, "alice", "test_graph_copy", 0.5)          # a cell the instructor removes next
    edit_source(root, lambda nb: (new_function(nb), change_points_and_drop_a_test(nb)))
    assert not in_sync(root)
    logs: list[str] = []
    grader = Grader(root, A, log=logs.append)
    grader.follow_source()
    assert in_sync(root)
    got = grades(root, "alice")
    assert got["why_clone_before_edit"][1] == 1.5, "a hand grade was lost"
    assert got["test_edit_copy"][2] == 3 and got["test_twice_hidden"][2] == 2 and "test_graph_copy" not in got
    text = "\n".join(logs)
    assert "solutions/a2_clone changed since the gradebook took it" in text
    assert "3 cells (test_twice, test_twice_hidden, twice) added" in text and "(test_graph_copy) removed" in text
    assert "(test_edit_copy) changed" in text
    assert "hand grades dropped with the cells removed from solutions/: test_graph_copy" in text
    assert grader.retired == {"test_graph_copy"}
    logs.clear()
    Grader(root, A, log=logs.append).follow_source()
    assert not any("changed" in line for line in logs), "an unchanged source changes nothing"


@pytest.fixture(scope="module")
def regraded(tmp_path_factory):
    """Three submissions graded, a hand grade given, then the source edited: a new function, a
    changed test's points, a removed test; then ``grade`` twice."""
    root = scratch_course(tmp_path_factory.mktemp("sync"), A)
    submit(root, A, "alice", submission(A))
    submit(root, A, "bob", submission(A, {"graph_copy": "def graph_copy(t):\n    return t.detach()\n"}))
    submit(root, A, "carol", submission(A, blank=True))
    first = Grader(root, A, jobs=2, only_changed=True, log=lambda m: None).run()
    hand_grade(root, "alice", "why_clone_before_edit", 2.0)
    edit_source(root, lambda nb: (new_function(nb), change_points_and_drop_a_test(nb)))
    logs: list[str] = []
    second = Grader(root, A, jobs=2, only_changed=True, log=logs.append)
    results = second.run()
    third = Grader(root, A, jobs=2, only_changed=True, log=lambda m: None)
    third.run()
    return root, first, results, second, logs, third


@SANDBOX
def test_grade_uses_the_new_tests_and_regrades_the_submissions_whose_tests_changed(regraded):
    root, first, results, second, logs, third = regraded
    assert {r.student for r in first} == {"alice", "bob", "carol"}
    text = "\n".join(logs)
    assert "the tests of a2_clone changed since the last grading: 3 submissions re-graded" in text
    assert {r.student for r in results} == {"alice", "bob", "carol"} and not second.unchanged
    alice = grades(root, "alice")
    assert "test_graph_copy" not in alice and alice["test_edit_copy"][2] == 3
    assert alice["test_edit_copy"][0] == 3, "the changed points are used"
    assert alice["test_twice"][0] == 0 and alice["test_twice_hidden"][0] == 0, "their notebook has no twice()"
    assert alice["why_clone_before_edit"][1] == 2.0, "the hand grade is kept"
    assert not [r.flags for r in results if r.flags], "a removed cell flags nobody"
    assert grades(root, "bob")["test_graph_copy_hidden"][0] == 0
    # nothing changed since: nobody is graded again
    assert sorted(third.unchanged) == ["alice", "bob", "carol"]


def test_a_cell_of_an_earlier_release_is_restored_silently_a_learners_edit_is_flagged():
    from nbgrader.utils import compute_checksum

    from autograder.grading.intake import repair

    def release(points: float, extra: str = ""):
        nb = nbformat.v4.new_notebook()
        cell = grade_cell("test_x", "ck.ok('x')\n" + extra, points)
        cell.metadata.nbgrader["checksum"] = compute_checksum(cell)
        nb.cells.append(cell)
        return nb

    new = release(3)
    assert repair(release(1), new) == [], "points the instructor changed since"
    assert repair(release(1, "# gone"), release(3)) == []
    edited = release(3)
    edited.cells[0].metadata.nbgrader["points"] = 30
    assert repair(edited, new) == ["nbgrader metadata of 'test_x' was edited (points); restored"]
    assert edited.cells[0].metadata.nbgrader["points"] == 3
    renamed = release(1)
    renamed.cells[0].metadata.nbgrader["grade_id"] = "test_y"
    assert repair(renamed, new) == ["cell with unknown grade id 'test_y' is not graded"], "its checksum fails"
    removed = release(1)
    removed.cells[0].metadata.nbgrader["grade_id"] = "test_y"
    removed.cells[0].metadata.nbgrader["checksum"] = compute_checksum(removed.cells[0])
    assert repair(removed, new) == [], "a test the instructor removed since"


def test_a_notebook_added_then_removed_reaches_a_gradebook_with_submissions(tmp_path):
    from nbgrader.api import Gradebook

    root = scratch_course(tmp_path / "c", A)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        gb.add_student("alice")
        gb.add_submission(A, "alice")
    extra = nbformat.v4.new_notebook()
    extra.metadata = nbformat.read(root / "solutions" / A / f"{A}.ipynb", as_version=4).metadata
    extra.cells.append(grade_cell("test_extra", "ck.ok('extra')\n", 2))
    nbformat.write(extra, root / "solutions" / A / "extra.ipynb")
    Grader(root, A, log=lambda m: None).follow_source()
    assert in_sync(root)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        assert [g.name for g in gb.find_submission_notebook("extra", A, "alice").grades] == ["test_extra"]
        assert gb.find_submission(A, "alice").max_score == 9 + 2
    (root / "solutions" / A / "extra.ipynb").unlink()
    Grader(root, A, log=lambda m: None).follow_source()
    assert in_sync(root)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        assert [nb.name for nb in gb.find_submission(A, "alice").notebooks] == [A]
