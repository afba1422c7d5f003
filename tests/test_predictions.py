"""Questions with a right letter: the sealed feedback (``autograder.kernel.predictions``), the checks
that read it (``ck.check_predictions`` and friends) and the command that writes it
(``python -m autograder predictions``)."""
from __future__ import annotations

import ast
import subprocess
import sys

import nbformat
import pytest

from autograder.course import predictions as command
from autograder.course.layout import assignments
from autograder.kernel import checks as ck
from autograder.kernel import predictions as pred
from autograder.learner.cells import role
from harness import ROOT, source_notebook

SALT = "copy-that/test/predictions:"
CHOICES = {"q1": "abc", "q2": "ab"}
KEY = {"q1": "b", "q2": "a"}
WHY = {"q1": {"a": "M-views-copy: (a) is the tempting one."}, "q2": {"b": "M-detach-copies: not (b)."}}
FEEDBACK = {q: pred.sealed_feedback(WHY.get(q, {}), SALT, q) for q in CHOICES}


def failure(fn, *args, **kwargs) -> str:
    with pytest.raises(ck.CheckFailed) as info:
        fn(*args, **kwargs)
    return str(info.value)


# --- sealing ---------------------------------------------------------------------------------------

def test_a_sealed_diagnosis_opens_with_its_own_letter_only():
    tag, sealed = pred.seal("M-views-copy: a view, not a copy. ✓ unicode", SALT, "q1", "a")
    store = {tag: sealed}
    assert pred.unseal(store, SALT, "q1", "a") == "M-views-copy: a view, not a copy. ✓ unicode"
    assert pred.unseal(store, SALT, "q1", "b") is None
    assert pred.unseal(store, SALT, "q2", "a") is None, "the question is part of the key"
    assert pred.unseal(store, "another salt", "q1", "a") is None, "so is the salt"
    assert "view" not in sealed and "view" not in tag


def test_the_stored_feedback_holds_one_entry_per_diagnosed_letter_in_an_order_that_says_nothing():
    feedback = pred.sealed_feedback({"c": "third", "a": "first"}, SALT, "q1")
    assert len(feedback) == 2 and list(feedback) == sorted(feedback)
    assert {pred.unseal(feedback, SALT, "q1", letter) for letter in "abc"} == {"first", "third", None}


@pytest.mark.parametrize("store", [None, [], {"x": 1}, "text"])
def test_a_store_of_another_shape_opens_nothing(store):
    assert pred.unseal(store, SALT, "q1", "a") is None


def test_a_letter_is_read_in_either_case_with_spaces_or_parentheses():
    assert [pred.choice(pred.spelled(v), "abc") for v in ("b", "B", " (b) ", "(B)", "d")] == ["b"] * 4 + [None]
    assert pred.choice(pred.spelled(" (b)"), "ABCD") == "B"


# --- the visible half: form, and a diagnosis for a diagnosed letter only ---------------------------

def test_a_diagnosed_letter_fails_with_its_diagnosis_and_link():
    message = failure(ck.check_predictions, {"q1": "A", "q2": "a"}, CHOICES, FEEDBACK, SALT)
    assert message.startswith("q1: you predicted (a); expected another choice. Likely mistake: (a) is the tempting one.")
    assert "[M-views-copy: course/" in message


def test_the_right_letter_reads_exactly_like_a_wrong_letter_without_a_diagnosis(capsys):
    ck.check_predictions({"q1": "b", "q2": "a"}, CHOICES, FEEDBACK, SALT)    # both right
    right = capsys.readouterr().out
    ck.check_predictions({"q1": "c", "q2": "a"}, CHOICES, FEEDBACK, SALT)    # q1 wrong, not diagnosed
    wrong = capsys.readouterr().out
    assert right.replace("q1 (b)", "q1 (?)") == wrong.replace("q1 (c)", "q1 (?)")
    assert right.startswith(pred.NO_DIAGNOSIS) and "\u2713" not in right
    assert "check --full" in right


