"""The tamper corpus (tests/tamper_corpus.py) through ``autograder grade``: each hostile
submission has its outcome, an honest victim graded right after it keeps full marks, nothing
escapes the sandbox, and nbgrader's own feedback and export read what was written."""
from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import time
import uuid

import nbformat
import pytest

from autograder.course.build import run_nbgrader
from autograder.grading.runner import Grader
from autograder.grading.sandbox import Limits
from harness import SANDBOX, scratch_course, submission, submit
from tamper_corpus import CASES, KERNEL_TRICKS, Case

VICTIM = "-victim"   # an honest copy of the reference answers, graded after each case that runs hostile code
# the cases whose code could reach the slot, the fork server or the next kernel (the others edit
# cells or break the file, and never run anything unusual)
RUNS_HOSTILE_CODE = {"exit-midway", "infinite-loop", "output-flood", "huge-allocation", "memory-hog", "fork-bomb",
                     "read-secrets", "write-gradebook", "delete-course", "network", "leftover-processes",
                     "patched-torch", "patched-helpers", "custom-exc", "no-traceback", "planted-config",
                     "deep-tree", "reads-host", "forked-memory", "poisoned-server", "forges-the-agent",
                     "fills-scratch", "huge-message", "deep-html", "mismatched-tags", "size-as-markup", "leaves-ipc", "leaves-key",
                     *KERNEL_TRICKS}
TEST_LIMITS = Limits(memory_bytes=2 << 30, cell_timeout=10, notebook_timeout=120, cpu_seconds=60,
                     output_bytes=1 << 20)


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


@contextlib.contextmanager
def _peak_memory():
    """How much the grader's (this process's) resident memory grew at most while the block ran:
    ``grown[0]``, in bytes, once it is done."""
    import psutil

    me, samples, done, grown = psutil.Process(), [], threading.Event(), [0]

    def sample():
        while not done.wait(0.05):
            samples.append(me.memory_info().rss)

    before = me.memory_info().rss
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield grown
    finally:
        done.set()
        sampler.join()
        grown[0] = max(samples + [me.memory_info().rss]) - before


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
    with _peak_memory() as grown:
        results = {r.student: r for r in Grader(root, "a1_views", jobs=2, limits=TEST_LIMITS, log=lambda m: None).run()}
    ctx["seconds"] = time.monotonic() - start
    ctx["grown"] = grown[0]
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
def test_no_message_of_the_kernel_fills_the_graders_memory(corpus):
    """One message of 300 MB (huge-message) made the grader grow by 860 MiB before the output budget
    could count it: messages past a cap are dropped as they arrive (provisioner.MAX_MESSAGE)."""
    _, ctx = corpus
    assert ctx["grown"] < 512 << 20, f"the grader grew by {ctx['grown'] >> 20} MiB while grading the corpus"


@SANDBOX
def test_flags_reach_the_gradebook_where_the_formgrader_shows_them(corpus):
    from nbgrader.api import Gradebook

    results, ctx = corpus
    with Gradebook(f"sqlite:///{ctx['root'] / 'gradebook.db'}") as gb:
        marked = {s: gb.find_submission_notebook("a1_views", "a1_views", s).flagged for s in results}
    assert {s for s, flagged in marked.items() if flagged} == {s for s, r in results.items() if r.flags}
    assert marked["patched-torch"] and not marked["honest"]


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
def test_each_submission_leaves_its_slot_as_it_found_it(corpus):
    """After every submission of the batch (each attack, each victim), once its slot was reaped,
    restarted if it held too much, and cleared: the slot's memory is back within DIRTY_BYTES of the
    clean state it first had, so the next one's limits start from there; the attack that leaves
    SysV and POSIX objects behind is flagged for it."""
    from autograder.grading import cgroups
    from autograder.grading.jobs import DIRTY_BYTES, LEFT_BEHIND

    results, _ = corpus
    if cgroups.available()[0] is None:
        pytest.skip(f"no cgroup for the slots here: {cgroups.available()[1]}")
    graded = {n: r.slot_left for n, r in results.items() if r.seconds > 0}
    assert len(graded) >= len(RUNS_HOSTILE_CODE) * 2, graded
    assert None not in graded.values(), graded
    over = {n: left >> 20 for n, left in graded.items() if left > DIRTY_BYTES}
    assert not over, f"MiB a slot still held after these submissions: {over}"
    assert any(f.startswith(LEFT_BEHIND) for f in results["leaves-ipc"].flags), results["leaves-ipc"].flags


