"""One SQLAlchemy engine per gradebook in a grading process.

nbgrader opens a new ``Gradebook`` (so a new engine: a fresh statement cache, the schema
inspected again) for each step of each notebook: the runner, ``SaveAutoGrades``,
``OverwriteCells``, ``AssignLatePenalties``.  Over a class that was a good part of the grader's
time, and the caches each engine builds kept the grader's memory growing.  ``share_engines``
makes ``nbgrader.api`` hand every ``Gradebook`` of one database the same engine; closing a
gradebook still returns its connections (``Engine.dispose``), and the statement cache stays.

``SaveAutoGradesOnce`` writes a notebook's grades in one transaction instead of one per cell.
"""
from __future__ import annotations

import threading

from nbgrader.preprocessors import SaveAutoGrades

_lock = threading.Lock()


def share_engines() -> None:
    """From now on, ``nbgrader.api.Gradebook`` reuses one engine per database URL (in-memory
    SQLite excepted: each of those is a database of its own)."""
    import nbgrader.api as api

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
        if getattr(api.create_engine, "shares_engines", False):
            return
        original = api.create_engine
        api.create_engine = create_engine


class _CommitOnClose:
    """A gradebook's session whose ``commit()`` only flushes: the one commit comes when the
    gradebook is closed (``Gradebook.close`` calls ``remove()``)."""

    def __init__(self, session):
        self._session = session

    def commit(self) -> None:
        self._session.flush()

    def remove(self) -> None:
        try:
            self._session.commit()
        finally:
            self._session.remove()

    def __getattr__(self, name):
        return getattr(self._session, name)


class SaveAutoGradesOnce(SaveAutoGrades):
    """nbgrader's ``SaveAutoGrades``, its own steps for every cell, in one transaction per
    notebook: nbgrader commits after every graded cell, and with SQLite each commit waits for
    the disk.  The course configuration lists it in nbgrader's place."""

    def preprocess_cell(self, cell, resources, cell_index):
        if not isinstance(self.gradebook.db, _CommitOnClose):
            self.gradebook.db = _CommitOnClose(self.gradebook.db)
        return super().preprocess_cell(cell, resources, cell_index)
