"""Fast unit tests of each step of ``autograder grade`` on notebooks built in code.

No kernel, no bubblewrap, no subprocess: every test builds its notebook with ``nbformat.v4``
and nbgrader metadata dicts (as nbgrader's own ``nbgrader/tests/preprocessors`` do), then calls
one step of the pipeline — ``read_notebook``, ``repair``, ``add_guards``/``_finish``, the
sandbox's command line and scratch folder, the feedback preprocessor, the scoring of a test
cell — and checks what it did.
"""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from autograder.grading import bwrap, jobs, sandbox
from autograder.grading.feedback import StripHiddenTracebacks
from autograder.grading.jobs import GUARD_KEY, INSTALL_SOURCE, add_guards
from autograder.grading.intake import read_notebook, repair
from autograder.kernel import guard
from autograder.learner.selfcheck import score_cell


# ---------------------------------------------------------------------------------------------
# builders

def nbgrader_meta(grade_id: str, *, grade: bool = False, solution: bool = False, locked: bool = False,
                  points: float | None = None, cell_type: str = "code") -> dict:
    """The nbgrader metadata of a released cell (schema 3, as generate_assignment writes it)."""
    meta = {"cell_type": cell_type, "checksum": f"sum-{grade_id}", "grade": grade, "grade_id": grade_id,
            "locked": locked, "schema_version": 3, "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return meta


def code(grade_id: str | None = None, source: str = "", *, points: float | None = None, grade: bool = False,
         solution: bool = False, locked: bool = False, outputs: list | None = None,
         execution_count: int | None = None) -> nbformat.NotebookNode:
    """A code cell; with a grade_id, one carrying nbgrader metadata."""
    cell = new_code_cell(source, outputs=outputs or [], execution_count=execution_count)
    if grade_id is not None:
        cell.metadata["nbgrader"] = nbgrader_meta(grade_id, grade=grade, solution=solution, locked=locked,
                                                  points=points)
    return cell


def markdown(grade_id: str | None = None, source: str = "", **kw) -> nbformat.NotebookNode:
    cell = new_markdown_cell(source)
    if grade_id is not None:
        cell.metadata["nbgrader"] = nbgrader_meta(grade_id, cell_type="markdown", **kw)
    return cell


def setup_cell(grade_id: str = "setup", source: str = "import torch") -> nbformat.NotebookNode:
    return code(grade_id, source, locked=True)


def answer(grade_id: str, source: str = "def f():\n    raise NotImplementedError()") -> nbformat.NotebookNode:
    return code(grade_id, source, solution=True)


def graded(grade_id: str, source: str = "assert f() == 1", points: float = 1, **kw) -> nbformat.NotebookNode:
    """An auto-graded test cell (grade, locked, not a solution)."""
    return code(grade_id, source, grade=True, locked=True, points=points, **kw)


def written(grade_id: str, points: float = 2) -> nbformat.NotebookNode:
    """A manually graded written answer (markdown, grade and solution)."""
    return markdown(grade_id, "YOUR ANSWER HERE", grade=True, solution=True, points=points)


def notebook(*cells) -> nbformat.NotebookNode:
    return new_notebook(cells=list(cells))


def stream(text: str, name: str = "stdout") -> nbformat.NotebookNode:
    return new_output("stream", name=name, text=text)


def error(ename: str, evalue: str, traceback: list[str] | None = None) -> nbformat.NotebookNode:
    return new_output("error", ename=ename, evalue=evalue,
                      traceback=traceback if traceback is not None else ["Traceback...", f"{ename}: {evalue}"])


def release_nb() -> nbformat.NotebookNode:
    return notebook(markdown(source="# Exercise"), setup_cell(), answer("f"), graded("test_f"),
                    written("why"), graded("test_g", "assert g() == 2", points=2))


def meta_of(cell) -> dict | None:
    return cell.metadata.get("nbgrader")


def error_names(cell) -> list[str]:
    return [o.ename for o in cell.get("outputs", []) if o.output_type == "error"]


# ---------------------------------------------------------------------------------------------
# step 1a: read_notebook

def write(tmp_path: Path, data: bytes | str, name: str = "a1.ipynb") -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def nb_json(cells, **top) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells, **top})


class TestReadNotebook:

    @pytest.mark.parametrize("data", [b"", b"  \n\t\n"], ids=["empty", "whitespace"])
    def test_empty_file_is_reported_empty(self, tmp_path, data):
        nb, problem = read_notebook(write(tmp_path, data))
        assert nb is None
        assert problem == "a1.ipynb is empty"

    def test_invalid_utf8_is_not_a_text_file(self, tmp_path):
        nb, problem = read_notebook(write(tmp_path, b'{"cells": ["\xff\xfe\xfa"]}'))
        assert nb is None
        assert problem == "a1.ipynb is not a text file"

    @pytest.mark.parametrize("data", ['{"cells": [{"cell_type": "co', "import torch\nprint(torch.ones(2))\n",
                                      "[]"], ids=["truncated-json", "python-file", "json-list"])
    def test_non_notebook_content_is_not_a_notebook(self, tmp_path, data):
        nb, problem = read_notebook(write(tmp_path, data))
        assert nb is None
        assert problem.startswith("a1.ipynb is not a notebook (")

    def test_truncated_json_names_the_json_error(self, tmp_path):
        _, problem = read_notebook(write(tmp_path, '{"cells": ['))
        assert "NotJSONError" in problem

    def test_problem_is_one_short_line(self, tmp_path):
        _, problem = read_notebook(write(tmp_path, "x = 1\n" * 500))
        assert "\n" not in problem and len(problem) < 200

    def test_json_without_cells_is_not_a_notebook(self, tmp_path):
        nb, problem = read_notebook(write(tmp_path, json.dumps({"nbformat": 4, "nbformat_minor": 5,
                                                                "metadata": {}})))
        assert nb is None
        assert problem.startswith("a1.ipynb is not a notebook")
        assert "cells" in problem

    def test_cells_that_are_not_a_list_is_no_cells(self, tmp_path):
        nb, problem = read_notebook(write(tmp_path, nb_json({})))
        assert nb is None
        assert problem == "a1.ipynb is not a notebook (no cells)"

    @pytest.mark.parametrize("cell", [
        {"cell_type": "heading", "source": "x", "metadata": {}, "id": "c1"},
        {"source": "x", "metadata": {}, "id": "c1"},
        {"cell_type": "code", "source": 5, "metadata": {}, "outputs": [], "execution_count": None, "id": "c1"},
        {"cell_type": "markdown", "source": None, "metadata": {}, "id": "c1"},
    ], ids=["bad-cell-type", "no-cell-type", "int-source", "null-source"])
    def test_malformed_cells_are_reported(self, tmp_path, cell):
        ok = {"cell_type": "markdown", "source": "fine", "metadata": {}, "id": "c0"}
        nb, problem = read_notebook(write(tmp_path, nb_json([ok, cell])))
        assert nb is None
        assert problem == "a1.ipynb has malformed cells"

    @pytest.mark.parametrize("cells", [[1], [{"cell_type": "code", "source": ["a", 1], "metadata": {},
                                              "outputs": [], "id": "c1"}]], ids=["int-cell", "int-in-source-list"])
    def test_unreadable_cells_are_reported_not_raised(self, tmp_path, cells):
        nb, problem = read_notebook(write(tmp_path, nb_json(cells)))
        assert nb is None
        assert problem.startswith("a1.ipynb ")

    def test_a_folder_in_place_of_the_notebook_is_reported(self, tmp_path):
        (tmp_path / "a1.ipynb").mkdir()
        nb, problem = read_notebook(tmp_path / "a1.ipynb")
        assert nb is None
        assert problem == "a1.ipynb is not a regular file"

    def test_a_missing_file_is_reported(self, tmp_path):
        nb, problem = read_notebook(tmp_path / "a1.ipynb")
        assert nb is None and problem.startswith("cannot read a1.ipynb: ")

    def test_a_link_is_never_followed(self, tmp_path):
        secret = tmp_path / "solutions.ipynb"
        nbformat.write(release_nb(), secret)
        (tmp_path / "a1.ipynb").symlink_to(secret)
        nb, problem = read_notebook(tmp_path / "a1.ipynb")
        assert nb is None and problem == "a1.ipynb is a link, not a file: it was not followed"

    def test_a_notebook_over_the_size_cap_is_not_read(self, tmp_path, monkeypatch):
        from autograder.grading import intake

        monkeypatch.setattr(intake, "MAX_NOTEBOOK_BYTES", 1000)
        path = tmp_path / "a1.ipynb"
        nbformat.write(release_nb(), path)
        assert path.stat().st_size > 1000
        nb, problem = read_notebook(path)
        assert nb is None and "over" in problem

    def test_valid_notebook_is_read_unchanged(self, tmp_path):
        original = release_nb()
        path = tmp_path / "a1.ipynb"
        nbformat.write(original, path)
        nb, problem = read_notebook(path)
        assert problem is None
        assert nb == original

    def test_missing_outputs_and_execution_count_are_filled_in(self, tmp_path):
        cells = [{"cell_type": "code", "source": ["x = 1\n", "y = 2"], "metadata": {}, "id": "c1"},
                 {"cell_type": "markdown", "source": "text", "metadata": {}, "id": "c2"}]
        nb, problem = read_notebook(write(tmp_path, nb_json(cells)))
        assert problem is None
        cell, md = nb.cells
        assert cell.outputs == [] and cell.execution_count is None
        assert cell.source == "x = 1\ny = 2"
        assert "outputs" not in md and "execution_count" not in md

    def test_old_format_notebook_is_converted(self, tmp_path):
        v3 = {"nbformat": 3, "nbformat_minor": 0, "metadata": {},
              "worksheets": [{"cells": [{"cell_type": "code", "input": "x = 1", "outputs": [], "language": "python"}]}]}
        nb, problem = read_notebook(write(tmp_path, json.dumps(v3)))
        assert problem is None
        assert nb.nbformat == 4 and nb.cells[0].source == "x = 1"

    def test_cell_without_metadata_is_not_a_notebook(self, tmp_path):
        cells = [{"cell_type": "code", "source": "x = 1", "outputs": [], "execution_count": None, "id": "c1"}]
        nb, problem = read_notebook(write(tmp_path, nb_json(cells)))
        assert nb is None and "not a notebook" in problem

    def test_cell_without_source_is_rejected_or_given_empty_source(self, tmp_path):
        cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "id": "c1"}]
        nb, problem = read_notebook(write(tmp_path, nb_json(cells)))
        assert nb is None or nb.cells[0].get("source") == ""


