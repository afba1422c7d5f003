"""The Chinese edition's notebooks beside the English ones: which notebooks pair up, what state each
cell's translation is in, ``zh sync`` (code, outputs and metadata from English, the translated prose
kept) and ``zh stamp`` (a translator records which English text a cell was translated from).

A translated cell carries, in its metadata, the sha256 of the English source it was translated
from: ``"copy_that": {"en": "<sha256>"}``.  A cell without it is untranslated; a cell whose hash is
not the English cell's current one is stale (the English changed since).  Markdown is translated;
so are the comments and docstrings of code cells a learner edits or reads (lecture cells, answer
cells), never their code.  Locked and test cells are the English ones, byte for byte: the gradebook
and the judge take them from there.
"""
from __future__ import annotations

import ast
import copy
import hashlib
import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..kernel.i18n import LANG_KEY, META
from ..learner.cells import LECTURE_DIR, SOURCE_DIR, notebooks, role
from ..learner.editions import ZH_DIR

HASH = "en"                 # cell metadata: {"copy_that": {"en": sha256 of the English source}}
IGNORED_METADATA = {META, "execution"}   # translation records, and when a cell last ran (not content)
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
WORD = re.compile(r"[A-Za-z]{3,}")


def english_hash(source: str) -> str:
    """The hash a translated cell records: sha256 of the English cell's source (UTF-8), in hex."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Pair:
    """An English notebook and its Chinese counterpart (which may not exist yet)."""

    en: Path
    zh: Path
    kind: str          # "lecture" or "assignment"


def pairs(root: Path) -> list[Pair]:
    """Every English lecture and instructor's notebook with the path of its Chinese counterpart."""
    out = [Pair(p, root / ZH_DIR / LECTURE_DIR / p.name, "lecture") for p in notebooks(root / LECTURE_DIR)]
    source = root / SOURCE_DIR
    for folder in sorted(p for p in source.iterdir() if p.is_dir() and not p.name.startswith(".")) if source.is_dir() else []:
        out += [Pair(p, root / ZH_DIR / SOURCE_DIR / folder.name / p.name, "assignment") for p in notebooks(folder)]
    return out


def pair_for(root: Path, path: Path) -> Pair:
    """The pair a notebook of either edition belongs to; a ValueError for any other file."""
    target = Path(path).resolve()
    for pair in pairs(root):
        if target in (pair.en.resolve(), pair.zh.resolve()):
            return pair
    raise ValueError(f"{path} is not a notebook of course/ or solutions/, nor its Chinese counterpart in {ZH_DIR}/")


def orphans(root: Path) -> list[Path]:
    """Chinese notebooks without an English one (renamed or removed in English)."""
    known = {p.zh.resolve() for p in pairs(root)}
    found = notebooks(root / ZH_DIR / LECTURE_DIR) if (root / ZH_DIR / LECTURE_DIR).is_dir() else []
    zh_source = root / ZH_DIR / SOURCE_DIR
    if zh_source.is_dir():
        for folder in sorted(p for p in zh_source.iterdir() if p.is_dir()):
            found += notebooks(folder)
    return [p for p in found if p.resolve() not in known]


# --- code: what may differ (comments and docstrings) and what may not ---------------------------

def translatable_code(cell, kind: str) -> bool:
    """A code cell whose comments and docstrings the Chinese edition may translate: any lecture
    cell; in an assignment, the cells nbgrader neither locks nor grades (the learner's answer cells
    and free cells).  Locked and test cells stay the English ones, byte for byte."""
    if cell.cell_type != "code":
        return False
    if kind == "lecture":
        return True
    r = role(cell)
    return not (r.locked or r.grade)


