"""Pictures for the lectures: memory diagrams and autograd graphs.

``memory_diagram(a=a, b=b)`` draws names -> tensor objects -> storages, so a learner sees which
names alias; ``same_storage(a, b)`` is the question that diagram answers, as a bool;
``autograd_graph(loss)`` draws the backward graph with torchviz, leaves at the top and the
output at the bottom.  Both pictures display as SVG in JupyterLab when Graphviz's ``dot`` is
installed and fall back to a text drawing, with a one-line hint, when it is not; the graph's text
drawing is the same way up as its picture.  Like ``checks``, this module runs in learners'
kernels and imports nothing from the grading side.
"""
from __future__ import annotations

import html
import re
import shutil
import warnings
from typing import Any, Iterable

import torch

__all__ = ["Diagram", "memory_diagram", "same_storage", "autograd_graph", "dot_available", "DOT_HINT"]

DOT_HINT = (
    "Graphviz's `dot` was not found, so this is the text version. Install it "
    "(Debian/Ubuntu: `sudo apt-get install graphviz`, macOS: `brew install graphviz`, "
    "conda: `conda install -c conda-forge graphviz`) and re-run the cell to see the picture."
)

MAX_CELLS = 16  # storage elements drawn before the rest is summarised


def dot_available() -> bool:
    """True when Graphviz's ``dot`` program is on PATH."""
    return shutil.which("dot") is not None