# ---------------------------------------------------------------------------------------------
# step 1b: repair

class TestRepair:

    def test_untouched_submission_has_no_flags_and_is_unchanged(self):
        release = release_nb()
        nb = copy.deepcopy(release)
        assert repair(nb, release) == []
        assert nb == release

    def test_submission_with_answers_written_is_unchanged(self):
        release = release_nb()
        nb = copy.deepcopy(release)
        nb.cells[2].source = "def f():\n    return 1"
        nb.cells[4].source = "Because views share storage."
        before = copy.deepcopy(nb)
        assert repair(nb, release) == []
        assert nb == before

    def test_duplicated_answer_keeps_the_last_copys_metadata(self):
        release = release_nb()
        nb = copy.deepcopy(release)
        first = nb.cells[2]
        second = copy.deepcopy(first)
        second.source = "def f():\n    return 1"
        nb.cells.insert(3, second)
        flags = repair(nb, release)
        assert meta_of(nb.cells[2]) is None
        assert meta_of(nb.cells[3]) == meta_of(release.cells[2])
        assert flags == ["cell 'f' appears 2 times (copy-paste); one copy is graded"]

    def test_duplicated_test_cell_keeps_the_first_copys_metadata(self):
        release = release_nb()
        nb = copy.deepcopy(release)
        nb.cells.append(copy.deepcopy(nb.cells[3]))   # test_f pasted again at the end
        flags = repair(nb, release)
        assert meta_of(nb.cells[3]) == meta_of(release.cells[3])
        assert meta_of(nb.cells[-1]) is None
        assert flags == ["cell 'test_f' appears 2 times (copy-paste); one copy is graded"]

    def test_triplicated_cell_keeps_exactly_one_copy(self):
        release = release_nb()
        nb = copy.deepcopy(release)
        nb.cells[3:3] = [copy.deepcopy(nb.cells[2]), copy.deepcopy(nb.cells[2])]
        flags = repair(nb, release)
        assert [meta_of(c) is not None for c in nb.cells[2:5]] == [False, False, True]
        assert flags == ["cell 'f' appears 3 times (copy-paste); one copy is graded"]

    @pytest.mark.parametrize("cell_index, key, value", [
        (3, "points", 100), (3, "grade", False), (2, "solution", False), (1, "locked", False), (2, "grade", True),
    ])
    def test_edited_metadata_is_restored_and_named(self, cell_index, key, value):
        release = release_nb()
        nb = copy.deepcopy(release)
        gid = meta_of(nb.cells[cell_index])["grade_id"]
        meta_of(nb.cells[cell_index])[key] = value
        flags = repair(nb, release)
        assert meta_of(nb.cells[cell_index]) == meta_of(release.cells[cell_index])
        assert flags == [f"nbgrader metadata of {gid!r} was edited ({key}); restored"]

    def test_several_edited_keys_are_all_named(self):
        release = release_nb()
        nb = copy.deepcopy(release)
        meta_of(nb.cells[3]).update(points=5, solution=True, locked=False)
        flags = repair(nb, release)
        assert flags == ["nbgrader metadata of 'test_f' was edited (solution, locked, points); restored"]
        assert meta_of(nb.cells[3]) == meta_of(release.cells[3])

    def test_restored_metadata_is_a_copy_of_the_release(self):
        release = release_nb()
        nb = copy.deepcopy(release)
        meta_of(nb.cells[3])["points"] = 9
        repair(nb, release)
        meta_of(nb.cells[3])["points"] = 7
        assert meta_of(release.cells[3])["points"] == 1

    def test_metadata_key_removed_by_the_learner_is_restored(self):
        release = release_nb()
        nb = copy.deepcopy(release)
        del meta_of(nb.cells[3])["points"]
        flags = repair(nb, release)
        assert meta_of(nb.cells[3])["points"] == 1
        assert flags == ["nbgrader metadata of 'test_f' was edited (points); restored"]

    def test_unknown_grade_id_loses_its_metadata_and_is_flagged(self):
        release = release_nb()
        nb = copy.deepcopy(release)
        nb.cells.append(graded("test_free_points", "pass", points=50))
        flags = repair(nb, release)
        assert meta_of(nb.cells[-1]) is None
        assert flags == ["cell with unknown grade id 'test_free_points' is not graded"]

    def test_non_dict_nbgrader_metadata_is_dropped(self):
        release = release_nb()
        nb = copy.deepcopy(release)
        nb.cells.append(code(source="x = 1"))
        nb.cells[-1].metadata["nbgrader"] = "grade me"
        repair(nb, release)
        assert "nbgrader" not in nb.cells[-1].metadata

    def test_test_cell_turned_into_markdown_is_turned_back_into_code(self):
        release = release_nb()
        nb = copy.deepcopy(release)
        md = new_markdown_cell(nb.cells[3].source, metadata=copy.deepcopy(nb.cells[3].metadata))
        nb.cells[3] = md
        flags = repair(nb, release)
        cell = nb.cells[3]
        assert cell.cell_type == "code"
        assert cell.outputs == [] and cell.execution_count is None
        assert flags == ["cell 'test_f' changed type to markdown; restored"]
        nbformat.validate(nb)

    def test_written_answer_turned_into_code_is_turned_back_into_markdown(self):
        release = release_nb()
        nb = copy.deepcopy(release)
        nb.cells[4] = new_code_cell(nb.cells[4].source, metadata=copy.deepcopy(nb.cells[4].metadata),
                                    outputs=[stream("hi\n")], execution_count=3)
        flags = repair(nb, release)
        cell = nb.cells[4]
        assert cell.cell_type == "markdown"
        assert "outputs" not in cell and "execution_count" not in cell
        assert flags == ["cell 'why' changed type to code; restored"]
        nbformat.validate(nb)

    def test_ungraded_cells_are_left_alone(self):
        release = release_nb()
        nb = copy.deepcopy(release)
        nb.cells.append(code(source="print('scratch')"))
        nb.cells.append(markdown(source="notes"))
        before = copy.deepcopy(nb.cells[-2:])
        assert repair(nb, release) == []
        assert nb.cells[-2:] == before


