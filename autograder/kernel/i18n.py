"""The learner's language: English (the source of every message) or Chinese, from the catalog
``locale/zh.json``.

Messages are made in English everywhere (what the grader records, what ``check`` reads) and
translated where they are shown.  The catalog's keys are the English texts: plain strings, and
templates whose ``{name}`` placeholders stand for the parts that vary (``"{what} is {actual}"``);
a message built from a template is translated by finding the template it was built from and
translating the parts that are themselves in the catalog (a test's ``what``, a hint, a myth).
:func:`N_` marks a string as a key where it is written; ``python -m autograder zh check`` fails on
a key without its Chinese form.

Runs inside learners' kernels and in the learner's tools: the standard library only.
"""
from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path

LANGS = ("en", "zh")
DEFAULT = "en"
LANG_ENV = "COPY_THAT_LANG"     # the learner's choice, over the notebook's own language
META = "copy_that"              # notebook metadata {"copy_that": {"lang": "zh"}}: the notebook's language
LANG_KEY = "lang"
LOCALE = Path(__file__).resolve().parent / "locale"
# "{what}", "{name!r}", "{diff:.3g}", "{tuple(shape)}", "{str(e)[:70]}": a placeholder names an expression
# (no spaces or quotes; a colon only inside brackets), then a conversion and a format
PLACEHOLDER = re.compile(r"\{((?:[^{}\s\"':!\[\]]|\[[^\]{}\s\"']*\])+)(![rsa])?(:[^{}]*)?\}")
MAX_DEPTH = 4
# the space a template leaves between two Chinese phrases it joins ("更新之后的 影子参数")
_CJK_GAP = re.compile(r"(?<=[\u4e00-\u9fff])[ ]+(?=[\u4e00-\u9fff])")


def N_(text: str) -> str:
    """Mark ``text`` as a message of the catalog, where it is written; it is translated where shown."""
    return text


def notebook_lang(nb: dict) -> str:
    """The language a notebook says it is written in (``metadata.copy_that.lang``); English if none."""
    meta = nb.get("metadata", {}) if isinstance(nb, dict) else {}
    ours = meta.get(META) if isinstance(meta, dict) else None
    value = ours.get(LANG_KEY) if isinstance(ours, dict) else None
    return value if value in LANGS else DEFAULT


def choose(option: str | None = None, notebook: dict | None = None, environ: dict | None = None) -> str:
    """The language to speak: ``option`` (a command's ``--lang``), else ``$COPY_THAT_LANG``, else the
    notebook's own language, else English."""
    env = os.environ if environ is None else environ
    for value in (option, env.get(LANG_ENV, "").strip() or None):
        if value:
            if value not in LANGS:
                raise ValueError(f"unknown language {value!r}: the course speaks {', '.join(LANGS)}")
            return value
    return notebook_lang(notebook) if notebook is not None else DEFAULT


def file_lang(path: str | os.PathLike | None) -> str:
    """The language of the notebook file at ``path`` (English when it cannot be read)."""
    try:
        with open(path, encoding="utf-8") as f:
            return notebook_lang(json.load(f))
    except (OSError, ValueError, TypeError):
        return DEFAULT


def choose_for(option: str | None, path: str | os.PathLike | None) -> str:
    """:func:`choose` for the notebook file at ``path`` (or none)."""
    return choose(option, {"metadata": {META: {LANG_KEY: file_lang(path)}}} if path else None)


@lru_cache(maxsize=4)
def _session_lang(env_lang: str, session: str) -> str:
    if env_lang in LANGS:
        return env_lang
    return file_lang(session) if session.endswith(".ipynb") else DEFAULT


def kernel_lang() -> str:
    """The language of the notebook this kernel runs: ``$COPY_THAT_LANG``, else the metadata of the
    notebook Jupyter started it for (``$JPY_SESSION_NAME``), else English.  The grader's kernels
    and ``check``'s have neither, and speak English: what they print is what the tools read."""
    return _session_lang(os.environ.get(LANG_ENV, "").strip(), os.environ.get("JPY_SESSION_NAME", ""))


# --- the catalog ---------------------------------------------------------------------------------

def catalog_path(lang: str) -> Path:
    return LOCALE / f"{lang}.json"


def read_catalog(path: Path) -> dict[str, dict[str, str | None]]:
    """The catalog file as written: section -> English -> translation (None: not translated yet)."""
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


@lru_cache(maxsize=None)
def _flat(lang: str) -> dict[str, str]:
    if lang == DEFAULT:
        return {}
    out: dict[str, str] = {}
    for section in read_catalog(catalog_path(lang)).values():
        out.update({k: v for k, v in section.items() if v})
    return out


def _parts(template: str) -> list[str]:
    """``"{what} is {actual}"`` -> ``["", "what", " is ", "actual", ""]``: literals at even places."""
    out, at = [], 0
    for m in PLACEHOLDER.finditer(template):
        out += [template[at:m.start()], m.group(0)]
        at = m.end()
    return out + [template[at:]]


@lru_cache(maxsize=None)
def _templates(lang: str) -> list[tuple[str, list[str]]]:
    return [(k, _parts(k)) for k in _flat(lang) if PLACEHOLDER.search(k)]


