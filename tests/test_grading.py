"""``autograder grade``: the tamper corpus, agreement with plain nbgrader, the command line."""
from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import nbformat
import pytest

from autograder.course.build import run_nbgrader
from autograder.grading.runner import Grader, GradingError, SlotPool
from autograder.grading.sandbox import Limits, bwrap_path
from harness import reference_answers, scratch_course, submission, submit
from tamper_corpus import CASES, Case


VICTIM = "-victim"   # an honest copy of the reference answers, graded after each case that runs hostile code
# the cases whose code could reach the slot, the fork server or the next kernel (the others edit
# cells or break the file, and never run anything unusual)
RUNS_HOSTILE_CODE = {"exit-midway", "infinite-loop", "output-flood", "huge-allocation", "memory-hog", "fork-bomb",
                     "read-secrets", "write-gradebook", "delete-course", "network", "leftover-processes",
                     "patched-torch", "patched-helpers", "custom-exc", "no-traceback", "planted-config",
                     "deep-tree", "reads-host", "forked-memory", "poisoned-server", "forges-the-agent",
                     "fills-scratch"}
SANDBOX = pytest.mark.skipif(bwrap_path() is None and not os.environ.get("CI"),
                             reason="bubblewrap is not installed (make test-deps installs it as root)")
TEST_LIMITS = Limits(memory_bytes=2 << 30, cell_timeout=10, notebook_timeout=120, cpu_seconds=60,
                     output_bytes=1 << 20)


def scores_of(root: Path, assignment: str, student: str) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        sub = gb.find_submission_notebook(assignment, assignment, student)
        return {g.name: (g.auto_score if g.auto_score is not None else -1.0) for g in sub.grades}


class _Listener:
    """A TCP server on loopback that records whether anybody connected."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
                self.connections += 1
                conn.close()
            except OSError:
                pass

    def close(self):
        self.stop = True
        self.thread.join(2)
        self.sock.close()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = scratch_course(tmp_path_factory.mktemp("tamper"), "a1_views")
    listener = _Listener()
    ctx = {"root": root, "port": listener.port, "marker": str(4000 + uuid.uuid4().int % 1000)}
    for case in CASES:
        path = submit(root, "a1_views", case.name, case.build(ctx))
        for rel, text in (case.files or {}).items():
            (path.parent / rel).parent.mkdir(parents=True, exist_ok=True)
            (path.parent / rel).write_text(text)
        if case.link:
            path.unlink()
            path.symlink_to(root / case.link)
        if case.name in RUNS_HOSTILE_CODE:
            # graded right after the attacker (students go in name order): nothing may carry over
            submit(root, "a1_views", case.name + VICTIM, submission("a1_views"))
    config_before = (root / "nbgrader_config.py").read_bytes()
    start = time.monotonic()
    results = {r.student: r for r in Grader(root, "a1_views", jobs=2, limits=TEST_LIMITS, log=lambda m: None).run()}
    ctx["seconds"] = time.monotonic() - start
    time.sleep(0.5)
    listener.close()
    ctx["connections"] = listener.connections
    ctx["results"] = results
    ctx["config_before"] = config_before
    for name, r in results.items():
        path = root / "autograded" / name / "a1_views" / "a1_views.ipynb"
        r.autograded = nbformat.read(path, as_version=4) if path.exists() else None
    return results, ctx


@SANDBOX
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_tamper_case_has_its_outcome(case: Case, corpus):
    results, ctx = corpus
    r = results[case.name]
    lo, hi = case.score if isinstance(case.score, tuple) else (case.score, case.score)
    assert lo <= r.score <= hi, f"{case.what}: scored {r.score}, expected {case.score}; {r.problems} {r.flags}"
    assert r.max_score == 15.0, "points a submission claims never change the maximum"
    assert r.graded is case.graded, r.problems
    if case.flag:
        assert any(case.flag in f for f in r.flags), f"expected a flag with {case.flag!r}: {r.flags}"
    if case.problem:
        assert any(case.problem in p for p in r.problems), f"expected a problem with {case.problem!r}: {r.problems}"
    if case.extra:
        case.extra(r, ctx)


@SANDBOX
def test_memory_and_processes_are_limited_per_submission_where_cgroups_exist():
    """The forked-memory case checks the sum only where a cgroup can be made; here, say which."""
    from autograder.grading.cgroups import available

    version, sentence = available()
    if version is None:
        pytest.skip(sentence)
    assert version in ("v1", "v2") and "per submission" in sentence


@SANDBOX
def test_flags_reach_the_gradebook_where_the_formgrader_shows_them(corpus):
    from nbgrader.api import Gradebook

    results, ctx = corpus
    with Gradebook(f"sqlite:///{ctx['root'] / 'gradebook.db'}") as gb:
        marked = {s: gb.find_submission_notebook("a1_views", "a1_views", s).flagged for s in results}
    assert {s for s, flagged in marked.items() if flagged} == {s for s, r in results.items() if r.flags}
    assert marked["custom-exc"] and not marked["honest"]


@SANDBOX
def test_honest_submissions_raise_no_flags(corpus):
    results, _ = corpus
    for name in ("honest", "blank", "warns"):
        assert results[name].flags == [] and results[name].problems == [], (name, results[name])


@SANDBOX
def test_nothing_escapes_the_sandbox(corpus):
    results, ctx = corpus
    root = ctx["root"]
    assert ctx["connections"] == 0, "a submission reached a server on the grader's loopback"
    assert (root / "solutions" / "a1_views" / "a1_views.ipynb").exists()
    assert (root / "nbgrader_config.py").read_bytes() == ctx["config_before"]
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for student in results:
            for nb in gb.find_submission("a1_views", student).notebooks:
                assert all(not g.extra_credit for g in nb.grades), f"extra credit for {student}"
    leftover = subprocess.run(["pgrep", "-f", f"sleep {ctx['marker']}"], capture_output=True, text=True).stdout
    assert leftover.strip() == "", "a process started by a submission outlived its grading"
    victims = {name: r for name, r in results.items() if name.endswith(VICTIM)}
    assert len(victims) == len(RUNS_HOSTILE_CODE)
    changed = {name: (r.score, r.flags, r.problems) for name, r in victims.items()
               if (r.score, r.flags, r.problems) != (13.0, [], [])}
    assert not changed, f"an attacker changed the grading of the honest student after it: {changed}"


@SANDBOX
def test_gradebook_and_autograded_notebooks_work_for_nbgrader(corpus):
    """After `grade`, nbgrader's own feedback and export read what it wrote."""
    _, ctx = corpus
    root = ctx["root"]
    out = run_nbgrader("generate_feedback", "a1_views", "--student", "honest", cwd=root)
    assert out.returncode == 0, out.stderr
    html = (root / "feedback" / "honest" / "a1_views" / "a1_views.html").read_text()
    assert "a1_views (Score: 13.0 / 15.0)" in html, "the feedback shows the autograded score of 13 out of 15"
    assert "BEGIN HIDDEN TESTS" not in html
    out = run_nbgrader("export", "--to", "grades.csv", cwd=root)
    assert out.returncode == 0, out.stderr
    rows = (root / "grades.csv").read_text().splitlines()
    assert any(row.startswith("a1_views") and ",honest," in row for row in rows)


