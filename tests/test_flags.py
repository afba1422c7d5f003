"""The grader's flags as a gradebook comment (``flags.py``): escaped for the feedback's Markdown,
and taken back whole by a later grading without touching what else the comment says."""
from __future__ import annotations

from autograder.grading.flags import HEADING, comment_text, without_flags


def test_a_reason_quoting_student_text_stays_text():
    text = comment_text(["graded <img src=x onerror=alert(1)>.ipynb in its place", "[link](javascript:x) `code` *b*"])
    assert text.startswith(HEADING + "\n- ")
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert "\\[link\\](javascript:x)" in text and "\\`code\\`" in text and "\\*b\\*" in text


def test_a_later_grading_takes_the_reasons_out_and_keeps_the_rest():
    assert without_flags("No response.\n\n" + comment_text(["x"])) == "No response."
    assert without_flags(comment_text(["x"])) is None
    assert without_flags("No response.") == "No response."
    assert without_flags(None) is None
