"""The fork server: one per grading slot, running inside the slot's sandbox.

It imports torch and the kernel machinery once, then forks one fresh IPython kernel per
submission, so a submission pays neither the interpreter start nor ``import torch``.  It speaks
JSON lines on stdin/stdout with the grader:

    {"op": "run", "connection_file": ..., "cwd": ..., "limits": {...}}  -> {"pid": n}
    {"op": "poll"}                                                       -> {"status": null | code}
    {"op": "signal", "signum": n}                                        -> {"ok": true}
    {"op": "reap"}                                                       -> {"status": code}
    {"op": "warm"}                                                       -> {"ok": true}
    {"op": "grads"}                                                      -> {"ok": true}

``warm`` runs once what torch loads lazily (``_warm_up``): asked for before the first kernel whose
notebook uses an optimizer, so that a slot grading anything else never pays for it.  ``grads`` loads
only what a gradient call loads (``GRAD_MODULE``), for notebooks that call ``backward`` (the warm-up
loads it too).

``reap`` kills every process left in the sandbox but the server itself (the sandbox has its own
PID namespace, so nothing a submission started can hide outside it), waits for the kernel, and
removes the kernel objects that outlive processes in the sandbox's own IPC namespace and
``/dev``: SysV shared memory, semaphores and message queues, POSIX shared memory and queues.  Its
reply lists what it removed (``leftovers``): the grader flags the submission for it.
The kernel child closes the control pipe before any learner code runs, so it can neither read
nor forge the grader's messages; the server is not dumpable, so the kernel cannot ptrace it or
write its memory to reach the next submission.
"""
from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys

PR_SET_DUMPABLE = 4
# what torch.autograd.grad and backward(gradient) import on their first call with a gradient tensor
# (sympy, through torch.fx's symbolic shapes): a third of a second in every kernel and judge that
# computes one, loaded once in the server when a notebook calls backward
GRAD_MODULE = "torch.fx.experimental.symbolic_shapes"


def preload() -> None:
    """What every kernel needs, loaded once.  Nothing here may start a thread (fork safety)."""
    # A grading kernel has no debugger: without debugpy, ipykernel skips it.  That is one way in
    # less (debugpy listens on TCP), and 0.2 s less per kernel (importing it was half the start).
    sys.modules["debugpy"] = None
    import IPython  # noqa: F401
    import IPython.core.completerlib  # noqa: F401  (what IPKernelApp.initialize imports)
    import IPython.extensions.storemagic  # noqa: F401
    import ipykernel.debugger  # noqa: F401
    import pdb  # noqa: F401
    import sqlite3  # noqa: F401
    import tornado.queues  # noqa: F401
    import ipykernel.ipkernel  # noqa: F401
    import ipykernel.kernelapp  # noqa: F401
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import torch.nn  # noqa: F401
    import torch.nn.functional  # noqa: F401

    import autograder.kernel.checks  # noqa: F401
    import autograder.kernel.diagrams  # noqa: F401
    import autograder.kernel.guard  # noqa: F401        (the install cell's imports: fresh in each fork)
    import autograder.judge.agent  # noqa: F401

    # what IPKernelApp.initialize would import or look up in every kernel (a third of its start)
    import faulthandler  # noqa: F401
    import IPython.core.debugger  # noqa: F401
    import IPython.core.oinspect  # noqa: F401
    import IPython.utils.wildcard  # noqa: F401
    import psutil  # noqa: F401
    import tornado.platform.asyncio  # noqa: F401
    from jupyter_client import localinterfaces

    localinterfaces.localhost()      # the sandbox's interfaces, found once (they are the kernel's)


