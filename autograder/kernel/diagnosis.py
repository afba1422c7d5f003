"""How a failed check shows in a notebook: its diagnosis as rows, and in a Jupyter kernel a display
whose "read again" is a link JupyterLab opens at the lecture's heading.

In a Chinese notebook the rows, their labels and the myth are shown in Chinese, and "read again"
opens the Chinese lecture (the editions' cells have the same ids, so the English heading's cell id
finds the Chinese heading).

Runs inside learners' kernels with :mod:`autograder.kernel.checks`: the standard library only.
"""
from __future__ import annotations

import os
import sys
from urllib.parse import quote

from .i18n import DEFAULT, N_, tr
from .misconceptions import Misconception, anchor_of

HEADING = r"^#{1,6}\s+(.*\S)\s*$"


def ansi_row(label: str, text: str, lang: str = DEFAULT) -> str:
    if label == "CheckFailed":
        return f"\x1b[31mCheckFailed\x1b[0m: {text}"
    if label == "\u2717":
        return f"\x1b[31m\u2717 {text}\x1b[0m"
    if label == "expected":
        return f"  {tr(N_('expected'), lang)}: {text}"
    return f"  \x1b[33m{tr(label, lang)}:\x1b[0m {text}"


def _markdown_cells(path: str) -> list[tuple[str | None, str]]:
    """(id, source) of each markdown cell of a notebook (none when it cannot be read)."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            cells = json.load(f).get("cells", [])
    except (OSError, ValueError, AttributeError):
        return []
    out = []
    for cell in cells:
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        if cell.get("cell_type") == "markdown":
            out.append((cell.get("id"), source))
    return out


def _headings(source: str) -> list[str]:
    import re

    return [m.group(1) for m in map(re.compile(HEADING).match, source.splitlines()) if m]


def heading_cell_id(path: str, heading: str) -> str | None:
    """The id of the markdown cell of a notebook that holds ``heading`` (None if none has)."""
    return next((cid for cid, source in _markdown_cells(path) if heading in _headings(source)), None)


def english_lecture(path: str) -> str | None:
    """The English lecture of a Chinese one (``<course>/zh/course/X.ipynb`` -> ``<course>/course/X.ipynb``)."""
    folder = os.path.dirname(os.path.abspath(path))               # .../zh/course
    edition = os.path.dirname(folder)                              # .../zh
    if os.path.basename(edition) != "zh":
        return None
    return os.path.join(os.path.dirname(edition), os.path.basename(folder), os.path.basename(path))


def lecture_cell(path: str, heading: str) -> str | None:
    """The id of the cell of the lecture at ``path`` that holds the English ``heading``: found in the
    lecture itself, or (a Chinese lecture, whose heading is translated) in its English one."""
    found = heading_cell_id(path, heading)
    english = None if found else english_lecture(path)
    return found or (heading_cell_id(english, heading) if english else None)


def heading_of_cell(path: str, cell_id: str) -> str | None:
    """The first heading of the cell ``cell_id`` of a notebook (None if it has none)."""
    return next((h for cid, source in _markdown_cells(path) if cid == cell_id for h in _headings(source)), None)


def read_again_text(m: Misconception, path: str | None, lang: str = DEFAULT) -> str:
    """What "read again" shows: the lecture and its heading (``course/03_detach.ipynb#1.-What-...``) as
    the lecture at ``path`` has it (the Chinese one translated, in the English heading's cell)."""
    if path is None or heading_cell_id(path, m.heading):
        return m.link
    cell = lecture_cell(path, m.heading)
    heading = heading_of_cell(path, cell) if cell else None
    return f"{m.lecture}#{anchor_of(heading)}" if heading else m.link


def find_lecture(m: Misconception) -> str | None:
    """The lecture's file, looked for from the kernel's folder (the notebook's, in JupyterLab) up."""
    here = os.getcwd()
    for _ in range(8):
        path = os.path.join(here, m.lecture)
        if os.path.isfile(path):
            return path
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent
    return None


def lecture_href(m: Misconception) -> str | None:
    """A link to the lecture's heading relative to the kernel's folder (the notebook's, in
    JupyterLab), or None when the course's lectures are not found above it.

    The fragment names the heading's cell (``#cell-id=...``): JupyterLab scrolls to a cell as soon
    as the notebook is loaded, while a heading's own id is found only once its cell is rendered,
    which a notebook opened by the click has not done yet.  From a Chinese exercise the lecture found
    is the Chinese one (``zh/course/``, the nearest), and its heading's cell has the English one's id."""
    path = find_lecture(m)
    if path is None:
        return None
    rel = quote(os.path.relpath(path).replace(os.sep, "/"))
    cell = lecture_cell(path, m.heading)
    return f"{rel}#cell-id={cell}" if cell else f"{rel}#{m.link.partition('#')[2]}"


def show_in_notebook(rows: list[tuple[str, str]], m: Misconception, lang: str = DEFAULT) -> bool:
    """In a Jupyter kernel, publish the diagnosis with a working link to the lecture; False
    elsewhere (a terminal, the grader's judge) or when the lecture is not found."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or not hasattr(shell, "kernel") or not hasattr(shell, "display_pub"):
        return False
    href = lecture_href(m)
    if href is None:
        return False
    from html import escape

    html, plain = [], []
    for label, text in rows:
        shown = tr(label, lang)
        if label == "\u2717":
            html.append(f'<div style="color: var(--jp-error-color1, #d32f2f)">\u2717 {escape(text)}</div>')
        elif label == "read again":
            html.append(f'<div>&nbsp;&nbsp;<b>{escape(shown)}:</b> <a href="{escape(href)}">{escape(text)}</a></div>')
        else:
            html.append(f"<div>&nbsp;&nbsp;<b>{escape(shown)}:</b> {escape(text)}</div>")
        plain.append(f"\u2717 {text}" if label == "\u2717" else f"  {shown}: {text}")
    shell.display_pub.publish(data={"text/html": '<div class="ct-diagnosis" style="font-family: var(--jp-code-font-family, '
                                                 'monospace); font-size: var(--jp-code-font-size, 13px)">'
                                                 + "".join(html) + "</div>",
                                    "text/plain": "\n".join(plain)}, metadata={})
    return True