# ---------------------------------------------------------------------------------------------
# step 2: guard cells around the execution

def fake_client(current: int | None = None, timed_out: set[int] | None = None,
                failed_replies: dict[int, str] | None = None) -> SimpleNamespace:
    """What _finish reads of a LimitedClient: the cell running at the stop, the cells that timed
    out (and, where _finish reads it, the cells whose execute reply was not ``ok``)."""
    return SimpleNamespace(current=current, timed_out=timed_out or set(), failed_replies=failed_replies or {})


def guarded_nb() -> nbformat.NotebookNode:
    """setup, answer, test_f, test_g; after add_guards:
    0 install, 1 setup, 2 answer, 3 restore, 4 test_f, 5 restore, 6 test_g."""
    return add_guards(notebook(setup_cell(), answer("f"), graded("test_f"), graded("test_g")))


def report(names: list[str] | str) -> nbformat.NotebookNode:
    text = names if isinstance(names, str) else json.dumps(names)
    return stream(guard.MARK + text + "\n")


def restore_cells(nb) -> list:
    return [c for c in nb.cells if c.metadata.get(GUARD_KEY) and c.source == guard.RESTORE_SOURCE]


def run_all(nb, *, reports: bool = True) -> None:
    """Make every cell look executed; restore cells print an empty report."""
    for i, cell in enumerate(nb.cells, 1):
        if cell.cell_type == "code":
            cell.execution_count = i
            if reports and cell.source == guard.RESTORE_SOURCE:
                cell.outputs = [report([])]


def finish(nb, client=None, stop_reason=None):
    problems, flags = [], []
    jobs._finish(nb, client, stop_reason, problems, flags)
    return flags


class TestAddGuards:

    def test_install_cell_comes_first(self):
        nb = guarded_nb()
        assert nb.cells[0].source == INSTALL_SOURCE
        assert nb.cells[0].source.startswith(guard.INSTALL_SOURCE) and "autograder.judge.agent" in INSTALL_SOURCE
        assert nb.cells[0].metadata[GUARD_KEY] is True

    def test_a_restore_cell_precedes_every_test_cell_and_nothing_else(self):
        nb = guarded_nb()
        sources = [c.source if c.metadata.get(GUARD_KEY) else (meta_of(c) or {}).get("grade_id")
                   for c in nb.cells]
        R = guard.RESTORE_SOURCE
        assert sources == [INSTALL_SOURCE, "setup", "f", R, "test_f", R, "test_g"]

    def test_no_restore_before_answers_written_answers_or_plain_cells(self):
        nb = add_guards(notebook(code(source="x = 1"), answer("f"), written("why"), markdown(source="hi")))
        assert len(nb.cells) == 5
        assert restore_cells(nb) == []

    def test_guard_cells_are_code_cells_without_outputs(self):
        for cell in guarded_nb().cells[:1] + restore_cells(guarded_nb()):
            assert cell.cell_type == "code" and cell.outputs == [] and cell.execution_count is None


class TestRestoreWithTheJudgedTest:
    """A restore cell right before a judged test travels with that test's first request to the
    kernel; its report is taken out of what the request printed and becomes the cell's output."""

    def client(self, nb, judged):
        c = jobs.LimitedClient.__new__(jobs.LimitedClient)
        c.nb, c.judged, c.code_cells_executed = nb, judged, 0
        return c

    def test_only_a_restore_right_before_a_judged_test_waits(self):
        nb = add_guards(notebook(setup_cell(), answer("f"), graded("test_f"), graded("test_g")))
        client = self.client(nb, {"test_g": "..."})
        waits = [i for i, c in enumerate(nb.cells) if client._before_a_judged_test(c, i)]
        assert [meta_of(nb.cells[i + 1])["grade_id"] for i in waits] == ["test_g"]
        assert all(nb.cells[i].source == guard.RESTORE_SOURCE for i in waits)

    def test_the_report_goes_to_the_restore_cell_and_the_rest_stays_printed(self):
        nb = add_guards(notebook(setup_cell(), answer("f"), graded("test_f")))
        restore = next(c for c in nb.cells if c.source == guard.RESTORE_SOURCE)
        client = self.client(nb, {"test_f": "..."})
        printed = [guard.MARK + '["torch.Tensor.add"]\nfrom the ', "learner\n"]
        client.restored(restore, printed)
        assert restore.outputs[0].text == guard.MARK + '["torch.Tensor.add"]\n'
        assert "".join(printed) == "from the learner\n"
        assert finish(nb, fake_client()) == ["changed torch.Tensor.add"]

    def test_a_silent_restore_is_flagged_as_before(self):
        nb = add_guards(notebook(setup_cell(), answer("f"), graded("test_f")))
        restore = next(c for c in nb.cells if c.source == guard.RESTORE_SOURCE)
        printed = ["nothing from the guard\n"]
        self.client(nb, {"test_f": "..."}).restored(restore, printed)
        assert restore.outputs == [] and printed == ["nothing from the guard\n"]
        assert "the grader's guard cells did not report" in finish(nb, fake_client())[0]


