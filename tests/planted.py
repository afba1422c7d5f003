"""A class of a1_views submissions for the similarity report (tests/test_similarity.py): answers
from the corpus (tests/answers/a1_views.py: right, wrong and blank), broken and hostile files, and
planted pairs, each an original and a disguised copy of it (names changed, code reformatted,
comments and docstrings changed, a helper moved).  The originals are written here; every other
answer is the corpus's, so different corpus answers are independent work."""
from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat

from autograder.learner.cells import role
from harness import reference_answers, release_notebook, submission, submit

ASSIGNMENT = "a1_views"
HOSTILE_ID = "=1+1<b>x"                 # a student id that is HTML and a spreadsheet formula
PAYLOAD = "<script>alert(1)</script>"

# --- group 1: every answer copied, names changed, reformatted, the helper moved below --------------
P1_ORIGINAL = {
    "shares_memory": '''
def _storage_of(tensor):
    # the storage behind a tensor, whichever view of it we were given
    storage = tensor.untyped_storage()
    return storage.data_ptr(), storage.nbytes()


def shares_memory(a, b):
    first_address, first_size = _storage_of(a)
    second_address, second_size = _storage_of(b)
    return first_address == second_address and first_size == second_size
''',
    "add_one_": '''
def add_one_(t):
    ones = torch.ones_like(t)
    t.add_(ones)
    return None
''',
    "plus_one": '''
def plus_one(t):
    result = torch.empty_like(t)
    torch.add(t, 1, out=result)
    return result
''',
    "count_storages": '''
def count_storages(tensors):
    addresses = set()
    for tensor in tensors:
        storage = tensor.untyped_storage()
        addresses.add(storage.data_ptr())
    return len(addresses)
''',
    "why_not_id": "Two tensors can be different Python objects and still sit on the same block of memory: "
                  "a view is a new object every time you index or transpose. So id() tells you about the "
                  "wrapper, not the bytes. And data_ptr() is where the first element lives, which moves "
                  "when a view starts at an offset.",
}
P1_COPY = {
    "shares_memory": '''
def shares_memory(x,y):
    # compare the two storages
    px,nx=_st(x)
    py,ny=_st(y)
    return (px==py) and (nx==ny)

def _st(v):
    s=v.untyped_storage()
    return s.data_ptr(),s.nbytes()
''',
    "add_one_": '''
def add_one_(t):
    o = torch.ones_like(t)
    t.add_(o)
    return None
''',
    "plus_one": '''
def plus_one(t):
    out_tensor = torch.empty_like(t)
    torch.add(t,
              1,
              out=out_tensor)
    return out_tensor
''',
    "count_storages": '''
def count_storages(ts):
    """How many storages."""
    seen = set()
    for x in list(ts):
        st = x.untyped_storage()
        seen.add(st.data_ptr())
    return int(len(seen))
''',
    "why_not_id": "two tensors can be DIFFERENT python objects, and still sit on the same block of memory -- "
                  "a view is a new object every time you index or transpose; so id() tells you about the "
                  "wrapper (not the bytes). data_ptr() is where the first element lives, which moves when a "
                  "view starts at an offset!",
}

# --- group 2: two answers copied (the others the copier's own, from the corpus) ---------------------
P2_ORIGINAL = {
    "shares_memory": '''
def shares_memory(a, b):
    bases = []
    for tensor in (a, b):
        while tensor._base is not None:
            tensor = tensor._base
        bases.append(tensor.untyped_storage().data_ptr())
    return bases[0] == bases[1]
''',
    "count_storages": '''
def count_storages(tensors):
    found = {}
    index = 0
    while index < len(tensors):
        key = tensors[index].untyped_storage().data_ptr()
        found[key] = found.get(key, 0) + 1
        index += 1
    return len(found.keys())
''',
}
P2_COPY = {
    "shares_memory": '''
def shares_memory(left, right):
    roots = []
    for item in (left, right):
        # walk up to the tensor that owns the memory
        while item._base is not None:
            item = item._base
        roots.append(item.untyped_storage().data_ptr())
    return roots[0] == roots[1]
''',
    "count_storages": '''
def count_storages(tensors):
    counts = {}
    i = 0
    while i < len(tensors):
        k = tensors[i].untyped_storage().data_ptr()
        counts[k] = counts.get(k, 0) + 1
        i += 1
    return len(counts.keys())
''',
}

