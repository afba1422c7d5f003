"""The judge server: one per grading slot, in a sandbox of its own beside the kernel's.

It imports torch and the judge once, then forks one judge per submission, so a submission pays
neither the interpreter's start nor ``import torch``.  It is started as a file, in isolated mode,
with the folder holding the package and the number of its control socket on its command line,
and speaks JSON lines with the grader on that socket:

    {"op": "fork", "limits": {...}, "warm": bool} and the judge's end of its pipe
        (SCM_RIGHTS)                                                              -> {"pid": n}
    {"op": "reap"}                                                                -> {"status": code}
    {"op": "warm"}                                                                -> {"ok": true}
    {"op": "grads"}                                                               -> {"ok": true}
    {"op": "exit"}

``reap`` kills every process of the sandbox but the server (its own PID namespace: nothing the
judge started can hide outside it) and says how the judge ended (a negative number: the signal
that killed it).  The judge closes the control socket before it reads anything, so it can neither
read nor forge the grader's orders; the server is not dumpable, so the judge cannot write its memory
to reach the next submission.

The judge (``run_judge``) runs the cells the grader sends it through ``judgepipe`` and sends each
request of the test to the grader, which relays it to the kernel; it parses the kernel's answer
itself (``parse_answer``), in time linear in its length, in this process and no other.
"""
from __future__ import annotations

import codecs
import ctypes
import json
import os
import resource
import signal
import socket
import sys

PR_SET_DUMPABLE = 4


def _judge_classes():
    """The judge and its error: the one place the judge is imported."""
    from autograder.judge import Judge, JudgeError

    return Judge, JudgeError


class DeadKernelError(RuntimeError):
    """The kernel died while the judge waited for its answer (the grader says so)."""


def parse_answer(text: str) -> dict:
    """The agent's answer from the text the kernel sent: the repr of a str that holds JSON.

    Read in time linear in its length, whatever the kernel sent: the quotes stripped, the escapes
    decoded by the C codec, then ``json.loads``; no Python parser, no lock.  Anything that is not
    such a text raises ``ValueError``."""
    if len(text) < 2 or text[0] not in "'\"" or text[-1] != text[0]:
        raise ValueError("not the repr of a str")
    # characters past Latin-1 become \\u escapes first, which the codec decodes back
    body = text[1:-1].encode("latin-1", "backslashreplace")
    answer = json.loads(codecs.decode(body, "unicode_escape"))
    if not isinstance(answer, dict):
        raise ValueError("not an object")
    return answer


def preload() -> None:
    """What every judge needs, loaded once (nothing here may start a thread: fork safety)."""
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import torch.nn  # noqa: F401
    import torch.nn.functional  # noqa: F401

    Judge, _ = _judge_classes()
    Judge(None).run_cell("x = torch.ones(3)\nck.check_close(x.clone(), x, 'x')\n")


def warm_up() -> None:
    """Run once what torch loads lazily on first use (an optimizer's first step pulls in
    torch._dynamo: nearly two seconds), here rather than in every judge; asked for by the first
    submission whose tests use an optimizer, or as the slot starts for a call whose assignments
    use one, so that assignments without one never pay for it."""
    import gc

    import torch

    from autograder.grading import forkserver

    forkserver._warm_up(torch)
    gc.collect()
    gc.freeze()


