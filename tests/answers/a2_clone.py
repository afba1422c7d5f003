"""Learner answers for assignment 2: mistakes that must lose points, other correct ways that must not."""
from harness import Answer

WRONG = [
    Answer("graph_copy", "detach().clone(): a copy that left the graph", '''
def graph_copy(t):
    return t.detach().clone()
''', message="requires_grad is False"),
    Answer("graph_copy", "returns t itself", '''
def graph_copy(t):
    return t
''', message="shares memory with x"),
    Answer("graph_copy", "view_as: a new object on the same memory", '''
def graph_copy(t):
    return t.view_as(t)
''', message="shares memory with x"),
    Answer("graph_copy", "contiguous(): returns t when t is already contiguous", '''
def graph_copy(t):
    return t.contiguous()
''', message="shares memory with x"),
    Answer("graph_copy", "torch.tensor(t): warns and leaves the graph", '''
def graph_copy(t):
    return torch.tensor(t)
''', message="requires_grad is False"),
    Answer("graph_copy", "a fresh leaf that copies requires_grad", '''
def graph_copy(t):
    return t.detach().clone().requires_grad_(t.requires_grad)
''', message="x.grad is None"),
    Answer("graph_copy", "copy.deepcopy: a new leaf (and refused for non-leaves)", '''
import copy

def graph_copy(t):
    return copy.deepcopy(t)
''', message="x.grad is None"),
    Answer("graph_copy", "forces requires_grad on the copy", '''
def graph_copy(t):
    return t.clone().requires_grad_()
''', message="do not force `requires_grad_()`"),
    Answer("graph_copy", "t * 1: promotes bool to int64", '''
def graph_copy(t):
    return t * 1
''', message="dtype torch.int64"),
    Answer("edit_copy", "writes into y in place", '''
def edit_copy(y, index, value):
    y[index] = value
    return y
''', message="y._version went from 0 to 1"),
    Answer("edit_copy", "detach().clone(): cuts the graph", '''
def edit_copy(y, index, value):
    result = y.detach().clone()
    result[index] = value
    return result
''', message="requires_grad is False"),
    Answer("edit_copy", "writes through detach() to dodge the error", '''
def edit_copy(y, index, value):
    result = y.detach()
    result[index] = value
    return result
''', message="_version went from"),
    Answer("edit_copy", "clone, then writes through .data (gradient leaks through the slot)", '''
def edit_copy(y, index, value):
    result = y.clone()
    result.data[index] = value
    return result
''', message="x.grad is"),
    Answer("edit_copy", "torch.cat of slices without handling negative indices", '''
def edit_copy(y, index, value):
    return torch.cat([y[:index], torch.tensor([value], dtype=y.dtype), y[index + 1:]])
''', message="negative index"),
    Answer("edit_copy", "builds the result under no_grad", '''
def edit_copy(y, index, value):
    with torch.no_grad():
        result = y.clone()
        result[index] = value
    return result
''', message="requires_grad is False"),
    # --- the prediction set: wrong letters fail with their diagnosis
    Answer("predictions", "believes the blog: a clone is a leaf", '''
PREDICTIONS = {"q1": "a", "q2": "b", "q3": "b", "q4": "b", "q5": "c"}
''', message="`clone()` is recorded in the graph as `CloneBackward0`, so"),
    Answer("predictions", "expects a contiguous clone", '''
PREDICTIONS = {"q1": "b", "q2": "b", "q3": "b", "q4": "a", "q5": "c"}
''', message="the default `memory_format=torch.preserve_format` keeps the"),
    Answer("predictions", "a wrong letter whose diagnosis only the grading shows (q2: c)", '''
PREDICTIONS = {"q1": "b", "q2": "c", "q3": "b", "q4": "b", "q5": "c"}
''', message="`c` requires grad through `CloneBackward0`, so"),
]

RIGHT = [
    Answer("graph_copy", "torch.clone", '''
def graph_copy(t):
    return torch.clone(t)
'''),
    Answer("graph_copy", "clone to contiguous memory", '''
def graph_copy(t):
    return t.clone(memory_format=torch.contiguous_format)
'''),
    Answer("graph_copy", "empty_like then copy_ (recorded as CopyBackwards)", '''
def graph_copy(t):
    out = torch.empty_like(t)
    out.copy_(t)
    return out
'''),
    Answer("graph_copy", "to(copy=True)", '''
def graph_copy(t):
    return t.to(copy=True)
'''),
    Answer("graph_copy", "clone, then checks with the deprecated typed storage (prints a warning)", '''
def graph_copy(t):
    c = t.clone()
    assert c.storage().data_ptr() != t.storage().data_ptr()
    return c
'''),
    Answer("edit_copy", "torch.where with a mask", '''
def edit_copy(y, index, value):
    mask = torch.arange(y.shape[0]) == index % y.shape[0]
    return torch.where(mask, value, y)
'''),
    Answer("edit_copy", "index_put on a clone", '''
def edit_copy(y, index, value):
    return y.clone().index_put((torch.tensor([index]),), torch.tensor(value, dtype=y.dtype))
'''),
    Answer("edit_copy", "torch.cat with the index normalised", '''
def edit_copy(y, index, value):
    i = index % len(y)
    return torch.cat([y[:i], torch.tensor([value], dtype=y.dtype), y[i + 1:]])
'''),
    Answer("edit_copy", "blends y and value with a 0/1 mask", '''
def edit_copy(y, index, value):
    keep = torch.ones_like(y)
    keep[index] = 0
    return y * keep + value * (1 - keep)
'''),
    # --- the prediction set: the right letters in any accepted spelling (either case, spaces, parentheses)
    Answer("predictions", "letters in parentheses, with spaces and mixed case", '''
PREDICTIONS = {"q1": "(b)", "q2": " (B) ", "q3": "b ", "q4": "(B)", "q5": "(c)"}
'''),
]