class TestFinish:

    def test_guard_cells_are_removed_and_the_rest_kept_in_order(self):
        plain = notebook(setup_cell(), answer("f"), graded("test_f"), markdown(source="m"), graded("test_g"))
        nb = add_guards(copy.deepcopy(plain))
        flags = finish(nb, fake_client())
        assert flags == ["the grader's guard cells did not report (output suppressed or guard replaced)"]
        assert nb.cells == plain.cells

    def test_clean_reports_give_no_flags(self):
        nb = guarded_nb()
        run_all(nb)
        assert finish(nb, fake_client()) == []
        assert not any(c.metadata.get(GUARD_KEY) for c in nb.cells)
        assert all(c.outputs == [] for c in nb.cells)

    def test_reported_names_become_changed_flags_once_each(self):
        nb = guarded_nb()
        run_all(nb)
        first, second = restore_cells(nb)
        first.outputs = [report(["torch.allclose", "the name 'ck'"])]
        second.outputs = [report(["torch.allclose"])]
        assert finish(nb, fake_client()) == ["changed torch.allclose", "changed the name 'ck'"]

    def test_report_line_among_other_output_is_read(self):
        nb = guarded_nb()
        run_all(nb)
        restore_cells(nb)[0].outputs = [stream("noise\n" + guard.MARK + '["torch.Tensor.add"]\nmore\n')]
        assert finish(nb, fake_client()) == ["changed torch.Tensor.add"]

    def test_a_test_cell_whose_reply_failed_without_showing_an_error_fails_and_is_flagged(self):
        """The kernel said 'error' for a test cell run there, but the error never reached the cell
        (a custom exception handler, a replaced showtraceback): the cell fails, the submission is
        flagged; a failed reply whose error showed is left as it is."""
        nb = guarded_nb()
        run_all(nb)
        test_f, test_g = (i for i, c in enumerate(nb.cells) if (meta_of(c) or {}).get("grade_id", "").startswith("test_"))
        nb.cells[test_g].outputs = [nbformat.v4.new_output("error", ename="CheckFailed", evalue="x", traceback=[])]
        flags = finish(nb, fake_client(failed_replies={test_f: "error", test_g: "error"}))
        assert flags == ["error display tampered with"]
        [f_cell, g_cell] = [c for c in nb.cells if (meta_of(c) or {}).get("grade_id") in ("test_f", "test_g")]
        assert [o.ename for o in f_cell.outputs] == ["FailedWithoutError"]
        assert [o.ename for o in g_cell.outputs] == ["CheckFailed"]

    def test_garbled_report_is_flagged(self):
        nb = guarded_nb()
        run_all(nb)
        restore_cells(nb)[0].outputs = [report('["torch.allclose"')]
        assert finish(nb, fake_client()) == ["the guard's report was garbled"]

    @pytest.mark.parametrize("text", ["null", "5", '"torch"'])
    def test_report_that_is_json_but_not_a_list_is_garbled(self, text):
        nb = guarded_nb()
        run_all(nb)
        restore_cells(nb)[0].outputs = [report(text)]
        assert finish(nb, fake_client()) == ["the guard's report was garbled"]

    def test_missing_report_is_flagged(self):
        nb = guarded_nb()
        run_all(nb)
        restore_cells(nb)[1].outputs = []
        assert finish(nb, fake_client()) == [
            "the grader's guard cells did not report (output suppressed or guard replaced)"]

    def test_report_sent_as_a_result_not_a_stream_does_not_count(self):
        nb = guarded_nb()
        run_all(nb)
        restore_cells(nb)[0].outputs = [new_output("execute_result", data={"text/plain": guard.MARK + "[]"},
                                                   execution_count=4)]
        assert finish(nb, fake_client()) == [
            "the grader's guard cells did not report (output suppressed or guard replaced)"]

    def test_a_double_report_does_not_hide_a_missing_one(self):
        nb = guarded_nb()
        run_all(nb)
        first, second = restore_cells(nb)
        first.outputs = [report([]), stream(guard.MARK + "[]\n", name="stderr")]
        second.outputs = []
        assert "the grader's guard cells did not report (output suppressed or guard replaced)" in \
            finish(nb, fake_client())

    def test_no_restore_cells_means_no_missing_report_flag(self):
        nb = add_guards(notebook(setup_cell(), answer("f")))
        run_all(nb)
        assert finish(nb, fake_client()) == []

    def test_missing_report_is_not_flagged_when_the_run_stopped(self):
        nb = guarded_nb()
        assert finish(nb, fake_client(current=2), stop_reason="the kernel died") == []

    def test_stopped_run_marks_the_current_cell_stopped_and_later_cells_not_run(self):
        nb = guarded_nb()
        nb.cells[0].execution_count = 1
        nb.cells[1].execution_count = 2                            # setup ran
        nb.cells[2].outputs = [stream("computing...\n")]           # the answer was running
        finish(nb, fake_client(current=2), stop_reason="the kernel died")
        setup, ans, test_f, test_g = nb.cells
        assert setup.outputs == []
        assert error_names(ans) == ["Stopped"]
        assert ans.outputs[-1].evalue == "the kernel died"
        assert ans.outputs[0].text == "computing...\n"
        assert error_names(test_f) == ["NotRun"] and error_names(test_g) == ["NotRun"]
        assert test_f.outputs[0].evalue == "the kernel died"
        assert test_f.outputs[0].traceback == ["NotRun: the kernel died"]

    def test_current_cell_with_its_own_error_gets_no_second_error(self):
        nb = guarded_nb()
        run_all(nb)
        nb.cells[4].outputs = [error("MemoryError", "")]
        finish(nb, fake_client(current=4), stop_reason="the kernel died")
        assert error_names(nb.cells[2]) == ["MemoryError"]
        assert error_names(nb.cells[3]) == []   # test_g ran (it has an execution count)

    def test_stop_without_client_marks_never_run_cells(self):
        nb = guarded_nb()
        nb.cells[1].execution_count = 1
        finish(nb, None, stop_reason="SlotError: fork server died")
        assert [error_names(c) for c in nb.cells] == [[], ["NotRun"], ["NotRun"], ["NotRun"]]

    def test_markdown_cells_are_never_marked(self):
        nb = add_guards(notebook(markdown(source="m"), graded("test_f")))
        finish(nb, fake_client(), stop_reason="the kernel died")
        assert nb.cells[0].cell_type == "markdown" and "outputs" not in nb.cells[0]
        assert error_names(nb.cells[1]) == ["NotRun"]

    def test_timed_out_cell_gets_a_cell_timeout_error(self):
        nb = guarded_nb()
        run_all(nb)
        nb.cells[4].outputs = [error("KeyboardInterrupt", "")]
        flags = finish(nb, fake_client(current=6, timed_out={4}))
        assert flags == []
        assert error_names(nb.cells[2]) == ["KeyboardInterrupt", "CellTimeout"]
        assert [error_names(c) for c in (nb.cells[0], nb.cells[1], nb.cells[3])] == [[], [], []]

    def test_timed_out_current_cell_on_a_stop_gets_only_the_timeout(self):
        nb = guarded_nb()
        run_all(nb)
        finish(nb, fake_client(current=4, timed_out={4}), stop_reason="the notebook ran past its 600 s limit")
        assert error_names(nb.cells[2]) == ["CellTimeout"]

    def test_a_stopped_test_cell_scores_zero(self):
        nb = guarded_nb()
        run_all(nb)
        nb.cells[6].execution_count = None
        finish(nb, fake_client(current=6), stop_reason="the kernel died")
        assert score_cell(nb.cells[2]).points == 1
        assert score_cell(nb.cells[3]).points == 0


# ---------------------------------------------------------------------------------------------
# the sandbox's command line

@pytest.fixture
def layout(tmp_path, monkeypatch):
    """A course root, a slot folder and a home folder; bwrap 'installed'."""
    course = tmp_path / "course"
    course.mkdir()
    home = tmp_path / "home-of-grader"
    home.mkdir()
    slot = tmp_path / "grade-base" / "slot0"
    slot.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(bwrap, "bwrap_path", lambda: "/usr/bin/bwrap")
    return SimpleNamespace(course=course, home=home, slot=slot)


def argv_for(slot: Path, uid: int | None) -> list[str]:
    """The command line of a slot's kernel sandbox: its fork server run by bubblewrap."""
    return bwrap.sandbox_argv(slot, uid, bwrap.forkserver_command())


def values_of(argv: list[str], option: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == option]


def pairs_of(argv: list[str], option: str) -> list[tuple[str, str]]:
    return [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == option]


def index_of(argv: list[str], *seq: str) -> int:
    for i in range(len(argv) - len(seq) + 1):
        if argv[i:i + len(seq)] == list(seq):
            return i
    raise AssertionError(f"{seq} not in {argv}")


