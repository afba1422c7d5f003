"""One SQLAlchemy engine per gradebook in a grading process.

nbgrader opens a new ``Gradebook`` (so a new engine: a fresh statement cache, the schema
inspected again) for each step of each notebook: the runner, ``SaveAutoGrades``,
``OverwriteCells``, ``AssignLatePenalties``.  Over a class that was a good part of the grader's
time, and the caches each engine builds kept the grader's memory growing.  ``share_engines``
makes ``nbgrader.api`` hand every ``Gradebook`` of one database the same engine; closing a
gradebook still returns its connections (``Engine.dispose``), and the statement cache stays.
"""
from __future__ import annotations

import threading

_lock = threading.Lock()


def share_engines() -> None:
    """From now on, ``nbgrader.api.Gradebook`` reuses one engine per database URL (in-memory
    SQLite excepted: each of those is a database of its own)."""
    import nbgrader.api as api

    if getattr(api.create_engine, "shares_engines", False):
        return
    original = api.create_engine
    engines: dict[tuple, object] = {}

    def create_engine(url, *args, **kwargs):
        text = str(url)
        if text.startswith("sqlite") and ":memory:" in text or text.rstrip("/") == "sqlite:":
            return original(url, *args, **kwargs)
        key = (text, args, tuple(sorted(kwargs.items())))
        with _lock:
            if key not in engines:
                engines[key] = original(url, *args, **kwargs)
            return engines[key]

    create_engine.shares_engines = True
    with _lock:
        api.create_engine = create_engine
