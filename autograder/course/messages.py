"""The learner-facing messages and their catalog (``autograder/kernel/locale/zh.json``).

A message key is English text (a template where parts vary, ``"{what} is {actual}"``), found where
it is written:

- in the package's learner-facing code (``kernel/``, ``learner/``, ``cli.py``): the argument of
  ``N_(...)`` (a string, or an f-string read as a template whose placeholders are its expressions)
  and the template of ``say(lang, ...)``;
- the myths of ``kernel/misconceptions.py``;
- the assignments' test cells (the English instructor's notebooks, hidden tests included): every
  string or f-string that reads as prose rather than code (a test's ``what``, its ``hint=``, its
  ``ok()`` line, the diagnoses of wrong letters), a misconception's ``M-...:`` tag left off.

The catalog holds one section per place (``kernel/checks.py``, ``solutions/a1_views``...), each
mapping a key to its Chinese form (``null`` until translated).  ``zh sync`` adds the keys it lacks
and drops those nothing uses any more; the gate fails on a key without its Chinese form, on a
translation whose placeholders are not the key's, and on a key nothing uses.
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..kernel.i18n import PLACEHOLDER, catalog_path, read_catalog
from ..kernel.misconceptions import MISCONCEPTIONS, TAG
from ..learner.cells import SOURCE_DIR, notebooks, role

PACKAGE = Path(__file__).resolve().parent.parent
LEARNER_CODE = ["kernel", "learner", "cli.py"]     # what a learner's commands and kernels show


def _untagged(text: str) -> str:
    return TAG.sub("", text, count=1)


def template(node: ast.AST) -> str | None:
    """The key a string or f-string node stands for (``f"{what} is None"`` -> ``"{what} is None"``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value))
            elif isinstance(part, ast.FormattedValue):
                conv = {-1: "", 115: "!s", 114: "!r", 97: "!a"}[part.conversion]
                spec = f":{template(part.format_spec)}" if part.format_spec is not None else ""
                out.append("{" + ast.unparse(part.value).replace(" ", "") + conv + spec + "}")
        return "".join(out)
    return None


def _called(node: ast.Call) -> str | None:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _useful(key: str | None) -> bool:
    """A key with text of its own (``"{expected}"`` alone is not a message)."""
    return bool(key) and bool(PLACEHOLDER.sub("", key).strip())


def code_keys(source: str) -> list[str]:
    """The keys a module of the package marks: ``N_(...)`` and ``say(lang, ...)``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args:
            name = _called(node)
            arg = node.args[0] if name == "N_" else node.args[1] if name == "say" and len(node.args) > 1 else None
            key = template(arg) if arg is not None else None
            if _useful(key):
                found.append(_untagged(key))
    return list(dict.fromkeys(found))


def _is_prose(key: str) -> bool:
    """Text a learner reads, not code: has words and a space, and is no Python expression."""
    if " " not in key.strip() or not any(c.isalpha() for c in key):
        return False
    try:
        ast.parse(PLACEHOLDER.sub("x", key).strip(), mode="eval")
    except SyntaxError:
        return True
    return False


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def _operands(node: ast.AST) -> list[ast.AST]:
    """``a + " after" + f"{b}"`` -> its operands, in order."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _operands(node.left) + _operands(node.right)
    return [node]


def _sum_template(node: ast.BinOp) -> str | None:
    """The template a sum of strings builds (``what + " after the update"`` -> ``"{what} after the update"``),
    or None when no operand is a string."""
    parts = _operands(node)
    if not any(template(p) is not None for p in parts):
        return None
    return "".join(template(p) if template(p) is not None else "{" + ast.unparse(p).replace(" ", "") + "}"
                   for p in parts)


def keys_of_test_cell(source: str) -> list[str]:
    """The prose strings of one test cell, in order (its docstrings and code-like strings left out);
    a sum of strings (``what + " after the update"``) is read as one template."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    skip = _docstrings(tree)
    inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    sums = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.BinOp) and id(n) not in inner and _sum_template(n) is not None:
            sums[id(n)] = _sum_template(n)
            inner |= {id(x) for x in ast.walk(n) if x is not n}
    found = []
    for node in ast.walk(tree):
        if id(node) in skip or id(node) in inner:
            continue
        key = sums.get(id(node)) or (template(node) if isinstance(node, (ast.Constant, ast.JoinedStr)) else None)
        if key and _is_prose(_untagged(key)):
            found.append(_untagged(key))
    return list(dict.fromkeys(found))


def notebook_keys(nb) -> list[str]:
    """The keys of every test cell of an assignment's notebook."""
    keys = []
    for cell in nb.cells:
        if cell.cell_type == "code" and role(cell).is_test:
            keys += keys_of_test_cell(cell.source)
    return list(dict.fromkeys(keys))