@SANDBOX
@pytest.mark.parametrize("name", ["output-flood", "poisoned-server"])
def test_a_kernel_that_dies_under_a_judged_test_ends_the_notebook_there(name, corpus):
    """Killed for its output while the judge waited (output-flood), or gone with its fork server
    (poisoned-server): the notebook stops at that test, as when nbclient finds the kernel dead,
    instead of each later judged test waiting out its time limit on a dead kernel (23 s and 46 s
    of a slot's time before)."""
    results, _ = corpus
    errors = [(c.metadata.get("nbgrader", {}).get("grade_id"), o.get("ename"))
              for c in results[name].autograded.cells if c.cell_type == "code"
              for o in c.outputs if o.get("output_type") == "error"]
    assert not [e for e in errors if e[1] in ("TimeoutError", "CellTimeout", "CellTimeoutError")], errors
    first_not_run = next(i for i, e in enumerate(errors) if e[1] == "NotRun")
    assert first_not_run > 0 and all(e[1] == "NotRun" for e in errors[first_not_run:]), errors


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


# --- attacks on what the grader reads from the kernel's messages ----------------------------------
# They need learner code running while a test cell waits on the kernel.  Every test cell, the
# prediction sets included, is judged outside the kernel, so the code rides on a judged call: the
# learner's reaches(), called by the judge, plays its trick on the messages of the judge's request,
# then answers False, as its wrong twin does; it must score exactly as the twin does.  An honest
# victim graded after each in the same slot keeps full marks.  The flood runs twice: in an answer
# cell (the notebook's output budget) and in reaches() (the judge's transport, whose messages
# count against the same budget).
A7_TWIN = "def reaches(output, leaf):\n    return False\n"


def _in_reaches(trick: str) -> str:
    """A reaches() that runs ``trick`` (indented for a function body), then answers like the twin."""
    return "def reaches(output, leaf):\n" + trick + "    return False\n"


_SEND = """\
    k = get_ipython().kernel
    parent = k.get_parent()
"""
A7_ATTACKS = {
    # an execute_result before the test's error: nbgrader scores the first result or error it meets
    "result-before-error": _in_reaches("    import sys\n    sys.displayhook('reaches: all right')\n"),
    # an ipywidgets Output widget claiming the request's messages, so its error would land in the
    # widget's state instead of the cell (what nbclient's widget imitation does)
    "widget-capture": _in_reaches(_SEND +
                                  "    k.session.send(k.iopub_socket, 'comm_open', {'comm_id': 'capture', "
                                  "'target_name': 'jupyter.widget', 'data': {'state': {'_model_name': 'OutputModel', "
                                  "'_model_module': '@jupyter-widgets/output', '_model_module_version': '1.0.0', "
                                  "'msg_id': parent['header']['msg_id'], 'outputs': []}, 'buffer_paths': []}}, "
                                  "parent=parent)\n"),
    # a forged 'idle' for the running request: the wait would end before the answer arrives
    "forged-idle": _in_reaches(_SEND + "    k.session.send(k.iopub_socket, 'status', {'execution_state': 'idle'}, "
                               "parent=parent)\n"),
}
_FLOOD = ("from IPython.display import display\nhandle = display('x', display_id=True)\n"
          "while True:\n    handle.update('x' * 100000)\n")
