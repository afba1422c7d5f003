"""The judge in a process of its own: the pipe between it and the grader (``judgepipe``), what it
does with the kernel's answers (``judgeserver.parse_answer``), its sandbox (``judgebox``), and what
a judge that crashes, stalls, passes a limit or sends garbage costs a notebook (``jobs``).

The grader never parses what the kernel answers: it relays the text; the judge reads it in linear
time.  It takes back from the judge only outputs it can check, and a judge that stops answering as
a judge does ends its own submission's judged tests, never the grader or the next submission.
"""
from __future__ import annotations

import asyncio
import json
import socket
import threading

import nbformat
import pytest

from autograder.grading import judgepipe
from autograder.grading.judgepipe import (ANSWER, CELL, FAILED, OUTPUTS, REQUEST, JudgeChannel, JudgeEnd,
                                          JudgeStopped, checked_outputs, frame, split_answer)
from autograder.grading.judgeserver import parse_answer
from harness import SANDBOX


# -- the kernel's answer, read in the judge ---------------------------------------------------------

@pytest.mark.parametrize("answer", [
    {"result": {"k": "v", "v": True}},
    {"text": "it's \"quoted\", a back\\slash, a new\nline, é, ✓ and \U0001f600", "n": [1, 2.5, None]},
])
def test_the_answer_is_read_back_from_the_repr_the_kernel_sends(answer):
    for dumped in (json.dumps(answer), json.dumps(answer, ensure_ascii=False)):
        assert parse_answer(repr(dumped)) == answer


@pytest.mark.parametrize("text", [
    "f'" + "{1}" * 5000 + "'",          # an f-string: quadratic for Python's own parser, here no str
    "'a' 'b'", "b'{}'", "{'a': 1}", "'[1, 2]'", "'{\"a\": 1'", "'", "", "'{}\"",
])
def test_anything_but_the_repr_of_a_json_object_is_no_answer(text):
    with pytest.raises(ValueError):
        parse_answer(text)


def test_the_judge_parses_without_pythons_parser(monkeypatch):
    """A codec and json.loads: nothing whose cost an answer can make quadratic (Python's parser
    took 31 s for a 393 kB f-string of replacement fields), and no lock shared with anyone."""
    import ast
    import builtins

    def refuse(*args, **kwargs):
        raise AssertionError("the judge used Python's parser on the kernel's answer")

    for module, name in ((ast, "literal_eval"), (ast, "parse"), (builtins, "compile"), (builtins, "eval")):
        monkeypatch.setattr(module, name, refuse)
    assert parse_answer(repr(json.dumps({"a": [1, "b"]}))) == {"a": [1, "b"]}


# -- what the grader takes back from a judge -----------------------------------------------------------

def test_outputs_are_rebuilt_from_their_allowed_fields_only():
    sent = [{"output_type": "stream", "name": "stdout", "text": "✓ ok\n", "extra": "x" * 10},
            {"output_type": "error", "ename": "CheckFailed", "evalue": "wrong", "traceback": ["forged"],
             "metadata": {"a": 1}}]
    assert checked_outputs(json.dumps(sent).encode(), 1000) == [
        {"output_type": "stream", "name": "stdout", "text": "✓ ok\n"},
        {"output_type": "error", "ename": "CheckFailed", "evalue": "wrong", "traceback": ["CheckFailed: wrong"]}]


@pytest.mark.parametrize("sent", [
    {"output_type": "stream"},                                              # not a list
    [{"output_type": "stream", "name": "stdout", "text": "x"}] * 5,         # too many
    [{"output_type": "display_data", "data": {"text/html": "<script>"}}],   # another kind
    [{"output_type": "stream", "name": "stdout", "text": 5}],
    [{"output_type": "stream", "name": "stdout", "text": "x" * 1001}],      # past its length
    [{"output_type": "error", "ename": "<script>alert(1)</script>", "evalue": ""}],
    [{"output_type": "error", "ename": "A" * 101, "evalue": ""}],
    [{"output_type": "error", "ename": "Bad name", "evalue": ""}],
    [{"output_type": "error", "ename": "E", "evalue": "v" * (judgepipe.MAX_EVALUE + 1)}],
    [{"output_type": "error", "ename": "E", "evalue": None}],
    ["text"],
])
def test_anything_else_from_the_judge_is_a_broken_judge(sent):
    with pytest.raises(JudgeStopped, match="not a cell's outputs"):
        checked_outputs(json.dumps(sent).encode(), 1000)


def test_outputs_that_are_not_json_are_a_broken_judge():
    for payload in (b"\xff\xfe", b"[" * 100_000, b"[1, 2"):
        with pytest.raises(JudgeStopped):
            checked_outputs(payload, 1000)


