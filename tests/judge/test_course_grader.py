"""Through ``grade``: a real kernel in a sandbox, its agent loaded by the install cell, the hidden
tests from the gradebook, the judge's requests and answers over the kernel's own messages."""
from __future__ import annotations

from harness import SANDBOX
from judge_corpus import A7_ORACLE, A7_TWIN, COPY_TO_ORACLE, COPY_TO_TWIN, SNAPSHOT_OPTIMIZER_ORACLE, SNAPSHOT_OPTIMIZER_TWIN


@SANDBOX
def test_the_course_grader_scores_the_oracle_like_its_wrong_twin(tmp_path):
    """The same through ``grade``: a real kernel in a sandbox, the hidden tests from the gradebook."""
    from corpus import grade_with_the_course_grader
    from harness import scratch_course, submission

    subs = {"oracle": submission("a8_devices", {"copy_to": COPY_TO_ORACLE}),
            "twin": submission("a8_devices", {"copy_to": COPY_TO_TWIN})}
    graded = grade_with_the_course_grader(scratch_course(tmp_path, "a8_devices"), {"a8_devices": subs})["a8_devices"]
    oracle, twin = graded.scores["oracle"], graded.scores["twin"]
    assert oracle == twin, (oracle, twin)
    assert oracle["test_copy_to_hidden"] == (0.0, 2.0) and oracle["test_copy_to"] == (0.0, 1.0), oracle
    assert oracle["test_predictions"] == (1.0, 1.0)


@SANDBOX
def test_the_course_grader_scores_the_a7_oracle_like_its_wrong_twin(tmp_path):
    """The same through ``grade``: a real kernel, its agent replaying the recipes, the tests from the gradebook."""
    from corpus import auto_cells, grade_with_the_course_grader
    from harness import scratch_course, submission

    subs = {"oracle": submission("a7_graphs", {"reaches": A7_ORACLE}),
            "twin": submission("a7_graphs", {"reaches": A7_TWIN}),
            "reference": submission("a7_graphs")}
    graded = grade_with_the_course_grader(scratch_course(tmp_path, "a7_graphs"), {"a7_graphs": subs})["a7_graphs"]
    oracle, twin, reference = (graded.scores[k] for k in ("oracle", "twin", "reference"))
    assert oracle == twin, (oracle, twin)
    assert oracle["test_reaches_hidden"] == (0.0, 2.0) and oracle["test_reaches"] == (0.0, 1.0), oracle
    assert all(reference[gid][0] == reference[gid][1] for gid in auto_cells("a7_graphs")), reference


@SANDBOX
def test_the_course_grader_judges_6b_in_a_real_kernel_without_flooding_or_flags(tmp_path):
    """Through ``grade``: the oracle scores like its wrong twin, and a save_compact that writes the
    whole 1.6 MB storage behind a view loses its own points only (its file comes back by value
    without passing the output budget, and the cells after it still run)."""
    from corpus import grade_with_the_course_grader
    from harness import scratch_course, submission

    twin = SNAPSHOT_OPTIMIZER_TWIN
    subs = {"oracle": submission("a6b_boundaries", {"snapshot_optimizer": SNAPSHOT_OPTIMIZER_ORACLE}),
            "twin": submission("a6b_boundaries", {"snapshot_optimizer": twin}),
            "view": submission("a6b_boundaries", {"save_compact": "def save_compact(t, path):\n    torch.save(t, path)\n"})}
    graded = grade_with_the_course_grader(scratch_course(tmp_path, "a6b_boundaries"), {"a6b_boundaries": subs})
    graded = graded["a6b_boundaries"]
    oracle, view = graded.scores["oracle"], graded.scores["view"]
    assert oracle == graded.scores["twin"], (oracle, graded.scores["twin"])
    assert oracle["test_snapshot_optimizer"] == (0.0, 1.0) and oracle["test_snapshot_optimizer_hidden"] == (0.0, 2.0)
    assert view["test_save_compact"] == (0.0, 1.0) and view["test_save_compact_hidden"] == (0.0, 2.0), view
    assert all(s == m for k, (s, m) in view.items() if k.startswith("test_") and "save_compact" not in k), view
    errors = [o for c in graded.notebooks["view"].cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors and not any(o["ename"] == "JudgeError" for o in errors), errors
    assert any("writes the whole storage behind a view" in o["evalue"] for o in errors), errors


@SANDBOX
def test_the_judges_data_budget_still_stops_a_flood(tmp_path, monkeypatch):
    """With the data budget made small, a save_compact that returns big files passes it: the kernel is
    stopped there and the cells after it are not run, as a flood of output is stopped."""
    from autograder.grading import transport
    from corpus import grade_with_the_course_grader
    from harness import scratch_course, submission

    monkeypatch.setattr(transport, "JUDGE_DATA_LIMIT", 3 << 20)
    subs = {"view": submission("a6b_boundaries", {"save_compact": "def save_compact(t, path):\n    torch.save(t, path)\n"})}
    graded = grade_with_the_course_grader(scratch_course(tmp_path, "a6b_boundaries"), {"a6b_boundaries": subs})
    view = graded["a6b_boundaries"].scores["view"]
    assert view["test_save_compact_hidden"] == (0.0, 2.0) and view["test_hidden_grad_hidden"] == (0.0, 2.0), view
