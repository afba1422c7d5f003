"""The learner's view: ``autograder progress`` (every exercise, cached by content) and
``autograder check --watch`` (re-check on save, hints from the learner's own notebook)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from autograder.learner import progress as prog
from autograder.learner import watch
from autograder.learner.cells import RELEASE_DIR, role
from autograder.course.layout import SOURCE_DIR
from autograder.learner.selfcheck import CheckReport
from autograder.learner.selfcheck import TestResult as Result
from harness import ROOT, submission

PY = sys.executable


def write(nb: nbformat.NotebookNode, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def learner(tmp_path_factory):
    """A learner's course folder: one exercise failing, one done, one untouched, one missing;
    checked once, with its cache."""
    root = tmp_path_factory.mktemp("learner")
    wrong = "def shares_memory(a, b):\n    return a.data_ptr() == b.data_ptr()\n"
    write(submission("a1_views", {"shares_memory": wrong}), root / RELEASE_DIR / "a1_views" / "a1_views.ipynb")
    write(submission("a2_clone", blank=True), root / RELEASE_DIR / "a2_clone" / "a2_clone.ipynb")
    write(submission("a3_detach"), root / RELEASE_DIR / "a3_detach" / "a3_detach.ipynb")
    (root / RELEASE_DIR / "a4_grad_modes").mkdir()
    cache = root / "cache"
    start = time.monotonic()
    rows = prog.progress(root, cache=cache)
    return root, cache, rows, time.monotonic() - start


def test_progress_shows_done_failing_with_its_diagnostic_not_started_and_missing(learner):
    root, _, rows, _ = learner
    by = {r.assignment: r for r in rows}
    assert [r.assignment for r in rows] == ["a1_views", "a2_clone", "a3_detach", "a4_grad_modes"]
    assert by["a1_views"].status == "failing"
    assert (by["a1_views"].passed, by["a1_views"].tests) == (3, 4)   # the predictions: not checked here
    assert by["a1_views"].diagnostic.startswith("shares_memory:")
    assert "a[1] is a view of a" in by["a1_views"].diagnostic  # the test's own hint
    assert by["a2_clone"].status == "not started" and by["a2_clone"].points == 0
    assert by["a3_detach"].status == "done" and by["a3_detach"].points == by["a3_detach"].visible_points > 0
    assert by["a3_detach"].total_points > by["a3_detach"].visible_points  # hidden tests count later
    assert by["a4_grad_modes"].status == "missing"


def test_progress_second_run_comes_from_the_cache_without_running_a_kernel(learner, monkeypatch):
    root, cache, first, first_s = learner

    def no_kernel(*args, **kwargs):
        raise AssertionError("an unchanged notebook was run again")

    monkeypatch.setattr(prog, "check_notebook", no_kernel)
    start = time.monotonic()
    rows = prog.progress(root, cache=cache)
    second_s = time.monotonic() - start
    assert [(r.assignment, r.status, r.points, r.diagnostic) for r in rows] == \
           [(r.assignment, r.status, r.points, r.diagnostic) for r in first]
    # the untouched one was never run: it needs no cache
    assert all(r.cached for r in rows if r.status not in ("missing", "not started"))
    assert second_s < 5.0 and second_s < first_s / 3, (first_s, second_s)


def test_progress_reruns_only_the_notebook_whose_content_changed(learner, tmp_path, monkeypatch):
    root, cache, _, _ = learner
    course = tmp_path / "course"
    for a in ("a1_views", "a2_clone"):
        src = root / RELEASE_DIR / a / f"{a}.ipynb"
        write(nbformat.read(src, as_version=4), course / RELEASE_DIR / a / f"{a}.ipynb")
    ran = []
    real = prog.check_notebook

    def counting(path, *args, **kwargs):
        ran.append(Path(path).name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(prog, "check_notebook", counting)
    write(submission("a2_clone"), course / RELEASE_DIR / "a2_clone" / "a2_clone.ipynb")  # the learner's work
    rows = prog.progress(course, cache=cache)
    assert ran == ["a2_clone.ipynb"]  # a1_views: same bytes as before, even in another folder
    assert {r.assignment: r.status for r in rows} == {"a1_views": "failing", "a2_clone": "done"}


def test_an_untouched_release_is_not_started_without_running_it(tmp_path, monkeypatch):
    """The first progress of a fresh course runs no notebook the learner has not touched."""
    blank = write(submission("a2_clone", blank=True), tmp_path / RELEASE_DIR / "a2_clone" / "a2_clone.ipynb")
    assert prog.untouched(nbformat.read(blank, as_version=4))
    monkeypatch.setattr(prog, "check_notebook", lambda *a, **k: pytest.fail("an untouched notebook was run"))
    [row] = prog.progress(tmp_path, cache=tmp_path / "cache")
    assert (row.status, row.points, row.diagnostic) == ("not started", 0, "")
    assert row.tests == 3 and row.visible_points == 3 and row.total_points > 3
    # one answer cell changed, even to something that still does nothing: it runs
    nb = nbformat.read(blank, as_version=4)
    cell = next(c for c in nb.cells if role(c).grade_id == "graph_copy")
    cell.source += "\n# started"
    assert not prog.untouched(nb)


def test_cache_key_follows_content_and_package_version(tmp_path, monkeypatch):
    nb = tmp_path / "x.ipynb"
    nb.write_text("{}")
    key = prog.cache_key(nb)
    assert prog.cache_key(nb) == key and re.fullmatch(r"[0-9a-f]{64}", key)
    nb.write_text("{ }")
    assert prog.cache_key(nb) != key
    nb.write_text("{}")
    monkeypatch.setattr(prog, "__version__", "99.0")
    assert prog.cache_key(nb) != key


def test_status_rules_done_not_started_and_failing_with_the_first_diagnostic(tmp_path):
    path = write(submission("a1_views", blank=True), tmp_path / "a1_views.ipynb")

    def row(results, problems=(), unwritten=()):
        return prog.summarize("a1_views", path, CheckReport(path, results, list(problems), [], list(unwritten)))

    ok = Result("test_a", 1, 1, "passed", "\u2713 a")
    todo = Result("test_b", 0, 1, "not started", "the function still raises NotImplementedError: write its body")
    bad = Result("test_c", 0, 1, "failed", "CheckFailed: c is wrong")
    assert row([ok, ok]).status == "done"
    # every test passes but a written answer is still nbgrader's placeholder: not done
    r = row([ok, ok], unwritten=["why_not_id"])
    assert (r.status, r.diagnostic) == ("failing", "1 written answer still empty: why_not_id")
    assert row([todo, todo]).status == "not started"
    assert row([todo], ["answer cell x: NotImplementedError"]).status == "not started"
    r = row([ok, todo, bad])
    assert (r.status, r.diagnostic, r.passed, r.tests) == ("failing", "c: CheckFailed: c is wrong", 1, 3)
    r = row([ok, todo])
    assert r.status == "failing" and r.diagnostic.startswith("b: the function still raises")
    r = row([todo], ["answer cell f: SyntaxError: invalid syntax (line 2)"])
    assert r.status == "failing" and r.diagnostic == "answer cell f: SyntaxError: invalid syntax (line 2)"
    assert row([ok], ["the run stopped: DeadKernelError: ..."]).status == "failing"
    points = sum(role(c).points for c in nbformat.read(path, as_version=4).cells if role(c).grade)
    assert row([ok]).total_points == points > 4  # visible + hidden tests + written answers


def test_progress_command_prints_the_table_and_the_summary(learner):
    root, cache, _, _ = learner
    env = dict(os.environ, COPY_THAT_CACHE=str(cache), COLUMNS="200")
    out = subprocess.run([PY, "-m", "autograder", "progress"], cwd=root / RELEASE_DIR, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    for word in ("a1_views", "failing", "shares_memory", "a2_clone", "not started",
                 "a3_detach", "done", "a4_grad_modes", "missing"):
        assert word in out.stdout, word
    flat = " ".join(out.stdout.split())
    assert "1/4 exercises done" in flat and "taken from the cache" in flat


# --- check --watch ----------------------------------------------------------------------------

def test_watch_checks_at_start_and_again_after_each_save(tmp_path):
    nb = tmp_path / "a.ipynb"
    nb.write_text("one")
    calls, ticks = [], []

    def fake_sleep(seconds: float) -> None:
        ticks.append(seconds)
        if len(ticks) == 4:
            nb.write_text("two, longer")  # a save: new size (and mtime)
        if len(ticks) == 12:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        watch.watch(nb, lambda: calls.append(nb.read_text()), interval=0.01, settle=0.0, sleep=fake_sleep)
    assert calls == ["one", "two, longer"]  # polling an unchanged file checks nothing


def test_watch_returns_after_max_runs(tmp_path):
    nb = tmp_path / "a.ipynb"
    nb.write_text("x")
    assert watch.watch(nb, lambda: None, max_runs=1, sleep=lambda s: None) == 1


def _learner_notebook_with(answer_body: str, docstring: str | None = None) -> nbformat.NotebookNode:
    nb = submission("a2_clone", blank=True)
    for cell in nb.cells:
        if role(cell).grade_id == "graph_copy":
            cell.source = cell.source.replace("raise NotImplementedError()", answer_body)
            if docstring is not None:
                cell.source = re.sub(r'""".*?"""', f'"""{docstring}"""', cell.source, flags=re.S)
    return nb


def _failing(grade_id: str) -> CheckReport:
    return CheckReport(Path("x"), [Result(grade_id, 0, 1, "failed", "CheckFailed: ..."),
                                   Result("test_edit_copy", 0, 1, "not started", "")], [], [])


def test_hints_come_from_the_learners_own_docstring_never_from_solutions(tmp_path):
    path = write(_learner_notebook_with("return t.detach().clone()"), tmp_path / "a2_clone.ipynb")
    found = watch.hints(path, _failing("test_graph_copy"))
    assert [name for name, _ in found] == ["graph_copy"]
    text = found[0][1]
    # the label is the caller's ("hint for graph_copy():"), never repeated: no "Hint: Hint:"
    assert not text.lower().startswith("hint") and "lecture 02" in text
    # nothing of the reference solution (solutions/) is shown
    source = nbformat.read(ROOT / SOURCE_DIR / "a2_clone" / "a2_clone.ipynb", as_version=4)
    solution = next(c.source for c in source.cells if role(c).grade_id == "graph_copy")
    body = solution.split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0]
    for line in body.strip().splitlines():
        assert line.strip() not in text
    # the learner's notebook is the only source: their own edit of the docstring is what shows
    path = write(_learner_notebook_with("return t", "Copy t.\n\n    Hint: my own note."), tmp_path / "b.ipynb")
    assert watch.hints(path, _failing("test_graph_copy_hidden")) == [("graph_copy", "my own note.")]
    # half-written code still gets its hint; untouched functions get none
    path = write(_learner_notebook_with("return t.clone(  # unfinished"), tmp_path / "c.ipynb")
    assert watch.hints(path, _failing("test_graph_copy"))[0][1] == found[0][1]


def test_check_watch_rechecks_on_save_and_prints_the_hint_after_a_failure(tmp_path):
    nb = write(_learner_notebook_with("return t.clone()"), tmp_path / "a2_clone.ipynb")
    env = dict(os.environ, COLUMNS="250", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([PY, "-m", "autograder", "check", str(nb), "--watch"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()

    def wait_for(predicate, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate("".join(lines)):
                return "".join(lines)
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError("watch output so far:\n" + "".join(lines))

    try:
        first = wait_for(lambda out: out.count("watching a2_clone.ipynb") == 1)
        assert "1/3 visible tests pass" in first and "hint for" not in first  # graph_copy right; predictions, edit_copy not started
        time.sleep(0.05)
        write(_learner_notebook_with("return t.detach().clone()"), nb)  # the learner saves a wrong answer
        out = wait_for(lambda out: out.count("watching a2_clone.ipynb") == 2)
        second = out[len(first):]
        assert "0/3 visible tests pass" in second and "requires_grad is False" in second
        assert "hint for graph_copy():" in second and "lecture 02" in second
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert "stopped watching" in "".join(lines)


def test_progress_reads_a_folder_of_fetched_assignments_as_on_jupyterhub(learner, tmp_path, monkeypatch):
    root, cache, first, _ = learner
    fetched = tmp_path / "copy-that"  # what the Assignments tab fetches: ~/copy-that/<assignment>/
    for a in ("a1_views", "a3_detach"):
        write(nbformat.read(root / RELEASE_DIR / a / f"{a}.ipynb", as_version=4), fetched / a / f"{a}.ipynb")
    (fetched / "a1_views" / "feedback").mkdir()
    (fetched / ".cache").mkdir()
    monkeypatch.setattr(prog, "check_notebook", lambda *a, **k: pytest.fail("unchanged notebook re-run"))
    assert prog.learner_root(fetched) == fetched
    rows = prog.progress(prog.learner_root(fetched), cache=cache)
    assert [(r.assignment, r.status) for r in rows] == [("a1_views", "failing"), ("a3_detach", "done")]
    with pytest.raises(FileNotFoundError, match="--root"):
        prog.learner_root(tmp_path / "copy-that" / "a1_views" / "feedback")
