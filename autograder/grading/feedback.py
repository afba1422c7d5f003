"""nbgrader preprocessors for the feedback learners receive.

``ClearHiddenTests`` removes the hidden tests' source from the feedback, but a failing hidden
test still shows its own lines in the traceback.  ``StripHiddenTracebacks`` runs first and
keeps only the diagnosis (``CheckFailed: ... Likely mistake: ...``) of those cells.
``RedactHiddenTestLines`` removes any line of a hidden test from every output, whatever printed it.
"""
from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import List

HIDDEN_MARK = "BEGIN HIDDEN TESTS"


class CoursePreprocessor(NbGraderPreprocessor):
    """nbgrader's preprocessor base, with ``display_data_priority`` a configurable trait as in
    nbconvert's ``NbConvertBase``: nbconvert's HTML exporter configures it for every preprocessor,
    and nbgrader's base, which redeclares it unconfigurable, answers each time with "Config option
    `display_data_priority` not recognized"."""

    display_data_priority = List(NbGraderPreprocessor.class_traits()["display_data_priority"].default()).tag(config=True)


class StripHiddenTracebacks(CoursePreprocessor):
    """Replace the traceback of a cell holding hidden tests by its last line (name and message)."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and HIDDEN_MARK in cell.source:
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    output.traceback = [f"{output.ename}: {output.evalue}"]
        return cell, resources


HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
MIN_REDACTED = 12    # shorter lines (``pass``, ``)``) say nothing of a test and are left alone
REDACTED = "[a line of a hidden test, removed from the feedback]"


def hidden_test_lines(nb) -> set[str]:
    """The substantial lines inside the hidden-test regions of a notebook's cells, less those
    that the notebook also shows outside them (a line a visible test or the text repeats is no
    secret, and redacting it would blank honest output)."""
    lines: set[str] = set()
    shown: set[str] = set()
    for cell in nb.cells:
        inside = False
        for line in cell.source.splitlines():
            if line.strip().startswith(HIDDEN_BEGIN):
                inside = True
            elif line.strip().startswith(HIDDEN_END):
                inside = False
            elif len(line.strip()) >= MIN_REDACTED:
                (lines if inside else shown).add(line.strip())
    return lines - shown


class RedactHiddenTestLines(CoursePreprocessor):
    """Remove every line of a hidden test from every output of the feedback, whatever printed it.

    A submission's code runs in the same process as the hidden tests and can read them (the
    calling frame, ``inspect``) and print them; those lines would reach the learner's feedback.
    This runs before ``ClearHiddenTests``, while the hidden tests are still in the notebook."""

    def preprocess(self, nb, resources):
        self.hidden = hidden_test_lines(nb)
        return super().preprocess(nb, resources)

    def _redact(self, text):
        if not isinstance(text, str) or not self.hidden:
            return text
        out = []
        for line in text.splitlines(keepends=True):
            if any(h in line for h in self.hidden):
                out.append(REDACTED + ("\n" if line.endswith("\n") else ""))
            else:
                out.append(line)
        return "".join(out)

    def preprocess_cell(self, cell, resources, cell_index):
        for output in cell.get("outputs", []):
            if "text" in output:
                output.text = self._redact(output.text)
            if output.get("output_type") == "error":
                output.evalue = self._redact(output.evalue)
                output.traceback = [self._redact(t) for t in output.traceback]
            for mime, value in list(output.get("data", {}).items()):
                if mime.startswith("text/") or mime in ("application/json",):
                    output.data[mime] = self._redact(value) if isinstance(value, str) else \
                        [self._redact(v) for v in value] if isinstance(value, list) else value
        return cell, resources