class TestSandboxArgv:

    def test_starts_with_bwrap_and_isolates(self, layout):
        argv = argv_for(layout.slot, None)
        assert argv[0] == "/usr/bin/bwrap"
        for option in ("--die-with-parent", "--unshare-pid", "--unshare-net", "--new-session"):
            assert option in argv

    def test_only_an_allow_list_of_host_paths_is_mounted(self, layout):
        argv = argv_for(layout.slot, None)
        bound = [src for src, dest in pairs_of(argv, "--ro-bind")]
        assert "/" not in bound, "the host's root is never mounted whole"
        allowed = set(bwrap.SYSTEM_PATHS) | {str(p) for p in bwrap.visible_paths()}
        assert set(bound) <= allowed, set(bound) - allowed
        for src, dest in pairs_of(argv, "--ro-bind"):
            assert src == dest
        for secret in (layout.course, layout.home, Path("/srv"), Path("/var"), Path("/run"), Path("/home"),
                       Path("/opt"), Path("/mnt")):
            covering = [b for b in bound if Path(b) == secret.resolve() or Path(b) in secret.resolve().parents]
            assert not covering, f"{secret} is visible through {covering}"

    def test_visible_paths_are_the_interpreter_the_environment_and_this_package(self):
        import autograder

        visible = bwrap.visible_paths()
        package = Path(autograder.__file__).resolve().parent
        assert any(p == package or p in package.parents for p in visible)
        assert any(Path(sys.prefix).resolve() == p or p in Path(sys.prefix).resolve().parents for p in visible)
        assert not any(package.parent == p for p in visible), "the checkout holding the package stays hidden"

    def test_links_on_the_way_to_the_interpreter_are_made_in_the_sandbox(self, layout, tmp_path, monkeypatch):
        real = Path(sys.prefix).resolve()
        (tmp_path / "a").mkdir()
        (tmp_path / "a" / "env").symlink_to(real)
        (tmp_path / "venv").symlink_to("a/env")            # relative, and a link to a link
        monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
        monkeypatch.setattr(sys, "executable", str(tmp_path / "venv" / "bin" / "python"))
        links = bwrap.host_links()
        assert links == [("a/env", tmp_path / "venv"), (str(real), tmp_path / "a" / "env")]
        argv = argv_for(layout.slot, None)
        assert {(t, Path(at)) for t, at in pairs_of(argv, "--symlink")} >= set(links)
        assert str(tmp_path) not in {src for src, _ in pairs_of(argv, "--ro-bind")}, "links only, no folder shown"

    def test_no_link_is_made_for_an_interpreter_reached_directly(self, monkeypatch):
        monkeypatch.setattr(sys, "prefix", str(Path(sys.prefix).resolve()))
        monkeypatch.setattr(sys, "executable", str(Path(sys.prefix) / "bin" / Path(sys.executable).name))
        assert bwrap.host_links() == []   # bin/python links to the base interpreter, which is shown

    def test_tmp_is_a_sized_tmpfs(self, layout):
        argv = argv_for(layout.slot, None)
        at = index_of(argv, "--tmpfs", "/tmp")
        assert argv[at - 2:at] == ["--size", str(bwrap.SCRATCH_TMP_BYTES)]

    def test_slot_folder_is_the_only_writable_mount(self, layout):
        argv = argv_for(layout.slot, None)
        slot = str(layout.slot)
        assert pairs_of(argv, "--bind") == [(slot, slot)]

    def test_environment_is_cleared_then_points_home_and_tmpdir_at_the_slot(self, layout):
        argv = argv_for(layout.slot, None)
        env = dict(pairs_of(argv, "--setenv"))
        assert env["HOME"] == str(layout.slot) and env["TMPDIR"] == str(layout.slot)
        assert index_of(argv, "--clearenv") < min(i for i, a in enumerate(argv) if a == "--setenv")

    def test_grader_environment_does_not_leak(self, layout, monkeypatch):
        monkeypatch.setenv("COPY_THAT_SECRET", "s3cret")
        argv = argv_for(layout.slot, None)
        assert "s3cret" not in " ".join(argv)
        assert "COPY_THAT_SECRET" not in dict(pairs_of(argv, "--setenv"))

    def test_command_ends_with_the_isolated_forkserver(self, layout):
        argv = argv_for(layout.slot, None)
        fork = bwrap.forkserver_command()
        assert fork[:2] == [sys.executable, "-I"]
        assert Path(fork[2]).name == "forkserver.py" and Path(fork[2]).is_file()
        assert Path(fork[2]) == Path(fork[2]).resolve(), "the sandbox shows the package at its resolved path"
        assert Path(fork[3]) / "autograder" / "grading" / "forkserver.py" == Path(fork[2])
        assert argv[-4:] == fork
        assert argv[-5] == "--"

    def test_without_uid_there_is_no_setpriv(self, layout):
        argv = argv_for(layout.slot, None)
        assert not any(a.endswith("setpriv") for a in argv)
        assert not any(a.startswith("--reuid") for a in argv)

    def test_uid_drops_privileges_before_the_interpreter(self, layout):
        argv = argv_for(layout.slot, 61003)
        setpriv = next(i for i, a in enumerate(argv) if a.endswith("setpriv"))
        python = len(argv) - 4
        assert argv[python] == sys.executable
        assert argv[setpriv - 1] == "--"
        between = argv[setpriv + 1:python]
        for option in ("--reuid=61003", "--regid=61003", "--clear-groups", "--no-new-privs"):
            assert option in between
        assert between[-1] == "--"

    def test_without_root_a_user_namespace_is_added(self, layout, monkeypatch):
        monkeypatch.setattr(os, "geteuid", lambda: 1000)
        assert "--unshare-user" in argv_for(layout.slot, None)

    def test_as_root_no_user_namespace(self, layout, monkeypatch):
        monkeypatch.setattr(os, "geteuid", lambda: 0)
        assert "--unshare-user" not in argv_for(layout.slot, 61000)

    def test_mount_points_on_the_way_to_the_slot_are_traversable(self, layout):
        argv = argv_for(layout.slot, None)
        made = [argv[i + 3] for i, a in enumerate(argv)
                if a == "--perms" and argv[i + 1] == "0755" and argv[i + 2] == "--dir"]
        assert str(layout.slot.parent) in made
        assert index_of(argv, "--dir", str(layout.slot.parent)) < index_of(argv, "--bind")


class TestSlotUid:

    def test_not_sandboxed_runs_as_the_grader(self, tmp_path, monkeypatch):
        monkeypatch.setattr(os, "geteuid", lambda: 0)
        assert sandbox.Slot(2, tmp_path, sandboxed=False).uid is None

    def test_sandboxed_as_root_gets_a_uid_no_other_slot_holds(self, tmp_path, monkeypatch):
        monkeypatch.setattr(os, "geteuid", lambda: 0)
        monkeypatch.setattr(bwrap.shutil, "which", lambda name: f"/usr/bin/{name}")
        first, second = sandbox.Slot(2, tmp_path, sandboxed=True), sandbox.Slot(3, tmp_path, sandboxed=True)
        try:
            assert first.uid is not None and second.uid is not None and first.uid != second.uid
            assert bwrap.SLOT_UID_BASE <= first.uid < bwrap.SLOT_UID_BASE + bwrap.UID_RANGE
            # another grading run at the same time (another process) claims other ids still
            probe = subprocess.run([sys.executable, "-c", "from autograder.grading import bwrap; "
                                    "print(bwrap.claim_uid()[0])"], capture_output=True, text=True, timeout=60)
            assert int(probe.stdout) not in (first.uid, second.uid), probe.stderr
            held = first.uid
        finally:
            first.release()
            second.release()
        again = sandbox.Slot(4, tmp_path, sandboxed=True)
        try:
            assert again.uid <= held, "a released id is free again"
        finally:
            again.release()

    def test_sandboxed_without_root_keeps_the_graders_uid(self, tmp_path, monkeypatch):
        monkeypatch.setattr(os, "geteuid", lambda: 1000)
        assert sandbox.Slot(2, tmp_path, sandboxed=True).uid is None


# ---------------------------------------------------------------------------------------------
# the slot's scratch folder

@pytest.fixture
def slot(tmp_path):
    s = sandbox.Slot(0, tmp_path, sandboxed=False)
    s.dir.mkdir()
    return s


def everything_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


class TestPutFiles:

    def test_files_land_in_the_slot_folder_with_subfolders(self, slot):
        slot.put_files({"a1.ipynb": b"{}", "data/train/x.csv": b"1,2\n", ".hidden": b"h"})
        assert (slot.dir / "a1.ipynb").read_bytes() == b"{}"
        assert (slot.dir / "data" / "train" / "x.csv").read_bytes() == b"1,2\n"
        assert (slot.dir / ".hidden").read_bytes() == b"h"

    @pytest.mark.parametrize("rel", ["../escape.txt", "data/../../escape.txt", "../slot0-sibling/escape.txt"])
    def test_paths_climbing_out_are_ignored(self, slot, tmp_path, rel):
        before = everything_under(tmp_path)
        slot.put_files({rel: b"pwned", "ok.txt": b"fine"})
        assert everything_under(tmp_path) - before == {"slot0/ok.txt"}

    def test_absolute_path_is_ignored(self, slot, tmp_path):
        target = tmp_path / "outside" / "abs.txt"
        slot.put_files({str(target): b"pwned"})
        assert not target.exists() and not (tmp_path / "outside").exists()
        assert everything_under(slot.dir) == set()

    def test_path_through_a_symlink_out_is_ignored(self, slot, tmp_path):
        outside = tmp_path / "outside"
        outside.mkdir()
        (slot.dir / "link").symlink_to(outside)
        slot.put_files({"link/x.txt": b"pwned"})
        assert list(outside.iterdir()) == []

    def test_dots_that_stay_inside_are_allowed(self, slot):
        slot.put_files({"data/../kept.txt": b"1", "..dots.txt": b"2"})
        assert (slot.dir / "kept.txt").read_bytes() == b"1"
        assert (slot.dir / "..dots.txt").read_bytes() == b"2"

    def test_the_slot_folder_itself_is_not_a_file_name(self, slot):
        slot.put_files({".": b"x", "": b"y"})
        assert slot.dir.is_dir() and everything_under(slot.dir) == set()


