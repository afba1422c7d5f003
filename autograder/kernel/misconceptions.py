"""The course's one list of misconceptions: an id, the belief in one line, the lecture section that refutes it.

A diagnosis names a misconception by starting with its id (``"M-detach-copies: detach() alone
does not copy ..."``); the checks turn that into the statement and a link to the lecture heading.
Anchors are made the way JupyterLab and nbconvert (the course's site) make heading ids: the
heading's text with spaces turned into ``-``, so one link works in both.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Misconception", "MISCONCEPTIONS", "BY_ID", "TAG", "anchor_of", "split_tag", "ids_in"]

L01 = "course/01_names_views_storage.ipynb"
L02 = "course/02_clone.ipynb"
L03 = "course/03_detach.ipynb"
L04 = "course/04_grad_modes.ipynb"
L05 = "course/05_copy_.ipynb"
L06 = "course/06_deepcopy_state_dict.ipynb"
L06B = "course/06b_boundaries.ipynb"
L07 = "course/07_reading_graphs.ipynb"
L08 = "course/08_devices_gpu.ipynb"
L09 = "course/09_capstone.ipynb"
L10 = "course/10_myths.ipynb"


def anchor_of(heading: str) -> str:
    """The id JupyterLab and nbconvert give a markdown heading: its text, spaces as ``-``."""
    text = re.sub(r"^#+\s*", "", heading.strip()).replace("`", "")
    return text.strip().replace(" ", "-")


@dataclass(frozen=True)
class Misconception:
    """One wrong belief about copies, and where the course shows what really happens."""

    id: str
    myth: str       # the belief, in one line
    lecture: str    # a notebook of course/, relative to the course root
    heading: str    # a markdown heading of that lecture, as written there (without the #s)

    @property
    def link(self) -> str:
        return f"{self.lecture}#{anchor_of(self.heading)}"


M = Misconception
MISCONCEPTIONS: tuple[Misconception, ...] = (
    # names, views and storage
    M("M-assignment-copies", "`b = a` gives `b` a copy of the tensor.", L01, "1. Names are labels, not boxes"),
    M("M-rebinding-writes", "`t = t + 1` (or `p = p - lr * g`) changes the tensor the name was bound to.",
      L01, "In place or rebinding?"),
    M("M-augmented-assignment-copies", "`t += 1` builds a new tensor, just like `t = t + 1`.", L01, "In place or rebinding?"),
    M("M-argument-rebinding", "assigning to a parameter inside a function changes the caller's tensor.",
      L01, "Function arguments are names too"),
    M("M-views-copy", "a view (`a[1]`, `a.t()`, `a.view(...)`, a slice) has memory of its own.",
      L01, "2. Views: a new tensor object on the same storage"),
    M("M-indexing-views", "every index returns a view, a list, a mask or a 1-d index tensor too.", L01, "3. Copies"),
    M("M-reshape-views", "`reshape`, `flatten` and `contiguous` always return a view (or fail like `view`).",
      L01, "`reshape`, `flatten`, `contiguous`: a view when possible, a copy when not"),
    M("M-equal-values-shared", "tensors with equal values share memory, so comparing values tells.", L01, "3. Copies"),
    M("M-id-is-memory", "`id()` or `is` tells whether two tensors share memory.", L01,
      "`id()` names the object, not the memory"),
    M("M-id-of-temporary", "the `id()` of a temporary (`a.data`, `a.view(-1)`) identifies its memory.", L10,
      "M6. Myth: a new `id()` means new memory"),
    M("M-data-ptr-is-storage", "`t.data_ptr()` is the address of `t`'s storage.", L01,
      "`data_ptr()` is where a tensor starts, not its storage"),
    M("M-tensor-is-a-number", "a one-element tensor is a plain Python number or bool.", L03,
      "7. Logging losses without keeping graphs alive"),
    # clone()
    M("M-clone-leaves-graph", "`clone()` gives a copy outside the autograd graph.", L02,
      "1. New memory, same values, same graph"),
    M("M-fresh-leaf-connects", "a new tensor made from `t`'s values (`torch.tensor(t)`, `requires_grad_()`) "
      "still sends gradients to `t`.", L10, "M26. Myth: `torch.tensor(t)` is a clean detach-and-clone"),
    M("M-clone-copies-base", "cloning a view copies the view's whole base storage.", L02,
      "3. Clones of views copy only what the view shows"),
    M("M-clone-contiguous", "`clone()` always returns a row-major (contiguous) copy.", L02,
      "4. Memory format: which strides does the copy get?"),
    M("M-edit-saved-tensor", "writing into a tensor autograd saved for backward is harmless, or fails at once.",
      L02, "6. Why you clone before you edit a saved tensor"),
    # detach()
    M("M-detach-copies", "`detach()` (or `.data`) returns a copy.", L03, "1. What `detach()` returns"),
    M("M-snapshot-follows", "a copy made with `clone()` (after `detach()`) still follows later writes to the original.",
      L03, "4. Snapshots: `detach().clone()`"),
    M("M-detach-hides-writes", "autograd never notices a write through `detach()`.", L03,
      "2. One memory, one version counter"),
    M("M-data-is-tracked", "`.data` is just `detach()`: autograd notices and records writes through it.", L03,
      "3. `.data`: the same edit, no alarm"),
    M("M-numpy-copies", "`.numpy()` (after `detach()`) returns a copy.", L03,
      "5. To NumPy: `.numpy()` wraps the same memory"),
    M("M-tolist-keeps-dtype", "a round trip through Python numbers (`tolist()`, `torch.Tensor(...)`) keeps the dtype.",
      L03, "5. To NumPy: `.numpy()` wraps the same memory"),
    M("M-detach-input-cuts", "detaching the input (the noise) keeps gradients out of the generator.", L03,
      "6. Cutting the gradient on purpose: the GAN discriminator step"),
    # grad modes
    M("M-no-grad-records",
      "a result computed under `no_grad` (say `x * 2`) still gets a `grad_fn` and the input's `requires_grad`.",
      L04, "1. What `no_grad` records: nothing"),
    M("M-eval-is-no-grad", "`model.eval()` and `torch.no_grad()` are the same switch.", L04,
      "4. `no_grad` is not `model.eval()`"),
    M("M-leaf-in-place-allowed", "a leaf that requires grad can be updated in place while autograd records.",
      L04, "5. Updating parameters in place"),
    M("M-no-grad-view", "a view made under `no_grad` passes gradients like any other view.", L04,
      "6. The trap: views created under `no_grad`"),
    M("M-data-assignment-writes", "`p.data = new` writes the new values into `p`'s memory.", L06B,
      "6. `nn.Parameter(t)` wraps `t`'s memory"),
    # copy_()
    M("M-copy-aliases", "`dst.copy_(src)` makes `dst` share `src`'s memory.", L05, "1. The destination keeps its memory"),
    M("M-copy-broadcast", "`copy_` needs equal shapes, or broadcasts the destination.", L05,
      "2. Shapes: `src` broadcasts to `dst`, never the other way"),
    M("M-copy-keeps-source-dtype", "`copy_` keeps the source's dtype, or rounds floats to the nearest integer.",
      L05, "3. dtypes: the destination's dtype wins"),
    M("M-parameters-are-the-state", "`parameters()` is a model's whole state (its buffers forgotten).", L10,
      "M14. Myth: an EMA over `named_parameters()` averages the whole model"),
    # deepcopy, state_dict, modules
    M("M-shallow-copy-copies", "`copy.copy` of a tensor, a dict or a model gives new memory.", L06,
      "1. `copy.copy`: a new object on the old memory"),
    M("M-deepcopy-graph", "`deepcopy` copies a tensor's graph along, or detaches it for you.", L06,
      "3. Non-leaves are refused, not copied with their graph"),
    M("M-copies-keep-sharing", "copies share memory as their originals did, however many `deepcopy` calls made them.", L06,
      "4. One `deepcopy` call keeps sharing; two calls do not"),
    M("M-deepcopy-view", "a deep copy of a view copies only what the view shows.", L06,
      "5. A deep copy of a view copies its whole base"),
    M("M-deepcopy-unties", "a deep copy of a module unties the parameters its layers share.", L06,
      "6. Deep-copying a module keeps its ties"),
    M("M-state-dict-copies", "`state_dict()` returns a copy of the weights.", L06, "7. `state_dict()` hands out aliases"),
    M("M-assign-copies", "`load_state_dict(..., assign=True)` copies the values into the old tensors.", L06,
      "8. `load_state_dict` copies in; `assign=True` moves in"),
    # boundaries
    M("M-from-numpy-copies", "`torch.from_numpy`, `torch.as_tensor` and `np.ascontiguousarray` copy the array.",
      L06B, "1. From NumPy: three ways share, one copies"),
    M("M-constructors-share", "`torch.tensor(a)` wraps an array's memory, as `torch.from_numpy(a)` does.",
      L06B, "1. From NumPy: three ways share, one copies"),
    M("M-negative-strides-shared", "a tensor can share the memory of any NumPy array, negative strides included.",
      L06B, "2. Negative strides and read-only arrays"),
    M("M-save-writes-the-view", "`torch.save` of a view writes only what the view shows.", L06B,
      "4. `torch.save` writes storages, not what a tensor shows"),
    M("M-optimizer-state-copies", "`optimizer.state_dict()` is a snapshot of the optimizer.", L06B,
      "5. An optimizer's `state_dict()` holds its live state"),
    M("M-parameter-copies", "`nn.Parameter(t)` copies `t`'s values into memory of its own.", L06B,
      "6. `nn.Parameter(t)` wraps `t`'s memory"),
    M("M-nonleaf-grad", "`backward()` fills `.grad` of every tensor it passes, non-leaves too.", L06B,
      "`retain_grad()` and `register_hook`"),
    M("M-expand-copies", "`expand` copies like `repeat`.", L06B,
      "10. `expand` against `repeat`; `.storage()` against `untyped_storage()`"),
    # computation graphs
    M("M-nodes-are-tensors", "the nodes of the graph are tensors.", L07, "1. The nodes are functions, not tensors"),
    M("M-same-values-same-leaf", "a gradient reaches any tensor with the leaf's values or storage.", L07,
      "2. Walking the graph by hand"),
    M("M-none-edge-ends-graph", "a `None` in `next_functions` means the graph ends there.", L07,
      "2. Walking the graph by hand"),
    M("M-backward-is-harmless", "`backward()` leaves the graph and every `.grad` as they were.", L07,
      "4. Backward frees what was saved"),
    M("M-detach-keeps-branch", "a branch through `detach()` still leads back to the leaf.", L07,
      "`detach()`: the branch vanishes"),
    # devices
    M("M-to-always-copies", "`.to(device)` (or `.cpu()`) always returns a copy; `copy=True` leaves the graph.", L08,
      "Forcing a copy: `copy=True`"),
    M("M-cast-keeps-graph", "a cast keeps the gradient in the cast's dtype, integer casts included.", L08,
      "Converting to another dtype always copies"),
    # the training loop
    M("M-deepcopy-drops-requires-grad", "`copy.deepcopy(model)` gives parameters that no longer require grad.", L09,
      "3. The EMA copy"),
    M("M-grad-overwritten", "`backward()` overwrites `.grad`, so old gradients go away by themselves.", L09,
      "5. The gradients"),
)
del M

BY_ID: dict[str, Misconception] = {m.id: m for m in MISCONCEPTIONS}

# a diagnosis that names a misconception starts with its id and a colon
TAG = re.compile(r"^(M-[a-z0-9]+(?:-[a-z0-9]+)*):\s*")
# where a failure's one-line message names one: "[M-detach-copies: course/...#...]"
_NAMED = re.compile(r"\[(M-[a-z0-9]+(?:-[a-z0-9]+)*): ")


def split_tag(hint: str | None) -> tuple[Misconception | None, str | None]:
    """The misconception a diagnosis names (None if none) and the diagnosis without its tag.

    An unknown id stays in the text (tests/test_misconceptions.py catches typos in the course)."""
    if not hint:
        return None, hint
    m = TAG.match(hint)
    if not m or m.group(1) not in BY_ID:
        return None, hint
    return BY_ID[m.group(1)], hint[m.end():]


def ids_in(text: str) -> list[str]:
    """The misconceptions a failure's message names, in order, known ids only."""
    return [i for i in _NAMED.findall(text) if i in BY_ID]
