"""``autograder grade`` beside the tamper corpus (tests/test_tamper.py): the command line, runs
that fail or are interrupted, plain nbgrader from the course root, limits, and the sandbox's
own failures."""
from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from autograder.course.build import run_nbgrader
from autograder.grading.pool import SlotPool
from autograder.grading.runner import Grader, GradingError
from autograder.grading.sandbox import Limits
from harness import SANDBOX, reference_answers, scratch_course, submission, submit


def scores_of(root: Path, assignment: str, student: str) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        sub = gb.find_submission_notebook(assignment, assignment, student)
        return {g.name: (g.auto_score if g.auto_score is not None else -1.0) for g in sub.grades}


@SANDBOX
def test_memory_and_processes_are_limited_per_submission_where_cgroups_exist():
    """The forked-memory case checks the sum only where a cgroup can be made; here, say which."""
    from autograder.grading.cgroups import available

    version, sentence = available()
    if version is None:
        pytest.skip(sentence)
    assert version in ("v1", "v2") and "per submission" in sentence


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return scratch_course(tmp_path_factory.mktemp("course"), "a1_views")


def test_grading_without_bubblewrap_warns_and_can_refuse(course, monkeypatch):
    import autograder.grading.bwrap as bwrap

    root = course
    monkeypatch.setattr(bwrap, "bwrap_path", lambda: None)
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
    import autograder.grading.bwrap as bwrap

    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(bwrap, "bwrap_path", lambda: str(fake))
    assert "No permissions to create new namespace" in bwrap.probe()
    messages = []
    Grader(course, "a1_views", log=messages.append)
    assert "No permissions to create new namespace" in messages[0] and "WITHOUT a sandbox" in messages[0]
    with pytest.raises(GradingError, match="No permissions to create new namespace"):
        Grader(course, "a1_views", require_sandbox=True, log=messages.append)


def test_a_slot_that_cannot_start_says_what_bubblewrap_printed(tmp_path, monkeypatch):
    import autograder.grading.bwrap as bwrap
    import autograder.grading.sandbox as sandbox

    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(bwrap, "bwrap_path", lambda: str(fake))
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
                     r"this run's mean 6\.50, median 6\.5 of 15; [\d.]+ s$", text), "the counts come last: " + text
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
def test_grading_works_from_an_environment_reached_through_a_link(tmp_path):
    """A ``.venv`` that is a link to an environment elsewhere: the sandbox shows the environment
    where the link leads, and makes the link too (before, the fork server could not be started:
    "setpriv: failed to execute .../bin/python: No such file or directory")."""
    root = scratch_course(tmp_path / "c", "a1_views")
    submit(root, "a1_views", "alice", submission("a1_views"))
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "env").symlink_to(Path(sys.prefix).resolve())
    (tmp_path / "env").symlink_to(tmp_path / "elsewhere" / "env")     # a link to a link
    python = tmp_path / "env" / "bin" / Path(sys.executable).name
    out = subprocess.run([str(python), "-m", "autograder", "grade", "a1_views", "--jobs", "1"], cwd=root,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert sum(v for v in scores_of(root, "a1_views", "alice").values() if v >= 0) == 13.0, out.stdout


@SANDBOX
def test_a_run_that_fails_or_is_interrupted_keeps_every_earlier_result(course, monkeypatch):
    import autograder.grading.pool as pool_module
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

    monkeypatch.setattr(pool_module, "execute", interrupted)
    with pytest.raises(KeyboardInterrupt):
        Grader(root, "a1_views", students=["keeps"], jobs=1, log=lambda m: None).run()
    assert graded.read_bytes() == before, "Ctrl-C in the middle of a run lost the earlier results"

    def broken(job, slot):
        raise RuntimeError("the slot went away")

    monkeypatch.setattr(pool_module, "execute", broken)
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
    for name in ("read-secrets", "reads-host", "custom-exc", "patched-torch"):
        submit(course, "a1_views", f"plain-{name}", cases[name].build(ctx))
    out = run_nbgrader("autograde", "a1_views", "--student", "plain-*", cwd=course)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    log = out.stdout + out.stderr
    assert "WITHOUT a sandbox" not in log
    assert "plain-patched-torch/a1_views: FLAGGED for a manual look: changed torch.Tensor.untyped_storage" in log, log[-3000:]
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_submission_notebook("a1_views", "a1_views", "plain-patched-torch").flagged
        assert not gb.find_submission_notebook("a1_views", "a1_views", "plain-read-secrets").flagged
    def auto(student: str) -> float:
        return sum(v for v in scores_of(course, "a1_views", student).values() if v >= 0)

    # every test is judged outside the kernel: the swallowed errors never mattered (13 - 4 for a
    # wrong answer and a wrong prediction set), and the patched torch is put back before each test
    assert auto("plain-custom-exc") == 9.0
    assert auto("plain-patched-torch") == 13.0
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


@SANDBOX
def test_grade_takes_several_assignments_and_starts_their_slots_once(tmp_path, monkeypatch, capsys):
    """`grade a1_views a5_copy`: both graded, one summary line each, the slots started once."""
    import autograder.grading.runner as runner
    from autograder import cli

    root = scratch_course(tmp_path / "c")
    for assignment in ("a1_views", "a5_copy"):
        submit(root, assignment, "alice", submission(assignment))
        submit(root, assignment, "bob", submission(assignment, blank=True))
    starts = []
    enter = runner.SlotPool.__enter__

    def counted(pool):
        starts.append(pool.size)
        return enter(pool)

    monkeypatch.setattr(runner.SlotPool, "__enter__", counted)
    monkeypatch.chdir(root)
    code = cli.main(["grade", "a1_views", "a5_copy", "--jobs", "2"])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0, out
    assert starts == [2], f"the slot pool was started {len(starts)} times"
    for assignment, full in (("a1_views", 13.0), ("a5_copy", 10.0)):
        assert f"{assignment}: 2 submissions: 2 graded" in out, out
        scores = {s: sum(v for v in scores_of(root, assignment, s).values() if v >= 0) for s in ("alice", "bob")}
        assert scores == {"alice": full, "bob": 0.0}, (assignment, scores)


def test_a_run_grades_its_first_submission_while_it_prepares_the_others(tmp_path, monkeypatch):
    """The slots take a submission as soon as it is prepared, not once the whole class is: the
    first job reaches the pool when one student has been read, and the pool is never handed more
    than it asks for (it takes a few ahead of its slots)."""
    root = scratch_course(tmp_path / "course", "a1_views")
    students = [f"s{i}" for i in range(8)]
    for s in students:
        submit(root, "a1_views", s, submission("a1_views"))
    prepared: list[str] = []
    real = Grader.prepare
    monkeypatch.setattr(Grader, "prepare", lambda self, s, nb, r: (prepared.append(s), real(self, s, nb, r))[1])
    taken = []

    class OneAtATime:       # a pool of one slot that takes one job ahead
        background = sandboxed = False

        def map(self, jobs, stop=None):
            jobs = iter(jobs)
            ahead = next(jobs, None)
            while ahead is not None:
                job, ahead = ahead, next(jobs, None)
                taken.append((job.student, len(prepared)))
                yield job, None, "RuntimeError: not run in this test"

    results = Grader(root, "a1_views", jobs=1, pool=OneAtATime(), log=lambda m: None).run()
    assert [s for s, _ in taken] == students
    assert taken[0] == ("s0", 2), f"the first submission waited for {taken[0][1]} to be prepared"
    assert max(n - i for i, (_, n) in enumerate(taken)) <= 2, taken
    assert [r.student for r in results] == students
    assert all(any("not run in this test" in p for p in r.problems) for r in results)
