"""A submitted notebook before it is graded: read it without trusting the file, and repair what a
learner's editing broke (duplicated cells, edited nbgrader metadata, foreign graded cells)."""
from __future__ import annotations

import errno
import os
import stat
import warnings
from pathlib import Path

import nbformat
from nbformat.warnings import MissingIDFieldWarning

from ..learner.cells import role

MAX_NOTEBOOK_BYTES = 64 << 20   # a submitted notebook; larger ones are reported, not read
# Checked on the bytes and on plain JSON, before nbformat builds (and validates) its nodes: a
# 57 MB notebook of small metadata objects took the grader to 7 GB inside nbformat.
MAX_CONTAINERS = 500_000        # JSON objects and arrays (counted as '{' and '[' bytes: an upper bound)
MAX_CELLS = 5_000
MAX_NOTEBOOK_METADATA = 1 << 20  # characters of the notebook's metadata, as JSON
MAX_CELL_METADATA = 256 << 10    # characters of one cell's metadata, as JSON


def read_notebook(path: Path) -> tuple[nbformat.NotebookNode | None, str | None]:
    """The submission's notebook, or None and what is wrong with the file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None, f"{path.name} is a link, not a file: it was not followed"
        return None, f"cannot read {path.name}: {exc.strerror}"
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None, f"{path.name} is not a regular file"
    with os.fdopen(fd, "rb") as f:
        raw = f.read(MAX_NOTEBOOK_BYTES + 1)
    if len(raw) > MAX_NOTEBOOK_BYTES:
        return None, f"{path.name} is over {MAX_NOTEBOOK_BYTES >> 20} MiB"
    if not raw.strip():
        return None, f"{path.name} is empty"
    containers = raw.count(b"{") + raw.count(b"[")
    if containers > MAX_CONTAINERS:
        return None, f"{path.name} has {containers:,} nested values, over {MAX_CONTAINERS:,}: not read"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, f"{path.name} is not a text file"
    del raw
    too_big = _structure_problem(text)
    if too_big:
        return None, f"{path.name} {too_big}: not read"
    try:
        with warnings.catch_warnings():
            # cells without ids (a notebook written by a script): nbformat gives them ids, as it should
            warnings.simplefilter("ignore", MissingIDFieldWarning)
            nb = nbformat.reads(text, as_version=4)
    except Exception as exc:  # nbformat raises several kinds on broken JSON
        return None, f"{path.name} is not a notebook ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
    if not isinstance(nb.get("cells"), list):
        return None, f"{path.name} is not a notebook (no cells)"
    for cell in nb.cells:
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw") \
                or not isinstance(cell.get("source"), str):
            return None, f"{path.name} has malformed cells"
        if cell.cell_type == "code":
            cell.setdefault("outputs", [])
            cell.setdefault("execution_count", None)
    return nb, None



def _structure_problem(text: str) -> str | None:
    """What is too big in the notebook's plain JSON (cells, metadata), before nbformat reads it."""
    import json

    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None                         # nbformat says what is wrong with it
    if not isinstance(data, dict):
        return None
    cells = data.get("cells")
    if isinstance(cells, list) and len(cells) > MAX_CELLS:
        return f"has {len(cells):,} cells, over {MAX_CELLS:,}"
    size = len(json.dumps(data.get("metadata", {})))
    if size > MAX_NOTEBOOK_METADATA:
        return f"has {size:,} characters of notebook metadata, over {MAX_NOTEBOOK_METADATA:,}"
    for i, cell in enumerate(cells if isinstance(cells, list) else []):
        size = len(json.dumps(cell.get("metadata", {}))) if isinstance(cell, dict) else 0
        if size > MAX_CELL_METADATA:
            return f"has {size:,} characters of metadata in cell {i}, over {MAX_CELL_METADATA:,}"
    return None


def repair(nb: nbformat.NotebookNode, release: nbformat.NotebookNode, retired=frozenset()) -> list[str]:
    """Give every graded or locked cell the metadata of the release; report what was changed.

    Learners' edits that would make nbgrader fail (or grade the wrong thing) are undone here:
    a cell copy-pasted twice keeps its nbgrader metadata once (the last copy of an answer, the
    first of anything else), edited flags or points go back to the release's, and cells
    claiming a grade id the release does not have lose their metadata.  A locked cell exactly as
    an earlier release made it (its nbgrader checksum holds) is the instructor's change, not the
    learner's, and goes back silently; so do the cells of ``retired`` grade ids (removed from the
    source in this run).
    """
    reference = {role(c).grade_id: c for c in release.cells if role(c).grade_id}
    flags: list[str] = []
    positions: dict[str, list[int]] = {}
    for i, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader")
        if not isinstance(meta, dict):
            cell.metadata.pop("nbgrader", None)
            continue
        gid = meta.get("grade_id")
        if gid not in reference:
            if gid not in retired and not _as_released(cell):
                flags.append(f"cell with unknown grade id {gid!r} is not graded")
            cell.metadata.pop("nbgrader", None)
            continue
        positions.setdefault(gid, []).append(i)
    for gid, where in positions.items():
        ref = reference[gid]
        keep = where[-1] if role(ref).solution and not role(ref).grade else where[0]
        if len(where) > 1:
            flags.append(f"cell {gid!r} appears {len(where)} times (copy-paste); one copy is graded")
        for i in where:
            if i != keep:
                nb.cells[i].metadata.pop("nbgrader", None)
        cell = nb.cells[keep]
        if cell.metadata["nbgrader"] != ref.metadata["nbgrader"]:
            changed = [k for k in ("grade", "solution", "locked", "points", "task")
                       if cell.metadata["nbgrader"].get(k) != ref.metadata["nbgrader"].get(k)]
            if changed and not _as_released(cell):
                flags.append(f"nbgrader metadata of {gid!r} was edited ({', '.join(changed)}); restored")
            cell.metadata["nbgrader"] = dict(ref.metadata["nbgrader"])
        if cell.cell_type != ref.cell_type:
            flags.append(f"cell {gid!r} changed type to {cell.cell_type}; restored")
            cell.cell_type = ref.cell_type
            if ref.cell_type == "code":
                cell.setdefault("outputs", [])
                cell.setdefault("execution_count", None)
            else:
                cell.pop("outputs", None)
                cell.pop("execution_count", None)
    return flags


