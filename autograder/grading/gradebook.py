"""One SQLAlchemy engine per gradebook in a grading process.

nbgrader opens a new ``Gradebook`` (so a new engine: a fresh statement cache, the schema
inspected again) for each step of each notebook: the runner, ``SaveAutoGrades``,
``OverwriteCells``, ``AssignLatePenalties``.  Over a class that was a good part of the grader's
time, and the caches each engine builds kept the grader's memory growing.  ``share_engines``
makes ``nbgrader.api`` hand every ``Gradebook`` of one database the same engine; closing a
gradebook returns its connection to the engine's pool (a few connections at most), where the
next gradebook finds it, and the statement cache stays.
Each ``Gradebook()`` also inspects the database and runs ``create_all`` (a query per table):
on a shared engine that happens once, when the first gradebook of that database opens.

``SaveAutoGradesOnce`` writes a notebook's grades in one transaction instead of one per cell,
and finds the notebook's grades and comments in two queries instead of two per cell.

``check_metadata_once`` makes nbgrader's metadata check (``CheckCellMetadata``, run twice per
notebook) check its schema once per process rather than once per cell, and remember the cells'
metadata it has already found valid.
"""
from __future__ import annotations

import threading

from nbgrader.preprocessors import SaveAutoGrades

_lock = threading.Lock()


def _keep_pool(close: bool = True) -> None:
    """``Engine.dispose`` of a shared engine: its pool stays for the next gradebook."""


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
                engines[key]._copy_that_tables = threading.Event()
                # Gradebook.close() disposes of its engine's pool: a shared engine keeps it (at most
                # its pool's few connections), so the next gradebook does not connect again
                engines[key].dispose = _keep_pool
            return engines[key]

    def create_all(bind=None, tables=None, checkfirst=True):
        # Gradebook.__init__ checks every table of every gradebook it opens; once per shared engine
        made = getattr(bind, "_copy_that_tables", None)
        if made is not None and made.is_set() and tables is None and checkfirst:
            return
        original_create_all(bind=bind, tables=tables, checkfirst=checkfirst)
        if made is not None and tables is None:
            made.set()

    create_engine.shares_engines = True
    with _lock:
        if getattr(api.create_engine, "shares_engines", False):
            return
        original = api.create_engine
        original_create_all = api.Base.metadata.create_all
        api.create_engine = create_engine
        api.Base.metadata.create_all = create_all
    check_metadata_once()


def check_metadata_once() -> None:
    """nbgrader's metadata validator as it is, with jsonschema's ``validate`` replaced by one that
    checks the (fixed, nbgrader's own) schema once and skips metadata it has already found valid:
    the same errors for invalid metadata, raised by the same jsonschema code."""
    import json

    import jsonschema
    from nbgrader.nbgraderformat import common

    validators: dict[str, object] = {}
    valid: set[tuple[str, str]] = set()

    def validate(instance, schema, *args, **kwargs):
        if args or kwargs:
            return jsonschema.validate(instance, schema, *args, **kwargs)
        key = json.dumps(schema, sort_keys=True)
        try:
            seen = (key, json.dumps(instance, sort_keys=True))
        except (TypeError, ValueError):
            seen = None
        if seen is not None and seen in valid:
            return
        with _lock:
            validator = validators.get(key)
            if validator is None:
                cls = jsonschema.validators.validator_for(schema)
                cls.check_schema(schema)
                validator = validators[key] = cls(schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
        if error is not None:
            raise error
        if seen is not None:
            with _lock:
                if len(valid) >= 4096:       # a bound, whatever a submission's metadata holds
                    valid.clear()
                valid.add(seen)

    shim = type(jsonschema)("jsonschema")
    shim.__dict__.update({k: v for k, v in vars(jsonschema).items() if not k.startswith("__")})
    shim.validate = validate
    shim.checks_once = True
    with _lock:
        if not getattr(common.jsonschema, "checks_once", False):
            common.jsonschema = shim


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
            self._found_at_once()
        return super().preprocess_cell(cell, resources, cell_index)

    def _found_at_once(self) -> None:
        """The submitted notebook's grades and comments, by cell name, in two queries: nbgrader's
        ``find_grade`` and ``find_comment`` (a six-table join each) answer from them, and fall
        back to their own query for a cell not found there."""
        from nbgrader.api import Comment, Grade, GradeCell, MissingEntry, SolutionCell

        gb = self.gradebook
        try:
            nb = gb.find_submission_notebook(self.notebook_id, self.assignment_id, self.student_id)
        except MissingEntry:
            return
        # the cells nbgrader's first query joins (a task cell's falls back to its second query)
        grades = dict((name, g) for g, name in gb.db.query(Grade, GradeCell.name)
                      .join(GradeCell, GradeCell.id == Grade.cell_id).filter(Grade.notebook_id == nb.id))
        comments = dict((name, c) for c, name in gb.db.query(Comment, SolutionCell.name)
                        .join(SolutionCell, SolutionCell.id == Comment.cell_id).filter(Comment.notebook_id == nb.id))
        find_grade, find_comment = gb.find_grade, gb.find_comment
        ours = (self.notebook_id, self.assignment_id, self.student_id)

        def grade(cell, notebook, assignment, student):
            if (notebook, assignment, student) == ours and cell in grades:
                return grades[cell]
            return find_grade(cell, notebook, assignment, student)

        def comment(cell, notebook, assignment, student):
            if (notebook, assignment, student) == ours and cell in comments:
                return comments[cell]
            return find_comment(cell, notebook, assignment, student)

        gb.find_grade, gb.find_comment = grade, comment