@pytest.mark.parametrize("answers, message", [
    ([("q1", "a")], "PREDICTIONS is a list; expected a dict of letters"),
    ({"q1": "a"}, 'q2: no prediction; expected a letter in PREDICTIONS["q2"]'),
    ({"q1": "?", "q2": "b"}, 'q1: no prediction'),
    ({"q1": 1, "q2": "b"}, 'q1: the prediction is a int (1); expected a letter in quotes'),
    ({"q1": "d", "q2": "b"}, "q1: you predicted (d); expected one of (a), (b), (c)."),
    ({"q1": "a very long answer indeed", "q2": "b"}, "q1: you predicted (a very long ...); expected one of"),
])
def test_a_prediction_of_the_wrong_form_fails_saying_what_was_expected(answers, message):
    assert message in failure(ck.check_predictions, answers, CHOICES, FEEDBACK, SALT)
    assert message in failure(ck.grade_predictions, answers, KEY, CHOICES, WHY)


def test_predictions_still_as_handed_out_read_as_not_started():
    for fn, args in ((ck.check_predictions, (CHOICES, FEEDBACK, SALT)), (ck.grade_predictions, (KEY, CHOICES))):
        with pytest.raises(NotImplementedError, match="no predictions yet"):
            fn({"q1": "?", "q2": " ? "}, *args)


def test_a_learners_object_in_predictions_is_never_asked_for_its_repr():
    class Letter:
        def __repr__(self):
            raise AssertionError("learner code ran")
    assert "q1: the prediction is a" in failure(ck.check_predictions, {"q1": Letter(), "q2": "a"}, CHOICES, FEEDBACK, SALT)


# --- the hidden half: the right letters --------------------------------------------------------------

def test_the_hidden_half_passes_right_letters_in_any_spelling_and_fails_any_wrong_one(capsys):
    ck.grade_predictions({"q1": " (B) ", "q2": "a"}, KEY, CHOICES, WHY)
    assert capsys.readouterr().out == "\u2713 all 2 predictions right\n"
    assert failure(ck.grade_predictions, {"q1": "b", "q2": "b"}, KEY, CHOICES, WHY).startswith(
        "q2: you predicted (b); expected another choice. Likely mistake: not (b).")
    assert failure(ck.grade_predictions, {"q1": "c", "q2": "a"}, KEY, CHOICES, WHY) == \
        "q1: you predicted (c); expected another choice."


def test_one_question_with_a_right_letter_checks_and_grades_like_a_set(capsys):
    feedback = pred.sealed_feedback({"A": "M-to-always-copies: a ToCopyBackward0 would show."}, SALT, "pick")
    assert "pick is 'A'; expected another choice. Likely mistake: a ToCopyBackward0" in failure(
        ck.check_choice, "a", "pick", "ABCD", feedback, SALT)
    ck.check_choice(" B ", "pick", "ABCD", feedback, SALT)
    assert capsys.readouterr().out.startswith(pred.NO_DIAGNOSIS + "pick = 'B'")
    ck.grade_choice("b", "pick", "B", "ABCD")
    assert capsys.readouterr().out == "\u2713 pick is right\n"
    assert failure(ck.grade_choice, "C", "pick", "B", "ABCD", {"C": "not C"}) == \
        "pick is 'C'; expected another choice. Hint: not C"
    assert "pick is 'E'; expected one of 'A', 'B', 'C', 'D'" in failure(ck.check_choice, "E", "pick", "ABCD", feedback, SALT)
    assert "pick is a int (3)" in failure(ck.check_choice, 3, "pick", "ABCD", feedback, SALT)
    with pytest.raises(NotImplementedError, match="pick is not set yet"):
        ck.check_choice("?", "pick", "ABCD", feedback, SALT)


# --- the command ---------------------------------------------------------------------------------------

