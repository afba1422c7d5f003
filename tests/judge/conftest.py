"""Fixtures of the judge's tests (the helpers they import are in judge_helpers.py)."""
from __future__ import annotations

import pytest


@pytest.fixture
def course_fixtures(tmp_path, monkeypatch):
    """A course's fixtures module, as an assignment's ``fixtures.py`` would be: the judge gets a module
    object of its own (never ``sys.modules``); the 'kernel' (this process) imports the released copy
    from its working folder by name."""
    from judge_helpers import make_course_fixtures

    return make_course_fixtures(tmp_path, monkeypatch)