# -- the grader's end of the pipe, against a fake judge -----------------------------------------------

def _with_judge(judge, relay=None, deadline_in: float = 30.0, source: str = "x = 1"):
    """Run one cell through a JudgeChannel whose other end ``judge(end)`` plays in a thread."""
    mine, theirs = socket.socketpair()

    def play() -> None:
        try:
            judge(JudgeEnd(theirs))
        except EOFError:      # the grader closed its end
            pass
        finally:
            try:
                theirs.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    thread = threading.Thread(target=play, daemon=True)
    thread.start()

    async def run():
        channel = await JudgeChannel.open(mine, output_limit=1 << 20)
        try:
            loop = asyncio.get_running_loop()
            return await channel.run_cell(source, loop.time() + deadline_in, relay)
        finally:
            channel.close()
    try:
        return asyncio.run(run())
    finally:
        theirs.close()
        thread.join(5)


def test_a_request_goes_to_the_kernel_as_sent_and_its_answer_comes_back_unparsed():
    seen = {}

    async def relay(request, deadline):
        seen["request"] = request
        return "'{\"result\": 1}'", "printed\n"

    def judge(end):
        assert end.read() == (CELL, b"x = f(1)")
        end.send(REQUEST, b'{"op": "call"}')
        kind, payload = end.read()
        seen["answer"] = (kind, split_answer(payload))
        end.send(OUTPUTS, json.dumps([{"output_type": "stream", "name": "stdout", "text": "done"}]).encode())

    outputs = _with_judge(judge, relay, source="x = f(1)")
    assert seen == {"request": '{"op": "call"}', "answer": (ANSWER, ("'{\"result\": 1}'", "printed\n"))}
    assert outputs == [{"output_type": "stream", "name": "stdout", "text": "done"}]


@pytest.mark.parametrize("raised, error", [(TimeoutError("past the limit"), "TimeoutError"),
                                           ("dead", "DeadKernel"), ("none", "NoAnswer")])
def test_a_request_without_an_answer_reaches_the_judge_as_failed(raised, error):
    from nbclient.exceptions import DeadKernelError

    from autograder.grading.transport import NoAnswer

    exc = {"dead": DeadKernelError("the kernel died"), "none": NoAnswer("no answer")}.get(raised, raised)
    seen = {}

    async def relay(request, deadline):
        raise exc

    def judge(end):
        end.read()
        end.send(REQUEST, b"{}")
        kind, payload = end.read()
        seen["failed"] = (kind, json.loads(payload)["error"])
        end.send(OUTPUTS, b"[]")

    assert _with_judge(judge, relay) == []
    assert seen["failed"] == (FAILED, error)


def test_a_frame_of_an_unknown_kind_is_garbage():
    def judge(end):
        end.read()
        end.send(b"z", b"{}")

    with pytest.raises(JudgeStopped, match="not a judge's message"):
        _with_judge(judge)


def test_a_frame_over_its_size_is_refused_from_its_header_alone():
    """The judge claims a gigabyte and sends none of it: refused at once, nothing read or kept."""
    def judge(end):
        end.read()
        end.sock.sendall(judgepipe.HEADER.pack(OUTPUTS, 1 << 30))
        end.read()    # (waits until the grader closes its end)

    with pytest.raises(JudgeStopped, match="not a judge's message"):
        _with_judge(judge)


def test_a_judge_that_ends_mid_frame_has_ended():
    def judge(end):
        end.read()
        end.sock.sendall(frame(OUTPUTS, b"[]")[:4])     # and its end closes

    with pytest.raises(JudgeStopped, match="it ended"):
        _with_judge(judge)


def test_a_silent_judge_is_stopped_past_the_cells_deadline(monkeypatch):
    monkeypatch.setattr(judgepipe, "GRACE", 0.2)

    def judge(end):
        end.read()
        end.read()      # says nothing, until the grader closes the pipe

    with pytest.raises(JudgeStopped, match="ran past the test's time limit"):
        _with_judge(judge, deadline_in=0.1)


def test_the_judges_own_loop_runs_cells_and_relays_requests_through_the_pipe():
    """``run_judge`` (the judge process's loop) against the kernel's real agent: the cell's calls
    go out as requests, the agent's answers come back as the text a kernel sends (the repr of a
    str), and the cell's outputs as the grader reads them."""
    from autograder.grading.judgeserver import run_judge
    from autograder.judge import agent as judge_agent

    namespace: dict = {}
    exec("import torch\ndef plus_one(t):\n    print('called')\n    return t + 1\n", namespace)

    async def relay(request, deadline):
        judge_agent.serve(request, namespace)
        return repr(judge_agent.last_reply), "called\n"

    def judge(end):
        try:
            run_judge(end.sock)
        except EOFError:
            pass

    test = "t = torch.arange(3.0)\nck.check_close(plus_one(t), t + 1, 'plus_one(t)')\nprint('passed')\n"
    assert _with_judge(judge, relay, source=test) == [{"output_type": "stream", "name": "stdout",
                                                       "text": "called\npassed\n"}]
    wrong = "ck.check_close(plus_one(torch.zeros(2)), torch.zeros(2), 'plus_one(z)')\n"
    [error] = _with_judge(judge, relay, source=wrong)[-1:]
    assert error["output_type"] == "error" and error["ename"] == "CheckFailed", error


