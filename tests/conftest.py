"""The order test files start in under ``pytest -n`` (``make test``): the longest first.

Each file stays on one worker (``--dist loadfile``) and workers take files in collection order,
so a long file that comes late in the alphabet would start last and finish alone.  Putting the
long ones first lets the short files fill in around them.  Within a file the order is kept.
"""
from __future__ import annotations

# by whole-file time on a quiet 2-core machine, longest first (see the durations `make test` prints)
LONGEST_FIRST = ["test_nbgrader_plain.py", "test_grading.py", "test_corpus.py", "test_grader_agreement.py",
                 "test_course.py", "test_grading_scale.py", "test_progress.py", "test_site_handout.py",
                 "test_lectures.py", "test_package.py"]


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
