"""Learner answers for assignment 9: the buggy loop, each bug alone, and other correct loops."""
import textwrap

from harness import Answer

# The reference solution; each single-bug answer below re-introduces exactly one bug into it.
REFERENCE = '''
def fit(model, batches, epochs, lr, ema_decay):
    ema_model = copy.deepcopy(model)
    ema_model.requires_grad_(False)
    best_state, best_loss = None, float("inf")
    epoch_losses = []
    for epoch in range(epochs):
        batch_losses = []
        for x, y in batches:
            loss = F.mse_loss(model(x), y)
            loss.backward()
            with torch.no_grad():
                for p in model.parameters():
                    if p.grad is not None:
                        p.sub_(lr * p.grad)
                        p.grad = None
                for e, p in zip(ema_model.parameters(), model.parameters()):
                    e.mul_(ema_decay).add_((1 - ema_decay) * p)
            batch_losses.append(loss.item())
        epoch_loss = sum(batch_losses) / len(batch_losses)
        epoch_losses.append(epoch_loss)
        if epoch_loss < best_loss:
            best_loss = epoch_loss
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return best_state, epoch_losses, ema_model
'''

STEP = """                for p in model.parameters():
                    if p.grad is not None:
                        p.sub_(lr * p.grad)
                        p.grad = None
"""
EMA = """                for e, p in zip(ema_model.parameters(), model.parameters()):
                    e.mul_(ema_decay).add_((1 - ema_decay) * p)
"""


def with_bug(*edits: tuple[str, str]) -> str:
    """The reference with each (old, new) edit applied; every old text occurs exactly once."""
    source = REFERENCE
    for old, new in edits:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    return source


BUGGY = '''
def fit(model, batches, epochs, lr, ema_decay):
    ema_model = model                          # the averaged copy of the weights
    best_state, best_loss = None, float("inf")
    epoch_losses = []
    for epoch in range(epochs):
        batch_losses = []
        for x, y in batches:
            loss = F.mse_loss(model(x), y)
            loss.backward()
            with torch.no_grad():
                for e, p in zip(ema_model.parameters(), model.parameters()):
                    e.mul_(ema_decay).add_((1 - ema_decay) * p)
                for p in model.parameters():
                    if p.grad is not None:
                        p = p - lr * p.grad
            batch_losses.append(loss)
        epoch_loss = sum(batch_losses) / len(batch_losses)
        epoch_losses.append(epoch_loss)
        if epoch_loss < best_loss:
            best_loss = epoch_loss
            best_state = model.state_dict()
    return best_state, epoch_losses, ema_model
'''

WRONG = [
    Answer("fit", "buggy_fit handed in unchanged", BUGGY, message="[EMA-copy bug]"),
    # each bug alone
    Answer("fit", "only bug: the aliased checkpoint", with_bug(
        ("best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}",
         "best_state = model.state_dict()")), message="[checkpoint bug]"),
    Answer("fit", "only bug: a loss history of tensors", with_bug(
        ("batch_losses.append(loss.item())", "batch_losses.append(loss)")), message="[loss-history bug]"),
    Answer("fit", "only bug: `ema_model = model`", with_bug(
        ("    ema_model = copy.deepcopy(model)\n    ema_model.requires_grad_(False)\n",
         "    ema_model = model\n")), message="[EMA-copy bug]"),
    Answer("fit", "only bug: EMA parameters that still require grad", with_bug(
        ("    ema_model.requires_grad_(False)\n", "")), message="[EMA requires_grad bug]"),
    Answer("fit", "only bug: the out-of-place update", with_bug(
        ("p.sub_(lr * p.grad)", "p = p - lr * p.grad")), message="[in-place update bug]"),
    Answer("fit", "only bug: gradients never cleared", with_bug(
        ("                        p.grad = None\n", "")), message="[gradient-clearing bug]"),
    Answer("fit", "only bug: the EMA updated before the SGD step", with_bug(
        (STEP + EMA, EMA + STEP)), message="[EMA-placement bug]"),
    Answer("fit", "only bug: the EMA updated once per epoch", with_bug(
        (EMA, ""),
        ("        epoch_loss = sum(", "        with torch.no_grad():\n" + textwrap.indent(textwrap.dedent(EMA), " " * 12) +
         "        epoch_loss = sum(")), message="[EMA-placement bug]"),
    # other ways to get it wrong
    Answer("fit", "a shallow copy.copy(model) for the EMA", with_bug(
        ("    ema_model = copy.deepcopy(model)\n    ema_model.requires_grad_(False)\n",
         "    ema_model = copy.copy(model)\n")), message="[EMA-copy bug]"),
    Answer("fit", "the EMA copy switched to eval mode", with_bug(
        ("ema_model.requires_grad_(False)", "ema_model.requires_grad_(False).eval()")),
        message="ema_model.training"),
    Answer("fit", "new memory under each parameter through .data", with_bug(
        ("p.sub_(lr * p.grad)", "p.data = p.data - lr * p.grad")), message="[in-place update bug]"),
    Answer("fit", "gradients zeroed instead of set to None", with_bug(
        ("p.grad = None", "p.grad.zero_()")), message="[gradient-clearing bug]"),
    Answer("fit", "gradients cleared only once, after training", with_bug(
        ("                        p.grad = None\n", ""),
        ("    return best_state", "    model.zero_grad(set_to_none=True)\n    return best_state")),
        message="[gradient-clearing bug]"),
    Answer("fit", "the latest epoch wins on ties (<=)", with_bug(
        ("if epoch_loss < best_loss:", "if epoch_loss <= best_loss:")), message="the earliest epoch wins"),
    Answer("fit", "a checkpoint of the parameters only, still in the graph", with_bug(
        ("{k: v.detach().clone() for k, v in model.state_dict().items()}",
         "{k: v.clone() for k, v in model.named_parameters()}")), message="the keys of best_state"),
    Answer("fit", "the last batch's loss reported as the epoch loss", with_bug(
        ("epoch_loss = sum(batch_losses) / len(batch_losses)", "epoch_loss = batch_losses[-1]")),
        message="mean of the losses"),
    # --- the prediction set: wrong letters fail with their diagnosis
    Answer("predictions", "thinks rebinding p updates the model", '''
PREDICTIONS = {"q1": "a", "q2": "b", "q3": "a", "q4": "a", "q5": "b"}
''', message="`p - 0.1 * p.grad` is a new tensor and `p = ...` only"),
    Answer("predictions", "thinks backward overwrites .grad", '''
PREDICTIONS = {"q1": "a", "q2": "b", "q3": "a", "q4": "b", "q5": "a"}
''', message="`backward()` adds into `.grad` instead of overwriting it"),
    Answer("predictions", "a wrong letter whose diagnosis only the grading shows (q5: c)", '''
PREDICTIONS = {"q1": "a", "q2": "b", "q3": "a", "q4": "b", "q5": "c"}
''', message="`backward()` adds each new gradient to what"),
]