# -- the judge's sandbox: a real judge server -------------------------------------------------------
# (every name a test uses that it does not define is the learner's, asked of the kernel: these
# tests define theirs)
CRASH = "ctypes = __import__('ctypes')\nctypes.string_at(0)\n"     # a segmentation fault


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    from autograder.grading.bwrap import bwrap_path
    from autograder.grading.judgebox import JudgeBox

    judge = JudgeBox(7, tmp_path_factory.mktemp("judge-box"), sandboxed=bwrap_path() is not None)
    judge.launch()
    yield judge
    judge.release()


def _run(box, source: str, deadline_in: float = 30.0, **limits):
    """One fresh judge of ``box`` runs ``source``: (its outputs or how it stopped, its status)."""
    from autograder.grading.sandbox import Limits

    from autograder.grading.transport import NoAnswer

    sock = box.fork(Limits(**limits))

    async def no_kernel(request, deadline):
        raise NoAnswer("no kernel in this test")

    async def run():
        channel = await JudgeChannel.open(sock, output_limit=1 << 20)
        try:
            loop = asyncio.get_running_loop()
            return await channel.run_cell(source, loop.time() + deadline_in, no_kernel)
        except JudgeStopped as stop:
            return stop
        finally:
            channel.close()
    try:
        out = asyncio.run(run())
    finally:
        sock.close()
    return out, box.end()


def test_a_judge_runs_a_test_with_torch_and_the_check_helpers(box):
    out, _ = _run(box, "x = torch.arange(4.0)\nck.check_close(x[1:].clone(), torch.tensor([1.0, 2, 3]), 'x')\n"
                       "print('fine', torch.__version__ > '2')\n")
    assert out == [{"output_type": "stream", "name": "stdout", "text": "fine True\n"}]


def test_a_judge_that_crashes_is_named_and_the_next_one_is_fresh(box):
    from autograder.grading.sandbox import Limits

    out, status = _run(box, CRASH)
    assert isinstance(out, JudgeStopped) and str(out) == "it ended"
    assert "SIGSEGV (it crashed)" in box.why_stopped(status, Limits()), status
    again, _ = _run(box, "print(sorted(k for k in globals() if not k.startswith('_'))[:3])\n")
    assert again[0]["output_type"] == "stream", again


def test_a_judge_past_its_cpu_time_is_stopped_and_says_so(box):
    from autograder.grading.sandbox import Limits

    out, status = _run(box, "while True:\n    pass\n", judge_cpu_seconds=1)
    assert isinstance(out, JudgeStopped), out
    assert box.why_stopped(status, Limits(judge_cpu_seconds=1)) == "it used more than 1 s of CPU time"


def test_a_judge_cannot_allocate_past_its_memory(box):
    """A test that asks for more than the judge's allowance fails there; the judge goes on."""
    out, _ = _run(box, "try:\n    big = torch.ones(2 ** 28)\nexcept RuntimeError:\n    print('refused')\n",
                  judge_memory_bytes=256 << 20)
    assert out == [{"output_type": "stream", "name": "stdout", "text": "refused\n"}], out


def test_a_stalled_judge_is_stopped_at_the_deadline(box, monkeypatch):
    monkeypatch.setattr(judgepipe, "GRACE", 0.5)
    out, _ = _run(box, "__import__('time').sleep(60)\n", deadline_in=0.5)
    assert isinstance(out, JudgeStopped) and "ran past" in str(out)