@SANDBOX
def test_feedback_holds_no_line_of_a_hidden_test_whatever_the_submission_printed(corpus):
    import html as html_module

    from autograder.grading.feedback import hidden_test_lines

    _, ctx = corpus
    root = ctx["root"]
    student = "prints-hidden-tests"
    hidden = hidden_test_lines(nbformat.read(root / "solutions" / "a1_views" / "a1_views.ipynb", as_version=4))
    assert hidden
    graded = nbformat.read(root / "autograded" / student / "a1_views" / "a1_views.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for c in graded.cells for o in c.get("outputs", []))
    # a1's tests are judged outside the kernel: there is no hidden line there for the attack to print
    assert not [line for line in hidden if line in printed], "a hidden test line reached the kernel's outputs"
    assert "serve" in printed, "the attack printed its callers' source: the judge's agent"
    out = run_nbgrader("generate_feedback", "a1_views", "--student", student, cwd=root)
    assert out.returncode == 0, out.stderr[-3000:]
    page = html_module.unescape((root / "feedback" / student / "a1_views" / "a1_views.html").read_text())
    leaked = [line for line in hidden if line in page]
    assert not leaked, f"the feedback shows hidden test lines: {leaked[:3]}"
    # (where hidden tests still run in the kernel, RedactHiddenTestLines removes what was printed:
    # tests/test_grading_units.py::TestRedactHiddenTestLines)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return scratch_course(tmp_path_factory.mktemp("course"), "a1_views")


def test_grading_without_bubblewrap_warns_and_can_refuse(course, monkeypatch):
    import autograder.grading.sandbox as sandbox

    root = course
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: None)
    messages = []
    Grader(root, "a1_views", log=messages.append)
    assert messages and "WITHOUT a sandbox" in messages[0] and "not installed" in messages[0]
    with pytest.raises(GradingError, match="--require-sandbox"):
        Grader(root, "a1_views", require_sandbox=True, log=messages.append)


