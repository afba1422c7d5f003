"""How a failed check shows in a notebook: its diagnosis as rows, and in a Jupyter kernel a display
whose "read again" is a link JupyterLab opens at the lecture's heading.

Runs inside learners' kernels with :mod:`autograder.kernel.checks`: the standard library only.
"""
from __future__ import annotations

import os
import sys
from urllib.parse import quote

from .misconceptions import Misconception


def ansi_row(label: str, text: str) -> str:
    if label == "CheckFailed":
        return f"\x1b[31mCheckFailed\x1b[0m: {text}"
    if label == "\u2717":
        return f"\x1b[31m\u2717 {text}\x1b[0m"
    if label == "expected":
        return f"  expected: {text}"
    return f"  \x1b[33m{label}:\x1b[0m {text}"


def heading_cell_id(path: str, heading: str) -> str | None:
    """The id of the markdown cell of a notebook that holds ``heading`` (None if none has)."""
    import json
    import re

    try:
        with open(path, encoding="utf-8") as f:
            cells = json.load(f).get("cells", [])
    except (OSError, ValueError, AttributeError):
        return None
    for cell in cells:
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        if cell.get("cell_type") == "markdown" and any(
                m and m.group(1) == heading for m in map(re.compile(r"^#{1,6}\s+(.*\S)\s*$").match, source.splitlines())):
            return cell.get("id")
    return None


def lecture_href(m: Misconception) -> str | None:
    """A link to the lecture's heading relative to the kernel's folder (the notebook's, in
    JupyterLab), or None when the course's lectures are not found above it.

    The fragment names the heading's cell (``#cell-id=...``): JupyterLab scrolls to a cell as soon
    as the notebook is loaded, while a heading's own id is found only once its cell is rendered,
    which a notebook opened by the click has not done yet."""
    here = os.getcwd()
    for _ in range(8):
        path = os.path.join(here, m.lecture)
        if os.path.isfile(path):
            rel = quote(os.path.relpath(path).replace(os.sep, "/"))
            cell = heading_cell_id(path, m.heading)
            return f"{rel}#cell-id={cell}" if cell else f"{rel}#{m.link.partition('#')[2]}"
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent
    return None


def show_in_notebook(rows: list[tuple[str, str]], m: Misconception) -> bool:
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

    html = []
    for label, text in rows:
        if label == "\u2717":
            html.append(f'<div style="color: var(--jp-error-color1, #d32f2f)">\u2717 {escape(text)}</div>')
        elif label == "read again":
            html.append(f'<div>&nbsp;&nbsp;<b>read again:</b> <a href="{escape(href)}">{escape(text)}</a></div>')
        else:
            html.append(f"<div>&nbsp;&nbsp;<b>{escape(label)}:</b> {escape(text)}</div>")
    plain = "\n".join((f"\u2717 {t}" if label == "\u2717" else f"  {label}: {t}") for label, t in rows)
    shell.display_pub.publish(data={"text/html": '<div class="ct-diagnosis" style="font-family: var(--jp-code-font-family, '
                                                 'monospace); font-size: var(--jp-code-font-size, 13px)">'
                                                 + "".join(html) + "</div>",
                                    "text/plain": plain}, metadata={})
    return True
