"""Learner answers for assignment 5: mistakes that must lose points, other correct ways that must not."""
from harness import Answer

WRONG = [
    Answer("ema_update_", "rebinds the loop variable", '''
def ema_update_(ema_params, params, decay):
    for e, p in zip(ema_params, params):
        e = decay * e + (1 - decay) * p
''', message="only rebinds"),
    Answer("ema_update_", "gives e new memory through .data", '''
def ema_update_(ema_params, params, decay):
    for e, p in zip(ema_params, params):
        e.data = decay * e.data + (1 - decay) * p.data
''', message="has its own storage"),
    Answer("ema_update_", "updates in place without no_grad", '''
def ema_update_(ema_params, params, decay):
    for e, p in zip(ema_params, params):
        e.mul_(decay).add_(p, alpha=1 - decay)
''', message="grad_fn"),
    Answer("ema_update_", "swaps the weights", '''
def ema_update_(ema_params, params, decay):
    with torch.no_grad():
        for e, p in zip(ema_params, params):
            e.copy_((1 - decay) * e + decay * p)
''', message="decay multiplies the old e"),
    Answer("ema_update_", "replaces the list items", '''
def ema_update_(ema_params, params, decay):
    with torch.no_grad():
        for i, (e, p) in enumerate(zip(ema_params, params)):
            ema_params[i] = decay * e + (1 - decay) * p
''', message="is a different object"),
    Answer("ema_update_", "turns requires_grad off to get past the leaf error", '''
def ema_update_(ema_params, params, decay):
    for e, p in zip(ema_params, params):
        e.requires_grad_(False)
        e.mul_(decay).add_(p.detach(), alpha=1 - decay)
''', message="keep their requires_grad flag"),
    Answer("fill_buffer_", "returns a clone of the batch", '''
def fill_buffer_(buffer, batch):
    return batch.clone()
''', message="is a different object"),
    Answer("fill_buffer_", "rebinds buffer to the converted batch", '''
def fill_buffer_(buffer, batch):
    buffer = batch.to(buffer.dtype)
    return buffer
''', message="is a different object"),
    Answer("fill_buffer_", "gives the buffer new memory through .data", '''
def fill_buffer_(buffer, batch):
    buffer.data = batch.expand_as(buffer).to(buffer.dtype)
    return buffer
''', message="has its own storage"),
    Answer("fill_buffer_", "returns a contiguous copy of the buffer", '''
def fill_buffer_(buffer, batch):
    return buffer.copy_(batch).contiguous()
''', message="not a contiguous copy"),
    Answer("fill_buffer_", "rounds instead of converting like copy_", '''
def fill_buffer_(buffer, batch):
    if not batch.is_floating_point() or buffer.is_floating_point():
        return buffer.copy_(batch)
    return buffer.copy_(batch.round())
''', message="truncates floats toward zero"),
    Answer("restore_", "load_state_dict with assign=True", '''
def restore_(model, checkpoint):
    model.load_state_dict(checkpoint, assign=True)
''', message="is a different object"),
    Answer("restore_", "points .data at the checkpoint", '''
def restore_(model, checkpoint):
    for name, t in model.state_dict(keep_vars=True).items():
        t.data = checkpoint[name]
''', message="has its own storage"),
    Answer("restore_", "restores the parameters but not the buffers", '''
def restore_(model, checkpoint):
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(checkpoint[name])
''', message="running_mean"),
    Answer("restore_", "copies into parameters without no_grad", '''
def restore_(model, checkpoint):
    for name, p in model.named_parameters():
        p.copy_(checkpoint[name])
''', message="leaf Variable"),
    # --- the prediction set: wrong letters fail with their diagnosis
    Answer("predictions", "expects copy_ to round", '''
PREDICTIONS = {"q1": "b", "q2": "a", "q3": "b", "q4": "a"}
''', message="the destination's dtype wins, and floats are truncated"),
    Answer("predictions", "takes state_dict() for a copy", '''
PREDICTIONS = {"q1": "b", "q2": "b", "q3": "b", "q4": "b"}
''', message="`state_dict()` hands out detached aliases of the"),
    Answer("predictions", "a wrong letter whose diagnosis only the grading shows (q2: c)", '''
PREDICTIONS = {"q1": "b", "q2": "c", "q3": "b", "q4": "a"}
''', message="`copy_` converts to the destination's dtype"),
]

RIGHT = [
    Answer("ema_update_", "lerp_ under no_grad", '''
def ema_update_(ema_params, params, decay):
    with torch.no_grad():
        for e, p in zip(ema_params, params):
            e.lerp_(p, 1 - decay)
'''),
    Answer("ema_update_", "foreach lerp over the lists", '''
def ema_update_(ema_params, params, decay):
    with torch.no_grad():
        torch._foreach_lerp_(list(ema_params), list(params), 1 - decay)
'''),
    Answer("ema_update_", "copy_ of the out-of-place average", '''
@torch.no_grad()
def ema_update_(ema_params, params, decay):
    for e, p in zip(ema_params, params):
        e.copy_(decay * e + (1 - decay) * p)
'''),
    Answer("ema_update_", "in-place arithmetic on .data", '''
def ema_update_(ema_params, params, decay):
    for e, p in zip(ema_params, params):
        e.data.mul_(decay)
        e.data.add_((1 - decay) * p.data)
'''),
    Answer("fill_buffer_", "slice assignment", '''
def fill_buffer_(buffer, batch):
    buffer[...] = batch
    return buffer
'''),
    Answer("fill_buffer_", "copies through torch.tensor (prints a UserWarning)", '''
def fill_buffer_(buffer, batch):
    buffer.copy_(torch.tensor(batch))
    return buffer
'''),
    Answer("fill_buffer_", "broadcasts and converts explicitly, then copies", '''
def fill_buffer_(buffer, batch):
    values = torch.broadcast_to(batch, buffer.shape).to(buffer.dtype)
    buffer[:] = values
    return buffer
'''),
    Answer("restore_", "load_state_dict (copies in place)", '''
def restore_(model, checkpoint):
    model.load_state_dict(checkpoint)
'''),
    Answer("restore_", "parameters and buffers, copy_ under no_grad", '''
import itertools

def restore_(model, checkpoint):
    with torch.no_grad():
        named = itertools.chain(model.named_parameters(), model.named_buffers())
        for name, t in named:
            t.copy_(checkpoint[name])
'''),
    Answer("restore_", "copy_ into .data of every state_dict entry", '''
def restore_(model, checkpoint):
    for name, t in model.state_dict(keep_vars=True).items():
        t.data.copy_(checkpoint[name])
'''),
    # --- the prediction set: the right letters in any accepted spelling (either case, spaces, parentheses)
    Answer("predictions", "letters in parentheses, with spaces and mixed case", '''
PREDICTIONS = {"q1": "(b)", "q2": " (B) ", "q3": "b ", "q4": "(A)"}
'''),
]
