"""The order test files start in under ``pytest -n 3 --dist loadfile --no-loadscope-reorder``
(``make test``), and a folder the workers share.

Each file stays on one worker.  Without ``--no-loadscope-reorder`` pytest-xdist would sort the
files by their number of tests and ignore this order.  Each worker is first handed two files,
the i-th and the (i+3)-th of this list, then one more each time it runs short; so the first six
are paired to finish together, the browser tests (long, mostly waiting on JupyterLab) with a
short heavy file, and the smaller files fill in around them.  The corpus file comes early: it
makes the fast-path run that the plain-nbgrader and agreement files read (``corpus.fast_path``).

The browser tests wait on a real JupyterLab with wall-clock limits, while the other workers keep
every core busy (grading starts kernels of its own).  So a worker lowers its priority (``nice``)
when it starts a file other than the browser tests', and the processes it starts inherit that:
the lab runs its notebooks at full priority beside the rest.  Alone, the start notebook and a
lecture run in 20 s; beside the rest of the suite at equal priority one took over 150 s in CI.
"""
from __future__ import annotations

import os

import pytest

import harness

# paired as described above: (browser, agreement), (corpus, grading), (tamper, plain), then the
# rest by whole-file time (see the durations `make test` prints)
START_ORDER = ["test_browser.py", "test_corpus.py", "test_tamper.py", "test_check_agreement.py",
               "test_grader_agreement.py", "test_grading.py", "test_class_flow.py", "test_nbgrader_plain.py",
               "test_assignment_check.py", "test_course.py", "test_course_grader.py", "test_agreement.py",
               "test_grade_flow.py", "test_authoring_guide.py", "test_new_exercise.py", "test_kind_module_zoo.py",
               "test_sync.py", "test_grading_scale.py", "test_progress.py", "test_real_kernel.py",
               "test_browser_learner.py", "test_browser_report.py", "test_reveals.py", "test_finish.py", "test_check_view.py",
               "test_browser_zh.py", "test_zh_grading.py", "test_zh_learner.py",
               "test_site_handout.py", "test_lectures.py", "test_package.py", "test_checks_properties.py",
               "test_i18n.py", "test_zh_parity.py", "test_gpu.py"]


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(START_ORDER)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


# how much a worker that runs other files yields to the browser tests' lab
YIELD_TO_BROWSER = 10
_yielded = False


@pytest.fixture(scope="module", autouse=True)
def yield_to_the_browser_tests(request):
    global _yielded
    if not _yielded and os.environ.get("PYTEST_XDIST_WORKER") and not request.path.name.startswith("test_browser"):
        os.nice(YIELD_TO_BROWSER)
        _yielded = True


@pytest.fixture(scope="session", autouse=True)
def shared_folder(tmp_path_factory):
    """One folder for every worker of this run (see harness.made_once): under pytest-xdist each
    worker's base folder sits in the run's own, which the workers share."""
    base = tmp_path_factory.getbasetemp()
    harness.SHARED = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    return harness.SHARED
