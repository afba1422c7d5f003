"""The lecture notebooks run top to bottom, and what a reader sees stored is what runs.

Each notebook in ``course/`` is stored with its outputs.  The test re-runs it in a fresh kernel
(a new IPython kernel forked, as the grader forks them, from a process that has imported torch:
the kernel has no state of its own, and torch's random generator is where a new process has it)
and compares every code cell's outputs with the stored ones, after masking what legitimately
changes between runs (memory addresses, object ids).  A cell tagged ``nondeterministic``
(timings) is compared by output kind only; cells tagged ``gpu`` or ``mps`` depend on the
hardware and are checked by ``tests/test_gpu.py`` instead.

A markdown cell that asks the reader to **Predict** is answered by the code cells after it (up
to the next markdown cell); their outputs are stored collapsed (``jupyter.outputs_hidden``), so
the answer is one click away in JupyterLab but not on screen before the guess.  The paragraph
that explains such an answer is collapsed too (tag ``answer``), and a paragraph left in view right
after a collapsed answer was checked to give nothing away (tag ``no-spoiler``): see
``autograder.course.reveals``.
"""
from __future__ import annotations

import re

import nbformat
import pytest

from autograder.course.layout import lectures
from autograder.course.reveals import spoiler_problems
from autograder.grading.jobs import Job, execute
from autograder.grading.pool import SlotPool
from autograder.grading.sandbox import Limits
from harness import ROOT

LECTURES = lectures(ROOT)

MASKS = [
    (re.compile(r"0x[0-9a-fA-F]{6,}"), "0xADDR"),             # addresses
    (re.compile(r"(?<![\d.])\d{9,}(?![\d.])"), "<big-int>"),    # ids and data_ptr values
    (re.compile(r"at 0x[0-9a-f]+>"), "at 0xADDR>"),
]


HARDWARE_TAGS = {"gpu", "mps"}


def sanitize(text: str) -> str:
    for pattern, repl in MASKS:
        text = pattern.sub(repl, text)
    return text.rstrip()


