"""What a grading call starts, and when: slots in the background, only as many as it has work for,
a failed start reported, a pool closed while its slots start; the cheap count of surely graded
students; the servers' warm-up only for notebooks with an optimizer, as the slots start for a call
whose assignments use one, the two servers side by side; what a gradient call loads, loaded once
in the servers for notebooks that call backward; the quick look at a killed kernel; the report's
histogram.

No sandbox is started here: ``Slot.start`` is replaced by a stand-in, or the slot runs unsandboxed."""
from __future__ import annotations

import base64
import re
import threading
import time
from pathlib import Path

import pytest

from autograder.grading import pool as pool_module
from autograder.grading.bwrap import SlotError
from autograder.grading.jobs import uses_optimizer
from autograder.grading.sandbox import folders_use_optimizer, uses_gradients
from autograder.grading.pool import SlotPool
from autograder.grading.sandbox import Slot
from autograder.grading.state import surely_graded


@pytest.fixture
def fake_start(monkeypatch):
    """Slot.start that takes ``delay`` seconds, or fails; Slot.release and abandon recorded."""
    calls = {"started": [], "released": [], "abandoned": [], "delay": 0.0, "fail": False}
    gate = threading.Event()

    def start(self, timeout: float = 300) -> None:
        calls["started"].append(self.index)
        if calls["fail"]:
            raise SlotError(f"slot {self.index}: no bubblewrap here")
        if gate.wait(calls["delay"]):      # abandon() opens the gate: the start fails at once
            raise SlotError(f"slot {self.index}: fork server exited")

    monkeypatch.setattr(Slot, "start", start)
    monkeypatch.setattr(Slot, "release", lambda self: calls["released"].append(self.index))
    monkeypatch.setattr(Slot, "abandon", lambda self: (calls["abandoned"].append(self.index), gate.set()))
    monkeypatch.setattr(Slot, "ask_to_exit", lambda self: None)
    return calls


def test_a_background_pool_starts_what_it_is_asked_and_grows_to_its_size_at_most(fake_start, monkeypatch):
    monkeypatch.setattr(pool_module, "execute", lambda job, slot: (job, slot.index))
    with SlotPool(3, sandboxed=False, background=True, initial=1) as pool:
        results = [outcome for _, outcome, error in pool.map(["a", "b"])]
        assert fake_start["started"] == [0], "one slot for a run that surely has one submission"
        assert sorted(job for job, _ in results) == ["a", "b"] and {i for _, i in results} == {0}
        pool.grow(10)
        deadline = time.monotonic() + 10
        while len(pool.started) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sorted(fake_start["started"]) == [0, 1, 2], "grown to its size, never past it"
    assert sorted(fake_start["released"]) == [0, 1, 2]


def test_jobs_fail_with_the_start_error_when_no_slot_can_start(fake_start, monkeypatch):
    fake_start["fail"] = True
    monkeypatch.setattr(pool_module, "execute", lambda job, slot: pytest.fail("no slot, no job"))
    with SlotPool(2, sandboxed=False, background=True) as pool:
        with pytest.raises(SlotError, match="no bubblewrap here"):
            list(pool.map(["a"]))
        assert pool.failed()


def test_a_pool_closed_while_its_slots_start_does_not_wait_for_them(fake_start):
    fake_start["delay"] = 60.0
    start = time.monotonic()
    with SlotPool(2, sandboxed=False, background=True):
        time.sleep(0.2)
    assert time.monotonic() - start < 10, "closing waited for the slots to load torch"
    assert sorted(fake_start["abandoned"]) == [0, 1]


def test_surely_graded_counts_named_new_changed_and_lost_students():
    state = {"same": {"hash": "h1"}, "changed": {"hash": "old"}, "lost": {"hash": "h3"}, "named": {"hash": "h4"}}
    hashes = {"same": "h1", "changed": "h2", "lost": "h3", "named": "h4", "new": "h5", "unreadable": ""}
    kept = {"same": True, "changed": True, "lost": False, "named": True, "new": False, "unreadable": True}
    assert surely_graded(hashes, state, ["named"], kept.get) == 5
    assert surely_graded({"same": "h1"}, state, [], kept.get) == 0


def test_the_fork_server_warms_up_only_for_notebooks_with_an_optimizer():
    with_one = {"cells": [{"cell_type": "markdown", "source": "no optim here"},
                          {"cell_type": "code", "source": "opt = torch.optim.SGD(params, lr=0.1)"}]}
    without = {"cells": [{"cell_type": "markdown", "source": "an optimizer, in words"},
                         {"cell_type": "code", "source": "y = x.view(2, 3)"}]}
    assert uses_optimizer(with_one) and not uses_optimizer(without)