def _assignments(parts: list[str], text: str, limit: int = 32) -> list[list[str]]:
    """Every way ``text`` splits into the template's literals and non-empty placeholder values."""
    if not text.startswith(parts[0]) or not text.endswith(parts[-1]) or len(text) < sum(map(len, parts[::2])):
        return []
    found: list[list[str]] = []

    def walk(i: int, at: int, values: list[str]) -> None:
        if len(found) >= limit:
            return
        if i == len(parts) - 2:       # the last placeholder runs up to the final literal
            end = len(text) - len(parts[-1])
            if end > at:
                found.append(values + [text[at:end]])
            return
        literal = parts[i + 1]
        start = text.find(literal, at + 1) if literal else at + 1
        while start != -1 and start < len(text):
            walk(i + 2, start + len(literal), values + [text[at:start]])
            start = text.find(literal, start + 1) if literal else -1

    walk(1, len(parts[0]), [])
    return found


_WORDS = re.compile(r"\b(?:is|not|in|and|or|if|else|for)\b")
_STRINGS = re.compile(r"'[^']*'|\"[^\"]*\"")
# a Python exception as a cell shows it ("SyntaxError: invalid syntax (line 2)"): left in English
_EXCEPTION = re.compile(r"^[A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt)(?::\s.*)?$", re.S)


# a value as the checks print it: a tensor's or an array's values, cut short ("tensor([[0.1, ...")
_VALUES = re.compile(r"^(?:tensor|array|Parameter containing:)[\s(\[]")
# a placeholder holding an object's own text (an exception's message, ``{str(e)[:70]}``): not the catalog's
_RUNTIME = re.compile(r"\bstr\(")
_CALL = re.compile(r"^([A-Za-z_][\w.]*)\((.+)\)$", re.S)


def _is_code(text: str) -> bool:
    """A value that needs no translation: one word, a tensor's values, or a Python expression
    (``a[0]``, ``'w'``, ``tensor([1.0, 2.0])``) that reads as no sentence (``x is False`` does)."""
    text = text.strip()
    if " " not in text or _VALUES.match(text):
        return True
    if _WORDS.search(_STRINGS.sub("", text)):
        return False
    try:
        compile(text, "<value>", "eval")
    except (SyntaxError, ValueError):
        return False
    return True


def _fits(placeholder: str, value: str) -> bool:
    """A ``{name!r}`` or ``{x:.3g}`` placeholder stands for a repr or a number: code, never prose."""
    m = PLACEHOLDER.fullmatch(placeholder)
    return not (m and (m.group(2) or m.group(3))) or _is_code(value)


@lru_cache(maxsize=8192)
def _translated(text: str, lang: str, depth: int) -> tuple[str, int]:
    """(``text`` in ``lang``, how many of its characters the catalog accounts for).

    A template accounts for its own words and, in each part it leaves, for what the catalog knows
    of that part (all of it for code: ``a[0]``, ``False``); the template that accounts for most of
    the text wins (on a tie, the one with more words of its own), and only when it accounts for
    three quarters of it or more: a loose template
    (``"{where}: {error}"``) never turns an unknown text into a half-translation."""
    flat = _flat(lang)
    if text in flat:
        return flat[text], len(text)
    if _is_code(text) or _EXCEPTION.match(text):
        return text, len(text)
    if depth >= MAX_DEPTH:
        return text, 0
    best, best_score = None, (-1, -1)
    for key, parts in _templates(lang):
        own = sum(map(len, parts[::2]))
        for values in _assignments(parts, text):
            if not all(_fits(ph, v) for ph, v in zip(parts[1::2], values)):
                continue
            done = [(v, len(v)) if _RUNTIME.search(ph) else _translated(v, lang, depth + 1)
                    for ph, v in zip(parts[1::2], values)]
            score = (own + sum(c for _, c in done), own)     # coverage; then the more specific template
            if score > best_score:
                best, best_score = (key, parts, [t for t, _ in done]), score
    best_cover = best_score[0]
    if best is None or best_cover * 4 < len(text) * 3:
        call = _CALL.match(text)      # a call whose argument is prose: detached_parameter(a plain tensor)
        if call:
            inner, covered = _translated(call.group(2), lang, depth + 1)
            if covered * 4 >= len(call.group(2)) * 3:
                return f"{call.group(1)}({inner})", len(call.group(1)) + 2 + covered
        return text, 0
    key, parts, values = best
    filled = dict(zip(parts[1::2], values))
    return PLACEHOLDER.sub(lambda m: filled.get(m.group(0), m.group(0)), flat[key]), best_cover


def tr(text: str, lang: str) -> str:
    """``text`` in ``lang``: its catalog entry, or the translation of the template it was built from
    with its parts translated; the text itself when the catalog has neither."""
    if lang == DEFAULT or not text:
        return text
    return _CJK_GAP.sub("", _translated(text, lang, 0)[0])


def fill(template: str, **values) -> str:
    """``template`` with its ``{name}`` placeholders replaced, as ``str.format`` would (literal
    braces that are no placeholder stay as they are)."""
    def one(m: re.Match) -> str:
        value = values[m.group(1)]
        if m.group(2) == "!r":
            value = repr(value)
        return format(value, m.group(3)[1:]) if m.group(3) else str(value)
    return PLACEHOLDER.sub(one, template)


def say(lang: str, template: str, **values) -> str:
    """The message ``template`` (a catalog key) in ``lang``, with ``values`` filled in."""
    if lang != DEFAULT:
        template = _flat(lang).get(template) or template
    return fill(template, **values)
