"""Learner answers for assignment 4: mistakes that must lose points, other correct ways that must not."""
from harness import Answer

WRONG = [
    Answer("evaluate", "forgets torch.no_grad(): the forward passes record a graph", '''
def evaluate(model, batches, loss_fn):
    was_training = model.training
    model.eval()
    total = 0.0
    for x, y in batches:
        total += loss_fn(model(x), y).item()
    model.train(was_training)
    return total / len(batches)
''', message="torch.is_grad_enabled() inside model.forward"),
    Answer("evaluate", "forgets model.eval(): Dropout stays on", '''
def evaluate(model, batches, loss_fn):
    total = 0.0
    with torch.no_grad():
        for x, y in batches:
            total += loss_fn(model(x), y).item()
    return total / len(batches)
''', message="call model.eval() before the loop"),
    Answer("evaluate", "does not restore the mode: leaves the model in eval mode", '''
def evaluate(model, batches, loss_fn):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for x, y in batches:
            total += loss_fn(model(x), y).item()
    return total / len(batches)
''', message="model.training after evaluate"),
    Answer("evaluate", "always calls model.train() at the end", '''
def evaluate(model, batches, loss_fn):
    model.eval()
    with torch.no_grad():
        losses = [loss_fn(model(x), y).item() for x, y in batches]
    model.train()
    return sum(losses) / len(losses)
''', message="restore the mode it had"),
    Answer("evaluate", "returns a tensor instead of a float", '''
def evaluate(model, batches, loss_fn):
    was_training = model.training
    model.eval()
    with torch.no_grad():
        total = sum(loss_fn(model(x), y) for x, y in batches)
    model.train(was_training)
    return total / len(batches)
''', message="a Python float"),
    Answer("evaluate", "averages per sample (weights batches by their size)", '''
def evaluate(model, batches, loss_fn):
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for x, y in batches:
            total += loss_fn(model(x), y).item() * len(x)
            count += len(x)
    model.train(was_training)
    return total / count
''', message="do not weight them by batch size"),
    Answer("evaluate", "clears the gradients with model.zero_grad()", '''
def evaluate(model, batches, loss_fn):
    was_training = model.training
    model.eval()
    total = 0.0
    with torch.no_grad():
        for x, y in batches:
            total += loss_fn(model(x), y).item()
    model.zero_grad()
    model.train(was_training)
    return total / len(batches)
''', message="evaluation must leave .grad alone"),
    Answer("sgd_step_", "rebinds the loop variable: p = p - lr * p.grad", '''
def sgd_step_(params, lr):
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p = p - lr * p.grad
                p.grad = None
''', message="only rebinds the loop variable"),
    Answer("sgd_step_", "gives the parameter new memory: p.data = p.data - ...", '''
def sgd_step_(params, lr):
    for p in params:
        if p.grad is not None:
            p.data = p.data - lr * p.grad
            p.grad = None
''', message="keeps its storage"),
    Answer("sgd_step_", "does not clear the gradient", '''
def sgd_step_(params, lr):
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p.sub_(lr * p.grad)
''', message="set p.grad = None"),
    Answer("sgd_step_", "zeroes the gradient instead of setting it to None", '''
def sgd_step_(params, lr):
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p.sub_(lr * p.grad)
                p.grad.zero_()
''', message="zero_() leaves a tensor of zeros"),
    Answer("sgd_step_", "updates in place outside no_grad", '''
def sgd_step_(params, lr):
    for p in params:
        if p.grad is not None:
            p -= lr * p.grad
            p.grad = None
''', message="a leaf Variable that requires grad is being used in an in-place operation"),
    Answer("sgd_step_", "loops twice over a generator: the second loop sees nothing", '''
def sgd_step_(params, lr):
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p.sub_(lr * p.grad)
    for p in params:
        p.grad = None
''', message="a second loop over it sees nothing"),
    Answer("sgd_step_", "does not skip tensors whose .grad is None", '''
def sgd_step_(params, lr):
    with torch.no_grad():
        for p in params:
            p.sub_(lr * p.grad)
            p.grad = None
''', message="unsupported operand"),
    # --- the prediction set: wrong letters fail with their diagnosis
    Answer("predictions", "thinks no_grad switches Dropout off", '''
PREDICTIONS = {"q1": "b", "q2": "b", "q3": "b", "q4": "a", "q5": "a"}
''', message="grad mode only decides what is recorded"),
    Answer("predictions", "misses the no_grad view trap", '''
PREDICTIONS = {"q1": "b", "q2": "a", "q3": "b", "q4": "a", "q5": "b"}
''', message="a view inherits `requires_grad=True` from its base even"),
    Answer("predictions", "a wrong letter whose diagnosis only the grading shows (q3: c)", '''
PREDICTIONS = {"q1": "b", "q2": "a", "q3": "c", "q4": "a", "q5": "a"}
''', message="a leaf cannot record an in-place operation"),
]

RIGHT = [
    Answer("evaluate", "a @torch.no_grad() helper for the loop, try/finally left out", '''
@torch.no_grad()
def _mean_loss(model, batches, loss_fn):
    losses = [float(loss_fn(model(x), y)) for x, y in batches]
    return sum(losses) / len(losses)

def evaluate(model, batches, loss_fn):
    mode = model.training
    model.eval()
    result = _mean_loss(model, batches, loss_fn)
    model.train(mode)
    return result
'''),
    Answer("evaluate", "torch.inference_mode() and a tensor mean turned into a float", '''
def evaluate(model, batches, loss_fn):
    was_training = model.training
    model.eval()
    with torch.inference_mode():
        losses = torch.stack([loss_fn(model(x), y) for x, y in batches])
        result = losses.mean().item()
    model.train(was_training)
    return result
'''),
    Answer("evaluate", "set_grad_enabled(False), and torch.tensor(loss) (prints a UserWarning)", '''
def evaluate(model, batches, loss_fn):
    was_training = model.training
    model.eval()
    total = 0.0
    with torch.set_grad_enabled(False):
        for x, y in batches:
            total += float(torch.tensor(loss_fn(model(x), y)))
    if was_training:
        model.train()
    return total / len(batches)
'''),
    Answer("sgd_step_", "p.add_(p.grad, alpha=-lr) in a @torch.no_grad decorated function", '''
@torch.no_grad
def sgd_step_(params, lr):
    for p in params:
        if p.grad is not None:
            p.add_(p.grad, alpha=-lr)
            p.grad = None
'''),
    Answer("sgd_step_", "copy_ the new values into p under no_grad", '''
def sgd_step_(params, lr):
    for p in params:
        if p.grad is None:
            continue
        with torch.no_grad():
            p.copy_(p - lr * p.grad)
        p.grad = None
'''),
    Answer("sgd_step_", "writes through p.data (meets the spec; autograd does not see the write)", '''
def sgd_step_(params, lr):
    for p in params:
        if p.grad is not None:
            p.data.sub_(lr * p.grad)
            p.grad = None
'''),
    # --- the prediction set: the right letters in any accepted spelling (either case, spaces, parentheses)
    Answer("predictions", "upper-case letters", '''
PREDICTIONS = {"q1": "B", "q2": "A", "q3": "B", "q4": "A", "q5": "A"}
'''),
]