A7_FLOODS = {"display-flood": ("predictions", _FLOOD),
             "display-flood-judged": ("reaches", "def reaches(output, leaf):\n" + "".join(
                 "    " + line + "\n" for line in _FLOOD.splitlines()))}


def _cell_scores(root, student: str) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        sub = gb.find_submission_notebook("a7_graphs", "a7_graphs", student)
        return {g.name: g.auto_score for g in sub.grades if g.auto_score is not None}


@pytest.fixture(scope="module")
def message_attacks(tmp_path_factory):
    root = scratch_course(tmp_path_factory.mktemp("a7-attacks"), "a7_graphs")
    submit(root, "a7_graphs", "twin", submission("a7_graphs", {"reaches": A7_TWIN}))
    for name, (cell, source) in {**{n: ("reaches", a) for n, a in A7_ATTACKS.items()}, **A7_FLOODS}.items():
        submit(root, "a7_graphs", name, submission("a7_graphs", {cell: source}))
        submit(root, "a7_graphs", name + VICTIM, submission("a7_graphs"))
    submit(root, "a7_graphs", "reference", submission("a7_graphs"))
    results = {r.student: r for r in Grader(root, "a7_graphs", jobs=1, limits=TEST_LIMITS, log=lambda m: None).run()}
    return root, results


@SANDBOX
@pytest.mark.parametrize("name", sorted(A7_ATTACKS))
def test_a_message_trick_scores_like_the_same_wrong_answer_without_it(name, message_attacks):
    root, results = message_attacks
    twin, attack = _cell_scores(root, "twin"), _cell_scores(root, name)
    assert results["twin"].score < results["reference"].score, "the twin is a wrong answer"
    assert attack == twin, f"{name}: {results[name].problems} {results[name].flags}"


@SANDBOX
@pytest.mark.parametrize("name", sorted(A7_FLOODS))
def test_output_sent_as_display_updates_counts_against_the_budget(name, message_attacks):
    root, results = message_attacks
    r = results[name]
    assert any("output passed its limit" in p for p in r.problems), r.problems
    assert r.score <= results["twin"].score
    assert (root / "autograded" / name / "a7_graphs" / "a7_graphs.ipynb").stat().st_size < 2 << 20


@SANDBOX
def test_victims_after_message_attacks_keep_full_marks(message_attacks):
    _, results = message_attacks
    full = results["reference"].score
    victims = {n: (r.score, r.flags, r.problems) for n, r in results.items() if n.endswith(VICTIM)}
    assert len(victims) == len(A7_ATTACKS) + len(A7_FLOODS)
    assert all(v == (full, [], []) for v in victims.values()), victims


# --- attacks on the judge (tamper_corpus.JUDGE_ATTACKS, assignment 6b) -----------------------------
JUDGE_LIMITS = Limits(memory_bytes=2 << 30, cell_timeout=30, notebook_timeout=300, cpu_seconds=120,
                      output_bytes=1 << 20, judge_memory_bytes=1 << 30)


@pytest.fixture(scope="module")
def judge_attacks(tmp_path_factory):
    """Every judge attack, each followed by an honest victim in the same slot (one slot, students in
    name order), the attacks' twins and the reference; the grader's resident memory sampled."""
    from tamper_corpus import JUDGE_ATTACKS

    root = scratch_course(tmp_path_factory.mktemp("judge-attacks"), "a6b_boundaries")
    for attack in JUDGE_ATTACKS:
        submit(root, "a6b_boundaries", attack.name, submission("a6b_boundaries", attack.answers()))
        submit(root, "a6b_boundaries", attack.name + VICTIM, submission("a6b_boundaries"))
        submit(root, "a6b_boundaries", "twin-" + attack.name, submission("a6b_boundaries", attack.twin))
    submit(root, "a6b_boundaries", "reference", submission("a6b_boundaries"))
    with _peak_memory() as grown:
        results = {r.student: r for r in Grader(root, "a6b_boundaries", jobs=1, limits=JUDGE_LIMITS,
                                                log=lambda m: None).run()}
    return results, grown[0]