class TestClear:

    def test_clear_empties_files_subfolders_and_dotfiles(self, slot):
        slot.put_files({"a.txt": b"a", "sub/deeper/b.txt": b"b", ".config/c": b"c", ".hidden": b"d"})
        slot.clear()
        assert slot.dir.is_dir() and list(slot.dir.iterdir()) == []

    def test_clear_removes_symlinks_without_touching_their_targets(self, slot, tmp_path):
        outside = tmp_path / "outside"
        (outside / "inner").mkdir(parents=True)
        (outside / "keep.txt").write_text("keep")
        (outside / "inner" / "keep2.txt").write_text("keep2")
        (slot.dir / "to-folder").symlink_to(outside)
        (slot.dir / "to-file").symlink_to(outside / "keep.txt")
        (slot.dir / "broken").symlink_to(tmp_path / "nowhere")
        (slot.dir / "sub").mkdir()
        (slot.dir / "sub" / "nested-link").symlink_to(outside)
        slot.clear()
        assert list(slot.dir.iterdir()) == []
        assert (outside / "keep.txt").read_text() == "keep"
        assert (outside / "inner" / "keep2.txt").read_text() == "keep2"

    def test_clear_of_an_empty_folder_is_fine(self, slot):
        slot.clear()
        assert slot.dir.is_dir()


# ---------------------------------------------------------------------------------------------
# feedback

class TestStripHiddenTracebacks:

    def hidden_cell(self):
        src = "assert f() == 1\n### BEGIN HIDDEN TESTS\nassert f(2) == 4\n### END HIDDEN TESTS"
        return graded("test_hidden", src, outputs=[
            stream("✓ f() == 1\n"),
            error("CheckFailed", "f(2) returned 3. Likely mistake: off by one",
                  ["\x1b[0;31m---------\x1b[0m", "  assert f(2) == 4  # hidden line", "CheckFailed: ..."])])

    def test_hidden_test_traceback_becomes_its_last_line(self):
        nb = notebook(self.hidden_cell())
        nb, _ = StripHiddenTracebacks().preprocess(nb, {})
        err = nb.cells[0].outputs[1]
        assert err.traceback == ["CheckFailed: f(2) returned 3. Likely mistake: off by one"]
        assert err.ename == "CheckFailed" and err.evalue.startswith("f(2) returned 3")

    def test_other_outputs_of_the_hidden_cell_are_kept(self):
        nb = notebook(self.hidden_cell())
        nb, _ = StripHiddenTracebacks().preprocess(nb, {})
        assert nb.cells[0].outputs[0].text == "✓ f() == 1\n"

    def test_cells_without_hidden_tests_keep_their_traceback(self):
        tb = ["Traceback...", "  assert f() == 1", "AssertionError: "]
        visible = graded("test_f", "assert f() == 1", outputs=[error("AssertionError", "", tb)])
        answer_cell = answer("f", "def f(:\n    pass")
        answer_cell.outputs = [error("SyntaxError", "invalid syntax", ["  def f(:", "SyntaxError: invalid syntax"])]
        nb = notebook(visible, answer_cell, self.hidden_cell())
        nb, _ = StripHiddenTracebacks().preprocess(nb, {})
        assert nb.cells[0].outputs[0].traceback == tb
        assert nb.cells[1].outputs[0].traceback == ["  def f(:", "SyntaxError: invalid syntax"]

    def test_markdown_mentioning_hidden_tests_is_untouched(self):
        md = markdown(source="Some tests are hidden: ### BEGIN HIDDEN TESTS is how they are marked.")
        nb = notebook(md)
        before = copy.deepcopy(nb)
        nb, _ = StripHiddenTracebacks().preprocess(nb, {})
        assert nb == before


# ---------------------------------------------------------------------------------------------
# scoring a test cell (as nbgrader's determine_grade after IgnorePattern)

class TestScoreCell:

    def test_error_output_scores_zero(self):
        res = score_cell(graded("test_f", points=3, outputs=[error("AssertionError", "f() returned 2")]))
        assert (res.points, res.max_points, res.status) == (0.0, 3.0, "failed")
        assert res.message == "AssertionError: f() returned 2"

    def test_warning_on_stderr_is_dropped_and_scores_full(self):
        warn = stream("/work/x.py:3: UserWarning: the given NumPy array is not writable\n  t = torch.tensor(a)\n",
                      name="stderr")
        cell = graded("test_f", points=2, outputs=[stream("✓ ok\n"), warn])
        res = score_cell(cell)
        assert (res.points, res.status) == (2.0, "passed")
        assert [o.name for o in cell.outputs] == ["stdout"]
        assert res.message == "✓ ok"

    @pytest.mark.parametrize("text", ["/x.py:3: DeprecationWarning: old\n", "x.py:10: Warning: plain\n"])
    def test_any_warning_category_is_dropped(self, text):
        assert score_cell(graded("test_f", outputs=[stream(text, name="stderr")])).points == 1.0

    @pytest.mark.parametrize("text", ["something went wrong\n", "UserWarning: no file and line\n",
                                      "x.py: UserWarning: no line number\n"])
    def test_other_stderr_scores_zero(self, text):
        res = score_cell(graded("test_f", outputs=[stream(text, name="stderr")]))
        assert (res.points, res.status) == (0.0, "failed")
        assert res.message.startswith("wrote to stderr: ")

    def test_warning_on_stdout_is_not_dropped(self):
        cell = graded("test_f", outputs=[stream("x.py:3: UserWarning: printed\n")])
        score_cell(cell)
        assert len(cell.outputs) == 1

    def test_no_outputs_scores_full_points(self):
        res = score_cell(graded("test_f", points=4))
        assert (res.points, res.max_points, res.status) == (4.0, 4.0, "passed")

    def test_not_implemented_is_not_started(self):
        res = score_cell(graded("test_f", points=2, outputs=[error("NotImplementedError", "")]))
        assert (res.points, res.status) == (0.0, "not started")

    def test_warning_does_not_hide_an_error(self):
        cell = graded("test_f", outputs=[stream("x.py:1: UserWarning: w\n", name="stderr"),
                                         error("ValueError", "bad")])
        res = score_cell(cell)
        assert (res.points, res.status) == (0.0, "failed")
        assert res.message == "ValueError: bad"


# ---------------------------------------------------------------------------------------------
# files that cross the sandbox's edge

