"""docs/authoring.md as data: its commands (the ```bash blocks, line by line) and its worked
example (the ```python blocks under an ``<!-- example: ... -->`` line), and the example put into
a course the way an instructor would, with nbgrader's "Create Assignment" metadata."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat

from harness import ROOT

GUIDE = ROOT / "docs" / "authoring.md"
COMMAND_START = ("python ", "python3 ", ".venv/", "nbgrader ", "make ", "jupyter ", "copy-that ", "pytest ")


def text() -> str:
    return GUIDE.read_text()


def commands() -> list[str]:
    """Every line of every ```bash block, in order."""
    blocks = re.findall(r"^```bash\n(.*?)^```", text(), flags=re.M | re.S)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def inline_commands() -> list[str]:
    """Inline code spans outside the fenced blocks that read like a command line."""
    prose = re.sub(r"^```.*?^```", "", text(), flags=re.M | re.S)
    return [span for span in re.findall(r"`([^`\n]+)`", prose) if span.startswith(COMMAND_START)]


def examples() -> dict[str, str]:
    """``<!-- example: WHAT -->`` -> the ```python block right under it."""
    return dict(re.findall(r"^<!-- example: (.+?) -->\n```python\n(.*?)^```", text(), flags=re.M | re.S))


def _graded(source: str, grade_id: str, points: float | None, solution: bool) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade": points is not None, "solution": solution, "locked": not solution,
                                 "grade_id": grade_id, "schema_version": 3, "task": False}
    if points is not None:
        cell.metadata["nbgrader"]["points"] = points
    return cell


def add_example(course: Path, assignment: str = "a8_devices", hidden: str | None = None) -> None:
    """The guide's example put into ``course``: the fixtures file, the cells at the end of the
    notebook (``hidden``: another hidden test in place of the guide's), the corpus answers."""
    found = examples()
    folder = course / "solutions" / assignment
    (folder / "fixtures.py").write_text(found[f"solutions/{assignment}/fixtures.py"])
    path = folder / f"{assignment}.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("## 3. `frozen_copy(model, device) -> nn.Module`\n\n"
                                                  "A copy of `model` on `device` whose parameters never train."))
    for what, source in found.items():
        kind, *rest = what.split()
        if kind == "solution":
            nb.cells.append(_graded(source, rest[0], None, solution=True))
        elif kind == "tests":
            name, points = rest
            if hidden is not None and name.endswith("_hidden"):
                source = hidden
            nb.cells.append(_graded(source, name, float(points), solution=False))
        elif kind == "corpus":
            corpus = course / "tests" / "answers" / f"{rest[0]}.py"
            corpus.write_text(corpus.read_text() + "\n" + source)
    nbformat.write(nb, path)
