"""The judge's end: hidden tests run in the grader, the learner's functions in the kernel.

A judged cell's code runs here, with real torch and the course's check helpers (namespace.py); every
name the test uses that it does not define is a learner's function (a ``RemoteFunction``).  Calling
one sends its arguments *by value* to the kernel's agent (agent.py), each as its kind says
(kinds/), and rebuilds the answer: the result, and what the call did to its inputs, done to the
judge's own (call.py).  A result that requires grad joins the judge's autograd graph through a node
whose backward asks the kernel (autograd.py).  The kernel's answers are data, validated before use;
a forged answer can still claim facts the agent measures there, but a value can only be right by
being computed.  The judged cells of one notebook share one namespace and one ``Judge``.
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import io
import traceback
import types
from typing import Any, Callable

from .call import Call
from .lookup import look_up_names, names_read
from .namespace import RemoteFunction, compile_lock, make_namespace, printing_to
from .recorder import Recorder, graph_cell
from .session import Session


class Judge:
    """Runs the judged test cells of one notebook; ``rpc(request) -> (answer, printed)`` reaches the
    kernel's agent (and may be replaced between cells).  ``fixtures``: a course's modules that a
    judged cell may import by name and whose models go by value."""

    def __init__(self, rpc: Callable[[dict], tuple[dict, str]] | None = None,
                 fixtures: dict[str, types.ModuleType] | None = None):
        self.session = Session(rpc, fixtures)
        self.namespace: dict[str, Any] = {}
        self.looked_up: set[str] = set()

    @property
    def rpc(self):
        """The transport to the kernel's agent."""
        return self.session.rpc

    @rpc.setter
    def rpc(self, rpc) -> None:
        """Replace the transport (between cells)."""
        self.session.rpc = rpc

    # -- one cell ---------------------------------------------------------------------------
    def run_cell(self, source: str) -> list[dict]:
        """Run the cell's code here; return its outputs as a kernel would have shown them.

        The judged cells of one notebook share one namespace, as cells in a kernel do (a helper that
        one hidden test defines, a later one may use)."""
        out = io.StringIO()
        self.session.printed = out
        error = None
        with printing_to(out):
            try:
                with compile_lock:
                    tree = ast.parse(source)
                    code = compile(tree, "<hidden tests>", "exec")
                if not self.namespace:
                    self.namespace.update(make_namespace(self.session))
                self._bind_learners_names(tree)
                with self._recording(source):
                    exec(code, self.namespace)
            except BaseException as exc:  # the test's failure, shown as a kernel would show it
                if isinstance(exc, KeyboardInterrupt):
                    raise
                error = exc
        outputs: list[dict] = []
        if out.getvalue():
            outputs.append({"output_type": "stream", "name": "stdout", "text": out.getvalue()})
        if error is not None:
            tb = traceback.format_exception_only(type(error), error)
            outputs.append({"output_type": "error", "ename": type(error).__name__, "evalue": str(error),
                            "traceback": [t.rstrip("\n") for t in tb]})
        return outputs

    def _bind_learners_names(self, tree: ast.AST) -> None:
        """Names the cell uses and does not define stand for the learner's: functions called there,
        and names it only reads, fetched by value (lookup.py)."""
        nodes = list(ast.walk(tree))
        defined = set(self.namespace) | set(dir(builtins))
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                defined.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                defined.add(node.id)
        for node in nodes:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in defined:
                self.namespace[node.id] = RemoteFunction(self, node.id)
        names = names_read(nodes, self.namespace, lambda v: isinstance(v, RemoteFunction), self.looked_up)
        look_up_names(self.session, names, self.namespace, self.looked_up, lambda name: RemoteFunction(self, name))

    @contextlib.contextmanager
    def _recording(self, source: str):
        """A graph cell runs with the recorder on (recorder.py): its tensors go as recipes."""
        if not graph_cell(source):
            yield
            return
        if self.session.graphs is None:
            self.session.graphs = Recorder()
        self.session.graphing = True
        try:
            with self.session.graphs:
                yield
        finally:
            self.session.graphing = False

    # -- a call -----------------------------------------------------------------------------
    def call(self, name: str, args: tuple, kwargs: dict):
        """Call the learner's ``name`` in the kernel on ``args`` by value; the result, rebuilt here."""
        graphs = self.session.graphs
        if graphs is not None:
            graphs.paused += 1        # the judge's own torch calls are not the test's
        try:
            call = Call(self.session, name)
            return call.answer(self.session.ask(call.request(args, kwargs)))
        finally:
            if graphs is not None:
                graphs.paused -= 1
