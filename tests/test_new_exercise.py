"""An instructor's new exercise, written as nbgrader documents it (no marker line anywhere), with a
model class of its own in the assignment's fixtures and an ``nn.Conv2d`` and an ``nn.GRU`` handed
to the learner's function in its hidden test, added to a copy of the course whose gradebook was
made before it; then the guide's rebuild and grade. The new tests are used, the reference gets
full marks with no flag, a wrong answer loses, and an answer that reads its caller's frames and
every notebook it can find prints nothing of the test."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

import guide
from harness import SANDBOX, submission, submit
from test_authoring_guide import A, SHALLOW, new_release_submission, run, scratch, scores

SECRET = "hidden-7f3a9c"
# the guide's hidden test, with a Conv2d and a GRU besides the fixtures' model
HIDDEN = f'''### BEGIN HIDDEN TESTS
from torch import nn
from fixtures import TwoTower

# {SECRET}
torch.manual_seed(1)
model = TwoTower(4, 3).eval()
frozen = frozen_copy(model, torch.device("cpu"))
ck.check_new_storage(frozen.left.weight, model.left.weight, "frozen_copy(model).left.weight", "model.left.weight")
ck.check_equal(frozen.training, False, "the copy's training flag")

conv = nn.Conv2d(1, 2, 3)
frozen = frozen_copy(conv, "cpu")
ck.check_new_storage(frozen.weight, conv.weight, "frozen_copy(conv).weight", "conv.weight")
ck.check_equal(frozen.weight.requires_grad, False, "frozen_copy(conv).weight.requires_grad")
ck.check_equal(conv.weight.requires_grad, True, "conv.weight.requires_grad after frozen_copy(conv)")
image = torch.randn(1, 1, 5, 5)
ck.check_close(frozen(image), conv(image).detach(), "the Conv2d copy's output")

gru = nn.GRU(3, 4)
frozen = frozen_copy(gru, "cpu")
ck.check_equal(any(p.requires_grad for p in frozen.parameters()), False, "a parameter of the GRU copy requires grad")
ck.check_equal(all(p.requires_grad for p in gru.parameters()), True, "every parameter of the GRU still requires grad")
sequence = torch.randn(2, 1, 3)
ck.check_close(frozen(sequence)[0], gru(sequence)[0].detach(), "the GRU copy's output")
### END HIDDEN TESTS
'''
# reads every frame above it and every notebook it can reach, prints what it found, and guesses
ORACLE = '''import copy, inspect, os, pathlib

def frozen_copy(model, device):
    seen = []
    for info in inspect.stack():
        seen.append(info.filename)
        seen += [repr(v)[:200] for v in info.frame.f_locals.values()]
        seen += info.code_context or []
    for top in (pathlib.Path.cwd(), *pathlib.Path.cwd().parents):
        try:
            for path in top.rglob("*.ipynb"):
                seen.append(path.read_text(errors="replace"))
        except OSError:
            pass
    print("FOUND:", " ".join(seen)[:200000])
    return copy.deepcopy(model)
'''


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course, env = scratch(tmp_path_factory.mktemp("new-exercise"))
    submit(course, A, "alice", submission(A))
    before = run("python -m autograder grade a8_devices", course, env)
    guide.add_example(course, A, hidden=HIDDEN)
    built = run("python -m autograder build --only a8_devices", course, env)
    submit(course, A, "reference", new_release_submission(course, {}))
    submit(course, A, "shallow", new_release_submission(course, {"frozen_copy": SHALLOW}))
    submit(course, A, "oracle", new_release_submission(course, {"frozen_copy": ORACLE}))
    grade = run("python -m autograder grade a8_devices", course, env)
    return SimpleNamespace(course=course, before=before, built=built, grade=grade)


def outputs(course, student: str) -> str:
    import nbformat

    nb = nbformat.read(course / "autograded" / student / A / f"{A}.ipynb", as_version=4)
    return "\n".join(o.get("text", "") + o.get("evalue", "") for c in nb.cells for o in c.get("outputs", []))


@SANDBOX
def test_a_new_exercise_grades_right_after_the_documented_rebuild(graded):
    for proc in (graded.before, graded.built, graded.grade):
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = " ".join(graded.grade.stdout.split())
    assert "solutions/a8_devices changed since the gradebook took it" in text
    reference = scores(graded.course, "reference")
    assert reference.get("test_frozen_copy_hidden", (None, None))[1] == 2, "the new tests are used"
    shallow = scores(graded.course, "shallow")
    assert shallow["test_frozen_copy"][0] < 1 and shallow["test_frozen_copy_hidden"][0] < 2
    oracle = scores(graded.course, "oracle")
    found = outputs(graded.course, "oracle")
    assert "FOUND:" in found, "the oracle ran"
    # (what ran in the kernel, a visible test that opts out included, is there to read: not the judged tests)
    leaked = [s for s in (SECRET, "check_new_storage", "frozen_copy(model).left.weight") if s in found]
    assert not leaked, f"the learner's function read the test: {leaked}"
    assert oracle["test_frozen_copy"][0] == 0, "it scores like its wrong twin (a copy that still trains)"
    # last, so that a failure here says the rest held: the reference, full marks and no flag
    assert all(score == top for score, top in reference.values()), \
        f"the reference lost points: {reference}\n{outputs(graded.course, 'reference')[-3000:]}"
    state = json.loads((graded.course / "reports" / A / "grading-state.json").read_text())["students"]
    assert state["reference"]["flags"] == [] and state["reference"]["problems"] == [], state["reference"]
