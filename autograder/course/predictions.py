"""``python -m autograder predictions NOTEBOOK``: the release's half of each question with a right
letter, written from the author's half.

The author writes the right letters, the choices and the diagnoses of wrong letters in the hidden
part of the test cell, which nbgrader strips from the release and the judge runs at grading::

    # graded outside your kernel
    ### BEGIN HIDDEN TESTS
    ck.grade_predictions(PREDICTIONS, key={"q1": "b"}, choices={"q1": "abc"},
                         why={"q1": {"a": "M-...: why (a) is tempting and wrong"}})
    ### END HIDDEN TESTS

(or ``ck.grade_choice(graph_answer, "graph_answer", key="B", choices="ABCD", why={...})`` for one
question; ``graded_only={"q1": "c"}`` keeps a diagnosis out of the release, for the feedback after
grading only).  This module writes the visible call above the hidden part: the same choices and each
diagnosis sealed under its own letter (``autograder.kernel.predictions``), so the release holds no
right letter and no readable diagnosis, and a learner who picks a diagnosed letter reads it.
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..kernel.predictions import sealed_feedback
from ..learner.cells import JUDGED_MARKER as MARKER, role

BEGIN, END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
VISIBLE = {"grade_predictions": "check_predictions", "grade_choice": "check_choice"}
COMMENT = ("# Checks each letter's form; a wrong letter with a stored diagnosis shows it (only that letter opens it).\n"
           "# Written by `python -m autograder predictions` from the instructor's answers; no right letter is stored here.")


class AuthoringError(ValueError):
    """The author's half of a question cannot be read: the cell and what to change are named."""


@dataclass
class Questions:
    """The author's half of one test cell: right letters, choices and diagnoses, per question."""

    kind: str                        # "grade_predictions" or "grade_choice"
    target: str                      # the source of the name the test reads: PREDICTIONS, graph_answer
    key: dict[str, str]              # question -> right letter
    choices: dict[str, str]          # question -> its letters
    why: dict[str, dict[str, str]]   # question -> wrong letter -> diagnosis
    graded_only: dict[str, str] = field(default_factory=dict)   # question -> letters left out of the release

    def released(self, question: str) -> dict[str, str]:
        """The diagnoses the release carries for one question (sealed)."""
        return {letter: text for letter, text in self.why.get(question, {}).items()
                if letter not in self.graded_only.get(question, "")}


@dataclass
class Report:
    cells: list[str] = field(default_factory=list)     # test cells that hold questions
    changed: list[str] = field(default_factory=list)   # ... whose visible part was (or would be) rewritten
    notes: list[str] = field(default_factory=list)     # what a learner can learn by trying letters


def _literal(call: ast.Call, name: str, where: str):
    node = next((k.value for k in call.keywords if k.arg == name), None)
    if node is None:
        raise AuthoringError(f"{where}: the call has no {name}=")
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        raise AuthoringError(f"{where}: {name}= must be written out as a literal (letters and strings)") from None


def read_questions(hidden: str, where: str) -> Questions | None:
    """The ``ck.grade_predictions`` or ``ck.grade_choice`` call of a hidden part (None if there is none)."""
    try:
        tree = ast.parse(hidden)
    except SyntaxError as exc:
        raise AuthoringError(f"{where}: the hidden part is not valid Python (line {exc.lineno}: {exc.msg})") from None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.func.attr in VISIBLE]
    if not calls:
        return None
    if len(calls) > 1:
        raise AuthoringError(f"{where}: one question set per test cell, found {len(calls)}")
    call = calls[0]
    kind = call.func.attr
    if not call.args:
        raise AuthoringError(f"{where}: {kind}() needs the name the test reads first, e.g. {kind}(PREDICTIONS, ...)")
    target = ast.unparse(call.args[0])
    given = {k.arg for k in call.keywords}
    key, choices = _literal(call, "key", where), _literal(call, "choices", where)
    why = _literal(call, "why", where) if "why" in given else {}
    graded_only = _literal(call, "graded_only", where) if "graded_only" in given else {}
    if kind == "grade_choice":
        if len(call.args) < 2 or not isinstance(call.args[1], ast.Constant) or not isinstance(call.args[1].value, str):
            raise AuthoringError(f'{where}: grade_choice() takes the name as a string second, e.g. grade_choice(x, "x", ...)')
        name = call.args[1].value
        key, choices, why, graded_only = {name: key}, {name: choices}, {name: why}, {name: graded_only or ""}
    _validate(key, choices, why, where)
    if not isinstance(graded_only, dict) or not all(
            isinstance(letters, str) and q in why and set(letters) <= set(why[q]) for q, letters in graded_only.items()):
        raise AuthoringError(f"{where}: graded_only= names, per question, letters that why= diagnoses")
    return Questions(kind, target, key, choices, why, graded_only)


