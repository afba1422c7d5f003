"""What a grading call starts, and when: slots in the background, only as many as it has work for,
a failed start reported, a pool closed while its slots start; the cheap count of surely graded
students; the fork server's warm-up only for notebooks with an optimizer; the report's histogram.

No sandbox is started here: ``Slot.start`` is replaced by a stand-in."""
from __future__ import annotations

import base64
import re
import threading
import time

import pytest

from autograder.grading import pool as pool_module
from autograder.grading.bwrap import SlotError
from autograder.grading.jobs import uses_optimizer
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
