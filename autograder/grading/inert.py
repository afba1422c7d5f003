"""Student content made inert before the instructor sees it.

What a submission's code displays (HTML, SVG, JavaScript outputs) and what a student writes in a
markdown answer end up in ``autograded/`` and in the feedback, and the formgrader shows them to
the instructor inside a logged-in Jupyter page.  A ``<img src=x onerror=...>`` there runs with the
instructor's session: it can call the Jupyter API, write files, open a terminal.

:class:`InertStudentContent` is nbconvert's ``SanitizeHTML`` (bleach, with nbconvert's allow-list
of tags and attributes) applied to what the student controls:

- every output of every code cell (student code ran before each of them): HTML and markdown
  outputs are cleaned (markup outside the allow-list is escaped into visible text), every other rich type but plain text, LaTeX, JSON, PNG and JPEG is dropped
  (SVG and JavaScript among them);
- every markdown or raw cell except the instructor's own locked cells, which nbgrader restores
  from the gradebook: the written answers, and any cell the student added.  Markdown links to
  ``javascript:``, ``vbscript:`` or ``data:`` URLs are disarmed as well, since bleach sees only HTML.

Cleaning, not escaping everything: a written answer keeps its formatting, and a table or a bold
word in an output still shows.  The price is that SVG outputs (a student's own torchviz graph)
are dropped from what the instructor sees; the PNG fallback of a plot stays.
"""
from __future__ import annotations

import re

from nbconvert.preprocessors.sanitize import SanitizeHTML
from traitlets import Bool

from ..learner.cells import role

_SCRIPT_URL = re.compile(r"\]\(\s*(?:javascript|vbscript|data)\s*:", re.IGNORECASE)


class InertStudentContent(SanitizeHTML):
    """``SanitizeHTML`` on student-controlled cells and on every output."""

    enabled = Bool(True, help="On by default, unlike nbconvert's own preprocessors").tag(config=True)

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type in ("markdown", "raw"):
            r = role(cell)
            if r.locked and not r.solution:
                return cell, resources            # the instructor's, restored by nbgrader
            cell.source = _SCRIPT_URL.sub("](#link-removed:", self.sanitize_html_tags(cell.source))
            return cell, resources
        return super().preprocess_cell(cell, resources, cell_index)

    def sanitize_code_outputs(self, outputs):
        outputs = super().sanitize_code_outputs(outputs)
        for output in outputs:
            data = output.get("data", {})
            if isinstance(data.get("text/markdown"), str):
                data["text/markdown"] = _SCRIPT_URL.sub("](#link-removed:", data["text/markdown"])
        return outputs