def _docstring_starts(source: str) -> set[tuple[int, int]]:
    """(line, column) of every docstring of a cell's module, classes and functions."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    starts = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                starts.add((first.value.lineno, first.value.col_offset))
    return starts


def code_tokens(source: str) -> list[tuple[int, str]]:
    """The cell's Python tokens with comments, blank lines and docstrings' text left out: two cells
    with the same tokens run the same code.  Text that does not tokenize is compared whole."""
    docstrings = _docstring_starts(source)
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER):
                continue
            if tok.type == tokenize.STRING and tok.start in docstrings:
                out.append((tok.type, "<docstring>"))
                continue
            out.append((tok.type, tok.string))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return [(-1, source)]
    return out


def prose_of_code(source: str) -> str:
    """The comments and docstrings of a code cell, one per line: what a translator translates."""
    docstrings = _docstring_starts(source)
    parts = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                parts.append(tok.string.lstrip("#").strip())
            elif tok.type == tokenize.STRING and tok.start in docstrings:
                parts.append(tok.string.strip("\"'rbuRBU"))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return ""
    return "\n".join(parts)


def has_english_prose(text: str) -> bool:
    """Text with English words in it and no Chinese: worth translating (``# int64`` is not)."""
    return not CJK.search(text) and len(WORD.findall(text)) >= 2


# --- the state of one cell's translation ---------------------------------------------------------

SAME, TRANSLATED, UNTRANSLATED, STALE, UNSTAMPED = "same", "translated", "untranslated", "stale", "unstamped"


def cell_state(en, zh, kind: str) -> str:
    """Where the Chinese cell stands against its English cell:

    - ``same``: nothing to translate (code without English prose, an empty cell), kept as in English;
    - ``translated``: it records the hash of the English source as it is now;
    - ``stale``: it records another hash: the English changed since it was translated;
    - ``unstamped``: its text differs from the English but it records no hash yet (``zh stamp``);
    - ``untranslated``: the English text, not yet translated, or a markdown cell that holds English
      and no Chinese (an older English text is no translation, stamped or not).
    """
    recorded = (zh.get("metadata", {}).get(META) or {}).get(HASH)
    if en.cell_type == "markdown" and zh.source != en.source and has_english_prose(zh.source):
        return UNTRANSLATED     # English still (an older English text, say), whatever was recorded
    if recorded is not None:
        return TRANSLATED if recorded == english_hash(en.source) else STALE
    if zh.source != en.source:
        return UNSTAMPED
    if en.cell_type == "markdown":
        return UNTRANSLATED if en.source.strip() else SAME
    if translatable_code(en, kind) and has_english_prose(prose_of_code(en.source)):
        return UNTRANSLATED
    return SAME


# --- zh sync ----------------------------------------------------------------------------------------

@dataclass
class SyncNotes:
    """What ``zh sync`` did to one Chinese notebook, and what is left to translate."""

    created: bool = False
    added: list[str] = field(default_factory=list)        # cells new in English, copied in English
    removed: list[str] = field(default_factory=list)      # cells gone from English
    reset: list[str] = field(default_factory=list)        # code changed in English: comments back to English
    untranslated: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    unstamped: list[str] = field(default_factory=list)
    changed: bool = False


def _fresh(cell) -> nbformat.NotebookNode:
    new = copy.deepcopy(cell)
    new.get("metadata", {}).pop(META, None)
    return new


def sync_notebook(en_nb, zh_nb, kind: str) -> tuple[nbformat.NotebookNode, SyncNotes]:
    """The Chinese notebook brought in line with the English one: the English cells in their order,
    with their code, outputs and metadata; each cell's translated prose kept where the cell still
    has the same id and type (and, for code, the same code); a new cell in English, marked
    untranslated; the notebook marked as Chinese."""
    notes = SyncNotes(created=zh_nb is None)
    theirs = {c.get("id"): c for c in (zh_nb.cells if zh_nb is not None else [])}
    cells = []
    for en in en_nb.cells:
        zh = theirs.get(en.get("id"))
        new = _fresh(en)
        if zh is None or zh.cell_type != en.cell_type:
            notes.added.append(en.get("id"))
        elif en.cell_type == "markdown" or (translatable_code(en, kind) and code_tokens(zh.source) == code_tokens(en.source)):
            new.source = zh.source
            if (zh.get("metadata", {}).get(META) or {}).get(HASH):
                new.metadata[META] = {HASH: zh.metadata[META][HASH]}
            if en.cell_type == "markdown" and zh.get("attachments"):
                new["attachments"] = copy.deepcopy(zh["attachments"])
        elif zh.source != en.source:
            notes.reset.append(en.get("id"))
        cells.append(new)
    notes.removed = [i for i in theirs if i not in {c.get("id") for c in en_nb.cells}]
    out = copy.deepcopy(en_nb)
    out.cells = cells
    out.metadata[META] = {LANG_KEY: "zh"}
    for en, zh in zip(en_nb.cells, out.cells):
        state = cell_state(en, zh, kind)
        {UNTRANSLATED: notes.untranslated, STALE: notes.stale, UNSTAMPED: notes.unstamped}.get(state, []).append(en.get("id"))
    notes.changed = zh_nb is None or nbformat.writes(out) != nbformat.writes(zh_nb)
    return out, notes


def stamp(en_nb, zh_nb, kind: str, cells: list[str] | None = None) -> list[str]:
    """Record, in each Chinese cell named (default: every ``unstamped`` one, freshly translated),
    the hash of its English cell's source as it is now.  Returns the ids stamped; a KeyError for a
    cell id the notebook does not have."""
    english = {c.get("id"): c for c in en_nb.cells}
    unknown = sorted(set(cells or ()) - {c.get("id") for c in zh_nb.cells})
    if unknown:
        raise KeyError(f"no cell {', '.join(unknown)} in this notebook")
    done = []
    for zh in zh_nb.cells:
        en = english.get(zh.get("id"))
        if en is None or en.cell_type != zh.cell_type:
            continue
        wanted = zh.get("id") in cells if cells else cell_state(en, zh, kind) == UNSTAMPED
        if wanted:
            zh.metadata[META] = {HASH: english_hash(en.source)}
            done.append(zh.get("id"))
    return done


def _write(nb, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def sync_files(pair: Pair) -> list[str]:
    """An assignment's other files (its fixtures) copied from English; returns the names copied."""
    import filecmp
    import shutil

    if pair.kind != "assignment":
        return []
    copied = []
    for src in sorted(p for p in pair.en.parent.iterdir() if p.is_file() and p.suffix != ".ipynb" and not p.name.startswith(".")):
        dst = pair.zh.parent / src.name
        if not (dst.is_file() and filecmp.cmp(src, dst, shallow=False)):
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
            copied.append(src.name)
    for extra in sorted(p for p in pair.zh.parent.iterdir() if p.is_file() and p.suffix != ".ipynb"
                        and not p.name.startswith(".") and not (pair.en.parent / p.name).exists()):
        extra.unlink()
        copied.append(f"{extra.name} (removed)")
    return copied


def sync_course(root: Path, only: list[Path] | None = None, prune: bool = False) -> dict[str, SyncNotes]:
    """``zh sync``: every Chinese notebook (or those of ``only``) brought in line with its English one,
    written where it changed; the assignments' other files copied.  With ``prune``, Chinese notebooks
    whose English one is gone are removed.  Returns the notes per Chinese notebook (path relative to root)."""
    chosen = [pair_for(root, p) for p in only] if only else pairs(root)
    out = {}
    for pair in dict.fromkeys(chosen):
        zh_nb = nbformat.read(pair.zh, as_version=4) if pair.zh.is_file() else None
        new, notes = sync_notebook(nbformat.read(pair.en, as_version=4), zh_nb, pair.kind)
        if notes.changed:
            _write(new, pair.zh)
        if sync_files(pair):
            notes.changed = True
        out[pair.zh.relative_to(root).as_posix()] = notes
    if prune and not only:
        for path in orphans(root):
            path.unlink()
            out[path.relative_to(root).as_posix()] = SyncNotes(removed=["(the whole notebook)"], changed=True)
    return out


def stamp_file(root: Path, path: Path, cells: list[str] | None = None) -> list[str]:
    """``zh stamp``: record in the Chinese notebook at ``path`` which English text each named cell
    (default: each freshly translated one) was translated from; returns the ids stamped."""
    pair = pair_for(root, path)
    zh_nb = nbformat.read(pair.zh, as_version=4)
    done = stamp(nbformat.read(pair.en, as_version=4), zh_nb, pair.kind, cells)
    if done:
        _write(zh_nb, pair.zh)
    return done
