"""Learner answers for assignment 6: mistakes that must lose points, other correct ways that must not."""
from harness import Answer

WRONG = [
    Answer("checkpoint", "returns state_dict() itself", '''
def checkpoint(model):
    return model.state_dict()
''', message="detached *aliases*"),
    Answer("checkpoint", "copies the dict, not the tensors", '''
def checkpoint(model):
    return dict(model.state_dict())
''', message="shares memory with"),
    Answer("checkpoint", "shallow copy of the state_dict", '''
def checkpoint(model):
    return copy.copy(model.state_dict())
''', message="detached *aliases*"),
    Answer("checkpoint", "detach without clone", '''
def checkpoint(model):
    return {k: v.detach() for k, v in model.state_dict().items()}
''', message="shares memory with"),
    Answer("checkpoint", "clones the parameters only (no buffers, still in the graph)", '''
def checkpoint(model):
    return {k: p.clone() for k, p in model.named_parameters()}
'''),
    Answer("checkpoint", "clones the Parameters of keep_vars=True (still in the graph)", '''
def checkpoint(model):
    return {k: v.clone() for k, v in model.state_dict(keep_vars=True).items()}
''', message="requires_grad is True"),
    Answer("clone_model", "copy.copy (shallow)", '''
def clone_model(model):
    return copy.copy(model)
''', message="copy.copy(model) copies only the outer object"),
    Answer("clone_model", "rebuilds with type(model)() and loads the state_dict", '''
def clone_model(model):
    new = type(model)()
    new.load_state_dict(model.state_dict())
    return new
''', message="constructor needs arguments"),
    Answer("clone_model", "returns the model itself", '''
def clone_model(model):
    return model
''', message="return a copy, not the model itself"),
    Answer("clone_model", "deepcopy, then load_state_dict with assign=True", '''
def clone_model(model):
    new = copy.deepcopy(model)
    new.load_state_dict(model.state_dict(), assign=True)
    return new
'''),
    Answer("copy_preserving_sharing", "clones each tensor", '''
def copy_preserving_sharing(tensors):
    return [t.clone() for t in tensors]
''', message="Copy each storage once"),
    Answer("copy_preserving_sharing", "one deepcopy per tensor", '''
def copy_preserving_sharing(tensors):
    return [copy.deepcopy(t) for t in tensors]
''', message="copies of x and x[1:3] share memory"),
    Answer("copy_preserving_sharing", "copies the list, not the tensors", '''
def copy_preserving_sharing(tensors):
    return list(tensors)
''', message="the copies must own their memory"),
    Answer("copy_preserving_sharing", "clones each tensor's whole base separately", '''
def copy_preserving_sharing(tensors):
    out = []
    for t in tensors:
        whole = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage())
        out.append(whole.clone().as_strided(t.size(), t.stride(), t.storage_offset()))
    return out
'''),
    # --- the prediction set: wrong letters fail with their diagnosis
    Answer("predictions", "believes deepcopy copies the graph", '''
PREDICTIONS = {"q1": "a", "q2": "a", "q3": "b", "q4": "a", "q5": "b"}
''', message="`deepcopy` copies no graph"),
    Answer("predictions", "takes state_dict() for a checkpoint", '''
PREDICTIONS = {"q1": "c", "q2": "a", "q3": "b", "q4": "a", "q5": "a"}
''', message="the values of `state_dict()` are detached aliases of the"),
    Answer("predictions", "a wrong letter whose diagnosis only the grading shows (q1: b)", '''
PREDICTIONS = {"q1": "b", "q2": "a", "q3": "b", "q4": "a", "q5": "b"}
''', message="`deepcopy` does not detach for you: it refuses"),
]

RIGHT = [
    Answer("checkpoint", "deepcopy of the state_dict", '''
def checkpoint(model):
    return copy.deepcopy(model.state_dict())
'''),
    Answer("checkpoint", "clone of the (already detached) state_dict tensors", '''
def checkpoint(model):
    snapshot = {}
    for name, tensor in model.state_dict().items():
        snapshot[name] = tensor.clone()
    return snapshot
'''),
    Answer("checkpoint", "torch.tensor copy-construction (prints a UserWarning)", '''
def checkpoint(model):
    return {k: torch.tensor(v) for k, v in model.state_dict().items()}
'''),
    Answer("clone_model", "pickle round trip", '''
import pickle

def clone_model(model):
    return pickle.loads(pickle.dumps(model))
'''),
    Answer("clone_model", "torch.save and torch.load through memory", '''
import io

def clone_model(model):
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)
'''),
    Answer("copy_preserving_sharing", "one deepcopy of the whole list", '''
def copy_preserving_sharing(tensors):
    return copy.deepcopy(tensors)
'''),
    Answer("copy_preserving_sharing", "clone each base once, rebuild views with as_strided", '''
def copy_preserving_sharing(tensors):
    bases = {}
    out = []
    for t in tensors:
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key not in bases:
            whole = torch.empty(0, dtype=t.dtype).set_(storage)
            bases[key] = whole.clone()
        out.append(bases[key].as_strided(t.size(), t.stride(), t.storage_offset()))
    return out
'''),
    # --- the prediction set: the right letters in any accepted spelling (either case, spaces, parentheses)
    Answer("predictions", "upper-case letters", '''
PREDICTIONS = {"q1": "C", "q2": "A", "q3": "B", "q4": "A", "q5": "B"}
'''),
]
