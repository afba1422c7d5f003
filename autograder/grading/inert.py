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

Bounded before cleaned: an HTML, markdown or SVG output that is too long or nested too deep for
the parser (see ``htmlclean.too_costly``), or past the notebook's budget of such outputs, is
replaced by a one-line note before anything parses it, and the student is flagged.  Output
metadata keeps only a numeric image size and a text ``alt`` (the classic template writes the size
into an unquoted attribute).  What is served is cleaned again when rendered
(``htmlclean``, configured in ``nbgrader_config.py``).

Cleaning, not escaping everything: a written answer keeps its formatting, and a table or a bold
word in an output still shows.  The price is that SVG outputs (a student's own torchviz graph)
are dropped from what the instructor sees; the PNG fallback of a plot stays.
"""
from __future__ import annotations

import re

from nbconvert.preprocessors.sanitize import SanitizeHTML
from traitlets import Bool, Int

from ..learner.cells import role
from .htmlclean import get_metadata, too_costly

PARSED_TYPES = ("text/html", "text/markdown", "image/svg+xml")

_SCRIPT_URL = re.compile(r"\]\(\s*(?:javascript|vbscript|data)\s*:", re.IGNORECASE)


class InertStudentContent(SanitizeHTML):
    """``SanitizeHTML`` on student-controlled cells and on every output."""

    enabled = Bool(True, help="On by default, unlike nbconvert's own preprocessors").tag(config=True)
    markup_budget = Int(512 << 10, help="Characters of HTML, markdown and SVG output a notebook may "
                                         "show in all; later ones are replaced by a note").tag(config=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._spent, self._flags = 0, []

    def preprocess(self, nb, resources):
        self._spent, self._flags = 0, []
        info = resources.get("nbgrader", {}) if isinstance(resources, dict) else {}
        self._who = (info.get("student"), info.get("notebook")) if info else None
        nb, resources = super().preprocess(nb, resources)
        if self._flags:
            resources.setdefault("inert_flags", []).extend(self._flags)
        return nb, resources

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type in ("markdown", "raw"):
            r = role(cell)
            if r.locked and not r.solution:
                return cell, resources            # the instructor's, restored by nbgrader
            why = too_costly(cell.source)
            if why:
                self._flag(f"a {cell.cell_type} cell was not shown: {why}")
                cell.source = f"[{len(cell.source):,} characters of {cell.cell_type} not shown: {why}]"
                cell.pop("attachments", None)
                return cell, resources
            cell.source = _SCRIPT_URL.sub("](#link-removed:", self.sanitize_html_tags(cell.source))
            return cell, resources
        return super().preprocess_cell(cell, resources, cell_index)

    def _flag(self, text: str) -> None:
        if text not in self._flags:
            self._flags.append(text)
            who = "/".join(str(v) for v in (getattr(self, "_who", None) or ()))
            self.log.warning("%sFLAGGED for a manual look: %s", f"{who}: " if who else "", text)

    def _bound(self, output) -> None:
        """Replace what is too costly to parse, or over the notebook's budget, by a note."""
        data = output.get("data")
        if not isinstance(data, dict):
            return
        for mime in PARSED_TYPES:
            value = data.get(mime)
            if value is None:
                continue
            text = "".join(value) if isinstance(value, list) else str(value)
            why = too_costly(text)
            if why is None and self._spent + len(text) > self.markup_budget:
                why = f"the notebook's {self.markup_budget:,} characters of HTML/markdown/SVG output are spent"
            if why:
                self._flag(f"an output was not shown: {why}")
                del data[mime]
                data.setdefault("text/plain", f"[{len(text):,} characters of {mime} not shown: {why}]")
            else:
                self._spent += len(text)

    @staticmethod
    def _clean_metadata(output) -> None:
        """Keep only a numeric size and a text ``alt`` per image type (all else is the student's)."""
        if "metadata" not in output:
            return
        kept = {}
        for mime in ("image/png", "image/jpeg"):
            values = {k: get_metadata(output, k, mime) for k in ("width", "height", "alt")}
            values = {k: v for k, v in values.items() if v is not None}
            if values:
                kept[mime] = values
        output["metadata"] = kept

    def sanitize_code_outputs(self, outputs):
        for output in outputs:
            self._bound(output)
            self._clean_metadata(output)
        outputs = super().sanitize_code_outputs(outputs)
        for output in outputs:
            data = output.get("data", {})
            if isinstance(data.get("text/markdown"), str):
                data["text/markdown"] = _SCRIPT_URL.sub("](#link-removed:", data["text/markdown"])
        return outputs
