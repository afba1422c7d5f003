"""Learner answers for assignment 8: mistakes that must lose points, other correct ways that must not."""
from harness import Answer

WRONG = [
    Answer("copy_to", "to(device) returns t itself when it is already there", '''
def copy_to(t, device):
    return t.to(device)
''', message="returns the same tensor when nothing changes: pass copy=True"),
    Answer("copy_to", "cpu() ignores the device and returns t on the CPU", '''
def copy_to(t, device):
    return t.cpu()
''', message="returns the same tensor when nothing changes"),
    Answer("copy_to", "detach before copying leaves the graph", '''
def copy_to(t, device):
    return t.detach().to(device, copy=True)
''', message="left the autograd graph"),
    Answer("copy_to", "torch.tensor(t) warns and leaves the graph", '''
def copy_to(t, device):
    return torch.tensor(t, device=device)
''', message="left the autograd graph"),
    Answer("copy_to", "deepcopy makes a new leaf that no gradient leaves", '''
import copy

def copy_to(t, device):
    return copy.deepcopy(t).to(device)
'''),
    Answer("copy_to", "detached copy re-marked as requiring grad", '''
def copy_to(t, device):
    return t.detach().clone().to(device).requires_grad_(t.requires_grad)
''', message="make a new leaf"),
    # --- the prediction set: wrong letters fail with their diagnosis
    Answer("predictions", "thinks .to() to the same device copies", '''
PREDICTIONS = {"q1": "b", "q2": "b", "q3": "a", "q4": "b"}
''', message="`.to()` returns the tensor itself when its device and dtype"),
    Answer("predictions", "expects a float64 gradient", '''
PREDICTIONS = {"q1": "a", "q2": "b", "q3": "b", "q4": "b"}
''', message="on the way back the gradient is cast to the dtype of the"),
    Answer("predictions", "a wrong letter whose diagnosis only the grading shows (q4: c)", '''
PREDICTIONS = {"q1": "a", "q2": "b", "q3": "a", "q4": "c"}
''', message="the cast itself is allowed: it copies the values"),
]

RIGHT = [
    Answer("copy_to", "clone, then move", '''
def copy_to(t, device):
    return t.clone().to(device)
'''),
    Answer("copy_to", "move, then clone", '''
def copy_to(t, device):
    moved = t.to(device)
    return moved.clone()
'''),
    Answer("copy_to", "copy_ into new memory on the device", '''
def copy_to(t, device):
    out = torch.empty_like(t, device=device)
    return out.copy_(t)
'''),
    Answer("copy_to", "checks the size through the deprecated TypedStorage (prints a warning)", '''
def copy_to(t, device):
    assert t.storage().nbytes() >= t.numel() * t.element_size()
    return t.to(device=torch.device(device), dtype=t.dtype, copy=True)
'''),
    # --- the prediction set: the right letters in any accepted spelling (either case, spaces, parentheses)
    Answer("predictions", "letters in parentheses, with spaces and mixed case", '''
PREDICTIONS = {"q1": "(a)", "q2": " (B) ", "q3": "a ", "q4": "(B)"}
'''),
]
