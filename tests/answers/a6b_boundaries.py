"""Learner answers for assignment 6b: mistakes that must lose points, other correct ways that must not."""
from harness import Answer

WRONG = [
    # --- tensor_from_array ------------------------------------------------------------------------
    Answer("tensor_from_array", "torch.from_numpy wraps the array's buffer", '''
def tensor_from_array(arr):
    return torch.from_numpy(arr)
''', message="wrap the array's own buffer"),
    Answer("tensor_from_array", "torch.as_tensor shares when the dtype is kept", '''
def tensor_from_array(arr):
    return torch.as_tensor(arr)
''', message="shares memory with arr"),
    Answer("tensor_from_array", "torch.asarray shares too", '''
def tensor_from_array(arr):
    return torch.asarray(arr)
''', message="shares memory with arr"),
    Answer("tensor_from_array", "through a Python list: float64 becomes float32", '''
def tensor_from_array(arr):
    return torch.tensor(arr.tolist())
''', message="has dtype torch.float32"),
    Answer("tensor_from_array", "the legacy torch.Tensor constructor: always the default dtype, float32", '''
def tensor_from_array(arr):
    return torch.Tensor(arr)
''', message="torch.Tensor(arr) always gives the default dtype"),
    Answer("tensor_from_array", "torch.tensor copies but refuses negative strides", '''
def tensor_from_array(arr):
    return torch.tensor(arr)
''', message="negative strides"),
    Answer("tensor_from_array", "from_numpy then clone: refuses negative strides", '''
def tensor_from_array(arr):
    return torch.from_numpy(arr).clone()
''', message="raised ValueError"),
    Answer("tensor_from_array", "asarray with copy=True: refuses negative strides", '''
def tensor_from_array(arr):
    return torch.asarray(arr, copy=True)
''', message="negative strides"),
    Answer("tensor_from_array", "np.ascontiguousarray returns a contiguous array itself", '''
def tensor_from_array(arr):
    return torch.from_numpy(np.ascontiguousarray(arr))
''', message="np.ascontiguousarray returns arr itself"),
    # --- save_compact -----------------------------------------------------------------------------
    Answer("save_compact", "saves the view: its whole storage", '''
def save_compact(t, path):
    torch.save(t, path)
''', message="writes the whole storage behind a view"),
    Answer("save_compact", "contiguous() of a contiguous slice is the slice", '''
def save_compact(t, path):
    torch.save(t.contiguous(), path)
''', message="fits in"),
    Answer("save_compact", "detach() shares the storage", '''
def save_compact(t, path):
    torch.save(t.detach(), path)
''', message="writes the whole storage behind a view"),
    Answer("save_compact", "copy.deepcopy of a view copies its whole base", '''
def save_compact(t, path):
    torch.save(copy.deepcopy(t), path)
''', message="copy.deepcopy of a view copies its whole base"),
    Answer("save_compact", "a same-shape view() is still a view", '''
def save_compact(t, path):
    torch.save(t.view(t.shape), path)
''', message="fits in"),
    Answer("save_compact", "compacts t itself through .data", '''
def save_compact(t, path):
    t.data = t.clone()
    torch.save(t, path)
''', message="keeps its storage"),
    Answer("save_compact", "saves a NumPy array instead of the tensor", '''
def save_compact(t, path):
    torch.save(t.numpy().copy(), path)
''', message="not a NumPy array"),
    Answer("save_compact", "saves a list of numbers", '''
def save_compact(t, path):
    torch.save(t.tolist(), path)
''', message="not a list, a dict or an array"),
    # --- snapshot_optimizer -----------------------------------------------------------------------
    Answer("snapshot_optimizer", "returns state_dict() itself", '''
def snapshot_optimizer(optimizer):
    return optimizer.state_dict()
''', message="shares memory with the optimizer's live buffer"),
    Answer("snapshot_optimizer", "a shallow copy.copy of the state dict", '''
def snapshot_optimizer(optimizer):
    return copy.copy(optimizer.state_dict())
''', message="dict(), copy.copy() and copying the inner dicts keep those very tensors"),
    Answer("snapshot_optimizer", "copies the inner dicts, not the tensors", '''
def snapshot_optimizer(optimizer):
    sd = optimizer.state_dict()
    return {"state": {i: dict(s) for i, s in sd["state"].items()}, "param_groups": list(sd["param_groups"])}
''', message="shares memory"),
    Answer("snapshot_optimizer", "clones into the dicts state_dict() returned (the optimizer's own)", '''
def snapshot_optimizer(optimizer):
    sd = optimizer.state_dict()
    for state in sd["state"].values():
        for key, value in state.items():
            if torch.is_tensor(value):
                state[key] = value.clone()
    return sd
''', message="shares memory"),
    Answer("snapshot_optimizer", "deep-copies the state but keeps the live param_groups", '''
def snapshot_optimizer(optimizer):
    return {"state": copy.deepcopy(optimizer.state_dict()["state"]), "param_groups": optimizer.param_groups}
''', message="'param_groups' must be copies too"),
    Answer("snapshot_optimizer", "deep-copies optimizer.state, not the state dict", '''
def snapshot_optimizer(optimizer):
    return copy.deepcopy(optimizer.state)
''', message="not optimizer.state"),
    Answer("snapshot_optimizer", "clones only SGD's momentum buffers", '''
def snapshot_optimizer(optimizer):
    sd = optimizer.state_dict()
    state = {i: {"momentum_buffer": s["momentum_buffer"].clone()} for i, s in sd["state"].items()}
    return {"state": state, "param_groups": sd["param_groups"]}
''', message="momentum_buffer"),
    # --- detached_parameter -----------------------------------------------------------------------
    Answer("detached_parameter", "nn.Parameter(t) wraps t's memory", '''
def detached_parameter(t):
    return nn.Parameter(t)
''', message="wrap t's own memory"),
    Answer("detached_parameter", "nn.Parameter(t.detach()) wraps it too", '''
def detached_parameter(t):
    return nn.Parameter(t.detach())
''', message="shares memory with t"),
    Answer("detached_parameter", "nn.Parameter(t.data) wraps it too", '''
def detached_parameter(t):
    return nn.Parameter(t.data)
''', message="shares memory with t"),
    Answer("detached_parameter", "contiguous() of a contiguous tensor is the tensor", '''
def detached_parameter(t):
    return nn.Parameter(t.contiguous())
''', message="shares memory with t"),
    Answer("detached_parameter", "a plain tensor that requires grad, not a Parameter", '''
def detached_parameter(t):
    return t.detach().clone().requires_grad_()
''', message="expected a Parameter"),
    Answer("detached_parameter", "copies t's requires_grad flag", '''
def detached_parameter(t):
    return nn.Parameter(t.detach().clone(), requires_grad=t.requires_grad)
''', message="copies t's flag"),
    Answer("detached_parameter", "detach_() takes t itself out of its graph", '''
def detached_parameter(t):
    return nn.Parameter(t.detach_().clone())
''', message="detach_() took t itself out of its graph"),
    Answer("detached_parameter", "converts to float32", '''
def detached_parameter(t):
    return nn.Parameter(t.detach().to(torch.float32).clone())
''', message="has dtype torch.float32"),
    # --- hidden_grad ------------------------------------------------------------------------------
    Answer("hidden_grad", "h.grad without retain_grad() is None", '''
def hidden_grad(w1, w2, x):
    h = torch.tanh(x @ w1)
    loss = (h @ w2).pow(2).sum()
    loss.backward()
    return h.grad
''', message="h.retain_grad()"),
    Answer("hidden_grad", "retain_grad() called after backward", '''
def hidden_grad(w1, w2, x):
    h = torch.tanh(x @ w1)
    loss = (h @ w2).pow(2).sum()
    loss.backward()
    h.retain_grad()
    return h.grad
''', message="is None"),
    Answer("hidden_grad", "resets the gradients before backward", '''
def hidden_grad(w1, w2, x):
    w1.grad = None
    w2.grad = None
    h = torch.tanh(x @ w1)
    h.retain_grad()
    (h @ w2).pow(2).sum().backward()
    return h.grad
''', message="backward accumulates"),
    Answer("hidden_grad", "torch.autograd.grad alone fills no .grad", '''
def hidden_grad(w1, w2, x):
    h = torch.tanh(x @ w1)
    loss = (h @ w2).pow(2).sum()
    return torch.autograd.grad(loss, h)[0]
''', message="torch.autograd.grad alone"),
    Answer("hidden_grad", "autograd.grad for all three, then assigns w.grad = g", '''
def hidden_grad(w1, w2, x):
    h = torch.tanh(x @ w1)
    loss = (h @ w2).pow(2).sum()
    gh, g1, g2 = torch.autograd.grad(loss, (h, w1, w2))
    w1.grad = g1
    w2.grad = g2
    return gh
''', message="assigning w.grad = g"),
    Answer("hidden_grad", "a detached h cuts w1 off", '''
def hidden_grad(w1, w2, x):
    h = torch.tanh(x @ w1).detach().requires_grad_()
    (h @ w2).pow(2).sum().backward()
    return h.grad
''', message="w1.grad is None"),
    Answer("hidden_grad", "returns the gradient before the tanh", '''
def hidden_grad(w1, w2, x):
    z = x @ w1
    z.retain_grad()
    h = torch.tanh(z)
    (h @ w2).pow(2).sum().backward()
    return z.grad
''', message="after the tanh, not before it"),
    Answer("hidden_grad", "the gradient by formula, still in the graph", '''
def hidden_grad(w1, w2, x):
    h = torch.tanh(x @ w1)
    out = h @ w2
    out.pow(2).sum().backward()
    return 2 * out @ w2.T
''', message="must not require grad"),
    Answer("hidden_grad", "backward with create_graph=True", '''
def hidden_grad(w1, w2, x):
    h = torch.tanh(x @ w1)
    h.retain_grad()
    (h @ w2).pow(2).sum().backward(create_graph=True)
    return h.grad
''', message="requires_grad is True"),
    # --- the prediction set: wrong letters fail with their diagnosis
    Answer("predictions", "thinks `contiguous()` makes a slice save small", '''
PREDICTIONS = {"q1": "b", "q2": "c", "q3": "b", "q4": "a", "q5": "b"}
''', message="[M-reshape-views: "),
    Answer("predictions", "thinks `state_dict()` is a snapshot", '''
PREDICTIONS = {"q1": "b", "q2": "b", "q3": "a", "q4": "a", "q5": "b"}
''', message="q3: you predicted (a); expected another choice. Likely mistake: the `\"state\"` of `state_dict()`"),
    Answer("predictions", "thinks `torch.tensor(a)` shares the array's memory", '''
PREDICTIONS = {"q1": "a", "q2": "b", "q3": "b", "q4": "a", "q5": "b"}
''', message="[M-constructors-share: course/06b_boundaries.ipynb#1.-From-NumPy:-three-ways-share,-one-copies]"),
    Answer("predictions", "a wrong letter whose diagnosis only the grading shows (q5: c)", '''
PREDICTIONS = {"q1": "b", "q2": "b", "q3": "b", "q4": "a", "q5": "c"}
''', message="backward runs through non-leaves without"),
]