RIGHT = [
    Answer("fit", "deepcopy of the state_dict, lerp_ for the EMA, float(loss), an optimizer", '''
def fit(model, batches, epochs, lr, ema_decay):
    ema_model = copy.deepcopy(model)
    for q in ema_model.parameters():
        q.requires_grad = False
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    best_state, best_loss, epoch_losses = None, None, []
    for _ in range(epochs):
        total = 0.0
        for x, y in batches:
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            with torch.no_grad():
                for e, p in zip(ema_model.parameters(), model.parameters()):
                    e.lerp_(p, 1 - ema_decay)
            total += float(loss)
        epoch_losses.append(total / len(batches))
        if best_loss is None or epoch_losses[-1] < best_loss:
            best_loss = epoch_losses[-1]
            best_state = copy.deepcopy(model.state_dict())
    return best_state, epoch_losses, ema_model
'''),
    Answer("fit", "a @torch.no_grad() helper for the update, copy_ for the EMA, statistics.fmean", '''
import statistics

@torch.no_grad()
def _sgd_and_ema(model, ema_model, lr, decay):
    for p in model.parameters():
        if p.grad is not None:
            p.add_(p.grad, alpha=-lr)
            p.grad = None
    for e, p in zip(ema_model.parameters(), model.parameters()):
        e.copy_(decay * e + (1 - decay) * p)

def fit(model, batches, epochs, lr, ema_decay):
    ema_model = copy.deepcopy(model).requires_grad_(False)
    best, epoch_losses = None, []
    for _ in range(epochs):
        batch_losses = []
        for x, y in batches:
            loss = F.mse_loss(model(x), y)
            loss.backward()
            _sgd_and_ema(model, ema_model, lr, ema_decay)
            batch_losses.append(loss.item())
        epoch_losses.append(statistics.fmean(batch_losses))
        if best is None or epoch_losses[-1] < min(epoch_losses[:-1]):
            best = {name: t.clone() for name, t in model.state_dict().items()}
    return best, epoch_losses, ema_model
'''),
    Answer("fit", "checkpoint with torch.tensor(v) (prints a UserWarning), .data updates", '''
def fit(model, batches, epochs, lr, ema_decay):
    ema_model = copy.deepcopy(model)
    ema_model.requires_grad_(False)
    ema_params = list(ema_model.parameters())
    best_state, best_loss = {}, float("inf")
    epoch_losses = []
    for epoch in range(epochs):
        losses = []
        for x, y in batches:
            loss = F.mse_loss(model(x), y)
            loss.backward()
            for p in model.parameters():
                if p.grad is not None:
                    p.data.sub_(lr * p.grad)
                    p.grad = None
            for e, p in zip(ema_params, model.parameters()):
                e.data.mul_(ema_decay).add_(p.data, alpha=1 - ema_decay)
            losses.append(loss.detach().item())
        epoch_losses.append(sum(losses) / len(losses))
        if epoch_losses[-1] < best_loss:
            best_loss = epoch_losses[-1]
            best_state = {k: torch.tensor(v) for k, v in model.state_dict().items()}
    return best_state, epoch_losses, ema_model
'''),
    Answer("fit", "a deepcopy of the state every epoch, the best picked at the end, model.zero_grad(), *= and +=", '''
def fit(model, batches, epochs, lr, ema_decay):
    ema_model = copy.deepcopy(model)
    ema_model.requires_grad_(False)
    epoch_losses, snapshots = [], []
    for epoch in range(epochs):
        batch_losses = []
        for x, y in batches:
            loss = F.mse_loss(model(x), y)
            loss.backward()
            with torch.no_grad():
                for p in model.parameters():
                    if p.grad is not None:
                        p -= lr * p.grad
                model.zero_grad()
                for e, p in zip(ema_model.parameters(), model.parameters()):
                    e *= ema_decay
                    e += (1 - ema_decay) * p
            batch_losses.append(loss.item())
        epoch_losses.append(sum(batch_losses) / len(batch_losses))
        snapshots.append(copy.deepcopy(model.state_dict()))
    best_epoch = epoch_losses.index(min(epoch_losses))
    return snapshots[best_epoch], epoch_losses, ema_model
'''),
    # --- the prediction set: the right letters in any accepted spelling (either case, spaces, parentheses)
    Answer("predictions", "upper-case letters", '''
PREDICTIONS = {"q1": "A", "q2": "B", "q3": "A", "q4": "B", "q5": "B"}
'''),
]
