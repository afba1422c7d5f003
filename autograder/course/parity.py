"""The parity gate (``python -m autograder zh check``): the Chinese edition is the English one with
its prose translated, and nothing else.

For every pair of notebooks (:func:`autograder.course.translation.pairs`) it fails on a difference in
cells (ids, types, order), code (comments and docstrings aside, and only in cells whose comments may
be translated: token streams compared), locked and test cells (byte for byte), outputs, cell
metadata (tags, ``jupyter`` flags, nbgrader's grade ids, points and flags), the notebook's metadata
(its language aside), the misconception ids a cell names, the message keys of its tests; on an
assignment's other files (its fixtures) not being the same; and on a cell left untranslated, stale
(translated from an English text that has changed since) or translated without its record.  The
message catalog and the glossary are checked by :mod:`autograder.course.messages` and
:mod:`autograder.course.glossary`, and reported here with the rest.
"""
from __future__ import annotations

import filecmp
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from . import glossary
from .translation import (IGNORED_METADATA, META, STALE, TRANSLATED, UNSTAMPED, UNTRANSLATED, Pair, cell_state,
                          code_tokens, orphans, pairs, translatable_code)

MISCONCEPTION = re.compile(r"\bM-[a-z0-9]+(?:-[a-z0-9]+)*")
TRANSLATION_KINDS = (UNTRANSLATED, STALE, UNSTAMPED)


@dataclass(frozen=True)
class Problem:
    """One way the editions differ, or one string without its Chinese form."""

    where: str            # a path relative to the course root, or "messages"
    kind: str             # "cells", "code", "outputs", "metadata", "untranslated", "stale", ...
    text: str
    cell: str | None = None

    def describe(self) -> str:
        at = f"{self.where} cell {self.cell}" if self.cell else self.where
        return f"{at}: {self.kind}: {self.text}"


@dataclass
class GateReport:
    """Everything the gate found, and how much of the translation is done."""

    problems: list[Problem] = field(default_factory=list)
    cells: int = 0                 # cells compared
    translated: int = 0            # cells whose translation is current (or that need none)

    @property
    def ok(self) -> bool:
        return not self.problems

    def by_kind(self, *kinds: str) -> list[Problem]:
        return [p for p in self.problems if p.kind in kinds]


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def _metadata(cell) -> dict:
    return {k: v for k, v in cell.get("metadata", {}).items() if k not in IGNORED_METADATA}


def _comparable_outputs(cell) -> list:
    return [dict(o) for o in cell.get("outputs", [])]


def compare_cells(en, zh, kind: str, where: str) -> tuple[list[Problem], str | None]:
    """The problems of one pair of cells with the same id, and the translation state of the Chinese one."""
    cid = en.get("id")
    found = []
    if _metadata(en) != _metadata(zh):
        found.append(Problem(where, "metadata", "the cell's metadata differs from the English cell's "
                             "(tags, jupyter flags, nbgrader's grade id, points or flags)", cid))
    if en.cell_type == "code":
        if translatable_code(en, kind):
            if code_tokens(en.source) != code_tokens(zh.source):
                found.append(Problem(where, "code", "the code differs from the English cell's (only comments and "
                                     "docstrings may be translated)", cid))
        elif en.source != zh.source:
            found.append(Problem(where, "code", "a locked or test cell differs from the English one: it must be "
                                 "the same, byte for byte (the gradebook and the judge take it from English)", cid))
        if _comparable_outputs(en) != _comparable_outputs(zh) or en.get("execution_count") != zh.get("execution_count"):
            found.append(Problem(where, "outputs", "the stored outputs differ from the English cell's", cid))
    if sorted(MISCONCEPTION.findall(en.source)) != sorted(MISCONCEPTION.findall(zh.source)):
        found.append(Problem(where, "misconception ids", "the cell names other misconception ids than the English "
                             f"cell ({', '.join(sorted(set(MISCONCEPTION.findall(en.source)))) or 'none'})", cid))
    state = cell_state(en, zh, kind)
    return found, state


TRANSLATION_TEXT = {
    UNTRANSLATED: "still the English text: translate it, then record it with `python -m autograder zh stamp {path}`",
    STALE: "the English cell changed since it was translated: update the translation, then "
           "`python -m autograder zh stamp {path} --cell {cell}`",
    UNSTAMPED: "translated, but the English text it was translated from is not recorded: "
               "`python -m autograder zh stamp {path}`",
}