def question_cells():
    """(assignment, grade_id, the author's questions, the visible call's keywords) of every test cell
    of the course that holds questions with a right letter."""
    found = []
    for assignment in assignments(ROOT):
        nb = nbformat.read(source_notebook(assignment), as_version=4)
        for cell in nb.cells:
            if not role(cell).is_test or command.BEGIN not in cell.source:
                continue
            visible, rest = cell.source.split(command.BEGIN, 1)
            questions = command.read_questions(rest.split(command.END)[0], role(cell).grade_id)
            if questions is None:
                continue
            call = next(n for n in ast.walk(ast.parse(visible)) if isinstance(n, ast.Call)
                        and getattr(n.func, "attr", "") == command.VISIBLE[questions.kind])
            found.append((assignment, role(cell).grade_id, questions,
                          {k.arg: ast.literal_eval(k.value) for k in call.keywords}))
    return found


def test_every_assignment_has_a_prediction_set_and_a7_its_picture_question():
    cells = {(a, gid, q.kind) for a, gid, q, _ in question_cells()}
    assert {a for a, gid, kind in cells if gid == "test_predictions" and kind == "grade_predictions"} == set(assignments(ROOT))
    assert ("a7_graphs", "test_graph_answer", "grade_choice") in cells


def test_what_the_command_wrote_opens_to_the_authors_text_for_each_letter_and_to_nothing_for_the_right_one():
    for assignment, gid, questions, visible in question_cells():
        assert visible["choices"] == (questions.choices if questions.kind == "grade_predictions"
                                      else next(iter(questions.choices.values())))
        for q, letters in questions.choices.items():
            stored = visible["feedback"][q] if questions.kind == "grade_predictions" else visible["feedback"]
            assert len(stored) == len(questions.released(q)), (assignment, q)
            for letter in letters:
                opened = pred.unseal(stored, visible["salt"], q, letter)
                assert opened == questions.released(q).get(letter), (assignment, gid, q, letter)
            assert pred.unseal(stored, visible["salt"], q, questions.key[q]) is None


def test_the_committed_notebooks_are_what_the_command_writes():
    out = subprocess.run([sys.executable, "-m", "autograder", "predictions", "--check",
                          *(str(source_notebook(a)) for a in assignments(ROOT))],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "up to date" in out.stdout


AUTHORS_CELL = '''### BEGIN HIDDEN TESTS
ck.grade_predictions(
    PREDICTIONS,
    key={"q1": "b", "q2": "a"},
    choices={"q1": "abcd", "q2": "ab"},
    why={"q1": {"a": "M-views-copy: (a) is the tempting one.", "c": "not (c)"}},
)
### END HIDDEN TESTS'''


def _notebook_with(tmp_path, source: str):
    tmp_path.mkdir(exist_ok=True)
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": 1,
                                 "grade_id": "test_predictions", "schema_version": 3, "task": False}
    nb.cells.append(cell)
    path = tmp_path / "a0_new" / "a0_new.ipynb"
    path.parent.mkdir()
    path.write_text(nbformat.writes(nb) + "\n")
    return path


def test_the_command_writes_the_visible_check_of_a_new_cell_then_leaves_it_alone(tmp_path):
    path = _notebook_with(tmp_path, AUTHORS_CELL)
    assert command.write_predictions(path, check=True).changed == ["test_predictions"]
    assert path.read_text().count("check_predictions") == 0, "--check writes nothing"
    report = command.write_predictions(path)
    assert report.changed == ["test_predictions"]
    assert report.notes == [], "q1's (d) and q2's (b) have no diagnosis"
    source = nbformat.read(path, as_version=4).cells[0].source
    assert source.startswith("# graded outside your kernel\n"), "the hidden part holds the key: it is judged"
    assert source.endswith(AUTHORS_CELL)
    namespace = {"ck": ck, "PREDICTIONS": {"q1": "a", "q2": "a"}}
    visible = source.split(command.BEGIN)[0]
    with pytest.raises(ck.CheckFailed, match="the tempting one"):
        exec(visible, namespace)
    namespace["PREDICTIONS"] = {"q1": "b", "q2": "b"}
    exec(visible, namespace)          # no diagnosis stored for either letter: not judged here
    assert command.write_predictions(path).changed == []
    # the author changes a diagnosis: the visible check follows
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source = nb.cells[0].source.replace("not (c)", "M-detach-copies: not (c) either")
    path.write_text(nbformat.writes(nb) + "\n")
    assert command.write_predictions(path).changed == ["test_predictions"]
    exec(nbformat.read(path, as_version=4).cells[0].source.split(command.BEGIN)[0], namespace)
    namespace["PREDICTIONS"] = {"q1": "c", "q2": "a"}
    with pytest.raises(ck.CheckFailed, match="not \\(c\\) either"):
        exec(nbformat.read(path, as_version=4).cells[0].source.split(command.BEGIN)[0], namespace)