@SANDBOX
def test_without_cgroups_the_grader_says_limits_are_per_process(course, monkeypatch):
    import autograder.grading.cgroups as cgroups

    monkeypatch.setattr(cgroups, "available", lambda: (None, "no cgroup the grader may create"))
    messages = []
    Grader(course, "a1_views", log=messages.append)
    assert any("no cgroup the grader may create" in m and "six times its memory" in m for m in messages), messages


def test_a_bwrap_that_cannot_make_namespaces_is_no_sandbox_and_its_own_message_is_shown(course, tmp_path,
                                                                                         monkeypatch):
    """bwrap on PATH is not enough (containers, Ubuntu's AppArmor rule): a real sandbox is started
    first, and bubblewrap's own error reaches the user."""
    import autograder.grading.sandbox as sandbox

    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: str(fake))
    assert "No permissions to create new namespace" in sandbox.probe()
    messages = []
    Grader(course, "a1_views", log=messages.append)
    assert "No permissions to create new namespace" in messages[0] and "WITHOUT a sandbox" in messages[0]
    with pytest.raises(GradingError, match="No permissions to create new namespace"):
        Grader(course, "a1_views", require_sandbox=True, log=messages.append)


def test_a_slot_that_cannot_start_says_what_bubblewrap_printed(tmp_path, monkeypatch):
    import autograder.grading.sandbox as sandbox

    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: str(fake))
    slot = sandbox.Slot(0, tmp_path, sandboxed=True)
    try:
        with pytest.raises(sandbox.SlotError, match="setting up uid map: Permission denied"):
            slot.start(timeout=30)
    finally:
        slot.release()


def test_grading_an_unknown_assignment_says_what_to_do(course):
    root = course
    (root / "submitted" / "s1" / "a2_other").mkdir(parents=True)
    with pytest.raises(GradingError, match="generate_assignment"):
        Grader(root, "a2_other", log=lambda m: None).run()


