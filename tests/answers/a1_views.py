"""Learner answers for assignment 1: mistakes that must lose points, other correct ways that must not."""
from harness import Answer

WRONG = [
    Answer("shares_memory", "compares Python objects with `is`", '''
def shares_memory(a, b):
    return a is b
''', message="shares_memory(a, a.detach()) is False; expected True. Likely mistake: a.detach() is a new tensor object"),
    Answer("shares_memory", "compares id()", '''
def shares_memory(a, b):
    return id(a) == id(b)
''', message="[M-id-is-memory: course/01_names_views_storage.ipynb#id()-names-the-object,-not-the-memory]"),
    Answer("shares_memory", "compares the id() of temporaries", '''
def shares_memory(a, b):
    return id(a.data) == id(b.data)
''', message="[M-id-of-temporary: ",
       varies="whether two ids are equal depends on which addresses Python hands the next temporary"),
    Answer("shares_memory", "compares data_ptr() of the first elements", '''
def shares_memory(a, b):
    return a.data_ptr() == b.data_ptr()
''', message="[M-data-ptr-is-storage: "),
    Answer("shares_memory", "compares values", '''
def shares_memory(a, b):
    return a.shape == b.shape and bool(torch.equal(a, b))
''', message="[M-equal-values-shared: "),
    Answer("shares_memory", "returns a tensor instead of a bool", '''
def shares_memory(a, b):
    return torch.tensor(a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())
''', message="expected a bool (True). Likely mistake: return a plain Python value"),
    Answer("add_one_", "rebinds the local name", '''
def add_one_(t):
    t = t + 1
''', message="[M-argument-rebinding: "),
    Answer("add_one_", "returns a new tensor instead of writing in place", '''
def add_one_(t):
    return t + 1
'''),
    Answer("add_one_", "replaces the memory through .data", '''
def add_one_(t):
    t.data = t.data + 1
''', message="a view taken before the call has values tensor([0.0, 0.0, 0.0]) (max difference 1); expected tensor([1.0, 1.0, 1.0]) (within atol=1e-05). Likely mistake: the function gave t new memory"),
    Answer("add_one_", "writes into a contiguous copy", '''
def add_one_(t):
    t.contiguous().add_(1)
'''),
    Answer("plus_one", "adds in place and returns the input", '''
def plus_one(t):
    t += 1
    return t
''', message="t after plus_one(t)"),
    Answer("plus_one", "returns the result of add_", '''
def plus_one(t):
    return t.add_(1)
'''),
    Answer("plus_one", "copies the values into the input", '''
def plus_one(t):
    r = t + 1
    t.copy_(r)
    return r
''', message="_version went from"),
    Answer("plus_one", "changes the dtype", '''
def plus_one(t):
    return t.float() + 1
''', message="dtype"),
    Answer("count_storages", "counts objects", '''
def count_storages(tensors):
    return len({id(t) for t in tensors})
''', message="[M-id-is-memory: "),
    Answer("count_storages", "counts first-element addresses", '''
def count_storages(tensors):
    return len({t.data_ptr() for t in tensors})
''', message="[M-data-ptr-is-storage: "),
    Answer("count_storages", "counts the tensors", '''
def count_storages(tensors):
    return len(tensors)
'''),
    # --- the prediction set: wrong letters fail with their diagnosis
    Answer("predictions", "thinks `a = a + 1` also changes `b`", '''
PREDICTIONS = {"q1": "a", "q2": "a", "q3": "b", "q4": "b"}
''', message="`a = a + 1` builds a new tensor in new memory and moves"),
    Answer("predictions", "expects `reshape` to refuse like `view`", '''
PREDICTIONS = {"q1": "b", "q2": "a", "q3": "b", "q4": "c"}
''', message="only `view` refuses a layout it cannot express"),
    Answer("predictions", "leaves one question as handed out", '''
PREDICTIONS = {"q1": "b", "q2": "?", "q3": "b", "q4": "b"}
''', message='q2: no prediction; expected a letter in PREDICTIONS["q2"]'),
    Answer("predictions", "a wrong letter whose diagnosis only the grading shows (q1: d)", '''
PREDICTIONS = {"q1": "d", "q2": "a", "q3": "b", "q4": "b"}
''', message="`b = a` binds a second name to the same tensor,"),
]

RIGHT = [
    Answer("shares_memory", "compares typed storages (prints a deprecation warning)", '''
def shares_memory(a, b):
    return a.storage().data_ptr() == b.storage().data_ptr()
'''),
    Answer("shares_memory", "compares storages through a helper", '''
def _storage_address(t):
    return t.untyped_storage().data_ptr()

def shares_memory(a, b):
    same = _storage_address(a) == _storage_address(b)
    return bool(same)
'''),
    Answer("add_one_", "augmented assignment", '''
def add_one_(t):
    t += 1
'''),
    Answer("add_one_", "slice assignment", '''
def add_one_(t):
    t[...] = t + 1
'''),
    Answer("add_one_", "out= argument, returning t", '''
def add_one_(t):
    return torch.add(t, 1, out=t)
'''),
    Answer("plus_one", "torch.add", '''
def plus_one(t):
    return torch.add(t, 1)
'''),
    Answer("plus_one", "clone then add in place", '''
def plus_one(t):
    result = t.clone()
    result.add_(1)
    return result
'''),
    Answer("count_storages", "pairwise comparison with shares_memory", '''
def count_storages(tensors):
    seen = []
    for t in tensors:
        if not any(shares_memory(t, s) for s in seen):
            seen.append(t)
    return len(seen)
'''),
    Answer("count_storages", "storage addresses in a dict", '''
def count_storages(tensors):
    by_storage = {}
    for t in tensors:
        by_storage.setdefault(t.untyped_storage().data_ptr(), []).append(t)
    return len(by_storage)
'''),
    # --- the prediction set: the right letters in any accepted spelling (either case, spaces, parentheses)
    Answer("predictions", "upper-case letters", '''
PREDICTIONS = {"q1": "B", "q2": "A", "q3": "B", "q4": "B"}
'''),
]

# Answers that never return: the grader stops the cell at its time limit and fails it, and so does
# `copy-that check` (tests/test_check_agreement.py).  Kept apart from WRONG: each costs a time limit
# per cell that runs it.
LOOPS = [
    Answer("count_storages", "a while loop whose condition never changes", '''
def count_storages(tensors):
    seen = set()
    i = 0
    while i < len(tensors):
        seen.add(tensors[i].untyped_storage().data_ptr())
    return len(seen)
''', message="timed out"),
    Answer("plus_one", "the answer cell itself never ends (a loop left at the top level)", '''
def plus_one(t):
    return t + 1

while True:
    pass
''', message="timed out"),
]