@SANDBOX
def test_the_judge_sees_neither_the_course_nor_the_kernels_folder_nor_the_network(box, tmp_path):
    from harness import ROOT

    probe = f"""
os, socket = __import__('os'), __import__('socket')
seen = []
for path in ({str(ROOT / 'solutions')!r}, {str(ROOT / 'nbgrader_config.py')!r}, {str(ROOT / 'tests')!r},
             {str(box.dir.parent / 'slot7')!r}, '/home', '/root/.bash_history', '/srv'):
    seen.append((path, bool(os.listdir(path)) if os.path.isdir(path) else os.path.exists(path)))
try:
    socket.create_connection(('127.0.0.1', {{port}}), timeout=1)
    seen.append(('net', True))
except OSError:
    seen.append(('net', False))
print(seen, os.getuid(), len([p for p in os.listdir('/proc') if p.isdigit()]) < 10)
"""
    import os

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    (box.dir.parent / "slot7").mkdir(exist_ok=True)
    (box.dir.parent / "slot7" / "secret.txt").write_text("kernel's file")
    try:
        [out], _ = _run(box, probe.replace("{port}", str(port)))
    finally:
        listener.close()
    text = out["text"]
    assert "True)" not in text, f"the judge sees or reaches this: {text}"
    assert text.rstrip().endswith("True"), f"the judge sees processes outside its own namespace: {text}"
    if os.geteuid() == 0:
        assert f"] {box.uid} " in text and box.uid != 0, f"the judge runs as a user of its own: {text}"


def test_without_bubblewrap_the_judge_is_still_a_process_of_its_own(tmp_path):
    """The grader's warned fallback: no sandbox, but the judge still runs apart from the grader, so a
    crash there is the judge's alone."""
    import os

    from autograder.grading.judgebox import JudgeBox

    plain = JudgeBox(8, tmp_path, sandboxed=False)
    plain.launch()
    try:
        out, status = _run(plain, CRASH)
        assert isinstance(out, JudgeStopped) and status == -11, (out, status)
        [printed], _ = _run(plain, "print(__import__('os').getpid())\n")
        assert int(printed["text"]) != os.getpid()
    finally:
        plain.release()


# -- what a judge that stops costs a notebook ----------------------------------------------------------

def _judged_a1(crash_in: str | None):
    """A job of a1's reference answers whose judged tests come from the gradebook as usual, one of
    them (``crash_in``) made to crash the judge."""
    from autograder.grading.jobs import Job, add_guards
    from autograder.grading.judged import is_judged
    from autograder.learner.cells import role
    from harness import source_notebook, submission

    source = nbformat.read(source_notebook("a1_views"), as_version=4)
    judged = {role(c).grade_id: c.source for c in source.cells if role(c).is_test and is_judged(c.source)}
    if crash_in:
        judged[crash_in] = "# graded outside your kernel\n" + CRASH
    nb = add_guards(submission("a1_views"))
    return Job("s", "a1_views", dict(nb), {}, judged=judged)


def _errors(outcome) -> dict[str, str]:
    from autograder.learner.cells import role

    return {role(c).grade_id: o["ename"] for c in outcome.nb["cells"] if role(nbformat.from_dict(c)).is_test
            for o in c.get("outputs", []) if o.get("output_type") == "error"}


@SANDBOX
def test_a_crashed_judge_fails_its_test_and_the_judged_tests_after_it_only(tmp_path):
    from autograder.grading.jobs import JUDGE_STOPPED, execute
    from autograder.grading.pool import SlotPool

    with SlotPool(1, sandboxed=True) as pool:
        slot = pool.started[0]
        crashed = execute(_judged_a1("test_plus_one"), slot)
        after = execute(_judged_a1(None), slot)
    errors = _errors(crashed)
    order = [k for k in _judged_a1(None).judged]
    at = order.index("test_plus_one")
    assert errors.get("test_plus_one") == "JudgeStopped", errors
    assert all(errors.get(gid) == "JudgeStopped" for gid in order[at + 1:]), errors
    assert not [gid for gid in order[:at] if gid in errors], f"tests before the crash keep their score: {errors}"
    assert "test_predictions" not in errors, "a test run in the kernel keeps its score"
    assert JUDGE_STOPPED in crashed.flags
    assert any(p.startswith(JUDGE_STOPPED) and "SIGSEGV" in p for p in crashed.problems), crashed.problems
    assert _errors(after) == {} and after.flags == [] and after.problems == [], (after.flags, after.problems)


def test_a_judge_that_cannot_start_fails_the_job_not_the_student():
    """No judge (its server would not start) is the grader's fault: the job fails, so the runner keeps
    the student's earlier results and exits 1, instead of scoring every judged test zero."""
    from types import SimpleNamespace

    from autograder.grading import jobs
    from autograder.grading.bwrap import SlotError
    from autograder.grading.sandbox import Limits

    def cannot(limits, warm, fixtures=None):
        raise SlotError("judge 0: the judge server exited: ModuleNotFoundError")

    slot = SimpleNamespace(judge=SimpleNamespace(fork=cannot))
    with pytest.raises(jobs.JudgeUnavailable, match="could not be started: .*ModuleNotFoundError"):
        jobs._fork_judge(slot, Limits(), warm=False)
    assert not issubclass(jobs.JudgeUnavailable, RuntimeError), "a RuntimeError would be taken for a dead kernel"