def comparable(cell: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """(kind, text) per output: text outputs masked, rich outputs by mime type only."""
    tags = cell.get("metadata", {}).get("tags", [])
    if HARDWARE_TAGS & set(tags):
        return []
    out: list[tuple[str, str]] = []
    for o in cell.get("outputs", []):
        if o.output_type == "stream":
            kind = f"stream:{o.name}"
            # the kernel may flush one print in several chunks: join them before comparing
            if out and out[-1][0] == kind:
                out[-1] = (kind, out[-1][1] + o.text)
            else:
                out.append((kind, o.text))
        elif o.output_type in ("execute_result", "display_data"):
            data = o.get("data", {})
            kinds = ",".join(sorted(k for k in data if k != "text/plain"))
            text = "" if kinds else data.get("text/plain", "")
            out.append((f"{o.output_type}:{kinds or 'text/plain'}", text))
        elif o.output_type == "error":
            out.append(("error", f"{o.ename}: {o.evalue}"))
    nondeterministic = "nondeterministic" in tags
    return [(kind, "" if nondeterministic else sanitize(text)) for kind, text in out]


def ids(paths):
    return [p.stem for p in paths]


def test_there_are_lectures():
    names = [p.name for p in LECTURES]
    assert names[0] == "00_start_here.ipynb"
    assert any(n.startswith("01_") for n in names)


@pytest.mark.parametrize("path", LECTURES, ids=ids(LECTURES))
def test_lecture_is_stored_executed(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, "a lecture runs code"
    unexecuted = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.get("execution_count") is None]
    assert not unexecuted, f"cells {unexecuted} are stored without outputs: run `make lectures`"
    counts = [c.execution_count for c in code]
    assert counts == list(range(1, len(code) + 1)), "stored outputs come from one top-to-bottom run"


# a lecture is the course's own code: limits only against a runaway cell
LECTURE_LIMITS = Limits(memory_bytes=0, cpu_seconds=0, cell_timeout=300, notebook_timeout=900, processes=0,
                        output_bytes=64 << 20, file_bytes=0)


@pytest.fixture(scope="module")
def slot():
    with SlotPool(1, sandboxed=False) as pool:
        yield pool.slots.get()


@pytest.mark.parametrize("path", LECTURES, ids=ids(LECTURES))
def test_lecture_reruns_with_the_stored_outputs(path, slot):
    stored = nbformat.read(path, as_version=4)
    outcome = execute(Job("lecture", path.stem, nbformat.read(path, as_version=4), limits=LECTURE_LIMITS), slot)
    assert not outcome.problems and not outcome.flags, (outcome.problems, outcome.flags)
    fresh = nbformat.from_dict(outcome.nb)
    errors = [i for i, c in enumerate(fresh.cells) for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, f"cells {errors} raise: a lecture shows errors by catching them"
    for i, (old, new) in enumerate(zip(stored.cells, fresh.cells)):
        if old.cell_type != "code":
            continue
        assert comparable(new) == comparable(old), (
            f"{path.name} cell {i} prints something else than what is stored:\n"
            f"--- source ---\n{old.source}\n--- stored ---\n{comparable(old)}\n--- now ---\n{comparable(new)}"
        )


PREDICT = re.compile(r"\bPredict\b")  # "**Predict:**", "**Predict.**", "**Predict** which ..."


def predictions(nb: nbformat.NotebookNode) -> tuple[list[int], set[int]]:
    """(the markdown cells that ask for a prediction, the code cells that answer them)."""
    prompts, answers, asking = [], set(), False
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            asking = bool(PREDICT.search(cell.source))
            if asking:
                prompts.append(i)
        elif cell.cell_type == "code" and asking:
            answers.add(i)
    return prompts, answers


def collapsed(nb: nbformat.NotebookNode) -> set[int]:
    return {i for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and c.get("metadata", {}).get("jupyter", {}).get("outputs_hidden")}


def test_the_lectures_ask_for_predictions():
    assert sum(len(predictions(nbformat.read(p, as_version=4))[0]) for p in LECTURES) >= 50


@pytest.mark.parametrize("path", LECTURES, ids=ids(LECTURES))
def test_a_predictions_answer_is_stored_collapsed_and_nothing_else_is(path):
    nb = nbformat.read(path, as_version=4)
    prompts, answers = predictions(nb)
    unanswered = [i for i in prompts if i + 1 == len(nb.cells) or nb.cells[i + 1].cell_type != "code"]
    assert not unanswered, f"cells {unanswered} ask for a prediction, but the next cell is no code cell that answers it"
    hidden = collapsed(nb)
    shown = sorted(answers - hidden)
    assert not shown, (f"cells {shown} answer a Predict question with their outputs in view: "
                       'set their metadata "jupyter": {"outputs_hidden": true}')
    stray = sorted(hidden - answers)
    assert not stray, f"cells {stray} have their outputs collapsed, but no Predict question comes before them"
    empty = sorted(i for i in answers if not nb.cells[i].get("outputs"))
    assert not empty, f"cells {empty} answer a Predict question but store no outputs to reveal"


@pytest.mark.parametrize("path", LECTURES, ids=ids(LECTURES))
def test_no_paragraph_in_view_gives_a_collapsed_answer_away(path):
    problems = spoiler_problems(nbformat.read(path, as_version=4))
    assert not problems, f"{path.name}: {len(problems)} answer(s) could be read before the guess:\n" + "\n".join(problems)


TITLE = re.compile(r"# (\d\d[a-z]?) \u2014 \S")  # "# 02 — `clone()`: a copy that stays in the graph"


@pytest.mark.parametrize("path", LECTURES, ids=ids(LECTURES))
def test_lecture_title_is_numbered_like_the_others(path):
    first = nbformat.read(path, as_version=4).cells[0]
    line = first.source.splitlines()[0] if first.cell_type == "markdown" and first.source else ""
    m = TITLE.match(line)
    assert m and path.stem.startswith(m.group(1) + "_"), (
        f"{path.name} opens with {line!r}: write its title as '# {path.stem.split('_')[0]} \u2014 Title'")