def _warm_up(torch) -> None:
    """Run once what the exercises run, so the imports torch makes lazily on first use (an
    optimizer's first step pulls in torch._dynamo and sympy: over 2 s) happen here, not in
    every kernel.  Tiny tensors: no intra-op thread pool is started.  The random generator is
    put back where a new process has it, so a kernel draws what a freshly started one draws."""
    import copy
    import io

    rng = torch.random.get_rng_state()

    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))
    for opt in (torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), torch.optim.Adam(model.parameters())):
        model(torch.randn(8, 3)).pow(2).sum().backward()
        opt.step()
        opt.zero_grad()
    twin = copy.deepcopy(model)
    twin.load_state_dict(model.state_dict())
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "x": torch.arange(6.0)[2:]}, buffer)
    buffer.seek(0)
    torch.load(buffer)
    with torch.no_grad(), torch.inference_mode():
        model.eval()(torch.randn(2, 3))
    torch.random.set_rng_state(rng)


def load_grads() -> None:
    """Load ``GRAD_MODULE`` once, and keep the collector off it in every fork (as after preload)."""
    if GRAD_MODULE not in sys.modules:
        import gc

        __import__(GRAD_MODULE)
        gc.collect()
        gc.freeze()


def _apply_limits(limits: dict) -> None:
    def cap(which: int, value) -> None:
        if value:
            resource.setrlimit(which, (int(value), int(value)))

    cap(resource.RLIMIT_AS, limits.get("memory_bytes"))
    cap(resource.RLIMIT_CPU, limits.get("cpu_seconds"))
    cap(resource.RLIMIT_NPROC, limits.get("processes"))
    cap(resource.RLIMIT_FSIZE, limits.get("file_bytes"))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _kernel_child(request: dict) -> None:
    """Runs in the forked child: become a fresh kernel.  Never returns."""
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.closerange(3, 65536)  # the control pipe and anything else inherited
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        import tempfile

        cwd = request["cwd"]
        os.environ["HOME"] = cwd
        os.environ.pop("JPY_PARENT_PID", None)
        os.environ["NBGRADER_EXECUTION"] = "autograde"   # as nbgrader's own autograde sets it
        _apply_limits(request.get("limits", {}))
        # IPython's and Jupyter's configuration come from a folder made now, under a random name:
        # a submission's .ipython/ (startup files, profiles) or .jupyter/ is never read
        config_dir = tempfile.mkdtemp(prefix=".kernel-config-", dir=cwd)
        for var in ("IPYTHONDIR", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR"):
            os.environ[var] = config_dir
        os.environ.pop("JUPYTER_PATH", None)
        os.environ.pop("JUPYTER_CONFIG_PATH", None)
        sys.stdin = open(os.devnull)
        # no history database: IPython's SQLite file (created and synced for every kernel) was the
        # other third of the start; the session's input history stays in memory (In, _ih)
        sys.argv = ["ipykernel_launcher", "-f", request["connection_file"], "--HistoryManager.enabled=False"]
        from ipykernel.kernelapp import IPKernelApp

        # IPython also reads ipython_kernel_config.py from the working folder: initialize from /
        os.chdir("/")
        app = IPKernelApp.instance()
        app.initialize(sys.argv[1:])
        os.chdir(cwd)
        sys.path[0:0] = [cwd] if cwd not in sys.path else []
        app.start()
    finally:
        os._exit(0)


def _reply(out, payload: dict) -> None:
    out.write(json.dumps(payload) + "\n")
    out.flush()


def _kill_everything_else(child: int | None) -> None:
    """Kill what the last kernel left behind.

    In the sandbox (its own PID namespace, flagged by the launcher) that is every process the
    server may signal but itself and the namespace's init.  Without a sandbox only the kernel's
    session can be reached: a process that left it survives, which is why grading without
    bubblewrap warns loudly.
    """
    if os.environ.get("COPY_THAT_PIDNS") == "1" and os.getpid() < 100:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
    elif child is not None:
        try:
            os.killpg(child, signal.SIGKILL)
        except ProcessLookupError:
            pass


IPC_RMID = 0
SYSV = (("shm", "shmctl", "shared memory segment"), ("sem", "semctl", "semaphore set"),
        ("msg", "msgctl", "message queue"))
POSIX_DIRS = ("/dev/shm", "/dev/mqueue")


def remove_leftovers(proc: str = "/proc/sysvipc", dirs=POSIX_DIRS) -> list[str]:
    """Remove every SysV IPC object of this IPC namespace and every file of the POSIX IPC folders;
    what was removed, in words.  Only ever called in the sandbox, whose namespaces are its own."""
    libc = ctypes.CDLL(None, use_errno=True)
    removed: list[str] = []
    for kind, call, what in SYSV:
        try:
            lines = open(f"{proc}/{kind}").read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 2:
                continue
            ident = int(fields[1])
            size = f" of {int(fields[3]):,} bytes" if kind == "shm" and len(fields) > 3 else ""
            args = (ident, 0, IPC_RMID) if kind == "sem" else (ident, IPC_RMID, None)
            if getattr(libc, call)(*args) == 0:
                removed.append(f"a SysV {what}{size}")
    for folder in dirs:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            try:
                size = os.lstat(path).st_size
                os.unlink(path)
                removed.append(f"{path} ({size:,} bytes)")
            except IsADirectoryError:
                import shutil

                shutil.rmtree(path, ignore_errors=True)
                removed.append(f"{path}/")
            except OSError:
                pass
    return removed


def reap(child: int | None, status: int | None) -> dict:
    """End a submission in this server's sandbox: every other process killed, the child's exit
    status, zombies collected, what it left in the sandbox removed (named in the reply)."""
    _kill_everything_else(child)
    if child is not None and status is None:
        try:
            _, code = os.waitpid(child, 0)
            status = os.waitstatus_to_exitcode(code)
        except ChildProcessError:
            status = -9
    while True:      # any other process left to us (re-parented zombies)
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
    in_sandbox = os.environ.get("COPY_THAT_PIDNS") == "1" and os.getpid() < 100
    return {"status": status, "leftovers": remove_leftovers() if in_sandbox else []}


def serve() -> int:
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    import runpy

    # run from its file, not imported: the kernels forked from here never load autograder.grading
    deny_keyrings = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "nokeys.py"),
                                   run_name="copy_that_nokeys")["deny_keyrings"]
    refused = deny_keyrings()        # for this server and every kernel it forks
    if refused:
        print(f"kernel keyrings stay open to submissions: {refused}", file=sys.stderr)
    preload()
    # what is loaded now is shared with every kernel: keep the collector from touching it there
    # (each page it writes to is copied into the kernel)
    import gc

    gc.collect()
    gc.freeze()
    inp, out = sys.stdin, sys.stdout
    sys.stdout = sys.stderr  # nothing else may write on the control pipe
    child: int | None = None
    status: int | None = None
    warm = False
    _reply(out, {"ready": True})
    while True:
        line = inp.readline()
        if not line:
            break
        request = json.loads(line)
        op = request.get("op")
        if op == "run":
            status = None
            child = os.fork()
            if child == 0:
                _kernel_child(request)
            _reply(out, {"pid": child})
        elif op == "poll":
            if child is not None and status is None:
                pid, code = os.waitpid(child, os.WNOHANG)
                if pid == child:
                    status = os.waitstatus_to_exitcode(code)
            _reply(out, {"status": status if child is not None else 0})
        elif op == "signal":
            if child is not None and status is None:
                try:
                    os.killpg(child, int(request["signum"]))
                except ProcessLookupError:
                    pass
            _reply(out, {"ok": True})
        elif op == "reap":
            _reply(out, reap(child, status))
            child = None
        elif op == "warm":
            if not warm:
                import torch

                _warm_up(torch)
                gc.collect()
                gc.freeze()
                warm = True
            _reply(out, {"ok": True})
        elif op == "grads":
            load_grads()
            _reply(out, {"ok": True})
        elif op == "exit":
            break
    return 0


if __name__ == "__main__":
    # the folder that holds the grader's own package (the command line says where), first on the
    # path: that package is the one the sandbox shows, whatever the environment has installed
    if len(sys.argv) > 1:
        sys.path.insert(0, sys.argv[1])
    code = serve()
    sys.stderr.flush()
    os._exit(code)     # no interpreter teardown of torch and the kernel machinery: the slot is done