class TestFiles:

    def test_regular_files_are_taken_notebooks_and_links_are_not(self, tmp_path):
        from autograder.grading.files import submission_files

        (tmp_path / "data.csv").write_text("1,2\n")
        (tmp_path / "sub").mkdir()
        (tmp_path / "sub" / "more.txt").write_text("x")
        (tmp_path / "a1.ipynb").write_text("{}")
        (tmp_path / "passwd").symlink_to("/etc/passwd")
        (tmp_path / "linked-dir").symlink_to(tmp_path / "sub")
        problems: list[str] = []
        files = submission_files(tmp_path, problems)
        assert files == {"data.csv": b"1,2\n", "sub/more.txt": b"x"}
        assert sum("not a regular file" in p for p in problems) == 2, problems

    def test_caps_on_each_file_the_count_and_the_total(self, tmp_path, monkeypatch):
        from autograder.grading import files as f

        monkeypatch.setattr(f, "MAX_FILE_BYTES", 10)
        monkeypatch.setattr(f, "MAX_TOTAL_BYTES", 25)
        monkeypatch.setattr(f, "MAX_FILES", 3)
        (tmp_path / "big").write_bytes(b"x" * 11)
        for name in "abcd":
            (tmp_path / name).write_bytes(b"y" * 9)
        sparse = tmp_path / "sparse"
        with open(sparse, "wb") as out:
            out.truncate(1 << 30)     # 1 GiB that takes no disk: counted at its full length
        problems: list[str] = []
        taken = f.submission_files(tmp_path, problems)
        assert sorted(taken) == ["a", "b"], taken.keys()   # a+b = 18, c would pass 25
        assert any("big" in p for p in problems) and any("sparse" in p for p in problems)
        assert any("in all" in p for p in problems)

    def test_what_the_kernel_wrote_comes_back_but_hidden_files_timestamps_and_unchanged_inputs_do_not(self, tmp_path):
        from autograder.grading.files import kernel_output_files

        (tmp_path / "given.txt").write_text("same")
        (tmp_path / "changed.txt").write_text("new")
        (tmp_path / "side-effect.txt").write_text("made")
        (tmp_path / "timestamp.txt").write_text("2000-01-01 00:00:00")   # a forged submission time
        (tmp_path / ".kernel-config-x").mkdir()
        (tmp_path / ".kernel-config-x" / "history.sqlite").write_text("h")
        (tmp_path / ".copy-that-kernel.json").write_text("{}")
        out = kernel_output_files(tmp_path, {"given.txt": b"same", "changed.txt": b"old"}, [])
        assert out == {"changed.txt": b"new", "side-effect.txt": b"made"}


# ---------------------------------------------------------------------------------------------
# student content made inert

class TestInertStudentContent:
    LIVE = ["<img", "<script", "<svg", "<iframe", "javascript:"]   # markup that could run, unescaped

    def run(self, nb):
        from autograder.grading.inert import InertStudentContent

        out, _ = InertStudentContent()(copy.deepcopy(nb), {})   # called as nbgrader calls it
        return out

    def test_outputs_lose_scripts_svg_and_javascript_but_keep_text_and_pictures(self):
        cell = new_code_cell("x")
        cell.outputs = [
            new_output("display_data", data={"text/html": "<b>ok</b><img src=x onerror=alert(1)><script>alert(2)</script>",
                                             "text/plain": "ok"}),
            new_output("display_data", data={"image/svg+xml": "<svg onload=alert(3)></svg>", "image/png": "iVBORw0K"}),
            new_output("display_data", data={"application/javascript": "alert(4)"}),
            new_output("execute_result", data={"text/markdown": "[x](javascript:alert(5))"}, execution_count=1),
        ]
        out = self.run(new_notebook(cells=[cell])).cells[0].outputs
        text = json.dumps(out)
        assert not [p for p in self.LIVE if p in text], text
        assert "&lt;img src=x onerror=alert(1)&gt;" in out[0].data["text/html"], "escaped, shown as text"
        assert "<b>ok</b>" in out[0].data["text/html"] and out[0].data["text/plain"] == "ok"
        assert "image/svg+xml" not in out[1].data and out[1].data["image/png"] == "iVBORw0K"
        assert "application/javascript" not in out[2].data

    def test_written_answers_and_added_cells_are_cleaned_and_links_disarmed(self):
        answer = new_markdown_cell("My answer: <img src=x onerror=\"fetch('/api/contents')\"> and "
                                   "[click](javascript:alert(1)) and **bold**")
        answer.metadata["nbgrader"] = nbgrader_meta("written", solution=True, grade=True, points=1,
                                                    cell_type="markdown")
        added = new_markdown_cell("<iframe src=\"https://evil.example\"></iframe><a href=\"javascript:alert(2)\">x</a>")
        out = self.run(new_notebook(cells=[answer, added]))
        for cell in out.cells:
            assert not [p for p in self.LIVE if p in cell.source], cell.source
        assert "**bold**" in out.cells[0].source

    def test_the_instructors_locked_cells_are_left_as_they_are(self):
        prose = new_markdown_cell("<details><summary>Hint</summary>Use `.storage()`</details>")
        prose.metadata["nbgrader"] = nbgrader_meta("intro", locked=True, cell_type="markdown")
        out = self.run(new_notebook(cells=[prose]))
        assert out.cells[0].source == prose.source

    def test_the_course_configuration_runs_it_in_autograde_and_feedback(self):
        from traitlets.config import PyFileConfigLoader

        config = PyFileConfigLoader("nbgrader_config.py", path=str(Path(__file__).parent.parent)).load_config()
        name = "autograder.grading.inert.InertStudentContent"
        steps = config.Autograde.autograde_preprocessors
        assert steps.index(name) == steps.index("autograder.grading.execute.SandboxedExecute") + 1
        assert name in config.GenerateFeedback.preprocessors


class TestRedactHiddenTestLines:

    def test_lines_of_hidden_tests_are_removed_from_every_output_and_the_rest_stays(self):
        from autograder.grading.feedback import REDACTED, RedactHiddenTestLines

        hidden_line = "assert shares_memory(x, x[1:]) is True, 'a view'"
        test = new_code_cell(f"check(1)\n### BEGIN HIDDEN TESTS\n{hidden_line}\npass\n### END HIDDEN TESTS\n")
        answer = new_code_cell("print(stuff)")
        answer.outputs = [new_output("stream", name="stdout", text=f"before\n    {hidden_line}\npass\nafter\n"),
                          new_output("display_data", data={"text/plain": hidden_line, "text/html": f"<p>{hidden_line}</p>"}),
                          new_output("error", ename="X", evalue=hidden_line, traceback=[hidden_line])]
        out, _ = RedactHiddenTestLines()(new_notebook(cells=[test, answer]), {})
        outputs = out.cells[1].outputs
        assert outputs[0].text == f"before\n{REDACTED}\npass\nafter\n"
        assert hidden_line not in json.dumps(outputs)
        assert out.cells[0].source.count(hidden_line) == 1, "the source is ClearHiddenTests' job, later"


# --- recording grades --------------------------------------------------------------------------

def test_save_auto_grades_once_records_what_nbgraders_own_does_in_one_commit(tmp_path):
    """SaveAutoGradesOnce (the course's) against nbgrader's SaveAutoGrades on the same notebook:
    the same grades and comments, one commit instead of one per graded cell."""
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import SaveAutoGrades
    from sqlalchemy import event
    from sqlalchemy.engine import Engine
    from sqlalchemy.orm import Session

    from autograder.grading.gradebook import SaveAutoGradesOnce
    from harness import release_notebook, scratch_course

    root = scratch_course(tmp_path / "c", "a1_views")
    url = f"sqlite:///{root / 'gradebook.db'}"
    nb = nbformat.read(release_notebook("a1_views"), as_version=4)
    failing = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_plus_one")
    failing.outputs = [new_output("error", ename="AssertionError", evalue="wrong", traceback=[])]
    with Gradebook(url) as gb:
        for student in ("stock", "once"):
            gb.update_or_create_student(student)
            gb.update_or_create_submission("a1_views", student)
    commits, selects = [], []
    listener = lambda session: commits.append(session)   # noqa: E731

    def statement(conn, cursor, text, *args):
        if text.lstrip().upper().startswith("SELECT"):
            selects.append(text)
    event.listen(Session, "after_commit", listener)
    event.listen(Engine, "before_cursor_execute", statement)
    try:
        with Gradebook(url):        # what opening a gradebook commits and asks by itself (its course check)
            pass
        counts = {"open": len(commits)}
        asked = {"open": len(selects)}
        for student, cls in (("stock", SaveAutoGrades), ("once", SaveAutoGradesOnce)):
            before, asked_before = len(commits), len(selects)
            resources = {"nbgrader": {"notebook": "a1_views", "assignment": "a1_views", "student": student,
                                      "db_url": url}}
            cls().preprocess(copy.deepcopy(nb), resources)
            counts[student] = len(commits) - before
            asked[student] = len(selects) - asked_before
    finally:
        event.remove(Session, "after_commit", listener)
        event.remove(Engine, "before_cursor_execute", statement)
    with Gradebook(url) as gb:
        saved = {s: sorted((g.name, g.auto_score, g.needs_manual_grade)
                           for g in gb.find_submission_notebook("a1_views", "a1_views", s).grades)
                 for s in ("stock", "once")}
        comments = {s: sorted((c.name, c.auto_comment)
                              for c in gb.find_submission_notebook("a1_views", "a1_views", s).comments)
                    for s in ("stock", "once")}
    assert saved["once"] == saved["stock"] and comments["once"] == comments["stock"]
    assert ("test_plus_one", 0.0, False) in saved["once"], saved["once"]
    assert counts["stock"] > counts["open"] + 5 and counts["once"] == counts["open"] + 1, counts
    # nbgrader asks for each cell's grade or comment on its own; the course's finds them all at once
    graded = sum(1 for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")
                 or c.metadata.get("nbgrader", {}).get("solution"))
    assert asked["stock"] >= asked["open"] + graded, (asked, graded)
    assert asked["once"] <= asked["open"] + 4, asked


