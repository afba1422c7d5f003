"""Learner answers for assignment 7: mistakes that must lose points, other correct ways that must not."""
from harness import Answer

WRONG = [
    Answer("reaches", "runs backward and looks at leaf.grad", '''
def reaches(output, leaf):
    if output.grad_fn is None:
        return False
    output.sum().backward()
    return leaf.grad is not None
''', message="Trying to backward through the graph a second time"),
    Answer("reaches", "backward with retain_graph, then resets only leaf.grad", '''
def reaches(output, leaf):
    if output.grad_fn is None:
        return False
    output.sum().backward(retain_graph=True)
    found = leaf.grad is not None
    leaf.grad = None
    return found
''', message="reaches() must only walk the graph"),
    Answer("reaches", "compares AccumulateGrad.variable by value", '''
def reaches(output, leaf):
    stack = [output.grad_fn]
    while stack:
        node = stack.pop()
        if node is None:
            continue
        if hasattr(node, "variable") and node.variable.shape == leaf.shape and torch.equal(node.variable, leaf):
            return True
        stack.extend(child for child, _ in node.next_functions)
    return False
''', message="equal values do not make the same leaf"),
    Answer("reaches", "looks only at the direct children of output.grad_fn", '''
def reaches(output, leaf):
    if output.grad_fn is None:
        return False
    return any(getattr(child, "variable", None) is leaf for child, _ in output.grad_fn.next_functions)
''', message="x's AccumulateGrad is two steps from y.grad_fn"),
    Answer("reaches", "compares storages instead of objects", '''
def reaches(output, leaf):
    ptr = leaf.untyped_storage().data_ptr()
    stack = [output.grad_fn]
    while stack:
        node = stack.pop()
        if node is None:
            continue
        if hasattr(node, "variable") and node.variable.untyped_storage().data_ptr() == ptr:
            return True
        stack.extend(child for child, _ in node.next_functions)
    return False
''', message="compare objects with `is`, not storages"),
    Answer("reaches", "returns None when there is no grad_fn", '''
def reaches(output, leaf):
    if output.grad_fn is None:
        return
    stack = [output.grad_fn]
    while stack:
        node = stack.pop()
        if node is None:
            continue
        if getattr(node, "variable", None) is leaf:
            return True
        stack.extend(child for child, _ in node.next_functions)
    return False
''', message="is a NoneType"),
    Answer("reaches", "stops at the first None edge", '''
def reaches(output, leaf):
    node = output.grad_fn
    stack = [node]
    while stack:
        node = stack.pop()
        if node is None:
            return False
        if getattr(node, "variable", None) is leaf:
            return True
        stack.extend(child for child, _ in node.next_functions)
    return False
''', message="skip the None entries"),
    Answer("backward_ops", "returns a list", '''
def backward_ops(output):
    names = []
    stack = [output.grad_fn]
    while stack:
        node = stack.pop()
        if node is None:
            continue
        names.append(type(node).__name__)
        stack.extend(child for child, _ in node.next_functions)
    return names
''', message="expected a set"),
    Answer("backward_ops", "keeps only names with 'Backward' (loses AccumulateGrad, CopySlices)", '''
def backward_ops(output):
    names = set()
    stack = [output.grad_fn]
    while stack:
        node = stack.pop()
        if node is None:
            continue
        if "Backward" in type(node).__name__:
            names.add(type(node).__name__)
        stack.extend(child for child, _ in node.next_functions)
    return names
''', message="'AccumulateGrad' in backward_ops(y)"),
    Answer("backward_ops", "starts at the children, missing output.grad_fn", '''
def backward_ops(output):
    names = set()
    if output.grad_fn is None:
        return names
    stack = [child for child, _ in output.grad_fn.next_functions]
    while stack:
        node = stack.pop()
        if node is None:
            continue
        names.add(type(node).__name__)
        stack.extend(child for child, _ in node.next_functions)
    return names
''', message="include that node too"),
    Answer("backward_ops", "uses node.name()", '''
def backward_ops(output):
    names = set()
    stack = [output.grad_fn]
    while stack:
        node = stack.pop()
        if node is None:
            continue
        names.add(node.name())
        stack.extend(child for child, _ in node.next_functions)
    return names
''', message="not node.name()"),
    Answer("backward_ops", "adds 'NoneType' for the None edges", '''
def backward_ops(output):
    if output.grad_fn is None:
        return set()
    names = set()
    stack = [output.grad_fn]
    while stack:
        node = stack.pop()
        names.add(type(node).__name__)
        stack.extend(child for child, _ in getattr(node, "next_functions", ()))
    return names
''', message="skip them instead of adding type(None).__name__"),
    Answer("graph_answer", "A: a float64 conversion of w (would add ToCopyBackward0)", '''
graph_answer = "A"
''', message="graph_answer is 'A'; expected another choice. Hint: `w.to(torch.float64)` is a real conversion"),
    Answer("graph_answer", "C: x.detach().clone() (would have no CloneBackward0)", '''
graph_answer = "C"
''', message="in the picture an arrow runs from x's `AccumulateGrad` through `CloneBackward0` into `CopySlices`"),
    Answer("graph_answer", "D: x.detach() in the product (no arrow from x's AccumulateGrad into MulBackward0)", '''
graph_answer = "D"
''', message="a second arrow comes into it straight from x's `AccumulateGrad`"),
    Answer("graph_answer", "a letter that is not one of the four", '''
graph_answer = "E"
''', message="graph_answer is 'E'; expected one of 'A', 'B', 'C', 'D'"),
    # --- the prediction set: wrong letters fail with their diagnosis
    Answer("predictions", "believes graph nodes are tensors", '''
PREDICTIONS = {"q1": "a", "q2": "a", "q3": "b", "q4": "a", "q5": "b"}
''', message="graph nodes are backward functions, not tensors"),
    Answer("predictions", "expects zeros for a detached leaf", '''
PREDICTIONS = {"q1": "b", "q2": "a", "q3": "b", "q4": "b", "q5": "b"}
''', message="no node was recorded for `x.detach() * 2` (a `None` edge)"),
    Answer("predictions", "a wrong letter whose diagnosis only the grading shows (q3: c)", '''
PREDICTIONS = {"q1": "b", "q2": "a", "q3": "c", "q4": "a", "q5": "b"}
''', message="the first backward freed the saved tensors, so a"),
]

