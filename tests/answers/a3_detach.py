"""Learner answers for assignment 3: mistakes that must lose points, other correct ways that must not."""
from harness import Answer

WRONG = [
    Answer("snapshot", "detach without clone (shares memory)", '''
def snapshot(t):
    return t.detach()
''', message="detach() alone does not copy"),
    Answer("snapshot", "clone without detach (stays in the graph)", '''
def snapshot(t):
    return t.clone()
''', message="clone() copies but stays in the graph"),
    Answer("snapshot", ".data (shares memory)", '''
def snapshot(t):
    return t.data
''', message="nor does .data"),
    Answer("snapshot", "detach().contiguous() copies only non-contiguous inputs", '''
def snapshot(t):
    return t.detach().contiguous()
''', message="shares memory with x"),
    Answer("to_numpy_copy", "detach().numpy() shares memory", '''
def to_numpy_copy(t):
    return t.detach().numpy()
''', message="shares memory with the tensor on the CPU"),
    Answer("to_numpy_copy", "numpy() on a tensor that requires grad", '''
def to_numpy_copy(t):
    return t.numpy()
''', message="Can't call numpy() on Tensor that requires grad"),
    Answer("to_numpy_copy", "numpy(force=True) still shares on the CPU", '''
def to_numpy_copy(t):
    return t.numpy(force=True)
''', message="x after writing into the array"),
    Answer("to_numpy_copy", "through Python floats: float64", '''
def to_numpy_copy(t):
    return np.array(t.tolist())
''', message="float64"),
    Answer("discriminator_loss", "no detach: the loss reaches the generator", '''
def discriminator_loss(generator, discriminator, noise):
    logits = discriminator(generator(noise))
    return F.binary_cross_entropy_with_logits(logits, torch.zeros_like(logits))
''', message="detach the generator's output"),
    Answer("discriminator_loss", "detaches the noise, which never required grad", '''
def discriminator_loss(generator, discriminator, noise):
    logits = discriminator(generator(noise.detach()))
    return F.binary_cross_entropy_with_logits(logits, torch.zeros_like(logits))
''', message="Detaching the noise changes nothing"),
    Answer("discriminator_loss", "target 1 instead of 0", '''
def discriminator_loss(generator, discriminator, noise):
    logits = discriminator(generator(noise).detach())
    return F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits))
''', message="against target 0"),
    Answer("log_loss", "appends the tensor", '''
def log_loss(history, loss):
    history.append(loss)
''', message="is a torch.Tensor"),
    Answer("log_loss", "appends loss.detach(), still a tensor", '''
def log_loss(history, loss):
    history.append(loss.detach())
''', message="expected a Python float"),
    Answer("log_loss", "appends the method loss.item without calling it", '''
def log_loss(history, loss):
    history.append(loss.item)
''', message="builtin_function_or_method"),
    Answer("log_loss", "rebinds the local name instead of appending", '''
def log_loss(history, loss):
    history = history + [loss.item()]
''', message="only rebinds a local name"),
    # --- the prediction set: wrong letters fail with their diagnosis
    Answer("predictions", "thinks detach() copies", '''
PREDICTIONS = {"q1": "a", "q2": "b", "q3": "b", "q4": "b", "q5": "a"}
''', message="`detach()` copies nothing"),
    Answer("predictions", "thinks .data is caught like detach()", '''
PREDICTIONS = {"q1": "b", "q2": "b", "q3": "a", "q4": "b", "q5": "a"}
''', message="`.data` does not share the version counter"),
    Answer("predictions", "a wrong letter whose diagnosis only the grading shows (q4: d)", '''
PREDICTIONS = {"q1": "b", "q2": "b", "q3": "b", "q4": "d", "q5": "a"}
''', message="`clone()` gave `snap` memory of its own, which an"),
]

RIGHT = [
    Answer("snapshot", "clone then detach", '''
def snapshot(t):
    return t.clone().detach()
'''),
    Answer("snapshot", "torch.tensor(t) (prints PyTorch's copy-construct warning)", '''
def snapshot(t):
    return torch.tensor(t)
'''),
    Answer("snapshot", "clone under no_grad", '''
def snapshot(t):
    with torch.no_grad():
        return t.clone()
'''),
    Answer("to_numpy_copy", "np.array(..., copy=True) (prints NumPy's __array__ deprecation warning)", '''
def to_numpy_copy(t):
    return np.array(t.detach(), copy=True)
'''),
    Answer("to_numpy_copy", "clone the tensor, then share with the clone", '''
def to_numpy_copy(t):
    return t.detach().clone().numpy()
'''),
    Answer("to_numpy_copy", "force=True, then copy", '''
def to_numpy_copy(t):
    array = t.numpy(force=True)
    return array.copy()
'''),
    Answer("discriminator_loss", "generator under torch.no_grad()", '''
def discriminator_loss(generator, discriminator, noise):
    with torch.no_grad():
        fake = generator(noise)
    logits = discriminator(fake)
    return F.binary_cross_entropy_with_logits(logits, torch.zeros_like(logits))
'''),
    Answer("discriminator_loss", "softplus form of BCE against 0", '''
def discriminator_loss(generator, discriminator, noise):
    logits = discriminator(generator(noise).detach())
    return F.softplus(logits).mean()
'''),
    Answer("discriminator_loss", "nn.BCEWithLogitsLoss module", '''
def discriminator_loss(generator, discriminator, noise):
    fake = generator(noise)
    logits = discriminator(fake.detach())
    target = torch.zeros(logits.shape)
    return nn.BCEWithLogitsLoss()(logits, target)
'''),
    Answer("log_loss", "float(loss) (prints PyTorch's requires_grad-to-scalar warning)", '''
def log_loss(history, loss):
    history.append(float(loss))
'''),
    Answer("log_loss", "tolist() of a 0-d tensor", '''
def log_loss(history, loss):
    history.append(loss.tolist())
'''),
    Answer("log_loss", "augmented assignment extends the list in place", '''
def log_loss(history, loss):
    history += [loss.detach().item()]
'''),
    # --- the prediction set: the right letters in any accepted spelling (either case, spaces, parentheses)
    Answer("predictions", "upper-case letters", '''
PREDICTIONS = {"q1": "B", "q2": "B", "q3": "B", "q4": "B", "q5": "A"}
'''),
]
