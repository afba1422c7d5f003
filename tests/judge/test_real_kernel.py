"""The judge against a real IPython kernel (started here, outside the sandbox, with the agent loaded
as the install cell loads it): what a test hands over reaches the learner's function, and the
attacks on the judge's end fail with its error while the judge's objects stay as they were.  The
requests travel as the grader sends them: a silent execute_request whose user expression answers."""
from __future__ import annotations

import ast

import pytest

from autograder.judge import AGENT, Judge, wire
from judge_helpers import COURSE_FIXTURES, errors_of, make_course_fixtures


class RealKernel:
    """One kernel for this file's tests, its agent imported before any learner code."""

    def __init__(self, folder):
        from jupyter_client.manager import start_new_kernel

        self.km, self.kc = start_new_kernel(cwd=str(folder))
        self.run(f"import autograder.judge.agent as {AGENT}")

    def run(self, code: str) -> str:
        """Run learner code; what it printed (an error fails the test that asked)."""
        reply = self.kc.execute_interactive(code, timeout=120, output_hook=lambda msg: None)
        assert reply["content"]["status"] == "ok", reply["content"]
        return ""

    def rpc(self, request: dict):
        import json

        expression = f"{AGENT}.serve({json.dumps(request)!r}, globals()) or {AGENT}.last_reply"
        msg_id = self.kc.execute("", silent=True, store_history=False, user_expressions={"reply": expression})
        printed = []
        while True:
            msg = self.kc.get_iopub_msg(timeout=120)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["header"]["msg_type"] == "stream":
                printed.append(msg["content"]["text"])
            if msg["header"]["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        while True:
            reply = self.kc.get_shell_msg(timeout=120)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        text = reply["content"]["user_expressions"]["reply"]["data"]["text/plain"]
        return wire.loads(ast.literal_eval(text)), "".join(printed)

    def close(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kernel")
    (folder / "fixtures.py").write_text(COURSE_FIXTURES)
    kernel = RealKernel(folder)
    yield kernel
    kernel.close()


def test_a_conv2d_a_gru_and_a_model_of_the_courses_fixtures_reach_the_learners_function(real, tmp_path, monkeypatch):
    real.run("import copy, torch\ndef outputs(model, x):\n    return model(x)\ndef copied(model):\n    return copy.deepcopy(model)\n")
    fixtures = make_course_fixtures(tmp_path, monkeypatch)
    judge = Judge(real.rpc, fixtures)
    outputs = judge.run_cell("""
from fixtures import Stack
torch.manual_seed(0)
conv, gru, stack = nn.Conv2d(3, 4, 3, padding=1), nn.GRU(3, 5, num_layers=2), Stack()
x, seq, batch = torch.randn(2, 3, 6, 6), torch.randn(7, 2, 3), torch.randn(2, 7, 3)
ck.check_close(outputs(conv, x), conv(x).detach(), "the Conv2d's output")
out, h = outputs(gru, seq)
expected = gru(seq)
ck.check_close(out, expected[0].detach(), "the GRU's output")
ck.check_close(h, expected[1].detach(), "the GRU's hidden state")
ck.check_close(outputs(stack, batch), stack(batch).detach(), "the course's model's output")
c = copied(stack)
ck.check_equal((type(c) is Stack, c.rnn._flat_weight_refs[0]() is c.rnn.weight_ih_l0), (True, True), "the copy")
ck.ok("handed over")
""")
    assert outputs == [{"output_type": "stream", "name": "stdout", "text": "\u2713 handed over\n"}], outputs


def test_a_fused_switch_with_an_empty_buffer_fails_with_the_judges_error_and_the_optimizer_still_steps(real):
    real.run("def fuse(o):\n    for g in o.param_groups:\n        g['fused'] = True\n"
             "        for p in g['params']:\n            o.state[p]['momentum_buffer'] = torch.empty(0)\n")
    judge = Judge(real.rpc)
    errors = errors_of(judge.run_cell("""
m = nn.Linear(3, 2)
opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
m(torch.ones(1, 3)).sum().backward()
fuse(opt)
"""))
    assert errors and errors[0]["ename"] == "JudgeError" and "fused" in errors[0]["evalue"], errors
    assert not errors_of(judge.run_cell("opt.step()\nck.check_equal(opt.param_groups[0]['fused'], None, 'fused')"))


def test_a_result_of_gigabytes_over_four_bytes_fails_with_the_judges_error(real):
    real.run("def huge(x):\n    return x.expand(1 << 31)\n")
    errors = errors_of(Judge(real.rpc).run_cell("r = huge(torch.ones(1, requires_grad=True))"))
    assert errors and errors[0]["ename"] == "JudgeError" and "bigger than the judge makes" in errors[0]["evalue"], errors


def test_a_small_file_that_inflates_far_past_its_size_is_not_loaded(real):
    real.run("import zipfile, zlib\ndef bomb(path):\n"
             "    with zipfile.ZipFile(path, 'w', compression=zipfile.ZIP_DEFLATED) as z:\n"
             "        with z.open('archive/data.pkl', 'w', force_zip64=True) as f:\n"
             "            for _ in range(16):\n                f.write(bytes(4 << 20))\n")
    errors = errors_of(Judge(real.rpc).run_cell("""
with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "x.pt")
    bomb(path)
    ck.check_equal(os.path.getsize(path) < (2 << 20), True, "a small file")
    torch.load(path)
"""))
    assert errors and errors[0]["ename"] == "JudgeError" and "not loaded" in errors[0]["evalue"], errors


def test_an_agent_replaced_to_answer_deeply_nested_json_fails_with_the_judges_error(real):
    real.run(f"_serve = {AGENT}.serve\ndef nested(request, namespace):\n"
             f"    {AGENT}.last_reply = '{{\"result\": ' + '[' * 100000 + ']' * 100000 + '}}'\n"
             f"{AGENT}.serve = nested\n")
    try:
        with pytest.raises(wire.JudgeError):
            real.rpc({"op": "look_up", "names": ["x"]})
        errors = errors_of(Judge(real.rpc).run_cell("f(1)"))
        assert errors and errors[0]["ename"] == "JudgeError", errors
    finally:
        real.run(f"{AGENT}.serve = _serve")
