"""autograder.kernel.diagrams: the pictures, and their text fallback when Graphviz is missing."""
from __future__ import annotations

import re
import shlex
import shutil
import warnings

import pytest
import torch

from autograder.kernel import diagrams
from autograder.kernel.diagrams import DOT_HINT, autograd_graph, memory_diagram, same_storage

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


def test_memory_diagram_numbers_tensors_and_storages_in_the_order_they_are_listed():
    old = torch.zeros(3)               # made first
    new = old + 1                      # made second
    first = memory_diagram(old=old, new=new).text.splitlines()
    assert first[0].startswith("old \u2500\u25b6 T1") and first[0].endswith("S1")
    assert first[1].startswith("new \u2500\u25b6 T2") and first[1].endswith("S2")
    assert first[2].startswith("S1: storage") and first[2].endswith("[0, 0, 0]")
    # no creation time is stored on a tensor: the caller's order is the order (not names, not addresses)
    flipped = memory_diagram(new=new, old=old).text.splitlines()
    assert flipped[0].startswith("new \u2500\u25b6 T1") and flipped[2].endswith("[1, 1, 1]")
    assert "list the names in the order their tensors were made" in " ".join(memory_diagram.__doc__.split())


def test_same_storage_is_one_storage_box_of_the_diagram():
    a = torch.arange(12.0).reshape(3, 4)
    for view in (a[1], a[:, 1:3], a.t(), a.detach(), a[:1].expand(5, 4)):
        assert same_storage(view, a) and same_storage(a, view)
    assert same_storage(a[0], a[2])                      # different data_ptr(), one storage
    for copy in (a.clone(), a[[0, 2]], a.t().reshape(12), torch.zeros(3, 4)):
        assert not same_storage(copy, a)
    d = memory_diagram(a=a, row=a[2], c=a.clone()).text
    assert "row \u2500\u25b6 T2" in d and "\u2500\u25b6 S1 at element 8" in d and "c \u2500\u25b6 T3" in d and "S2" in d


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


def test_autograd_graph_text_reads_like_the_picture_leaves_on_top_output_last():
    x = torch.ones(3, requires_grad=True)
    w = torch.ones(3, requires_grad=True)
    g = autograd_graph((x.clone() * w).sum(), params={"x": x, "w": w})
    assert g.text.splitlines() == [
        "      \u250c\u2500 x (3,) \u2192 AccumulateGrad",
        "   \u250c\u2500 CloneBackward0",
        "   \u251c\u2500 w (3,) \u2192 AccumulateGrad",
        "\u250c\u2500 MulBackward0",
        "SumBackward0",
        "output ()",
    ]


def test_autograd_graph_text_hangs_every_input_above_its_node():
    """Each node's inputs are the lines above it joined to it; the output's node is the last but one."""
    x = torch.ones(2, requires_grad=True)
    w = torch.ones(2, requires_grad=True)
    text = autograd_graph((x * w + x.exp()).sum(), params={"x": x, "w": w}).text.splitlines()
    order = [line.lstrip("\u2502\u250c\u251c\u2500 ") for line in text]
    assert order.index("AddBackward0") > order.index("MulBackward0") > order.index("x (2,) \u2192 AccumulateGrad")
    assert order.index("AddBackward0") > order.index("ExpBackward0")
    assert order[-2:] == ["SumBackward0", "output ()"]
    assert "x (2,) \u2192 AccumulateGrad (shown above)" in order     # x reached twice, drawn once


def test_autograd_graph_after_detach_loses_the_branch():
    x = torch.ones(3, requires_grad=True)
    w = torch.ones(3, requires_grad=True)
    g = autograd_graph((x.detach() * w).sum(), params={"x": x, "w": w})
    assert "w (3,) \u2192" in g.text and "x (3,) \u2192" not in g.text


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


def saved_graph():
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = torch.tensor([0.5, -1.0, 0.25], requires_grad=True)
    return autograd_graph((x * w).exp().sum(), params={"x": x, "w": w}, show_saved=True)


def test_autograd_graph_with_saved_tensors_points_every_saved_line_into_its_node():
    source = saved_graph().source
    tensors = set(re.findall(r'^\s*(\d+) \[label="[^"]*" fillcolor=(?:orange|lightblue)\]', source, re.M))
    saved_lines = re.findall(r"^\s*(\d+) -> (\d+) \[dir=none\]", source, re.M)
    assert len(saved_lines) == 3                         # MulBackward0 keeps x and w, ExpBackward0 its result
    for tail, head in saved_lines:
        assert tail in tensors and head not in tensors, "a saved tensor's line must run into the node keeping it"


@needs_dot
def test_autograd_graph_with_saved_tensors_keeps_leaves_on_top_and_the_output_at_the_bottom():
    import graphviz

    words = shlex.split(graphviz.Source(saved_graph().source).pipe(format="plain", encoding="utf-8"))
    height = {}                                          # first line of each box's label -> its heights
    for i, word in enumerate(words):
        if word == "node":
            height.setdefault(words[i + 6].strip().splitlines()[0], []).append(float(words[i + 3]))
    top, bottom = max(y for ys in height.values() for y in ys), min(y for ys in height.values() for y in ys)
    assert height["x"] == [top] and height["w"] == [top]
    assert height["()"] == [bottom]
    assert min(height["AccumulateGrad"]) > height["MulBackward0"][0] > height["ExpBackward0"][0] > height["SumBackward0"][0]
    assert height["result"][0] > height["ExpBackward0"][0]   # the saved result sits above the node keeping it


def _top_to_bottom(svg: str, prefix: str) -> list[str]:
    """The titles of the picture's nodes that start with ``prefix``, from the top of the picture down."""
    found = {}
    for m in re.finditer(r'<g id="node\d+" class="node">\s*<title>([^<]+)</title>(.*?)</g>', svg, re.S):
        title = m.group(1).replace("&quot;", '"')
        y = re.search(r'\by="(-?[\d.]+)"', m.group(2))
        if title.startswith(prefix) and y:
            found[title] = float(y.group(1))
    return sorted(found, key=found.get)


@needs_dot
def test_memory_diagram_draws_names_tensors_and_storages_in_the_order_of_its_arguments():
    import itertools

    a = torch.zeros(3)
    given = [("a", a), ("b", a), ("c", a.clone()), ("v", a[1:])]
    for order in itertools.permutations(given):
        svg = memory_diagram(**dict(order)).svg()
        assert _top_to_bottom(svg, "n:") == [f"n:{name}" for name, _ in order]
        tensors = _top_to_bottom(svg, "T")
        assert tensors == sorted(tensors, key=lambda t: int(t[1:])), (order, tensors)   # T1 on top
        assert _top_to_bottom(svg, "S") == sorted(_top_to_bottom(svg, "S"), key=lambda s: int(s[1:]))


def test_a7_mystery_graph_text_is_what_autograd_graph_draws_for_its_answer():
    """Assignment 7 stores its picture by hand (DOT and text); the text must be the fallback the
    course draws for snippet B, so the two cannot read different ways up."""
    import json
    from pathlib import Path

    from autograder.kernel.diagrams import Diagram

    nb = json.loads((Path(__file__).resolve().parents[1] / "solutions/a7_graphs/a7_graphs.ipynb").read_text())
    cell = next(c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "mystery_graph")
    namespace = {"Diagram": Diagram}
    exec("".join(cell["source"]), namespace)
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = torch.tensor([4.0, 5.0], requires_grad=True)
    c = x.clone()
    c[1:] = w.to(torch.float32)
    assert namespace["MYSTERY_TEXT"] == autograd_graph((c * x).sum(), params={"x": x, "w": w}).text