def test_an_assignment_uses_an_optimizer_when_a_code_cell_of_its_source_names_one(tmp_path):
    import json

    def folder(name: str, *sources) -> Path:
        (tmp_path / name).mkdir()
        for i, source in enumerate(sources):
            cells = [{"cell_type": "code", "source": source, "metadata": {}, "outputs": []}]
            (tmp_path / name / f"n{i}.ipynb").write_text(json.dumps({"cells": cells}))
        return tmp_path / name

    plain = folder("a1", "y = x.view(2, 3)", ["x = 1\n", "y = x\n"])
    trained = folder("a6", "y = x", ["opt = torch.", "optim.SGD(p, lr=0.1)"])   # (a list source)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "n.ipynb").write_text("{ not json")
    assert folders_use_optimizer([trained]) and folders_use_optimizer([plain, broken, trained])
    assert not folders_use_optimizer([plain, broken, tmp_path / "missing"])


def test_a_warm_pool_has_its_slots_warm_up_as_they_start(monkeypatch):
    seen = []
    monkeypatch.setattr(Slot, "start", lambda self, timeout=300: seen.append((self.index, self.warm_start)))
    monkeypatch.setattr(Slot, "release", lambda self: None)
    monkeypatch.setattr(Slot, "ask_to_exit", lambda self: None)
    with SlotPool(2, sandboxed=False, warm=True):
        pass
    with SlotPool(2, sandboxed=False, background=True, initial=1):
        deadline = time.monotonic() + 10
        while len(seen) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
    assert sorted(seen) == [(0, False), (0, True), (1, True)], seen


def test_the_two_servers_warm_up_side_by_side_and_a_judge_that_cannot_is_left_to_its_fork(tmp_path, monkeypatch):
    from autograder.grading.judgebox import JudgeBox

    running, overlapped, order = [], [], []

    def busy(name):
        def warm(self, *args, **kwargs):
            running.append(name)
            time.sleep(0.3)
            overlapped.append(set(running))
            running.remove(name)
            order.append(name)
            if name == "judge" and fail_judge:
                raise SlotError("judge 0: the judge server exited")
            self.warm = True
        return warm

    fail_judge = False
    monkeypatch.setattr(JudgeBox, "warm_up", busy("judge"))
    monkeypatch.setattr(Slot, "request", lambda self, payload, timeout=60: busy("fork")(self))
    slot = Slot(0, tmp_path, sandboxed=False)
    slot.warm_up(judge_too=True)
    assert sorted(order) == ["fork", "judge"] and {"fork", "judge"} in overlapped, "one after the other"
    assert slot.warm and slot.judge.warm
    order.clear()
    slot.warm_up(judge_too=True)
    assert order == [], "warm already: nothing asked again"

    fail_judge, order[:] = True, []
    other = Slot(1, tmp_path, sandboxed=False)
    other.warm_up(judge_too=True)           # the judge's error is not the slot's
    assert sorted(order) == ["fork", "judge"] and other.warm and not other.judge.warm


def test_only_notebooks_that_call_backward_or_autograd_grad_load_what_a_gradient_call_loads():
    def nb(*sources):
        return {"cells": [{"cell_type": "markdown", "source": "call y.backward(g) to see"}]
                + [{"cell_type": "code", "source": s} for s in sources]}

    assert uses_gradients(nb("y.backward(torch.ones(3))")) and uses_gradients(nb(["g, = torch.autograd.", "grad(y, x)"]))
    assert not uses_gradients(nb("y = x.view(2, 3)", "x.requires_grad_()")), "markdown and requires_grad do not count"


def test_the_two_servers_load_what_a_gradient_call_loads_side_by_side_once(tmp_path, monkeypatch):
    from autograder.grading.judgebox import JudgeBox

    asked = []
    monkeypatch.setattr(JudgeBox, "load_grads", lambda self: (asked.append("judge"), setattr(self, "grads", True)))
    monkeypatch.setattr(Slot, "request", lambda self, payload, timeout=60: asked.append(payload["op"]) or {"ok": True})
    slot = Slot(0, tmp_path, sandboxed=False)
    slot.load_grads(judge_too=True)
    assert sorted(asked) == ["grads", "judge"] and slot.grads and slot.judge.grads
    asked.clear()
    slot.load_grads(judge_too=True)
    assert asked == [], "loaded already: nothing asked again"
    warm = Slot(1, tmp_path, sandboxed=False)
    warm.warm = warm.judge.warm = True
    warm.load_grads(judge_too=True)
    assert asked == [], "the optimizer's warm-up loads it too"


