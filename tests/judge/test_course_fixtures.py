"""An assignment's fixtures (``solutions/aN_slug/fixtures.py``): judged tests import them by name,
their model classes go to the learner's function by value, the judge loads the instructor's copy
and the kernel imports the released one from its working folder.

The in-process tests put the kernel's agent behind an rpc, as the other judge tests do; the end
to end one grades a scratch course in the sandbox."""
from __future__ import annotations

import json
import sys

import pytest

from autograder.judge import Judge
from autograder.grading.judged import fixture_modules
from autograder.judge import agent as judge_agent

FIXTURES = '''
import torch
from torch import nn


class TwoTower(nn.Module):
    """Two Linear towers whose outputs are added."""

    def __init__(self):
        super().__init__()
        self.left = nn.Linear(3, 2)
        self.right = nn.Linear(3, 2)

    def forward(self, x):
        return self.left(x) + self.right(x)
'''


@pytest.fixture
def kernel_side(tmp_path, monkeypatch):
    """The released fixtures in the 'kernel''s folder, importable there by name, as in a slot."""
    (tmp_path / "fixtures.py").write_text(FIXTURES)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "fixtures", raising=False)
    yield
    sys.modules.pop("fixtures", None)


def run(learner: str, test: str):
    namespace: dict = {}
    exec("import torch\nimport copy\n" + learner, namespace)

    def rpc(request: dict):
        judge_agent.serve(json.dumps(request), namespace)
        return json.loads(judge_agent.last_reply), ""

    judge = Judge(rpc, fixtures=fixture_modules({"fixtures": FIXTURES}))
    outputs = judge.run_cell(test)
    errors = [f"{o['ename']}: {o['evalue']}" for o in outputs if o["output_type"] == "error"]
    return errors, judge


TEST = '''
from fixtures import TwoTower
import fixtures
torch.manual_seed(0)
model = TwoTower()
ck.check_equal(n_parameters(model), 16, "n_parameters(TwoTower())")
made = copy_model(model)
ck.check_equal(type(made) is TwoTower and made is not model, True, "copy_model gives a new TwoTower")
x = torch.ones(1, 3)
ck.check_close(made(x), model(x), "the copy's output")
ck.check_equal(fixtures.TwoTower is TwoTower, True, "one module")
'''
LEARNER = '''
def n_parameters(model):
    return sum(p.numel() for p in model.parameters())

def copy_model(model):
    return copy.deepcopy(model)
'''


def test_a_model_of_the_fixtures_goes_to_the_learners_function_and_comes_back(kernel_side):
    errors, _ = run(LEARNER, TEST)
    assert errors == []
    errors, _ = run(LEARNER.replace("p.numel()", "1"), TEST)
    assert errors and "n_parameters(TwoTower()) is 4; expected 16" in errors[0]


def test_the_judged_import_gives_the_instructors_module_never_the_kernels(kernel_side):
    import importlib

    kernels = importlib.import_module("fixtures")          # what a learner's process would hold
    errors, judge = run("", "import fixtures as f\nck.check_equal(f.__file__, 'fixtures.py', 'where')\n")
    assert errors == []
    assert judge.namespace["f"] is judge.session.fixtures["fixtures"] is not kernels


def test_a_fixtures_file_that_fails_to_load_says_which():
    with pytest.raises(RuntimeError, match="fixtures file helpers.py failed to load: ZeroDivisionError"):
        fixture_modules({"helpers": "x = 1 / 0\n"})


def test_without_its_fixtures_the_judge_refuses_a_course_model(kernel_side):
    namespace: dict = {}
    exec(LEARNER, namespace)

    def rpc(request: dict):
        judge_agent.serve(json.dumps(request), namespace)
        return json.loads(judge_agent.last_reply), ""

    judge = Judge(rpc)                       # no fixtures given
    judge.run_cell("x = 1")
    judge.namespace["model"] = fixture_modules({"fixtures": FIXTURES})["fixtures"].TwoTower()
    [error] = [o for o in judge.run_cell("n_parameters(model)") if o["output_type"] == "error"]
    assert "cannot send a TwoTower" in error["evalue"]


def test_a_job_carries_the_instructors_fixtures_and_the_kernel_gets_the_released_copy(tmp_path):
    """Whatever a submission holds under the fixtures' name, the kernel's folder gets the release's
    file; the judge gets the instructor's source, in the job (so it travels to a Dask worker)."""
    import pickle

    from autograder.grading.runner import Grader
    from autograder.grading.state import Result
    from harness import scratch_course, submission, submit

    root = scratch_course(tmp_path / "c", "a8_devices")
    (root / "solutions" / "a8_devices" / "fixtures.py").write_text(FIXTURES)
    (root / "exercises" / "a8_devices" / "fixtures.py").write_text(FIXTURES + "# as released\n")
    path = submit(root, "a8_devices", "mallory", submission("a8_devices"))
    (path.parent / "fixtures.py").write_text("class TwoTower:\n    pass\n")
    (path.parent / "notes.txt").write_text("mine")
    grader = Grader(root, "a8_devices", log=lambda m: None)
    job = pickle.loads(pickle.dumps(grader.prepare("mallory", "a8_devices", Result("mallory"))))
    assert job.fixtures == {"fixtures": FIXTURES}
    assert job.files["fixtures.py"] == (FIXTURES + "# as released\n").encode()
    assert job.files["notes.txt"] == b"mine"