def test_the_command_notes_a_question_whose_right_letter_trying_every_letter_finds(tmp_path):
    path = _notebook_with(tmp_path, AUTHORS_CELL.replace('"c": "not (c)"}', '"c": "not (c)"}, "q2": {"b": "no"}'))
    [note] = command.write_predictions(path).notes
    assert "every wrong letter of q2 has a diagnosis" in note and "q1" not in note


def test_a_diagnosis_kept_for_the_grading_stays_out_of_the_release_and_shows_when_graded(tmp_path):
    cell = AUTHORS_CELL.replace('"c": "not (c)"}', '"c": "not (c)"}, "q2": {"b": "M-detach-copies: no"}').replace(
        "\n)\n### END", '\n    graded_only={"q2": "b"},\n)\n### END')
    path = _notebook_with(tmp_path, cell)
    assert command.write_predictions(path).notes == [], "q2's only wrong letter is kept for the grading"
    source = nbformat.read(path, as_version=4).cells[0].source
    visible = source.split(command.BEGIN)[0]
    assert "M-detach-copies" not in visible
    namespace = {"ck": ck, "PREDICTIONS": {"q1": "b", "q2": "b"}}
    exec(visible, namespace)                       # (b) reads like the right letter here
    with pytest.raises(ck.CheckFailed, match="q2: you predicted \\(b\\); expected another choice. Likely mistake: no"):
        exec(source, namespace)                    # and the grading names the mistake
    bad = _notebook_with(tmp_path / "x", cell.replace('graded_only={"q2": "b"}', 'graded_only={"q2": "a"}'))
    with pytest.raises(command.AuthoringError, match="graded_only= names, per question, letters that why= diagnoses"):
        command.write_predictions(bad)


@pytest.mark.parametrize("edit, message", [
    (('"q1": "b", "q2": "a"', '"q1": "e", "q2": "a"'), "the right letter of q1, 'e', is not one of its choices"),
    (('"c": "not (c)"', '"b": "b is right"'), "why['q1'] diagnoses the right letter 'b'"),
    (('"c": "not (c)"', '"e": "no such letter"'), "diagnoses 'e', which is not one of the choices"),
    (('key={"q1": "b", "q2": "a"}', 'key={"q1": "b"}'), "key= must give one right letter for each question"),
    (('key={"q1": "b", "q2": "a"}', 'key=KEY'), "key= must be written out as a literal"),
    (('key={"q1": "b", "q2": "a"}', 'key={"q1": "b", "q2": "a"'), "the hidden part is not valid Python"),
    (('choices={"q1": "abcd", "q2": "ab"}', 'choices={"q1": "abcA", "q2": "ab"}'), "repeat a letter"),
])
def test_the_command_refuses_a_cell_it_cannot_read_naming_the_cell(tmp_path, edit, message):
    path = _notebook_with(tmp_path, AUTHORS_CELL.replace(*edit))
    with pytest.raises(command.AuthoringError, match="a0_new.ipynb, cell test_predictions: .*" + message.replace("(", "\\(")
                       .replace(")", "\\)").replace("[", "\\[").replace("]", "\\]")):
        command.write_predictions(path)
    out = subprocess.run([sys.executable, "-m", "autograder", "predictions", str(path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "test_predictions" in out.stdout, out.stdout