def test_a_shared_gradebook_makes_its_tables_once_and_a_new_database_still_gets_them(tmp_path, monkeypatch):
    """share_engines: the first Gradebook of a database creates its tables (nbgrader's create_all);
    later ones open without checking each table again; another database is set up in full."""
    import sys

    from nbgrader.api import Gradebook
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    from autograder.grading.gradebook import share_engines

    share_engines()
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))  # alembic
    pragmas = []

    def statement(conn, cursor, text, *args):
        if "PRAGMA" in text.upper() and "table_info" in text.lower():
            pragmas.append(text)
    event.listen(Engine, "before_cursor_execute", statement)
    try:
        counts = []
        for url in [f"sqlite:///{tmp_path / 'one.db'}"] * 3 + [f"sqlite:///{tmp_path / 'two.db'}"]:
            before = len(pragmas)
            with Gradebook(url) as gb:
                gb.add_student("s1") if not gb.students else None
            counts.append(len(pragmas) - before)
    finally:
        event.remove(Engine, "before_cursor_execute", statement)
    assert counts[0] > 5 and counts[1] == counts[2] == 0 and counts[3] == counts[0], counts
    for name in ("one", "two"):
        with Gradebook(f"sqlite:///{tmp_path / name}.db") as gb:
            assert [s.id for s in gb.students] == ["s1"]


@pytest.mark.parametrize("change, key", [
    ({"points": "two"}, "points"),                  # a string where nbgrader wants a number
    ({"grade": "yes"}, "grade"),
    ({"extra": 1}, "extra"),
    ({"points": 0.5, "locked": False}, None),       # valid: passes, and passes again from memory
])
def test_the_metadata_check_fails_as_nbgraders_own_and_checks_its_schema_once(change, key, monkeypatch):
    """check_metadata_once: jsonschema's own errors for metadata that nbgrader's schema refuses, and
    valid metadata passes; the schema itself is checked once, not for every cell."""
    import jsonschema
    from nbgrader.nbgraderformat import MetadataValidator, common

    from autograder.grading.gradebook import check_metadata_once

    schema = MetadataValidator().schema
    meta = {"grade": True, "grade_id": "test_x", "locked": True, "points": 2, "schema_version": 3,
            "solution": False} | change
    try:
        jsonschema.validate(meta, schema)
        expected = None
    except jsonschema.ValidationError as e:
        expected = e.message
    check_metadata_once()
    assert getattr(common.jsonschema, "checks_once", False)
    checked = []
    monkeypatch.setattr(jsonschema.Draft4Validator, "check_schema",
                        classmethod(lambda cls, s, *a, **k: checked.append(1)), raising=False)
    for _ in range(3):
        try:
            common.jsonschema.validate(dict(meta), schema)
            got = None
        except jsonschema.ValidationError as e:
            got = e.message
        assert got == expected
    assert (expected is None) == (key is None), expected
    assert key is None or key in expected or f"'{change[key]}' is not of type" in expected, expected
    assert len(checked) <= 1, checked


def test_restore_missing_cells_puts_back_what_nbgraders_own_does_in_fewer_queries(tmp_path):
    """RestoreMissingCells against nbgrader's OverwriteCells on one tampered submission (a locked
    test rewritten, points raised, a cell type switched, a test deleted): the
    same notebook comes out, from a few queries instead of one or two per cell."""
    from nbgrader.preprocessors import OverwriteCells
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    from autograder.grading.cells import RestoreMissingCells
    from harness import release_notebook, scratch_course

    root = scratch_course(tmp_path / "c", "a1_views")
    url = f"sqlite:///{root / 'gradebook.db'}"
    nb = nbformat.read(release_notebook("a1_views"), as_version=4)

    def cell(gid):
        return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == gid)

    tests = [c.metadata.nbgrader["grade_id"] for c in nb.cells
             if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"]
    cell(tests[0]).source = "pass  # rewritten"
    cell(tests[1]).metadata.nbgrader["points"] = 100
    cell(tests[2]).cell_type = "markdown"
    cell(tests[2]).pop("outputs", None)
    cell(tests[2]).pop("execution_count", None)
    nb.cells.remove(cell(tests[4]))
    selects = []

    def statement(conn, cursor, text, *args):
        if text.lstrip().upper().startswith("SELECT"):
            selects.append(text)
    out, asked = {}, {}
    event.listen(Engine, "before_cursor_execute", statement)
    try:
        for name, cls in (("stock", OverwriteCells), ("ours", RestoreMissingCells)):
            before = len(selects)
            resources = {"nbgrader": {"notebook": "a1_views", "assignment": "a1_views", "db_url": url}}
            out[name], _ = cls(add_missing_cells=True).preprocess(copy.deepcopy(nb), resources)
            asked[name] = len(selects) - before
    finally:
        event.remove(Engine, "before_cursor_execute", statement)
    assert out["ours"] == out["stock"]
    restored = next(c for c in out["ours"].cells if c.metadata.get("nbgrader", {}).get("grade_id") == tests[0])
    assert restored.source != "pass  # rewritten"
    assert any(c.metadata.get("nbgrader", {}).get("grade_id") == tests[4] for c in out["ours"].cells)
    cells = sum(1 for c in nb.cells if "grade_id" in c.metadata.get("nbgrader", {}))
    assert asked["stock"] >= cells and asked["ours"] <= 12, (asked, cells)


def test_settling_memory_leaves_later_garbage_to_the_collector(monkeypatch):
    """settle_memory exempts what is loaded from full collections; a cycle made afterwards (a
    notebook's objects) is still collected, and a second call with nothing new loaded is a no-op."""
    import gc
    import weakref

    from autograder.grading import jobs

    import _imp

    # threads that earlier tests left (a Dask client's, say) may import a module at any moment;
    # the import lock keeps them out between the two calls.  They may also free frozen objects at
    # any moment (the count of frozen objects then falls), so the no-op is seen on gc.freeze itself.
    frozen_again = []
    _imp.acquire_lock()
    try:
        jobs.settle_memory()
        assert gc.get_freeze_count() > 0
        monkeypatch.setattr(gc, "freeze", lambda: frozen_again.append(True))
        jobs.settle_memory()
    finally:
        monkeypatch.undo()
        _imp.release_lock()
    assert frozen_again == [], "nothing new was loaded: nothing is frozen again"

    class Node:
        pass
    a, b = Node(), Node()
    a.other, b.other = b, a
    ref = weakref.ref(a)
    del a, b
    gc.collect()
    assert ref() is None


def test_grade_runs_one_job_more_than_the_cores_unless_told(monkeypatch, tmp_path):
    """The default number of submissions graded at once: the cores plus one (a kernel and the
    grader wait on each other in turn); the configuration or --jobs still decide when given."""
    from autograder.grading import config

    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    assert config.default_jobs() == 5
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert config.default_jobs() == 2


def test_the_guards_report_is_one_write(monkeypatch):
    """A stream flush between two writes of the report once let a warning on stderr land inside
    its line, and an honest submission was flagged "the guard's report was garbled"."""
    import io

    writes: list[str] = []

    class Recording(io.StringIO):
        def write(self, text):
            writes.append(text)
            return len(text)

    guard.install()
    monkeypatch.setattr("sys.stdout", Recording())
    guard.restore({})
    assert writes == [guard.MARK + "[]\n"]