class Diagram:
    """A picture with a text twin: SVG in JupyterLab when ``dot`` exists, text otherwise."""

    def __init__(self, source: str, text: str):
        self.source = source  # Graphviz DOT source
        self.text = text      # the plain-text drawing
        self._svg: str | None = None

    def svg(self) -> str | None:
        """The rendered SVG, or None when ``dot`` is missing or fails."""
        if self._svg is None and dot_available():
            import graphviz  # imported late: only needed when drawing

            try:
                self._svg = graphviz.Source(self.source).pipe(format="svg", encoding="utf-8")
            except (graphviz.ExecutableNotFound, graphviz.CalledProcessError):
                self._svg = None
        return self._svg

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        svg = self.svg()
        if svg is None:
            return {"text/plain": f"{self.text}\n\n{DOT_HINT}"}
        return {"image/svg+xml": svg, "text/plain": self.text}

    def __repr__(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text


# ---------------------------------------------------------------------------------------------
# Memory diagrams


def _storage_values(t: torch.Tensor) -> list[Any] | None:
    """Every element of the storage behind ``t`` (not only the ones ``t`` shows)."""
    if t.device.type != "cpu" or t.is_sparse or t.is_quantized:
        return None
    try:
        storage = t.untyped_storage()
        count = storage.nbytes() // t.element_size()
        with torch.no_grad():
            flat = torch.empty(0, dtype=t.dtype).set_(storage, 0, (count,), (1,))
            return flat.tolist()
    except (RuntimeError, NotImplementedError, TypeError):
        return None


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _tensor_summary(t: torch.Tensor) -> list[str]:
    parts = [f"shape={tuple(t.shape)}", f"stride={t.stride()}", f"offset={t.storage_offset()}",
             str(t.dtype).removeprefix("torch.")]
    if isinstance(t, torch.nn.Parameter):
        parts.insert(0, "Parameter")
    if t.requires_grad:
        parts.append("requires_grad")
    if t.grad_fn is not None:
        parts.append(f"grad_fn={type(t.grad_fn).__name__}")
    return parts


def memory_diagram(*args: dict[str, torch.Tensor], **named: torch.Tensor) -> Diagram:
    """Draw names -> tensor objects -> storages for the given tensors.

    ``memory_diagram(a=a, b=b, v=a[1])`` or ``memory_diagram({"a": a, "a[1]": a[1]})``.
    Names bound to the same object point at one tensor box; tensors that share a storage point
    into one storage row, at the element where their view starts (the storage offset).
    The boxes are numbered T1, T2, ... and S1, S2, ... in the order the names are given: a tensor
    records no creation time, so list the names in the order their tensors were made (the
    lectures do), and T1 is the oldest.
    """
    items: dict[str, torch.Tensor] = {}
    for mapping in args:
        items.update(mapping)
    items.update(named)
    for name, t in items.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"memory_diagram: {name!r} is a {type(t).__name__}, not a tensor")

    tensors: dict[int, tuple[str, torch.Tensor]] = {}   # id -> (label, tensor)
    storages: dict[tuple[int, int], tuple[str, torch.Tensor]] = {}  # (ptr, nbytes) -> (label, first tensor)
    names_of: dict[int, list[str]] = {}
    for name, t in items.items():
        if id(t) not in tensors:
            tensors[id(t)] = (f"T{len(tensors) + 1}", t)
            key = _storage_key(t)
            if key not in storages:
                storages[key] = (f"S{len(storages) + 1}", t)
        names_of.setdefault(id(t), []).append(name)

    text_lines = []
    dot = [
        "digraph memory {",
        '  rankdir=LR; nodesep=0.25; ranksep=0.6;',
        '  node [fontname="Helvetica", fontsize=11];',
        '  edge [arrowsize=0.7];',
    ]
    for name, t in items.items():
        tlabel = tensors[id(t)][0]
        dot.append(f'  "n:{_esc(name)}" [shape=plaintext, label="{_esc(name)}", fontname="Courier", fontsize=13];')
        dot.append(f'  "n:{_esc(name)}" -> "{tlabel}";')
    # Graphviz orders the nodes of a column as it likes (in this layout, the first at the bottom):
    # invisible edges inside each column keep the names, tensors and storages top to bottom in the
    # order they were given
    for column in ([f"n:{_esc(n)}" for n in items], [lbl for lbl, _ in tensors.values()],
                   [lbl for lbl, _ in storages.values()]):
        if len(column) > 1:
            dot.append("  { rank=same; " + " -> ".join(f'"{c}"' for c in column) + " [style=invis]; }")
    for tid, (tlabel, t) in tensors.items():
        slabel = storages[_storage_key(t)][0]
        parts = _tensor_summary(t)
        summary = " ".join(parts)
        rows = "".join(f"<tr><td align='left'>{html.escape(p)}</td></tr>" for p in parts)
        dot.append(
            f'  "{tlabel}" [shape=plaintext, label=<<table border="1" cellborder="0" cellspacing="0" '
            f'bgcolor="#eef4ff"><tr><td><b>{tlabel}: tensor</b></td></tr>{rows}</table>>];'
        )
        dot.append(f'  "{tlabel}" -> "{slabel}":e{min(t.storage_offset(), MAX_CELLS)};')
        text_lines.append(
            f"{', '.join(names_of[tid])} \u2500\u25b6 {tlabel} {summary} \u2500\u25b6 {slabel}"
            + (f" at element {t.storage_offset()}" if t.storage_offset() else "")
        )
    for (ptr, nbytes), (slabel, t) in storages.items():
        values = _storage_values(t)
        itemsize = t.element_size()
        count = nbytes // itemsize if itemsize else 0
        cells = []
        shown = [] if values is None else values[:MAX_CELLS]
        for i, v in enumerate(shown):
            cells.append(f"<td port='e{i}' width='28'>{html.escape(_fmt(v))}</td>")
        if values is None:
            cells.append("<td port='e0'>(no data here)</td>")
        elif len(values) > MAX_CELLS:
            cells.append(f"<td port='e{MAX_CELLS}'>\u2026 {len(values) - MAX_CELLS} more</td>")
        elif not values:
            cells.append("<td port='e0'>(empty)</td>")
        dtype = str(t.dtype).removeprefix("torch.")
        dot.append(
            f'  "{slabel}" [shape=plaintext, label=<<table border="0" cellborder="1" cellspacing="0" '
            f'bgcolor="#fff3df"><tr><td colspan="{max(len(cells), 1)}"><b>{slabel}: storage</b>&nbsp; '
            f'{count} \u00d7 {dtype}, {nbytes} bytes</td></tr><tr>{"".join(cells)}</tr></table>>];'
        )
        listing = "?" if values is None else "[" + ", ".join(_fmt(v) for v in values[:MAX_CELLS]) + (
            ", \u2026" if len(values) > MAX_CELLS else "") + "]"
        text_lines.append(f"{slabel}: storage of {count} \u00d7 {dtype} ({nbytes} bytes) {listing}")
    dot.append("}")
    return Diagram("\n".join(dot), "\n".join(text_lines))


