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
replaced by a one-line note before anything parses it, and the student is flagged.  A notebook
with ``in_place_below`` characters of markup or more is cleaned in a child process given
``clean_limit`` seconds (``timelimited``); past them none of its markup is shown (each piece
becomes a note) and the student is flagged.  Output
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
from traitlets import Bool, Float, Int

from ..learner.cells import role
from .htmlclean import get_metadata, too_costly
from .timelimited import Overrun, run_limited

PARSED_TYPES = ("text/html", "text/markdown", "image/svg+xml")
CLEANED_TYPES = ("text/html", "text/markdown")      # what is parsed (SVG is dropped unparsed)

_SCRIPT_URL = re.compile(r"\]\(\s*(?:javascript|vbscript|data)\s*:", re.IGNORECASE)


class InertStudentContent(SanitizeHTML):
    """``SanitizeHTML`` on student-controlled cells and on every output."""

    enabled = Bool(True, help="On by default, unlike nbconvert's own preprocessors").tag(config=True)
    markup_budget = Int(512 << 10, help="Characters of HTML, markdown and SVG output a notebook may "
                                         "show in all; later ones are replaced by a note").tag(config=True)
    clean_limit = Float(10.0, help="Seconds the cleaning of one notebook may take in a child process "
                                   "(for a notebook with in_place_below characters of markup or more); "
                                   "past them none of its markup is shown and the student is flagged. "
                                   "0: clean in place").tag(config=True)
    in_place_below = Int(16 << 10, help="Characters of markup (HTML and markdown outputs, the student's "
                                        "markdown and raw cells) below which cleaning runs in place, "
                                        "where its worst case is a fraction of a second").tag(config=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._spent, self._flags = 0, []

    def preprocess(self, nb, resources):
        self._spent, self._flags = 0, []
        info = resources.get("nbgrader", {}) if isinstance(resources, dict) else {}
        self._who = (info.get("student"), info.get("notebook")) if info else None
        if self.clean_limit > 0 and self._markup(nb) >= self.in_place_below:
            who = {"nbgrader": {k: info.get(k) for k in ("student", "notebook")}} if info else {}
            try:
                nb, flags = run_limited(self, nb, who, self.clean_limit, "inert_flags", {"clean_limit": 0})
                for text in flags:
                    self._flag(text)
            except Overrun as exc:
                self._flag(f"its markup was not shown: cleaning it {exc}")
                nb, resources = super().preprocess(self._without_markup(nb, f"cleaning {exc}"), resources)
        else:
            nb, resources = super().preprocess(nb, resources)
        if self._flags:
            resources.setdefault("inert_flags", []).extend(self._flags)
        return nb, resources

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type in ("markdown", "raw"):
            if _instructors(cell):
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

    @staticmethod
    def _students(nb):
        """The markdown and raw cells the student controls (the instructor's locked ones are restored)."""
        for cell in nb.cells:
            if cell.cell_type in ("markdown", "raw") and not _instructors(cell):
                yield cell

    @staticmethod
    def _output_data(nb):
        """The ``data`` mapping of every output of every code cell."""
        for cell in nb.cells:
            for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
                data = output.get("data") if isinstance(output, dict) else None
                if isinstance(data, dict):
                    yield data

    def _markup(self, nb) -> int:
        """Characters the cleaning would parse: the student's markdown and HTML, cells and outputs."""
        total = sum(len(str(c.source)) for c in self._students(nb))
        for data in self._output_data(nb):
            for value in (data.get(mime) for mime in CLEANED_TYPES):
                total += sum(map(len, value)) if isinstance(value, list) else len(str(value or ""))
        return total

    def _without_markup(self, nb, why: str):
        """``nb`` with a note in place of every piece of markup, nothing of it parsed."""
        for cell in self._students(nb):
            cell.source = f"[{len(str(cell.source)):,} characters of {cell.cell_type} not shown: {why}]"
            cell.pop("attachments", None)
        for data in self._output_data(nb):
            for mime in PARSED_TYPES:
                if data.pop(mime, None) is not None:
                    data.setdefault("text/plain", f"[{mime} not shown: {why}]")
        return nb

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


def _instructors(cell) -> bool:
    """A locked cell that is no answer: nbgrader restores it from the gradebook."""
    r = role(cell)
    return bool(r.locked and not r.solution)