def check_pair(pair: Pair, root: Path, keys_of=None, terms: list | None = None) -> tuple[list[Problem], int, int]:
    """The problems of one pair of notebooks; (problems, cells compared, cells whose translation is current).

    ``keys_of(nb)``, when given, names each test cell's message keys (compared between the editions);
    ``terms``, the glossary, whose core terms each translated markdown cell must use."""
    where = _rel(pair.zh, root)
    if not pair.zh.is_file():
        return [Problem(where, "missing", f"no Chinese counterpart of {_rel(pair.en, root)}: "
                        "run `python -m autograder zh sync`")], 0, 0
    en_nb = nbformat.read(pair.en, as_version=4)
    zh_nb = nbformat.read(pair.zh, as_version=4)
    problems = []
    en_meta = {k: v for k, v in en_nb.metadata.items() if k != META}
    zh_meta = {k: v for k, v in zh_nb.metadata.items() if k != META}
    if en_meta != zh_meta:
        problems.append(Problem(where, "metadata", "the notebook's metadata (kernel, language_info) differs from English"))
    if (zh_nb.metadata.get(META) or {}).get("lang") != "zh":
        problems.append(Problem(where, "metadata", 'the notebook does not say it is Chinese: metadata "copy_that": {"lang": "zh"}'))
    en_ids = [(c.get("id"), c.cell_type) for c in en_nb.cells]
    zh_ids = [(c.get("id"), c.cell_type) for c in zh_nb.cells]
    if en_ids != zh_ids:
        missing = [i for i, _ in en_ids if i not in {j for j, _ in zh_ids}]
        extra = [i for i, _ in zh_ids if i not in {j for j, _ in en_ids}]
        detail = "; ".join(filter(None, [missing and f"missing {', '.join(missing[:8])}",
                                        extra and f"not in English {', '.join(extra[:8])}"])) or "another order or type"
        problems.append(Problem(where, "cells", f"the cells are not the English ones ({detail}): "
                                "run `python -m autograder zh sync` (translations of cells kept by id)"))
    translated = 0
    zh_by_id = {c.get("id"): c for c in zh_nb.cells}
    for en in en_nb.cells:
        zh = zh_by_id.get(en.get("id"))
        if zh is None or zh.cell_type != en.cell_type:
            continue
        found, state = compare_cells(en, zh, pair.kind, where)
        problems += found
        if state in TRANSLATION_TEXT:
            problems.append(Problem(where, state, TRANSLATION_TEXT[state].format(path=where, cell=en.get("id")), en.get("id")))
        else:
            translated += 1
        if state == TRANSLATED and en.cell_type == "markdown" and terms:
            for term in glossary.missing(en.source, zh.source, terms):
                problems.append(Problem(where, "glossary", f"the English says {', '.join(term.english)}: the glossary's "
                                        f"term is {term.chinese[0]} (docs/glossary-zh.md)", en.get("id")))
    if keys_of is not None and keys_of(en_nb) != keys_of(zh_nb):
        problems.append(Problem(where, "message keys", "the test cells' messages differ from the English ones"))
    return problems, len(en_nb.cells), translated


def check_files(root: Path, pair: Pair) -> list[Problem]:
    """An assignment's other files (its fixtures) are the same in both editions."""
    if pair.kind != "assignment":
        return []
    en_dir, zh_dir = pair.en.parent, pair.zh.parent
    names = lambda d: {p.name for p in d.iterdir() if p.is_file() and p.suffix != ".ipynb"
                       and not p.name.startswith(".")} if d.is_dir() else set()
    problems = []
    for name in sorted(names(en_dir) | names(zh_dir)):
        a, b = en_dir / name, zh_dir / name
        if not (a.is_file() and b.is_file() and filecmp.cmp(a, b, shallow=False)):
            problems.append(Problem(_rel(b, root), "files", "not the same as the English file "
                                    f"{_rel(a, root)}: run `python -m autograder zh sync`"))
    return problems


def check_course(root: Path, only: list[Path] | None = None, keys_of=None) -> GateReport:
    """The gate over every pair of notebooks (or the pairs of ``only``, notebooks of either edition)."""
    from .translation import pair_for

    chosen = [pair_for(root, p) for p in only] if only else pairs(root)
    report = GateReport()
    terms = glossary.load(root)
    for pair in dict.fromkeys(chosen):
        problems, cells, translated = check_pair(pair, root, keys_of, terms)
        report.problems += problems + check_files(root, pair)
        report.cells += cells
        report.translated += translated
    if not only:
        report.problems += [Problem(_rel(p, root), "extra", "a Chinese notebook without an English one: remove it "
                                    "(or run `python -m autograder zh sync --prune`)") for p in orphans(root)]
    return report


def catalog_problems(root: Path) -> list[Problem]:
    """The message catalog against every learner-facing string of the package and the assignments."""
    from .messages import check_catalog, extract, load_catalog

    found = check_catalog(extract(root), load_catalog())
    where = "autograder/kernel/locale/zh.json"
    out = [Problem(where, "messages", f"no entry for {key!r} ({section}): run `python -m autograder zh sync`, then "
                   "translate it") for section, key in found.missing]
    out += [Problem(where, "messages", f"untranslated ({section}): {key!r}") for section, key in found.untranslated]
    out += [Problem(where, "messages", f"the translation of {key!r} has other placeholders than the English "
                    "({section})".replace("{section}", section)) for section, key in found.placeholders]
    out += [Problem(where, "messages", f"used nowhere any more ({section}): {key!r}: `python -m autograder zh sync` "
                    "drops it") for section, key in found.unused]
    out += [Problem(where, "messages", f"two different translations of {key!r}") for key in found.conflicts]
    return out


def gate(root: Path, only: list[Path] | None = None) -> GateReport:
    """The whole gate: the notebooks (or those of ``only``) with their tests' message keys and the
    glossary, and, over the whole course, the message catalog."""
    from .messages import notebook_keys

    report = check_course(root, only, keys_of=notebook_keys)
    if not only:
        report.problems += catalog_problems(root)
    return report
