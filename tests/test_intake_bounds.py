"""A submitted notebook is bounded before nbformat builds it: its bytes, how many JSON objects and
arrays it holds, its cells, and its metadata.  Each bomb is refused with the reason, and reading
it costs the grader little memory; an honest notebook is read as before."""
from __future__ import annotations

import json
import tracemalloc

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder.grading import intake
from autograder.grading.intake import read_notebook

PEAK_LIMIT = 400 << 20     # what reading may allocate at most, for a notebook of up to 64 MiB


def _peak_read(path):
    tracemalloc.start()
    try:
        nb, problem = read_notebook(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return nb, problem, peak


def _write(tmp_path, data: dict | str) -> object:
    path = tmp_path / "a1_views.ipynb"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def _honest() -> dict:
    nb = new_notebook(cells=[new_markdown_cell("# a1"), new_code_cell("x = 1")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return json.loads(nbformat.writes(nb))


def test_an_honest_notebook_is_read(tmp_path):
    nb, problem, _ = _peak_read(_write(tmp_path, _honest()))
    assert problem is None and [c.cell_type for c in nb.cells] == ["markdown", "code"]


def test_many_small_metadata_objects_are_refused_before_parsing(tmp_path):
    """The 57 MB notebook of metadata objects: refused on a byte count, nothing parsed."""
    data = _honest()
    text = json.dumps(data)
    bomb = ",".join(f'"k{i}":{{"a":[1]}}' for i in range(2_500_000))     # ~55 MB
    text = text.replace('"metadata": {', '"metadata": {' + bomb + ",", 1)
    nb, problem, peak = _peak_read(_write(tmp_path, text))
    assert nb is None and "nested values, over" in problem, problem
    assert peak < PEAK_LIMIT, f"reading allocated {peak >> 20} MiB"


def test_one_huge_metadata_value_is_refused_before_nbformat(tmp_path):
    data = _honest()
    data["metadata"]["x"] = "y" * (40 << 20)
    nb, problem, peak = _peak_read(_write(tmp_path, data))
    assert nb is None and "characters of notebook metadata" in problem, problem
    assert peak < PEAK_LIMIT, f"reading allocated {peak >> 20} MiB"


def test_cell_metadata_and_cell_counts_are_bounded(tmp_path):
    data = _honest()
    data["cells"][1]["metadata"]["x"] = "y" * (intake.MAX_CELL_METADATA + 1)
    assert "metadata in cell 1" in read_notebook(_write(tmp_path, data))[1]
    data = _honest()
    data["cells"] = [data["cells"][1]] * (intake.MAX_CELLS + 1)
    assert "cells, over" in read_notebook(_write(tmp_path, data))[1]


@pytest.mark.parametrize("depth", [100_000])
def test_deep_nesting_is_reported_not_raised(tmp_path, depth):
    text = json.dumps(_honest()).replace('"metadata": {', '"metadata": {"d":' + "[" * depth + "]" * depth + ",", 1)
    nb, problem = read_notebook(_write(tmp_path, text))
    assert nb is None and problem, problem