def _validate(key, choices, why, where: str) -> None:
    if not (isinstance(choices, dict) and all(isinstance(c, str) and c for c in choices.values())):
        raise AuthoringError(f'{where}: choices= maps each question to its letters, e.g. {{"q1": "abcd"}}')
    if not isinstance(key, dict) or set(key) != set(choices):
        raise AuthoringError(f"{where}: key= must give one right letter for each question of choices= ({', '.join(choices)})")
    if not isinstance(why, dict) or not set(why) <= set(choices):
        raise AuthoringError(f"{where}: why= maps questions of choices= to {{letter: diagnosis}}")
    for q, letters in choices.items():
        if len(set(letters.lower())) != len(letters):
            raise AuthoringError(f"{where}: {q}'s choices {letters!r} repeat a letter (in either case)")
        if key[q] not in letters:
            raise AuthoringError(f"{where}: the right letter of {q}, {key[q]!r}, is not one of its choices {letters!r}")
        diagnosed = why.get(q, {})
        if not isinstance(diagnosed, dict) or not all(isinstance(t, str) and t for t in diagnosed.values()):
            raise AuthoringError(f"{where}: why[{q!r}] maps letters to the text of their diagnosis")
        for letter in diagnosed:
            if letter not in letters:
                raise AuthoringError(f"{where}: why[{q!r}] diagnoses {letter!r}, which is not one of the choices {letters!r}")
            if letter == key[q]:
                raise AuthoringError(f"{where}: why[{q!r}] diagnoses the right letter {letter!r}: "
                                     "the release would then hold a text that only the right letter opens")


def visible_call(questions: Questions, salt: str) -> str:
    """The source of the visible check: the choices and the sealed diagnoses, nothing else."""
    s = json.dumps
    sealed = {q: sealed_feedback(questions.released(q), salt, q) for q in questions.choices}
    if questions.kind == "grade_choice":
        [(name, letters)] = questions.choices.items()
        lines = [f"    {questions.target},", f"    {s(name)},", f"    choices={s(letters)},",
                 "    feedback={", *(f"        {s(t)}: {s(v)}," for t, v in sealed[name].items()), "    },"]
    else:
        lines = [f"    {questions.target},",
                 "    choices={" + ", ".join(f"{s(q)}: {s(c)}" for q, c in questions.choices.items()) + "},",
                 "    feedback={"]
        for q, entries in sealed.items():
            lines += [f"        {s(q)}: {{", *(f"            {s(t)}: {s(v)}," for t, v in entries.items()), "        },"]
        lines.append("    },")
    return "\n".join([f"ck.{VISIBLE[questions.kind]}(", *lines, f"    salt={s(salt)},", ")"])


def salt_for(assignment: str, questions: Questions) -> str:
    """A salt per assignment and question set, the same at every run (so a rebuild changes nothing)."""
    return f"copy-that/{assignment}/{questions.target.lower()}:"


def rewrite(source: str, assignment: str, where: str) -> tuple[str, Questions | None]:
    """The test cell's source with its visible check written from its hidden part."""
    lines = source.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == BEGIN]
    if not starts:
        return source, None
    begin = starts[0]
    ends = [i for i, line in enumerate(lines) if line.strip() == END and i > begin]
    if not ends:
        raise AuthoringError(f"{where}: {BEGIN} has no {END}")
    questions = read_questions("\n".join(lines[begin + 1:ends[0]]), where)
    if questions is None:
        return source, None
    visible = lines[:begin]
    call = visible_call(questions, salt_for(assignment, questions)).splitlines()
    old = [n for n in ast.parse("\n".join(visible)).body
           if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Attribute)
           and n.value.func.attr == VISIBLE[questions.kind]]
    if old:
        visible[old[0].lineno - 1:old[0].end_lineno] = call
    else:
        visible += [*COMMENT.splitlines(), *call]
    if not any(line.strip() == MARKER for line in visible):
        visible.insert(0, MARKER)   # the hidden part holds the key: it must never be sent to the kernel
    return "\n".join(visible + lines[begin:]), questions


def notes_on(questions: Questions) -> list[str]:
    """What a learner finds by trying letters: the right letter of every question whose wrong
    letters all carry a diagnosis."""
    told = [q for q, letters in questions.choices.items() if len(questions.released(q)) == len(letters) - 1]
    if not told:
        return []
    return [f"every wrong letter of {', '.join(told)} has a diagnosis in the release, so trying each letter in turn "
            f"shows {'its' if len(told) == 1 else 'their'} right letter (graded_only= keeps one for the grading)"]


def write_predictions(path: Path, check: bool = False) -> Report:
    """Rewrite the visible checks of one instructor notebook in place (``check``: only compare)."""
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    assignment = path.parent.name
    report = Report()
    for cell in nb.cells:
        r = role(cell)
        if cell.cell_type != "code" or not r.is_test:
            continue
        where = f"{path.name}, cell {r.grade_id}"
        source, questions = rewrite(cell.source, assignment, where)
        if questions is None:
            continue
        report.cells.append(r.grade_id or "?")
        report.notes += [f"{r.grade_id}: {note}" for note in notes_on(questions)]
        if source != cell.source:
            report.changed.append(r.grade_id or "?")
            cell.source = source
    if report.changed and not check:
        path.write_text(nbformat.writes(nb) + "\n")
    return report
