"""The glossary of the Chinese edition (``docs/glossary-zh.md``) and its check on translated text.

The glossary is a markdown table: English forms (comma-separated), Chinese terms (separated by
``、``), a note; a row whose English cell starts with ★ is a core term.  The check is a heuristic,
said in the glossary itself: where the English text of a cell uses a core term's English form
(whole words, any case, outside code and links' targets, longer forms first), the Chinese text must
contain the row's first Chinese term.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

GLOSSARY = Path("docs") / "glossary-zh.md"
CORE_MARK = "\u2605"


@dataclass(frozen=True)
class Term:
    english: tuple[str, ...]   # the English forms, as written
    chinese: tuple[str, ...]   # the Chinese terms; the first is the one the check looks for
    core: bool
    note: str = ""


def parse(text: str) -> list[Term]:
    """The rows of the glossary's table (header and rule lines left out)."""
    terms = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.lstrip().startswith("|") else []
        if len(cells) < 2 or set(cells[0]) <= set("-: ") or cells[0] == "English":
            continue
        core = cells[0].startswith(CORE_MARK)
        english = tuple(f.strip() for f in re.sub(r"\(.*?\)", "", cells[0].lstrip(CORE_MARK)).split(",") if f.strip())
        chinese = tuple(t.strip() for t in re.sub(r"（.*?）", "", cells[1]).split("、") if t.strip())
        if english and chinese:
            terms.append(Term(english, chinese, core, cells[2] if len(cells) > 2 else ""))
    return terms


def load(root: Path) -> list[Term]:
    """The glossary of the course at ``root`` (empty when there is none)."""
    path = root / GLOSSARY
    return parse(path.read_text(encoding="utf-8")) if path.is_file() else []


_CODE = [re.compile(r"```.*?```", re.S), re.compile(r"`[^`\n]*`"), re.compile(r"\]\([^)]*\)"),
         re.compile(r"<[^>\n]+>"), re.compile(r"https?://\S+")]


def prose(markdown: str) -> str:
    """The markdown's text outside code, links' targets, HTML tags and addresses."""
    for pattern in _CODE:
        markdown = pattern.sub(" ", markdown)
    return markdown


def required(english: str, terms: list[Term]) -> list[Term]:
    """The core terms the English text uses, longest forms matched first and not counted twice."""
    text = prose(english)
    found = []
    forms = sorted(((f, t) for t in terms if t.core for f in t.english), key=lambda ft: -len(ft[0]))
    for form, term in forms:
        pattern = re.compile(r"(?<![\w-])" + re.escape(form).replace(r"\ ", r"[\s-]+") + r"(?![\w-])", re.I)
        if pattern.search(text):
            text = pattern.sub(" ", text)
            if term not in found:
                found.append(term)
    return found


def missing(english: str, chinese: str, terms: list[Term]) -> list[Term]:
    """The core terms the English text uses whose Chinese term the translation lacks."""
    text = prose(chinese)
    return [t for t in required(english, terms) if t.chinese[0] not in text]
