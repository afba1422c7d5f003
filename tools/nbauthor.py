"""Authoring aid: build course notebooks from Python with the right nbgrader metadata.

The committed ``.ipynb`` files are the source of truth; this module only saves typing when a
notebook is written or rewritten from a script::

    from tools.nbauthor import md, code, setup, solution, tests, manual, save
    save("solutions/a1_views/a1_views.ipynb", [md("# ..."), setup("import torch"), ...])

Cell kinds:
- ``md`` / ``code``: plain cells (lectures use only these).
- ``setup``: a locked, read-only code cell (imports); nbgrader restores it when grading.
- ``solution``: the learner's code cell; wrap the answer in ``### BEGIN SOLUTION`` /
  ``### END SOLUTION`` inside the function body so the release keeps signature and docstring.
- ``tests``: a locked, auto-graded test cell worth ``points``; ``### BEGIN HIDDEN TESTS`` /
  ``### END HIDDEN TESTS`` mark what the release hides.
- ``manual``: a markdown answer cell graded by hand.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import nbformat

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
LANGUAGE_INFO = {"name": "python", "pygments_lexer": "ipython3", "version": "3.11"}


def _src(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def _nbg(**kw) -> dict:
    meta = {"schema_version": 3, "grade": False, "solution": False, "locked": False, "task": False}
    meta.update(kw)
    return {"nbgrader": meta}


def md(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(_src(text))


def code(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(_src(text))


def setup(text: str, grade_id: str = "setup") -> nbformat.NotebookNode:
    cell = code(text)
    cell.metadata.update(_nbg(locked=True, grade_id=grade_id))
    cell.metadata["editable"] = False
    cell.metadata["deletable"] = False
    return cell


def solution(text: str, grade_id: str) -> nbformat.NotebookNode:
    cell = code(text)
    cell.metadata.update(_nbg(solution=True, grade_id=grade_id))
    return cell


def tests(text: str, grade_id: str, points: float) -> nbformat.NotebookNode:
    cell = code(text)
    cell.metadata.update(_nbg(grade=True, locked=True, grade_id=grade_id, points=points))
    cell.metadata["editable"] = False
    cell.metadata["deletable"] = False
    return cell


def manual(text: str, grade_id: str, points: float) -> nbformat.NotebookNode:
    cell = md(text)
    cell.metadata.update(_nbg(grade=True, solution=True, grade_id=grade_id, points=points))
    return cell


def save(path: str | Path, cells: list[nbformat.NotebookNode]) -> Path:
    """Write the notebook with stable cell ids (grade ids where there are some)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = KERNELSPEC
    nb.metadata["language_info"] = LANGUAGE_INFO
    used: set[str] = set()
    for i, cell in enumerate(cells):
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        cid = gid or f"cell-{i:02d}"
        assert cid not in used, f"duplicate cell id {cid}"
        used.add(cid)
        cell["id"] = cid
    nb.cells = cells
    nbformat.validate(nb)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path