@SANDBOX
@pytest.mark.parametrize("name", ["fused-optimizer", "quadratic-reply", "stride-zero", "expanding-file"])
def test_an_attack_on_the_judge_is_flagged_or_scores_like_its_twin(name, judge_attacks):
    results, _ = judge_attacks
    attack, twin = results[name], results["twin-" + name]
    assert attack.graded and not attack.failed, attack.problems
    assert attack.flags or attack.score <= twin.score, (attack.score, twin.score, attack.problems)


@SANDBOX
def test_an_honest_victim_after_each_judge_attack_keeps_full_marks(judge_attacks):
    results, _ = judge_attacks
    full = results["reference"].score
    victims = {n: (r.score, r.flags, r.problems) for n, r in results.items() if n.endswith(VICTIM)}
    assert len(victims) == 4 and all(v == (full, [], []) for v in victims.values()), victims


@SANDBOX
def test_a_judge_that_crashes_says_why_and_the_run_goes_on(judge_attacks):
    """The fused optimizer's step() crashed the grader itself before (a segmentation fault: no report,
    no results for anyone).  Where it crashes the judge now, the submission is flagged and the
    problem names the crash; every student after it is graded."""
    from autograder.grading.jobs import JUDGE_STOPPED

    results, _ = judge_attacks
    r = results["fused-optimizer"]
    if JUDGE_STOPPED in r.flags:
        assert any(p.startswith(JUDGE_STOPPED) and "crashed" in p for p in r.problems), r.problems
    else:      # refused by the judge's own checks instead: flagged, or no better than its twin
        assert r.flags or r.score <= results["twin-fused-optimizer"].score, (r.flags, r.problems)
    assert all(not x.failed and x.graded for x in results.values()), {n: x.problems for n, x in results.items()}


@SANDBOX
def test_the_graders_memory_stays_within_the_judges_limit_whatever_the_judge_is_sent(judge_attacks):
    """3 GiB results and files were rebuilt in the grader before (killed for memory); the judge's
    own limit (1 GiB here) is the most the grading can hold beyond the grader's usual figure."""
    _, grown = judge_attacks
    assert grown < JUDGE_LIMITS.judge_memory_bytes, f"the grader grew by {grown >> 20} MiB while grading"


@SANDBOX
def test_nbgrader_autograde_survives_a_crashing_judge_and_grades_the_next_student(tmp_path):
    """The formgrader's Autograde button runs nbgrader's Autograde converter, SandboxedExecute in it,
    inside the instructor's Jupyter server: before, the crash killed that server.  The same
    converter, run as `nbgrader autograde` in a process watched here, grades the crashing
    submission and then an honest one, and exits normally."""
    from nbgrader.api import Gradebook

    from tamper_corpus import FUSED_OPTIMIZER

    root = scratch_course(tmp_path / "course", "a6b_boundaries")
    submit(root, "a6b_boundaries", "a-crashes", submission("a6b_boundaries", {"snapshot_optimizer": FUSED_OPTIMIZER}))
    submit(root, "a6b_boundaries", "b-honest", submission("a6b_boundaries"))
    out = run_nbgrader("autograde", "a6b_boundaries", cwd=root)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-3000:]
    assert "a-crashes/a6b_boundaries: FLAGGED for a manual look" in log, log[-3000:]
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        crashed = gb.find_submission_notebook("a6b_boundaries", "a6b_boundaries", "a-crashes")
        honest = gb.find_submission_notebook("a6b_boundaries", "a6b_boundaries", "b-honest")
        assert crashed.flagged and not honest.flagged
        auto = [(g.name, g.auto_score, g.max_score) for g in honest.grades if g.auto_score is not None]
        assert auto and all(score == maximum for _, score, maximum in auto), f"the honest student lost points: {auto}"
        assert crashed.score < honest.score, (crashed.score, honest.score)
