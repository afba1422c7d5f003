"""The fast path for the answer corpus: run graded notebooks without kernels.

``python tests/inprocess.py JOBS_DIR`` reads ``JOBS_DIR/*.ipynb``, and writes each one executed
to ``JOBS_DIR/<name>.out.ipynb``.  The process imports torch and IPython once, then forks one
child per notebook (two at a time); the child runs the code cells in a fresh IPython shell (no
kernel, no messaging) and records, in order, what a kernel would have sent nbclient: stdout and
stderr as stream outputs (consecutive writes joined, as nbclient joins them), the value of a
bare last expression as ``execute_result``, an exception as an ``error`` output.

This is test machinery for honest answers only: the answers are the project's own.  That it
scores like plain ``nbgrader autograde`` is proven cell for cell on a sample of the corpus
(``tests/test_exercises.py``).
"""
from __future__ import annotations

import io
import os
import sys
import time
from pathlib import Path

NOTEBOOK_LIMIT = 120   # seconds for a whole notebook: a runaway answer is killed, its cells get no output


class _Stream(io.TextIOBase):
    def __init__(self, outputs: list, name: str):
        self.outputs, self.name = outputs, name

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if text:
            last = self.outputs[-1] if self.outputs else None
            if last is not None and last.get("output_type") == "stream" and last["name"] == self.name:
                last["text"] += text
            else:
                self.outputs.append({"output_type": "stream", "name": self.name, "text": text})
        return len(text)


_outputs: list = []


def _shell():
    """One IPython shell, made before any fork: each child starts from a fresh copy of it."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    class Shell(InteractiveShell):
        # the error as a kernel reports it (name and message); the traceback's text is not
        # formatted: nothing scores it, and formatting was most of a failing notebook's time
        def showtraceback(self, exc_tuple=None, *args, **kwargs):
            etype, value, _ = self._get_exc_info(exc_tuple)
            _outputs.append({"output_type": "error", "ename": etype.__name__, "evalue": str(value),
                             "traceback": [f"{etype.__name__}: {value}"]})

        def showsyntaxerror(self, filename=None, running_compiled_code=False):
            self.showtraceback()

    config = Config()
    config.HistoryManager.enabled = False   # no history database, no saving thread
    shell = Shell.instance(config=config)
    # a bare last expression becomes an execute_result below, as in a kernel, not printed text
    shell.displayhook.write_output_prompt = lambda: None
    shell.displayhook.write_format_data = lambda *args, **kwargs: None
    return shell


def _run(shell, nb_path: Path, out_path: Path) -> None:
    """In the forked child: execute every code cell, write the notebook with its outputs."""
    import json

    import nbformat

    nb = nbformat.v4.reads(nb_path.read_text())   # the format as written, without schema validation
    os.chdir(nb_path.parent / (nb_path.stem + ".cwd"))
    outputs = _outputs
    sys.stdout, sys.stderr = _Stream(outputs, "stdout"), _Stream(outputs, "stderr")
    count = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        outputs.clear()
        count += 1
        result = shell.run_cell(cell.source, store_history=False, silent=False)
        if result.result is not None and not result.error_in_exec:
            outputs.append({"output_type": "execute_result", "execution_count": count, "metadata": {},
                            "data": {"text/plain": repr(result.result)}})
        cell.outputs = [nbformat.from_dict(o) for o in outputs]
        cell.execution_count = count
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    out_path.write_text(json.dumps(nb))


def main(jobs: Path) -> int:
    os.environ.setdefault("MPLBACKEND", "agg")
    import torch

    torch.set_num_threads(1)
    from autograder.grading.forkserver import _warm_up, preload

    preload()   # what the grader's fork server loads and runs once, before forking kernels
    _warm_up(torch)   # (which it runs for notebooks that use an optimizer)

    pending = sorted(p for p in jobs.glob("*.ipynb") if not p.name.endswith(".out.ipynb"))
    # what each child uses to read and write its notebook, loaded here once: imported in the
    # children, nbformat's schema machinery was a third of the fast path's time
    import nbformat

    if pending:
        nbformat.v4.reads(pending[0].read_text())
    shell = _shell()
    # what is loaded now is shared with every child: keep the collector from touching it there
    # (each page it writes to would be copied into the child)
    import gc

    gc.collect()
    gc.freeze()
    running: dict[int, tuple[Path, float]] = {}
    while pending or running:
        while pending and len(running) < 2:
            path = pending.pop(0)
            (path.parent / (path.stem + ".cwd")).mkdir(exist_ok=True)
            pid = os.fork()
            if pid == 0:
                try:
                    _run(shell, path, path.with_suffix(".out.ipynb"))
                finally:
                    os._exit(0)
            running[pid] = (path, time.monotonic())
        pid, _ = os.waitpid(-1, os.WNOHANG)
        if pid:
            running.pop(pid, None)
            continue
        for pid, (path, started) in list(running.items()):
            if time.monotonic() - started > NOTEBOOK_LIMIT:
                os.kill(pid, 9)
        time.sleep(0.002)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1])))
