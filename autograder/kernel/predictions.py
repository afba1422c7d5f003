"""Questions with a right letter (the prediction sets, a7's picture question): the letter a learner
wrote, and the feedback a release can carry without giving the right letter away.

The author's letters and diagnoses stay in the instructor's notebook, in the hidden part of the
test cell.  The release carries, for each wrong letter the author diagnosed, that diagnosis sealed
under a key derived from the salt, the question and the letter, so only a learner who chose that
letter reads it.  The right letter has no entry at all: it reads exactly like a wrong letter the
author left without a diagnosis.  What stays possible, by design: trying every letter in turn
shows which letters carry a named mistake (and so, where every wrong letter of a question carries
one, which letter is left).

Standard library only: this module runs in learners' kernels, and ``check`` imports it.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from typing import Any

from .i18n import N_

# the line a visible check prints for letters it cannot judge; ``check`` reads it (selfcheck.py)
NO_DIAGNOSIS = "\u00b7 no stored diagnosis for "

_type = type
_str = str
_dict = dict


def spelled(value: Any) -> Any:
    """The letter in ``value`` as written, without spaces or parentheses (``" (b) "`` -> ``"b"``);
    anything but a str is returned as it is."""
    if _type(value) is not _str:
        return value
    text = value.strip()
    if len(text) >= 2 and text[0] == "(" and text[-1] == ")":
        text = text[1:-1].strip()
    return text


def is_blank(value: Any) -> bool:
    """Still as handed out: no value, an empty string or ``"?"``."""
    return value is None or (_type(value) is _str and value in ("", "?"))


def choice(text: str, choices: str) -> str | None:
    """The choice that ``text`` names, in either case (``"b"`` names choice ``"B"``); None if none."""
    for letter in choices:
        if text.lower() == letter.lower():
            return letter
    return None


@dataclass(frozen=True)
class Problem:
    """What is wrong with the form of an answer: the test fails with it (``not_started``: it raises
    ``NotImplementedError``, as an exercise still as handed out does)."""

    observed: str
    expected: str = ""
    hint: str | None = None
    not_started: bool = False


def letters(answers: Any, choices: dict[str, str], name: str) -> dict[str, str] | Problem:
    """Each question's letter, one of its choices (``choices``: question -> its letters), or the
    first problem: not a dict, all still ``"?"``, a question without a letter or with another one."""
    if _type(answers) is not _dict:
        return Problem(N_(f"{name} is a {_type_name(answers)}"), N_('a dict of letters, such as {"q1": "a", "q2": "b"}'),
                       N_(f"run the answer cell above this test, and keep {name} a plain dict."))
    given = {q: spelled(_dict.get(answers, q)) for q in choices}
    if all(is_blank(v) for v in given.values()):
        return Problem(N_(f'no predictions yet: replace each "?" in {name} with the letter you predict'), not_started=True)
    found = {}
    for q, text in given.items():
        if is_blank(text):
            return Problem(N_(f"{q}: no prediction"), N_(f'a letter in {name}["{q}"]'))
        if _type(text) is not _str:
            return Problem(N_(f"{q}: the prediction is a {_type_name(text)} ({_shown(text)})"),
                           N_('a letter in quotes, such as "a"'))
        found[q] = choice(text, choices[q])
        if found[q] is None:
            given_text = text if len(text) <= 12 else text[:12] + "..."
            options = ", ".join(f"({c})" for c in choices[q])
            return Problem(N_(f"{q}: you predicted ({given_text})"), N_(f"one of {options}"))
    return found


def letter(answer: Any, name: str, choices: str) -> str | Problem:
    """The choice one answer names (``graph_answer = "B"``), or what is wrong with it."""
    text = spelled(answer)
    if is_blank(text):
        return Problem(N_(f'{name} is not set yet: set it to your letter, e.g. {name} = "{choices[0]}"'), not_started=True)
    if _type(text) is not _str:
        return Problem(N_(f"{name} is a {_type_name(answer)} ({_shown(answer)})"),
                       N_(f'one letter in quotes, such as "{choices[0]}"'))
    found = choice(text, choices)
    if found is None:
        options = ", ".join(repr(c) for c in choices)
        return Problem(N_(f"{name} is {_shown(answer)}"), N_(f"one of {options}"))
    return found


def _type_name(obj: Any) -> str:
    t = _type(obj)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _shown(obj: Any) -> str:
    try:
        text = repr(obj) if _type(obj) in (_str, int, float, bool, type(None)) else f"<{_type_name(obj)}>"
    except Exception:
        text = f"<{_type_name(obj)}>"
    return text if len(text) <= 40 else text[:37] + "..."


def _digest(purpose: bytes, salt: str, question: str, letter: str) -> bytes:
    return hashlib.sha256(purpose + b"\0" + f"{salt}{question}:{letter}".encode("utf-8")).digest()


def _tag(salt: str, question: str, letter: str) -> str:
    return _digest(b"tag", salt, question, letter).hex()[:32]


def _xor(data: bytes, salt: str, question: str, letter: str) -> bytes:
    stream = hashlib.shake_256(_digest(b"key", salt, question, letter)).digest(len(data))
    return bytes(a ^ b for a, b in zip(data, stream))


def seal(text: str, salt: str, question: str, letter: str) -> tuple[str, str]:
    """``(tag, sealed)``: the diagnosis of one letter, found and read only with that letter."""
    sealed = _xor(text.encode("utf-8"), salt, question, letter)
    return _tag(salt, question, letter), base64.b64encode(sealed).decode("ascii")


def unseal(sealed: Any, salt: str, question: str, letter: str) -> str | None:
    """The diagnosis the release stores for ``letter`` (``sealed``: tag -> sealed text), or None."""
    token = sealed.get(_tag(salt, question, letter)) if _type(sealed) is _dict else None
    if _type(token) is not _str:
        return None
    try:
        return _xor(base64.b64decode(token, validate=True), salt, question, letter).decode("utf-8")
    except (binascii.Error, ValueError):
        return None


def sealed_feedback(why: dict[str, str], salt: str, question: str) -> dict[str, str]:
    """What the release stores for one question: each diagnosed letter's text sealed, in tag order
    (so the order says nothing about the letters)."""
    return dict(sorted(seal(text, salt, question, letter) for letter, text in why.items()))