def test_a_kernel_finds_what_a_gradient_call_loads_in_its_fork_server_once_a_notebook_called_backward(tmp_path):
    import nbformat

    from autograder.grading.jobs import Job, execute

    probe = ("import sys, torch\nprint('loaded' if 'torch.fx.experimental.symbolic_shapes' in sys.modules "
             "else 'not loaded')")
    backward = "x = torch.ones(2, requires_grad=True)\n(x * 3).backward(torch.ones(2))\nprint(x.grad.tolist())"

    def job(*sources):
        return Job("s", "n", dict(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])))

    def printed(outcome):
        assert not outcome.problems and not outcome.flags, (outcome.problems, outcome.flags)
        return ["".join(o.get("text", "") for o in c["outputs"]).strip() for c in outcome.nb["cells"]]

    with SlotPool(1, sandboxed=False) as pool:
        slot = pool.started[0]
        before = printed(execute(job(probe, "x = torch.ones(2)"), slot))
        first = printed(execute(job(probe, backward), slot))
        after = printed(execute(job(probe, "x = torch.ones(2)"), slot))
        assert slot.grads and not slot.warm and not slot.judge.grads, "no judged test: the judge is not asked"
    assert before[0] == "not loaded", "a notebook without backward costs its slot nothing"
    assert first == ["loaded", "[3.0, 3.0]"], "loaded before the kernel that calls backward, and its gradient right"
    assert after[0] == "loaded", "every kernel after it finds it loaded"


def test_a_killed_kernel_is_seen_gone_within_milliseconds_not_a_tenth_of_a_second():
    import asyncio

    from autograder.grading.provisioner import SlotKernelManager

    class Gone(SlotKernelManager):
        polls = 0

        async def _async_is_alive(self):
            Gone.polls += 1
            return Gone.polls < 3       # gone at the third look, as a SIGKILLed fork is

    km = Gone()
    start = time.monotonic()
    asyncio.run(km._async_wait())
    waited = time.monotonic() - start
    assert Gone.polls == 3 and waited < 0.05, f"{waited:.3f} s for a kernel gone after 2 looks"


def test_a_kernels_sockets_try_a_refused_connection_again_within_milliseconds():
    """They connect before the forked kernel has bound its ports: zmq's default pause before it
    tries again, 100 ms, was most of each kernel's start."""
    import zmq

    from autograder.grading.provisioner import QuickReadyClient

    client = QuickReadyClient()
    sock = client.context.socket(zmq.DEALER)
    try:
        assert sock.getsockopt(zmq.RECONNECT_IVL) == 5 and sock.getsockopt(zmq.RECONNECT_IVL_MAX) == 100
    finally:
        sock.close(linger=0)
        client.context.destroy(linger=0)


def test_the_histogram_is_an_svg_whose_bars_count_the_scores():
    from autograder.grading.report import Report, StudentRow
    from autograder.grading.report_page import histogram_svg, render_html

    rows = [StudentRow(f"s{i}", "graded", score, score, 15.0, [], [], 0, 0.5)
            for i, score in enumerate([13.0, 13.0, 13.0, 7.0, 0.0, 0.0])]
    svg = histogram_svg(Report("a1<x>", rows, [], {}, None, None, 15.0, 1.0))
    heights = [float(h) for h in re.findall(r'<rect [^>]*height="([0-9.]+)"', svg)]
    assert len(heights) == 16, "one bar per point from 0 to 15"
    assert heights[13] == max(heights) and heights[0] == pytest.approx(heights[13] * 2 / 3, abs=0.1)
    assert heights[7] == pytest.approx(heights[13] / 3, abs=0.1) and sum(h > 0 for h in heights) == 3
    assert "a1&lt;x&gt;: 6 submissions" in svg and "<script" not in svg
    page = render_html(Report("a1", rows, [], {}, None, None, 15.0, 1.0))
    data = re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', page).group(1)
    assert base64.b64decode(data).decode().startswith("<svg ")
    assert histogram_svg(Report("a1", [], [], {}, None, None, 15.0, 1.0)) is None


def test_a_call_starts_a_slot_for_every_six_submissions_where_cores_are_few():
    from autograder.grading.pool import slots_worth_starting

    on_two_cores = [slots_worth_starting(n, jobs=3, cores=2) for n in (1, 3, 4, 6, 7, 16, 150)]
    assert on_two_cores == [1, 1, 1, 1, 2, 2, 2], on_two_cores
    assert [slots_worth_starting(n, jobs=17, cores=16) for n in (1, 4, 16, 150)] == [1, 4, 8, 16]
    assert slots_worth_starting(0, jobs=3, cores=2) == 1 and slots_worth_starting(50, jobs=2, cores=64) == 2