# --- group 3: a chain, the original copied and the copy copied again ----------------------------------
P3_ORIGINAL = {
    "add_one_": '''
def add_one_(t):
    flat = t.view(-1) if t.is_contiguous() else None
    if flat is not None:
        flat += 1
    else:
        t.copy_(t + 1)
''',
    "plus_one": '''
def plus_one(t):
    fresh = t.detach().clone() if not t.requires_grad else t.clone()
    fresh.add_(1)
    return fresh
''',
    "count_storages": '''
def count_storages(tensors):
    pointers = sorted(t.untyped_storage().data_ptr() for t in tensors)
    distinct = 0
    previous = None
    for pointer in pointers:
        if pointer != previous:
            distinct += 1
        previous = pointer
    return distinct
''',
}
P3_COPY_A = {
    "add_one_": '''
def add_one_(t):
    v = t.view(-1) if t.is_contiguous() else None
    if v is not None:
        v += 1
    else:
        t.copy_(t + 1)
''',
    "plus_one": '''
def plus_one(t):
    r = t.detach().clone() if not t.requires_grad else t.clone()
    r.add_(1)
    return r
''',
    "count_storages": '''
def count_storages(tensors):
    ptrs = sorted(t.untyped_storage().data_ptr() for t in tensors)
    n = 0
    last = None
    for p in ptrs:
        if p != last:
            n += 1
        last = p
    return n
''',
}
P3_COPY_B = {
    "add_one_": '''
def add_one_(tensor):
    view = tensor.view(-1) if tensor.is_contiguous() else None
    if view is not None:
        view += 1
    else:
        tensor.copy_(tensor + 1)  # not contiguous: write through copy_
''',
    "plus_one": '''
def plus_one(tensor):
    res = tensor.detach().clone() if not tensor.requires_grad else tensor.clone()
    res.add_(1)
    return res
''',
    "count_storages": '''
def count_storages(tensor_list):
    addrs = sorted(x.untyped_storage().data_ptr() for x in tensor_list)
    count = 0
    prev = None
    for a in addrs:
        if a != prev:
            count += 1
        prev = a
    return count
''',
}

# --- group 4: two helpers, their order swapped; the copier's id is hostile and a comment is HTML ------
P4_ORIGINAL = {
    "shares_memory": '''
def storage_key(t):
    return (t.untyped_storage().data_ptr(), t.device.type)


def same_key(first, second):
    return storage_key(first) == storage_key(second)


def shares_memory(a, b):
    answer = same_key(a, b)
    return bool(answer)
''',
    "count_storages": '''
def count_storages(tensors):
    keys = [storage_key(t) for t in tensors]
    return len(dict.fromkeys(keys))
''',
}
P4_COPY = {
    "shares_memory": f'''
def same_key(p, q):
    return storage_key(p) == storage_key(q)

def storage_key(z):  # {PAYLOAD}
    return (z.untyped_storage().data_ptr(), z.device.type)

def shares_memory(a, b):
    ans = same_key(a, b)
    return bool(ans)
''',
    "count_storages": '''
def count_storages(tensors):
    ks = [storage_key(t) for t in tensors]
    return len(dict.fromkeys(ks))
''',
}

PLANTED = {
    "planted_1_original": P1_ORIGINAL, "planted_1_copy": P1_COPY,
    "planted_2_original": P2_ORIGINAL, "planted_2_copy": P2_COPY,
    "planted_3_original": P3_ORIGINAL, "planted_3_copy_a": P3_COPY_A, "planted_3_copy_b": P3_COPY_B,
    "planted_4_original": P4_ORIGINAL, HOSTILE_ID: P4_COPY,
}
PLANTED_PAIRS = {frozenset(p) for p in [
    ("planted_1_original", "planted_1_copy"), ("planted_2_original", "planted_2_copy"),
    ("planted_3_original", "planted_3_copy_a"), ("planted_3_original", "planted_3_copy_b"),
    ("planted_3_copy_a", "planted_3_copy_b"), ("planted_4_original", HOSTILE_ID)]}
BROKEN = {"broken_empty": b"", "broken_json": b'{"cells": [', "broken_bytes": b"\xff\xfe\x00not utf-8\x80"}


def in_skeleton(release: nbformat.NotebookNode, answers: dict[str, str]) -> nbformat.NotebookNode:
    """The release with answers written as a student does: each answer in place of the skeleton,
    the handed-out docstring kept under the function's signature (unless the answer has its own);
    written answers in place of the placeholder."""
    nb = nbformat.from_dict(release)
    for cell in nb.cells:
        gid = role(cell).grade_id
        if not role(cell).solution or gid not in answers:
            continue
        lines = answers[gid].strip("\n").split("\n") + [""]
        docstring = _docstring(cell.source) if cell.cell_type == "code" else ""
        for n, line in enumerate(lines):
            if docstring and line.startswith(f"def {gid}(") and not lines[n + 1].strip().startswith('"""'):
                lines.insert(n + 1, docstring)
                break
        cell.source = "\n".join(lines)
    return nb


