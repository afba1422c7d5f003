"""autograder.kernel.diagrams: the pictures, and their text fallback when Graphviz is missing."""
from __future__ import annotations

import shutil
import warnings

import pytest
import torch

from autograder.kernel import diagrams
from autograder.kernel.diagrams import DOT_HINT, autograd_graph, memory_diagram

needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="Graphviz's dot is not installed (make test installs it as root)")


@pytest.fixture
def no_dot(monkeypatch):
    monkeypatch.setattr(diagrams.shutil, "which", lambda name: None)


def test_memory_diagram_text_shows_aliases_views_and_copies():
    a = torch.arange(6.0).reshape(2, 3)
    d = memory_diagram(a=a, b=a, row=a[1], c=a.clone())
    lines = d.text.splitlines()
    assert lines[0].startswith("a, b \u2500\u25b6 T1 shape=(2, 3) stride=(3, 1) offset=0 float32")
    assert "row \u2500\u25b6 T2 shape=(3,) stride=(1,) offset=3" in lines[1] and lines[1].endswith("S1 at element 3")
    assert lines[2].endswith("\u2500\u25b6 S2")
    assert "S1: storage of 6 \u00d7 float32 (24 bytes) [0, 1, 2, 3, 4, 5]" in d.text
    assert "S2: storage" in d.text and "S3" not in d.text


def test_memory_diagram_marks_autograd_state_and_long_storages():
    x = torch.arange(40.0, requires_grad=True)
    y = x * 2
    d = memory_diagram(x=x, y=y)
    assert "requires_grad" in d.text and "grad_fn=MulBackward0" in d.text
    assert "\u2026" in d.text  # 40 elements are summarised


def test_memory_diagram_rejects_non_tensors():
    with pytest.raises(TypeError, match="'n' is a int"):
        memory_diagram(n=3)


@needs_dot
def test_memory_diagram_renders_svg_with_one_box_per_storage():
    a = torch.arange(4.0)
    bundle = memory_diagram(a=a, v=a[1:])._repr_mimebundle_()
    assert bundle["image/svg+xml"].lstrip().startswith("<?xml")
    assert bundle["image/svg+xml"].count("S1: storage") == 1
    assert "text/plain" in bundle


def test_without_dot_diagrams_fall_back_to_text_with_a_hint(no_dot):
    a = torch.ones(2)
    bundle = memory_diagram(a=a)._repr_mimebundle_()
    assert set(bundle) == {"text/plain"}
    assert bundle["text/plain"].endswith(DOT_HINT)
    x = torch.ones(2, requires_grad=True)
    bundle = autograd_graph((x.clone() * 2).sum(), params={"x": x})._repr_mimebundle_()
    assert set(bundle) == {"text/plain"} and "CloneBackward0" in bundle["text/plain"]
    assert "apt-get install graphviz" in DOT_HINT


def test_autograd_graph_text_is_a_tree_down_to_the_leaves():
    x = torch.ones(3, requires_grad=True)
    w = torch.ones(3, requires_grad=True)
    g = autograd_graph((x.clone() * w).sum(), params={"x": x, "w": w})
    assert g.text.splitlines() == [
        "output ()",
        "SumBackward0",
        "\u2514\u2500 MulBackward0",
        "   \u251c\u2500 CloneBackward0",
        "   \u2502  \u2514\u2500 AccumulateGrad \u2192 x (3,)",
        "   \u2514\u2500 AccumulateGrad \u2192 w (3,)",
    ]


def test_autograd_graph_after_detach_loses_the_branch():
    x = torch.ones(3, requires_grad=True)
    w = torch.ones(3, requires_grad=True)
    g = autograd_graph((x.detach() * w).sum(), params={"x": x, "w": w})
    assert "\u2192 w" in g.text and "\u2192 x" not in g.text


def test_autograd_graph_of_a_tensor_without_history():
    assert "no grad_fn" in autograd_graph(torch.ones(2)).text


def test_autograd_graph_shares_nodes_once():
    x = torch.ones(2, requires_grad=True)
    y = x * 2
    g = autograd_graph(y + y, params={"x": x})
    assert "(shown above)" in g.text


def test_autograd_graph_emits_no_warnings():
    x = torch.ones(2, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        autograd_graph((x * 2).sum(), params={"x": x}, show_saved=True)


@needs_dot
def test_autograd_graph_svg_names_the_backward_nodes():
    x = torch.ones(2, requires_grad=True)
    svg = autograd_graph((x.clone() * 2).sum(), params={"x": x}).svg()
    assert "CloneBackward0" in svg and "AccumulateGrad" in svg