@SANDBOX
def test_grade_command_prints_counts_and_exits_zero_for_a_broken_notebook(tmp_path):
    """Issue 11 changed this on purpose: the exit status says whether the run failed, not whether a
    student's notebook was broken (it was 1 for one empty notebook); the summary ends with counts,
    and the rows per student go to the report."""
    root = scratch_course(tmp_path / "c", "a1_views")
    submit(root, "a1_views", "alice", submission("a1_views"))
    submit(root, "a1_views", "bob", b"")
    out = subprocess.run([sys.executable, "-m", "autograder", "grade", "a1_views", "--jobs", "1"], cwd=root,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    text = " ".join(out.stdout.split())
    assert "bob 0/15: a1_views.ipynb is empty" in text, text
    assert re.search(r"a1_views: 2 submissions: 2 graded, 0 unchanged, 1 broken, 0 failed, 0 flagged; "
                     r"mean 6\.50, median 6\.5 of 15; [\d.]+ s$", text), "the counts come last: " + text
    report = (root / "reports" / "a1_views" / "report.csv").read_text()
    assert "alice,graded,13,13,15," in report and "bob,broken submission,0,0,15,,a1_views.ipynb is empty" in report
    only = subprocess.run([sys.executable, "-m", "autograder", "grade", "a1_views", "--student", "alice"], cwd=root,
                          capture_output=True, text=True, timeout=600)
    assert only.returncode == 0, only.stdout + only.stderr
    for command in (["feedback", "a1_views"], ["export"]):
        done = subprocess.run([sys.executable, "-m", "autograder", *command], cwd=root, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    assert (root / "feedback" / "alice" / "a1_views" / "a1_views.html").exists()
    # copied into submitted/ by hand, without timestamp.txt: one is written for release_feedback
    assert (root / "autograded" / "alice" / "a1_views" / "timestamp.txt").is_file()
    assert (root / "feedback" / "alice" / "a1_views" / "timestamp.txt").is_file()
    assert (root / "grades.csv").exists()


@SANDBOX
def test_a_run_that_fails_or_is_interrupted_keeps_every_earlier_result(course, monkeypatch):
    import autograder.grading.runner as runner

    root = course
    submit(root, "a1_views", "keeps", submission("a1_views"))
    pool = SlotPool(1, sandboxed=True).__enter__()   # one fork server for the three runs
    monkeypatch.setattr(runner, "SlotPool", lambda *a, **k: contextlib.nullcontext(pool))
    [first] = Grader(root, "a1_views", students=["keeps"], jobs=1, log=lambda m: None).run()
    assert first.score == 13.0
    graded = root / "autograded" / "keeps" / "a1_views" / "a1_views.ipynb"
    before = graded.read_bytes()

    def interrupted(job, slot):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "execute", interrupted)
    with pytest.raises(KeyboardInterrupt):
        Grader(root, "a1_views", students=["keeps"], jobs=1, log=lambda m: None).run()
    assert graded.read_bytes() == before, "Ctrl-C in the middle of a run lost the earlier results"

    def broken(job, slot):
        raise RuntimeError("the slot went away")

    monkeypatch.setattr(runner, "execute", broken)
    [again] = Grader(root, "a1_views", students=["keeps"], jobs=1, log=lambda m: None).run()
    assert not again.graded and any("earlier results kept" in p for p in again.problems), again.problems
    assert graded.read_bytes() == before
    assert not list(root.glob(".copy-that-staging-*")), "the staging folders are removed"
    pool.__exit__(None, None, None)


@SANDBOX
def test_plain_nbgrader_autograde_from_the_course_root_is_sandboxed(course):
    """The course configuration puts the sandboxed executor in nbgrader's own autograde: the same
    attacks fail under `nbgrader autograde` as under `grade`."""
    from tamper_corpus import _output_of, by_name

    cases = by_name()
    ctx = {"root": course, "port": 9, "marker": "4999"}
    for name in ("read-secrets", "reads-host", "custom-exc"):
        submit(course, "a1_views", f"plain-{name}", cases[name].build(ctx))
    out = run_nbgrader("autograde", "a1_views", "--student", "plain-*", cwd=course)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    log = out.stdout + out.stderr
    assert "WITHOUT a sandbox" not in log
    assert "plain-custom-exc/a1_views: FLAGGED for a manual look: error display tampered with" in log, log[-3000:]
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_submission_notebook("a1_views", "a1_views", "plain-custom-exc").flagged
        assert not gb.find_submission_notebook("a1_views", "a1_views", "plain-read-secrets").flagged
    def auto(student: str) -> float:
        return sum(v for v in scores_of(course, "a1_views", student).values() if v >= 0)

    assert auto("plain-custom-exc") == 9.0, "the swallowed error still fails (a wrong answer and a wrong prediction set: 13 - 4)"
    for name in ("read-secrets", "reads-host"):
        assert auto(f"plain-{name}") == 13.0
        nb = nbformat.read(course / "autograded" / f"plain-{name}" / "a1_views" / "a1_views.ipynb", as_version=4)
        printed = _output_of(type("R", (), {"autograded": nb}), "shares_memory")
        assert "LEAKED" not in printed and ("blocked" in printed or "hidden" in printed), printed


def test_a_misspelt_assignment_is_named_as_such(course):
    out = subprocess.run([sys.executable, "-m", "autograder", "grade", "a1_veiws"], cwd=course,
                         capture_output=True, text=True, timeout=120)
    text = " ".join(out.stdout.split())
    assert out.returncode == 2, out.stdout + out.stderr
    assert "no assignment 'a1_veiws' in solutions/" in text and "a1_views" in text, text


def reference_answer(cell: str) -> str:
    return reference_answers("a1_views")[cell]


@SANDBOX
def test_cpu_time_is_capped_over_all_of_a_submissions_processes(course):
    """Three forked spinners under a 4 s CPU limit: each alone stays under its RLIMIT_CPU for a
    while, together they pass 4 s within about two seconds and the submission is stopped."""
    spin = ("import os, time\nkids = [os.fork() for _ in range(3)]\nif 0 in kids:\n    end = time.time() + 20\n"
            "    while time.time() < end:\n        pass\n    os._exit(0)\nfor k in kids:\n    os.waitpid(k, 0)\n")
    submit(course, "a1_views", "spinner", submission("a1_views", {"count_storages":
        reference_answer("count_storages") + "\n" + spin}))
    limits = Limits(memory_bytes=2 << 30, cell_timeout=30, notebook_timeout=60, cpu_seconds=4)
    start = time.monotonic()
    [r] = Grader(course, "a1_views", students=["spinner"], jobs=1, limits=limits, log=lambda m: None).run()
    assert any("together used more than 4 s of CPU time" in p for p in r.problems), r.problems
    assert time.monotonic() - start < 25, "stopped well before the spinners' 20 s"


@SANDBOX
def test_a_closed_pool_leaves_no_cgroup_and_no_mount_behind():
    pool = SlotPool(1, sandboxed=True).__enter__()
    slot = pool.started[0]
    groups = list(slot.cgroup.dirs) if slot.cgroup else []
    scratch = slot.dir
    pool.__exit__(None, None, None)
    assert not [d for d in groups if d.exists()], groups
    mounts = Path("/proc/self/mounts").read_text()
    assert f" {scratch} " not in mounts
