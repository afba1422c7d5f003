"""Devices on a real GPU: lecture 08's GPU section and ``copy_to`` of assignment 8.

The tests that need CUDA are skipped, with a reason, on a machine without one (they never count
as passed there). One test runs everywhere else: the lecture skips its GPU section cleanly, each GPU
cell saying what it would show on a GPU.
"""
from __future__ import annotations

import nbformat
import pytest
import torch
from nbclient import NotebookClient

from autograder.course.layout import solution_sources
from harness import ROOT

LECTURE = ROOT / "course" / "08_devices_gpu.ipynb"
SOLUTION = ROOT / "solutions" / "a8_devices" / "a8_devices.ipynb"
SKIP_MESSAGE = "No CUDA device here: the GPU section is skipped"
SKIPPED_CELL = "Skipped, no CUDA device. On a GPU this cell shows"

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="no CUDA device: GPU tests need one")


def storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


@pytest.fixture(scope="module")
def copy_to():
    """The reference ``copy_to``, taken from the solution notebook."""
    source = solution_sources(nbformat.read(SOLUTION, as_version=4))["copy_to"]
    namespace = {"torch": torch}
    exec(compile(source, f"{SOLUTION.name}:copy_to", "exec"), namespace)
    return namespace["copy_to"]


@pytest.fixture(scope="module")
def executed_lecture() -> nbformat.NotebookNode:
    """Lecture 08 run top to bottom in a fresh kernel on this machine."""
    nb = nbformat.read(LECTURE, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(LECTURE.parent)}}).execute()
    return nb


def text_of(cell: nbformat.NotebookNode) -> str:
    parts = []
    for o in cell.get("outputs", []):
        if o.output_type == "stream":
            parts.append(o.text)
        elif o.output_type in ("execute_result", "display_data"):
            parts.append(o.get("data", {}).get("text/plain", ""))
        elif o.output_type == "error":
            parts.append(f"{o.ename}: {o.evalue}")
    return "\n".join(parts)


def gpu_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [c for c in nb.cells if c.cell_type == "code" and "gpu" in c.get("metadata", {}).get("tags", [])]


def errors(nb: nbformat.NotebookNode) -> list[str]:
    return [f"cell {i}: {o.ename}: {o.evalue}" for i, c in enumerate(nb.cells)
            for o in c.get("outputs", []) if o.output_type == "error"]


@pytest.mark.skipif(CUDA, reason="a CUDA device is present: test_lecture_gpu_section_runs covers it")
def test_lecture_skips_gpu_section_cleanly_without_cuda(executed_lecture):
    assert not errors(executed_lecture), errors(executed_lecture)
    everything = "\n".join(text_of(c) for c in executed_lecture.cells if c.cell_type == "code")
    assert SKIP_MESSAGE in everything
    cells = gpu_cells(executed_lecture)
    assert len(cells) >= 6, "the GPU section's cells are tagged 'gpu'"
    unexplained = [c.source.splitlines()[0] for c in cells if not text_of(c).startswith(SKIPPED_CELL)]
    assert not unexplained, f"GPU cells that do not say what they would show on a GPU: {unexplained}"
    plots = [o for c in cells for o in c.get("outputs", []) if o.output_type == "display_data"]
    assert not plots, "a GPU cell showed a picture on a machine without CUDA"


@needs_cuda
def test_lecture_gpu_section_runs(executed_lecture):
    assert not errors(executed_lecture), errors(executed_lecture)
    everything = "\n".join(text_of(c) for c in executed_lecture.cells if c.cell_type == "code")
    assert SKIP_MESSAGE not in everything and SKIPPED_CELL not in everything
    silent = [c.source.splitlines()[0] for c in gpu_cells(executed_lecture) if not c.get("outputs")]
    assert not silent, f"GPU cells that printed nothing: {silent}"
    assert "stale read observed:" in everything
    assert "every element arrived: True" in everything
    assert "a kernel queued after the copy sees the data: True" in everything
    assert "waited on an event first, every element is 1.0: True" in everything
    assert "| after wait_stream: True" in everything
    assert "the batch arrived pinned: True" in everything
    assert "a pinning thread runs in this process: True" in everything
    assert "best measured on this machine:" in everything and "GB/s" in everything
    plots = [o for c in gpu_cells(executed_lecture) for o in c.get("outputs", [])
             if o.output_type == "display_data" and "image/png" in o.get("data", {})]
    assert plots, "the bandwidth plot was not shown"


@needs_cuda
def test_cuda_copies_and_returns_self_when_already_there():
    x = torch.arange(4.0)
    g = x.cuda()
    assert g.is_cuda and storage(g) != storage(x)
    assert g.cuda() is g
    assert g.to("cuda") is g
    assert torch.equal(g.cpu(), x)


@needs_cuda
def test_pinned_non_blocking_round_trip_after_synchronize():
    x = torch.arange(2**20, dtype=torch.float32)
    pinned = x.pin_memory()
    assert pinned.is_pinned() and not x.is_pinned() and storage(pinned) != storage(x)
    g = pinned.to("cuda", non_blocking=True)
    back = torch.empty_like(x).pin_memory()
    back.copy_(g * 2, non_blocking=True)
    torch.cuda.synchronize()
    assert torch.equal(back, x * 2)
    assert torch.equal(g.cpu(), x)


@needs_cuda
@pytest.mark.parametrize("device", ["cuda", torch.device("cuda")], ids=["str", "torch.device"])
def test_copy_to_cuda_gives_new_memory_even_when_already_there(copy_to, device):
    t = torch.arange(6.0, device="cuda").reshape(2, 3)
    r = copy_to(t, device)
    assert r.is_cuda and r.dtype == t.dtype
    assert storage(r) != storage(t)
    assert torch.equal(r, t)

    c = torch.arange(3, dtype=torch.int32)
    r = copy_to(c, device)
    assert r.is_cuda and r.dtype == torch.int32 and torch.equal(r.cpu(), c)

    x = torch.tensor([1.0, 2.0, 3.0], device="cuda", requires_grad=True)
    r = copy_to(x, device)
    assert r.grad_fn is not None and storage(r) != storage(x)
    (r * torch.tensor([2.0, 3.0, 4.0], device="cuda")).sum().backward()
    assert torch.equal(x.grad.cpu(), torch.tensor([2.0, 3.0, 4.0]))
