"""Whole assignments judged: an instructor's notebook's cells run next to an answer (as in the kernel)
or with its judged test cells run by a Judge whose 'kernel' is a namespace served in a thread of its
own, and the verdicts of the two compared cell for cell."""
from __future__ import annotations

import re

import nbformat

from autograder.grading.judged import is_judged
from autograder.judge import Judge
from autograder.learner.cells import role
from harness import source_notebook
from judge_helpers import errors_of, serve

JUDGED_ASSIGNMENTS = ["a1_views", "a2_clone", "a3_detach", "a4_grad_modes", "a5_copy", "a6_deepcopy", "a6b_boundaries",
                      "a7_graphs", "a8_devices", "a9_capstone"]


def source_cells(assignment: str) -> list[tuple]:
    """The instructor's notebook's code cells in order: (grade_id, is_test, source)."""
    nb = nbformat.read(source_notebook(assignment), as_version=4)
    return [(role(c).grade_id, role(c).is_test, c.source) for c in nb.cells if c.cell_type == "code"]


def only_exercise(cells: list[tuple], exercise: str | None) -> list[tuple]:
    """The cells that test one exercise (with every cell that is not a test); all, for None."""
    own = re.compile(rf"^test_{re.escape(exercise or '')}(_hidden|_\d+)?$")
    return [c for c in cells if exercise is None or not c[1] or own.match(c[0] or "")]


def in_kernel_cells(cells: list[tuple], answers: dict[str, str]) -> dict[str, str | None]:
    """Each test cell's failure (``ename: evalue``, or None) with the tests run next to the answer."""
    namespace: dict = {"__name__": "__main__"}
    out = {}
    for gid, is_test, source in cells:
        try:
            exec(compile(answers.get(gid, source), f"<{gid}>", "exec"), namespace)
            if is_test:
                out[gid] = None
        except Exception as exc:  # noqa: BLE001 - the cell's failure is what is compared
            if is_test:
                out[gid] = f"{type(exc).__name__}: {exc}"
    return out


def judged_cells(cells: list[tuple], answers: dict[str, str]) -> dict[str, str | None]:
    """The same, with every judged test cell run by a Judge whose kernel is a namespace of its own."""
    import threading

    namespace: dict = {"__name__": "__main__"}

    def rpc(request: dict):
        # in a thread of its own, as a kernel is a process of its own: a learner's function that
        # walks up its callers' frames finds the agent, never the judge's test
        reply = []
        serving = threading.Thread(target=lambda: reply.append(serve(request, namespace)))
        serving.start()
        serving.join()
        return reply[0], ""
    judge = Judge(rpc)
    out = {}
    for gid, is_test, source in cells:
        if is_test and is_judged(source):
            errors = errors_of(judge.run_cell(source))
            out[gid] = f"{errors[0]['ename']}: {errors[0]['evalue']}" if errors else None
            continue
        try:
            exec(compile(answers.get(gid, source), f"<{gid}>", "exec"), namespace)
            if is_test:
                out[gid] = None
        except Exception as exc:  # noqa: BLE001
            if is_test:
                out[gid] = f"{type(exc).__name__}: {exc}"
    return out


def same_verdicts(kernel: dict, judged: dict) -> list[str]:
    """Cells where the judge and the kernel disagree: pass or fail, and a check's message word for word
    (a learner's own exception is named by the judge as raised by the function, so only its name counts)."""
    bad = []
    for gid in kernel:
        k, j = kernel[gid], judged[gid]
        if (k is None) != (j is None):
            bad.append(f"{gid}: kernel {k!r}, judge {j!r}")
        elif k is not None and k.startswith("CheckFailed") and k != j:
            bad.append(f"{gid}: kernel {k!r}, judge {j!r}")
        elif k is not None and k.split(":")[0] != j.split(":")[0]:
            bad.append(f"{gid}: kernel {k!r}, judge {j!r}")
    return bad


# answers that read the test calling them (test_oracles.py, test_course_grader.py), and their wrong twins
COPY_TO_ORACLE = '''
import sys

def copy_to(t, device):
    frame = sys._getframe(1)
    while frame is not None:             # a caller that checks for new memory is a test: copy for it
        if "check_new_storage" in frame.f_code.co_names:
            return t.to(device, copy=True)
        frame = frame.f_back
    return t.to(device)
'''
COPY_TO_TWIN = "def copy_to(t, device):\n    return t.to(device)\n"

A7_ORACLE = '''
import dis, sys

def reaches(output, leaf):
    """Reads the expected answer from the caller's next instructions: check_equal(reaches(...), True, ...)."""
    frame = sys._getframe(1)
    for ins in dis.get_instructions(frame.f_code):
        if ins.offset <= frame.f_lasti:
            continue
        if ins.opname == "LOAD_CONST" and type(ins.argval) is bool:
            return ins.argval
        if ins.opname.startswith(("CALL", "STORE", "RETURN", "POP")):
            break
    return output.grad_fn is not None
'''
A7_TWIN = "def reaches(output, leaf):\n    return output.grad_fn is not None\n"

SNAPSHOT_OPTIMIZER_ORACLE = '''
import copy
import sys

def snapshot_optimizer(optimizer):
    frame = sys._getframe(1)
    while frame is not None:             # a caller that checks for new memory is a test: copy for it
        if "check_new_storage" in frame.f_code.co_names:
            return copy.deepcopy(optimizer.state_dict())
        frame = frame.f_back
    return optimizer.state_dict()
'''
SNAPSHOT_OPTIMIZER_TWIN = "def snapshot_optimizer(optimizer):\n    return optimizer.state_dict()\n"

SNAPSHOT_ORACLE = '''
import sys

def snapshot(t):
    frame = sys._getframe(1)
    while frame is not None:             # a caller that checks for new memory is a test: copy for it
        if "check_new_storage" in frame.f_code.co_names:
            return t.detach().clone()
        frame = frame.f_back
    return t.detach()
'''