def extract(root: Path) -> dict[str, list[str]]:
    """section -> the keys found there: the package's learner-facing code, the myths, each assignment."""
    out: dict[str, list[str]] = {}
    for part in LEARNER_CODE:
        files = sorted((PACKAGE / part).rglob("*.py")) if (PACKAGE / part).is_dir() else [PACKAGE / part]
        for path in files:
            keys = code_keys(path.read_text(encoding="utf-8"))
            if keys:
                out[path.relative_to(PACKAGE).as_posix()] = keys
    out["kernel/misconceptions.py"] = list(dict.fromkeys(m.myth for m in MISCONCEPTIONS))
    source = root / SOURCE_DIR
    for folder in sorted(p for p in source.iterdir() if p.is_dir()) if source.is_dir() else []:
        keys = []
        for path in notebooks(folder):
            keys += notebook_keys(nbformat.read(path, as_version=4))
        if keys:
            out[f"{SOURCE_DIR}/{folder.name}"] = list(dict.fromkeys(keys))
    return out


@dataclass
class CatalogReport:
    """How the catalog stands against the keys found."""

    missing: list[tuple[str, str]] = field(default_factory=list)        # (section, key): not in the catalog
    untranslated: list[tuple[str, str]] = field(default_factory=list)   # in it, with no Chinese yet
    placeholders: list[tuple[str, str]] = field(default_factory=list)   # translation's placeholders differ
    unused: list[tuple[str, str]] = field(default_factory=list)         # in it, used nowhere
    conflicts: list[str] = field(default_factory=list)                  # one key, two translations

    @property
    def ok(self) -> bool:
        return not (self.missing or self.untranslated or self.placeholders or self.unused or self.conflicts)


def placeholders(text: str) -> list[str]:
    return sorted(m.group(0) for m in PLACEHOLDER.finditer(text))


def check_catalog(found: dict[str, list[str]], catalog: dict[str, dict[str, str | None]]) -> CatalogReport:
    """Compare the keys found with the catalog (section -> key -> translation)."""
    report = CatalogReport()
    flat: dict[str, str | None] = {}
    for section, entries in catalog.items():
        for key, value in entries.items():
            if key in flat and value and flat[key] and flat[key] != value:
                report.conflicts.append(key)
            if value or key not in flat:
                flat[key] = value
    used = {key for keys in found.values() for key in keys}
    for section, keys in found.items():
        for key in keys:
            if key not in flat:
                report.missing.append((section, key))
            elif not flat[key]:
                report.untranslated.append((section, key))
            elif placeholders(key) != placeholders(flat[key]):
                report.placeholders.append((section, key))
    report.unused = [(s, k) for s, entries in catalog.items() for k in entries if k not in used]
    return report


def sync_catalog(found: dict[str, list[str]], catalog: dict[str, dict[str, str | None]]
                 ) -> tuple[dict[str, dict[str, str | None]], list[tuple[str, str]], dict[str, str | None]]:
    """The catalog with every key found in its section (new ones ``None``; a translation kept from
    wherever it was), sections in order; returns (catalog, keys added, entries dropped: unused)."""
    known: dict[str, str | None] = {}
    for entries in catalog.values():
        for key, value in entries.items():
            known[key] = value or known.get(key)
    out: dict[str, dict[str, str | None]] = {}
    added = []
    placed: set[str] = set()
    for section in sorted(found):
        entries = {}
        for key in found[section]:
            if key in placed:          # one entry per key: the first section that uses it
                continue
            placed.add(key)
            entries[key] = known.get(key)
            if key not in known:
                added.append((section, key))
        if entries:
            out[section] = entries
    dropped = {k: v for k, v in known.items() if k not in placed}
    return out, added, dropped


def write_catalog(catalog: dict, lang: str = "zh") -> Path:
    path = catalog_path(lang)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(catalog, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path


def load_catalog(lang: str = "zh") -> dict[str, dict[str, str | None]]:
    return read_catalog(catalog_path(lang))