RIGHT = [
    # --- tensor_from_array ------------------------------------------------------------------------
    Answer("tensor_from_array", "from_numpy of a C-ordered copy", '''
def tensor_from_array(arr):
    return torch.from_numpy(arr.copy())
'''),
    Answer("tensor_from_array", "torch.tensor of a contiguous array", '''
def tensor_from_array(arr):
    return torch.tensor(np.ascontiguousarray(arr))
'''),
    Answer("tensor_from_array", "as_tensor of a copy, then clone", '''
def tensor_from_array(arr):
    return torch.as_tensor(np.copy(arr, order="C")).clone()
'''),
    # --- save_compact -----------------------------------------------------------------------------
    Answer("save_compact", "clone into a contiguous tensor", '''
def save_compact(t, path):
    torch.save(t.clone(memory_format=torch.contiguous_format), path)
'''),
    Answer("save_compact", "torch.tensor(t) copies (prints a UserWarning)", '''
def save_compact(t, path):
    torch.save(torch.tensor(t), path)
'''),
    Answer("save_compact", "copy_ into a new tensor, written through an open file", '''
def save_compact(t, path):
    compact = torch.empty(t.shape, dtype=t.dtype)
    compact.copy_(t)
    with open(path, "wb") as f:
        torch.save(compact, f)
'''),
    # --- snapshot_optimizer -----------------------------------------------------------------------
    Answer("snapshot_optimizer", "clones every tensor, copies every dict", '''
def snapshot_optimizer(optimizer):
    sd = optimizer.state_dict()
    state = {i: {k: (v.clone() if torch.is_tensor(v) else copy.deepcopy(v)) for k, v in s.items()}
             for i, s in sd["state"].items()}
    groups = [copy.deepcopy(g) for g in sd["param_groups"]]
    return {"state": state, "param_groups": groups}
'''),
    Answer("snapshot_optimizer", "a round trip through torch.save and torch.load in memory", '''
import io

def snapshot_optimizer(optimizer):
    buffer = io.BytesIO()
    torch.save(optimizer.state_dict(), buffer)
    buffer.seek(0)
    return torch.load(buffer)
'''),
    # --- detached_parameter -----------------------------------------------------------------------
    Answer("detached_parameter", "nn.Parameter(t.clone()): the Parameter is a new leaf", '''
def detached_parameter(t):
    return nn.Parameter(t.clone())
'''),
    Answer("detached_parameter", "torch.tensor(t) copies (prints a UserWarning)", '''
def detached_parameter(t):
    return nn.Parameter(torch.tensor(t))
'''),
    Answer("detached_parameter", "an empty Parameter filled with copy_ under no_grad", '''
def detached_parameter(t):
    p = nn.Parameter(torch.empty_like(t, requires_grad=False))
    with torch.no_grad():
        p.copy_(t)
    return p
'''),
    # --- hidden_grad ------------------------------------------------------------------------------
    Answer("hidden_grad", "a hook catches the gradient as it flows", '''
def hidden_grad(w1, w2, x):
    h = torch.tanh(x @ w1)
    caught = []
    h.register_hook(caught.append)
    (h @ w2).pow(2).sum().backward()
    return caught[0]
'''),
    Answer("hidden_grad", "backward with inputs= names h too", '''
def hidden_grad(w1, w2, x):
    h = torch.tanh(x @ w1)
    (h @ w2).pow(2).sum().backward(inputs=[h, w1, w2])
    return h.grad
'''),
    Answer("hidden_grad", "autograd.grad, then accumulates by hand", '''
def hidden_grad(w1, w2, x):
    h = torch.tanh(x @ w1)
    loss = (h @ w2).pow(2).sum()
    gh, g1, g2 = torch.autograd.grad(loss, (h, w1, w2))
    for w, g in ((w1, g1), (w2, g2)):
        if w.grad is None:
            w.grad = g
        else:
            w.grad += g
    return gh
'''),
    # --- the prediction set: the right letters in any accepted spelling (either case, spaces, parentheses)
    Answer("predictions", "letters in parentheses, with spaces", '''
PREDICTIONS = {"q1": " (B) ", "q2": "B", "q3": "(b)", "q4": "a", "q5": " b"}
'''),
]