def _docstring(skeleton: str) -> str:
    """The docstring of a skeleton's function, as handed out."""
    if '    """' not in skeleton:
        return ""
    start = skeleton.index('    """')
    return skeleton[start:skeleton.index('"""', start + 7) + 3]


def corpus_variants() -> dict[str, list[str | None]]:
    """grade id -> the corpus's answers for it (the reference, right, wrong) and None for blank."""
    from corpus import answers_for

    wrong, right = answers_for(ASSIGNMENT)
    reference = reference_answers(ASSIGNMENT)
    out: dict[str, list[str | None]] = {}
    for gid, source in reference.items():
        if gid == "why_not_id":
            out[gid] = [source, None]
            continue
        out[gid] = [source] + [a.source for a in right + wrong if a.cell == gid] + [None]
    return out


def build_class(root: Path, size: int = 150) -> dict[str, str]:
    """``size`` submissions of a1_views in ``root/submitted``; student -> what it is."""
    release = nbformat.read(release_notebook(ASSIGNMENT), as_version=4)
    kinds: dict[str, str] = {}
    for student, answers in PLANTED.items():
        submit(root, ASSIGNMENT, student, in_skeleton(release, answers))
        kinds[student] = "planted"
    # the copier of group 2 wrote the other answers themself: corpus ones
    path = root / "submitted" / "planted_2_copy" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    variants = corpus_variants()
    nb = nbformat.read(path, as_version=4)
    submit(root, ASSIGNMENT, "planted_2_copy", in_skeleton(nb, {"add_one_": variants["add_one_"][1],
                                                                "plus_one": variants["plus_one"][2]}))
    for student, data in BROKEN.items():
        submit(root, ASSIGNMENT, student, data)
        kinds[student] = "broken"
    huge = in_skeleton(release, {"plus_one": "def plus_one(t):\n    return t + 1\n" + "# padding\n" * 200_000})
    submit(root, ASSIGNMENT, "broken_huge_cell", huge)
    kinds["broken_huge_cell"] = "broken"
    target = submit(root, ASSIGNMENT, "broken_link", b"{}")
    target.unlink()
    os.symlink(release_notebook(ASSIGNMENT), target)
    kinds["broken_link"] = "broken"
    surrogate = json.loads(nbformat.writes(in_skeleton(release, {"shares_memory": variants["shares_memory"][0]})))
    for cell in surrogate["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "why_not_id":
            cell["source"] = "a lone surrogate \ud800 and <b>markup</b>"
    submit(root, ASSIGNMENT, "odd_surrogate", json.dumps(surrogate).encode())
    kinds["odd_surrogate"] = "independent"
    for i in range(10):
        submit(root, ASSIGNMENT, f"blank_{i:02d}", submission(ASSIGNMENT, blank=True))
        kinds[f"blank_{i:02d}"] = "blank"
    order = sorted(variants)
    i = 0
    while len(kinds) < size:
        # each cell's answer cycles through the corpus at its own pace: combinations vary
        answers = {}
        for n, gid in enumerate(order):
            options = variants[gid]
            choice = options[(i * (n + 1) + n) % len(options)]
            if choice is not None:
                answers[gid] = choice
        student = f"corpus_{i:03d}"
        submit(root, ASSIGNMENT, student, in_skeleton(release, answers))
        kinds[student] = "independent"
        i += 1
    return kinds


def disguise(source: str, keep: set[str]) -> str:
    """A copy of ``source`` as someone hiding a copy writes it: every name it defines or uses
    renamed (not keywords, builtins, attributes, modules or the names in ``keep``), comments
    dropped and one added, indented by two spaces instead of four, blank lines moved."""
    import builtins
    import io
    import keyword
    import tokenize

    imported = {name for line in source.splitlines() if line.lstrip().startswith(("import ", "from "))
                for name in line.replace(",", " ").split()}         # modules and what they give keep their names
    fixed = set(dir(builtins)) | set(keyword.kwlist) | {"torch", "F", "nn", "np", "ck", "self"} | imported | keep
    renamed: dict[str, str] = {}
    out, previous = [], None
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            tok = tok._replace(string="")
        elif tok.type == tokenize.NAME and tok.string not in fixed and not (previous and previous.string == "."):
            tok = tok._replace(string=renamed.setdefault(tok.string, f"{tok.string[0]}{len(renamed)}x"))
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            previous = tok
        out.append(tok)
    lines = []
    for line in tokenize.untokenize(out).splitlines():
        stripped = line.lstrip(" ")
        if not stripped.strip():
            continue                                    # blank lines dropped ...
        lines.append(" " * ((len(line) - len(stripped)) // 2) + stripped.rstrip())
    return "# my own work\n" + "\n\n".join(lines) + "\n"     # ... and one put between every two lines