def _limit(limits: dict) -> None:
    """The judge's limits: its address space may grow by ``memory_bytes`` past what it holds at
    the fork (torch's libraries and the server's heap), CPU time, file size."""
    held = 0
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                held = int(line.split()[1]) * 1024
    memory, cpu, files = limits.get("memory_bytes"), limits.get("cpu_seconds"), limits.get("file_bytes")
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (held + int(memory), held + int(memory)))
    if cpu:
        resource.setrlimit(resource.RLIMIT_CPU, (int(cpu), int(cpu) + 5))   # SIGXCPU, then SIGKILL
    if files:
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(files), int(files)))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_judge(sock: socket.socket, fixtures: dict[str, str] | None = None) -> None:
    """Run the cells the grader sends on ``sock`` in one judge, until the grader closes it;
    ``fixtures``: the course's fixtures files (module name -> source), importable by judged cells."""
    from autograder.grading.judged import fixture_modules
    from autograder.grading.judgepipe import (ANSWER, CELL, FAILED, OUTPUTS, REQUEST, JudgeEnd,
                                              split_answer)

    Judge, JudgeError = _judge_classes()
    end = JudgeEnd(sock)

    def rpc(request: dict) -> tuple[dict, str]:
        end.send(REQUEST, json.dumps(request).encode())
        kind, payload = end.read()
        if kind == FAILED:
            failed = json.loads(payload)
            error, message = failed.get("error"), str(failed.get("message", ""))
            if error == "TimeoutError":
                raise TimeoutError(message)
            if error == "DeadKernel":
                raise DeadKernelError(message)
            raise JudgeError(message)
        if kind != ANSWER:
            raise EOFError
        text, printed = split_answer(payload)
        try:
            return parse_answer(text), printed
        except (ValueError, UnicodeError, RecursionError, MemoryError):
            raise JudgeError("the kernel's agent answered something that is not JSON") from None

    try:
        modules, broken = fixture_modules(fixtures or {}), ""
    except RuntimeError as exc:      # the course's fixtures file is broken: every judged test says so
        modules, broken = {}, str(exc)
    judge = Judge(rpc, fixtures=modules)
    while True:
        kind, payload = end.read()
        if kind != CELL:
            return
        if broken:
            outputs = [{"output_type": "error", "ename": "FixturesError", "evalue": broken}]
        else:
            outputs = judge.run_cell(payload.decode("utf-8", "surrogatepass"))
        sent = []
        for o in outputs:
            if o.get("output_type") == "stream":
                sent.append({"output_type": "stream", "name": o.get("name", "stdout"), "text": o.get("text", "")})
            elif o.get("output_type") == "error":
                sent.append({"output_type": "error", "ename": o.get("ename", ""), "evalue": o.get("evalue", "")})
        end.send(OUTPUTS, json.dumps(sent).encode())


def _judge_child(control: socket.socket, pipe: socket.socket, request: dict) -> None:
    """Runs in the forked child: become the submission's judge.  Never returns."""
    try:
        os.setsid()
        control.close()
        # nothing of the host but its pipe: no log file to fill, no descriptor of the server's
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        keep = pipe.fileno()
        os.closerange(3, keep)
        os.closerange(keep + 1, 65536)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _limit(request.get("limits", {}))
        import tempfile

        os.chdir(request["cwd"])
        tempfile.tempdir = request["cwd"]    # the test's temporary folders: the judge's scratch folder
        try:
            run_judge(pipe, request.get("fixtures"))
        except EOFError:
            pass
    finally:
        os._exit(0)


class _Control:
    """JSON lines on the control socket, with the file descriptors that come with them."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buffer = b""
        self.fds: list[int] = []

    def read(self) -> dict | None:
        while b"\n" not in self.buffer:
            data, fds, _, _ = socket.recv_fds(self.sock, 1 << 16, 4)
            self.fds += fds
            if not data:
                return None
            self.buffer += data
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    def reply(self, payload: dict) -> None:
        self.sock.sendall(json.dumps(payload).encode() + b"\n")


def serve(control_fd: int) -> int:
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    from autograder.grading.forkserver import load_grads, reap
    from autograder.grading.nokeys import deny_keyrings

    refused = deny_keyrings()        # for this server and every judge it forks
    if refused:
        print(f"kernel keyrings stay open to the judges: {refused}", file=sys.stderr)
    preload()
    # the judged tests see what a test cell sees in the kernel (nbgrader's own autograde sets it)
    os.environ["NBGRADER_EXECUTION"] = "autograde"
    import gc

    gc.collect()
    gc.freeze()     # what is loaded now is shared with every judge: the collector leaves it alone there
    control = _Control(socket.socket(fileno=control_fd))
    child: int | None = None
    status: int | None = None
    warm = False
    control.reply({"ready": True})
    while True:
        request = control.read()
        if request is None or request.get("op") == "exit":
            break
        if request.get("op") == "fork" and control.fds:
            pipe = socket.socket(fileno=control.fds.pop(0))
            if request.get("warm") and not warm:
                warm_up()
                warm = True
            status = None
            child = os.fork()
            if child == 0:
                _judge_child(control.sock, pipe, request)
            pipe.close()
            control.reply({"pid": child})
        elif request.get("op") == "warm":       # (a fork asking for it warms up too)
            if not warm:
                warm_up()
                warm = True
            control.reply({"ok": True})
        elif request.get("op") == "grads":      # what a gradient call loads (forkserver.GRAD_MODULE)
            load_grads()
            control.reply({"ok": True})
        elif request.get("op") == "reap":
            control.reply(reap(child, status))
            child = None
        else:
            control.reply({"error": "unknown request"})
    return 0


if __name__ == "__main__":
    # the folder that holds the grader's own package first on the path (see bwrap.server_command)
    sys.path.insert(0, sys.argv[1])
    code = serve(int(sys.argv[2]))
    sys.stderr.flush()
    os._exit(code)     # no interpreter teardown of torch and the judge: the slot is done
