"""Which file of a submitted folder is the submission (``intake.find_submitted``), without grading:
the notebook of the right name, a lone renamed or downloaded copy, several copies, a blank notebook
beside a filled copy, notebooks that are not the assignment's, nothing at all."""
from __future__ import annotations

from pathlib import Path

import nbformat

from autograder.grading.intake import find_submitted
from harness import release_notebook, submission

RELEASE = nbformat.read(release_notebook("a1_views"), as_version=4)


def folder_with(tmp_path: Path, **notebooks) -> Path:
    folder = tmp_path / "alice" / "a1_views"
    folder.mkdir(parents=True)
    for name, nb in notebooks.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, path)
    return folder


def test_the_notebook_of_the_right_name_is_the_submission(tmp_path):
    folder = folder_with(tmp_path, **{"a1_views.ipynb": submission("a1_views"),
                                      "scratch.ipynb": nbformat.v4.new_notebook()})
    found = find_submitted(folder, "a1_views", RELEASE)
    assert found.path == folder / "a1_views.ipynb" and found.flags == [] and found.problems == []


def test_a_lone_rename_or_download_copy_is_graded_and_said(tmp_path):
    for name in ("a1_views_final.ipynb", "a1_views (1).ipynb", "sub/a1_views.ipynb"):
        folder = folder_with(tmp_path / name.replace("/", "_"), **{name: submission("a1_views"),
                                                                   "notes.ipynb": nbformat.v4.new_notebook()})
        found = find_submitted(folder, "a1_views", RELEASE)
        assert found.path == folder / name
        assert found.flags == [f"a1_views.ipynb was not submitted; graded {name} in its place "
                               "(the same cells, another name)"]


def test_a_blank_notebook_beside_a_filled_copy_is_left_to_a_person(tmp_path):
    folder = folder_with(tmp_path, **{"a1_views.ipynb": submission("a1_views", blank=True),
                                      "a1_views (1).ipynb": submission("a1_views")})
    found = find_submitted(folder, "a1_views", RELEASE)
    assert found.path == folder / "a1_views.ipynb"
    [flag] = found.flags
    assert "a1_views (1).ipynb beside it holds answers" in flag and "for a person to decide" in flag
    # a blank copy beside a blank notebook is no question
    folder = folder_with(tmp_path / "b", **{"a1_views.ipynb": submission("a1_views", blank=True),
                                            "a1_views (1).ipynb": submission("a1_views", blank=True)})
    assert find_submitted(folder, "a1_views", RELEASE).flags == []


def test_several_copies_are_named_and_none_is_chosen(tmp_path):
    folder = folder_with(tmp_path, **{"a1_views (1).ipynb": submission("a1_views"),
                                      "a1_views (2).ipynb": submission("a1_views", blank=True)})
    found = find_submitted(folder, "a1_views", RELEASE)
    assert found.path is None
    [flag] = found.flags
    assert "2 notebooks hold its cells: a1_views (1).ipynb, a1_views (2).ipynb" in flag


def test_notebooks_that_are_not_the_assignments_are_named(tmp_path):
    edited = submission("a1_views")
    [test] = [c for c in edited.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_add_one_"]
    test.source += "\nassert True"      # a test cell changed: not the release's cells
    folder = folder_with(tmp_path, **{"homework.ipynb": nbformat.v4.new_notebook(), "mine.ipynb": edited})
    found = find_submitted(folder, "a1_views", RELEASE)
    assert found.path is None
    assert found.flags == ["a1_views.ipynb was not submitted; the folder holds homework.ipynb, mine.ipynb, "
                           "without its cells (scored zero)"]
    (folder / "broken.ipynb").write_text("{not json")
    assert "broken.ipynb" in find_submitted(folder, "a1_views", RELEASE).flags[0]


def test_an_empty_folder_is_a_problem_not_a_flag(tmp_path):
    folder = folder_with(tmp_path)
    found = find_submitted(folder, "a1_views", RELEASE)
    assert found.path is None and found.flags == []
    assert found.problems == ["a1_views.ipynb was not submitted (scored zero)"]