def _as_released(cell) -> bool:
    """A locked, non-answer cell whose nbgrader checksum holds: as some release of the instructor's
    made it (an answer's checksum never holds once written, so answers are never taken for one)."""
    from nbgrader.utils import compute_checksum, is_locked, is_solution

    try:
        return (not is_solution(cell) and is_locked(cell)
                and cell.metadata["nbgrader"].get("checksum") == compute_checksum(cell))
    except Exception:       # malformed metadata: not as released
        return False



# ---------------------------------------------------------------------------------------------
# which file of a submitted folder is the submission

MAX_NAMED = 10          # other notebooks named in a report, at most


class Found:
    """What a submitted folder holds for one notebook of the assignment: ``path`` is the file to
    grade (None: nothing to grade, a zero), ``flags`` what a person should look at (a rename, a
    download copy, several candidates), ``problems`` what is wrong with the submission."""

    def __init__(self, path: Path | None, flags: list[str] | None = None, problems: list[str] | None = None):
        self.path, self.flags, self.problems = path, flags or [], problems or []


def find_submitted(folder: Path, notebook: str, release: nbformat.NotebookNode) -> Found:
    """The notebook to grade as ``notebook``.ipynb in a submitted folder.

    The file of that name, as a rule.  Where it is missing, another notebook of the folder with the
    release's cells (every grade id, the instructor's locked cells unchanged: a rename such as
    ``a1_views_final.ipynb`` or a browser's download copy ``a1_views (1).ipynb``) is graded in its
    place when it is the only one, and said; several such copies, or a file of the right name left
    as handed out beside a filled copy, are said and left to a person (never a silent zero)."""
    expected = folder / f"{notebook}.ipynb"
    others = _other_notebooks(folder, expected)
    if expected.exists() or expected.is_symlink():
        filled = [p for p in others if _is_copy(p, release) == "filled"]
        if filled and _is_copy(expected, release) == "blank":
            names = _names(filled, folder)
            return Found(expected, flags=[
                f"{expected.name} is as handed out, but {names} beside it "
                f"{'holds' if len(filled) == 1 else 'hold'} answers: {expected.name} was graded (zero); "
                "which file is the submission is for a person to decide"])
        return Found(expected)
    copies = [p for p in others if _is_copy(p, release)]
    if len(copies) == 1:
        return Found(copies[0], flags=[f"{expected.name} was not submitted; graded "
                                      f"{_names(copies, folder)} in its place (the same cells, another name)"])
    if copies:
        return Found(None, flags=[f"{expected.name} was not submitted, and {len(copies)} notebooks hold its cells: "
                                  f"{_names(copies, folder)}; none was graded (scored zero): "
                                  "which one is the submission is for a person to decide"])
    if others:
        return Found(None, flags=[f"{expected.name} was not submitted; the folder holds "
                                  f"{_names(others, folder)}, without its cells (scored zero)"])
    return Found(None, problems=[f"{expected.name} was not submitted (scored zero)"])


def _other_notebooks(folder: Path, expected: Path) -> list[Path]:
    """Regular ``.ipynb`` files of the folder and its subfolders (checkpoints left out, links
    never followed), but ``expected``."""
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d != ".ipynb_checkpoints")
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if name.endswith(".ipynb") and path != expected and not path.is_symlink() and path.is_file():
                found.append(path)
        if len(found) > 100:
            break
    return found


def _names(paths: list[Path], folder: Path) -> str:
    shown = ", ".join(str(p.relative_to(folder)) for p in paths[:MAX_NAMED])
    return shown + (f" and {len(paths) - MAX_NAMED} more" if len(paths) > MAX_NAMED else "")


def _is_copy(path: Path, release: nbformat.NotebookNode) -> str | None:
    """"filled" or "blank" where the notebook at ``path`` has every graded cell of the release (by
    grade id) and the instructor's locked cells as released (by nbgrader's checksum), else None;
    "blank" when every answer is still as handed out."""
    from nbgrader.utils import compute_checksum, is_locked, is_solution

    nb, _ = read_notebook(path)
    if nb is None:
        return None
    mine = {}
    for cell in nb.cells:
        gid = role(cell).grade_id
        if gid:
            mine.setdefault(gid, cell)
    answered = False
    for ref in release.cells:
        gid = role(ref).grade_id
        if not gid:
            continue
        if gid not in mine:
            return None
        checksum = ref.metadata["nbgrader"].get("checksum")
        try:
            same = compute_checksum(mine[gid]) == checksum
        except Exception:       # malformed metadata: not the release's cell
            same = False
        if is_locked(ref) and not is_solution(ref) and not same:
            return None
        if is_solution(ref) and not same:
            answered = True
    return "filled" if answered else "blank"