def _storage_key(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    return (storage.data_ptr(), storage.nbytes())


def same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when ``a`` and ``b`` look into one storage: one storage box in ``memory_diagram``."""
    return _storage_key(a) == _storage_key(b)


def _esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


# ---------------------------------------------------------------------------------------------
# Autograd graphs


def autograd_graph(output: torch.Tensor | Iterable[torch.Tensor], params: dict[str, torch.Tensor] | None = None,
                   show_saved: bool = False) -> Diagram:
    """Draw the backward graph behind ``output`` with torchviz (text tree without ``dot``).

    ``params`` names the leaves (``{"x": x}``), as torchviz's ``make_dot`` does; ``show_saved``
    adds the tensors autograd saved for backward (orange boxes).  Every picture has one
    orientation: the arrows follow the forward pass, leaves at the top, the output at the bottom;
    the text tree reads the same way up (saved tensors are not in it).
    """
    import torchviz  # imported late: torchviz pulls in graphviz

    params = dict(params or {})
    with warnings.catch_warnings():
        # torchviz 0.0.3 compares versions with distutils' LooseVersion, which warns on every
        # call; the warning says nothing about the learner's code.
        warnings.simplefilter("ignore", DeprecationWarning)
        graph = torchviz.make_dot(output, params=params, show_attrs=show_saved, show_saved=show_saved)
    if show_saved:
        graph.body = _saved_edges_into_their_nodes(graph.body, output)
    return Diagram(graph.source, _graph_text(output, params))


_EDGE = re.compile(r"^(\s*)(\S+) -> (\S+) (\[dir=none\])$")


def _saved_edges_into_their_nodes(body: list[str], output: Any) -> list[str]:
    """Turn each "node keeps tensor" line of torchviz round, so the saved tensor sits above its node.

    torchviz draws them as ``node -> tensor``: Graphviz then ranks every saved tensor below the
    node that keeps it, a saved leaf too, and the picture comes out upside down (its leaves low,
    the first operation on top).  The line has no arrowhead, so its direction only tells the
    layout where to put the tensor; pointing it into the node keeps every edge running downward.
    """
    nodes: set[str] = set()
    todo = [r.grad_fn for r in (output if isinstance(output, (tuple, list)) else [output])]
    while todo:
        fn = todo.pop()
        if fn is None or str(id(fn)) in nodes:
            continue
        nodes.add(str(id(fn)))
        todo.extend(child for child, _ in getattr(fn, "next_functions", ()))
    out = []
    for line in body:
        m = _EDGE.match(line.rstrip("\n"))
        if m and m.group(2) in nodes and m.group(3) not in nodes:
            indent, fn, tensor, attrs = m.groups()
            line = f"{indent}{tensor} -> {fn} {attrs}\n"
        out.append(line)
    return out


def _graph_text(output: Any, params: dict[str, torch.Tensor]) -> str:
    """The graph as a text tree drawn the way the picture is: leaves on top, the output last.

    Each node sits under its inputs, which hang above it joined by ``┌─`` / ``├─``; a node reached
    again is drawn once, where it comes first from the top, and named "(shown above)" after that.
    """
    names = {id(t): n for n, t in params.items()}
    roots = list(output) if isinstance(output, (tuple, list)) else [output]
    seen: set[int] = set()

    def leaf_label(var: torch.Tensor) -> str:
        name = names.get(id(var), "")
        return f"{name} {tuple(var.shape)}".strip()

    def block(fn: Any) -> list[str]:
        """The lines of fn's subtree, its inputs above it, fn's own label on the last line."""
        label = type(fn).__name__
        if hasattr(fn, "variable"):
            label = f"{leaf_label(fn.variable)} \u2192 {label}"
        if id(fn) in seen:
            return [f"{label} (shown above)"]
        seen.add(id(fn))
        lines: list[str] = []
        children = [child for child, _ in getattr(fn, "next_functions", ()) if child is not None]
        for i, child in enumerate(children):
            sub = block(child)
            above = "   " if i == 0 else "\u2502  "       # the line down to fn starts at the first input
            lines += [above + line for line in sub[:-1]]
            lines.append(("\u250c\u2500 " if i == 0 else "\u251c\u2500 ") + sub[-1])
        return lines + [label]

    lines: list[str] = []
    for root in roots:
        if root.grad_fn is None:
            lines.append(f"{leaf_label(root) or 'tensor'}: no grad_fn (not part of any graph)")
        else:
            lines += block(root.grad_fn)
            lines.append(f"output {tuple(root.shape)}")
    return "\n".join(lines)