RIGHT = [
    Answer("reaches", "recursive walk with a set of seen nodes", '''
def reaches(output, leaf):
    seen = set()

    def visit(node):
        if node is None or node in seen:
            return False
        seen.add(node)
        if hasattr(node, "variable") and node.variable is leaf:
            return True
        return any(visit(child) for child, _ in node.next_functions)

    return bool(visit(output.grad_fn))
'''),
    Answer("reaches", "breadth-first with a deque, finding the leaf's node first", '''
from collections import deque

def reaches(output, leaf):
    if output.grad_fn is None or not leaf.requires_grad:
        return False
    queue, seen = deque([output.grad_fn]), {id(output.grad_fn)}
    while queue:
        node = queue.popleft()
        if type(node).__name__ == "AccumulateGrad" and node.variable is leaf:
            return True
        for child, _ in node.next_functions:
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                queue.append(child)
    return False
'''),
    Answer("reaches", "torch.autograd.grad with allow_unused and retain_graph (touches no .grad)", '''
def reaches(output, leaf):
    if output.grad_fn is None or not leaf.requires_grad:
        return False
    (g,) = torch.autograd.grad(output, leaf, grad_outputs=torch.ones_like(output),
                               retain_graph=True, allow_unused=True)
    return g is not None
'''),
    Answer("reaches", "walks with backward_ops-style collection of leaves; warns when there is no graph", '''
import warnings

def reaches(output, leaf):
    if output.grad_fn is None:
        warnings.warn("reaches: output has no grad_fn, so nothing can be reached")
        return False
    leaves, stack, seen = [], [output.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if hasattr(node, "variable"):
            leaves.append(node.variable)
        stack.extend(child for child, _ in node.next_functions)
    return any(v is leaf for v in leaves)
'''),
    Answer("backward_ops", "recursive walk over a set of nodes", '''
def backward_ops(output):
    nodes = set()

    def visit(node):
        if node is None or node in nodes:
            return
        nodes.add(node)
        for child, _ in node.next_functions:
            visit(child)

    visit(output.grad_fn)
    return {type(node).__name__ for node in nodes}
'''),
    Answer("backward_ops", "breadth-first with a deque", '''
from collections import deque

def backward_ops(output):
    if output.grad_fn is None:
        return set()
    names, seen = set(), set()
    queue = deque([output.grad_fn])
    while queue:
        node = queue.popleft()
        if id(node) in seen:
            continue
        seen.add(id(node))
        names.add(node.__class__.__name__)
        queue.extend(child for child, _ in node.next_functions if child is not None)
    return names
'''),
    Answer("graph_answer", "compares each candidate's drawing with the mystery picture", '''
def _candidate(letter):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = torch.tensor([4.0, 5.0], requires_grad=True)
    c = x.detach().clone() if letter == "C" else x.clone()
    c[1:] = {"A": w.to(torch.float64), "B": w.to(torch.float32)}.get(letter, w)
    y = (c * (x.detach() if letter == "D" else x)).sum()
    return autograd_graph(y, params={"x": x, "w": w}).text

graph_answer = [letter for letter in "ABCD" if _candidate(letter) == mystery.text][0]
'''),
    Answer("graph_answer", "a lower-case letter, in parentheses", '''
graph_answer = "(b)"
'''),
    # --- the prediction set: the right letters in any accepted spelling (either case, spaces, parentheses)
    Answer("predictions", "upper-case letters", '''
PREDICTIONS = {"q1": "B", "q2": "A", "q3": "B", "q4": "A", "q5": "B"}
'''),
]
