"""The grading job as a Dask task: each worker thread keeps its own sandboxed slot."""
from __future__ import annotations

import atexit
import os
import tempfile
import threading
from pathlib import Path

from .jobs import Job, Outcome, execute
from .bwrap import probe
from .sandbox import Slot

_local = threading.local()
_lock = threading.Lock()
_count = 0
_base: Path | None = None
_slots: list[Slot] = []


def _slot(require_sandbox: bool) -> Slot:
    global _count, _base
    slot = getattr(_local, "slot", None)
    if slot is not None and require_sandbox and not slot.sandboxed:
        raise RuntimeError("this Dask worker grades without a sandbox and the run requires one")
    if slot is None:
        problem = probe()
        if problem is not None and require_sandbox:
            raise RuntimeError(f"this Dask worker cannot sandbox and the run requires it: {problem}")
        with _lock:
            if _base is None:
                _base = Path(tempfile.mkdtemp(prefix="copy-that-worker-"))
            index = 100 + _count + 10 * (os.getpid() % 50)
            _count += 1
        # the worker's own folder stands in for the course root: it is hidden like /tmp and /home
        slot = Slot(index, _base, sandboxed=problem is None)
        slot.start()
        _slots.append(slot)
        _local.slot = slot
    return slot


def run_job(job: Job) -> Outcome:
    """Run one grading job on this worker (the Dask task)."""
    return execute(job, _slot(job.require_sandbox))


@atexit.register
def _close() -> None:
    for slot in _slots:
        slot.release()
