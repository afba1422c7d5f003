"""Which student ids the course grades: a safe alphabet, so that an id is never markup in the
formgrader (nbgrader's templates print ids unescaped), a formula in a spreadsheet, or a path."""
from __future__ import annotations

import re

SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}\Z")
SAFE_ALPHABET = "letters, digits and . _ @ - (starting with a letter or digit, at most 64)"


def unsafe_id(student: str) -> str | None:
    """Why ``student`` is refused as an id, or None when it is safe."""
    if SAFE_ID.match(student):
        return None
    return (f"student id {student!r} refused: ids are {SAFE_ALPHABET}; rename the submitted folder "
            "(and the hub user) to grade it")
