"""A class graded in either edition, with one gradebook: the Chinese edition's notebooks hold the
English test cells, so the gradebook either edition makes is the same, and the answer corpus scores
the same cell by cell, with the same diagnoses, whichever edition a learner handed in."""
from __future__ import annotations

import shutil

import nbformat
import pytest

from autograder.course.layout import assignments, fill_answers, solution_sources
from autograder.grading.sync import from_source
from autograder.kernel.misconceptions import ids_in
from autograder.learner.cells import role
from corpus import answers_for, grade_with_the_course_grader, student_id
from harness import ROOT, scratch_course

A = "a1_views"


def zh_submission(course, answers: dict[str, str] | None, blank: bool = False) -> nbformat.NotebookNode:
    """The Chinese release filled with the reference answers, some replaced (or none: ``blank``)."""
    release = nbformat.read(course / "zh" / "exercises" / A / f"{A}.ipynb", as_version=4)
    if blank:
        return release
    reference = solution_sources(nbformat.read(course / "zh" / "solutions" / A / f"{A}.ipynb", as_version=4))
    return fill_answers(release, {**reference, **(answers or {})})


def en_submission(answers: dict[str, str] | None, blank: bool = False) -> nbformat.NotebookNode:
    from harness import submission

    return submission(A, answers, blank=blank)


def diagnoses(nb: nbformat.NotebookNode) -> dict[str, tuple[list[str], str]]:
    """grade id -> (misconception ids named, the error text) of each test cell of a graded notebook."""
    out = {}
    for cell in nb.cells:
        if cell.cell_type == "code" and role(cell).is_test:
            errors = [f"{o.ename}: {o.evalue}" for o in cell.get("outputs", []) if o.output_type == "error"]
            out[role(cell).grade_id] = (ids_in(" ".join(errors)), " ".join(errors))
    return out


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = scratch_course(tmp_path_factory.mktemp("zh-grading") / "course", A)   # the English gradebook
    for folder in ("solutions", "exercises"):
        shutil.copytree(ROOT / "zh" / folder / A, course / "zh" / folder / A)
    wrong, right = answers_for(A)
    cases = {"reference": (None, False), "blank": (None, True)}
    varying = set()
    for kind, items in (("wrong", wrong), ("right", right)):
        for i, a in enumerate(items):
            cases[student_id(kind, i, a)] = ({a.cell: a.source}, False)
            if a.varies:
                varying.add(student_id(kind, i, a))
    subs = {}
    for name, (answers, blank) in cases.items():
        subs[f"en_{name}"] = en_submission(answers, blank)
        subs[f"zh_{name}"] = zh_submission(course, answers, blank)
    return grade_with_the_course_grader(course, {A: subs})[A], list(cases), course, varying


def test_the_corpus_scores_the_same_cell_by_cell_in_both_editions(graded):
    grades, cases, *_ = graded
    assert len(cases) > 30
    for name in cases:
        en, zh = grades.scores.get(f"en_{name}"), grades.scores.get(f"zh_{name}")
        assert en is not None and zh is not None, f"{name} was not graded in both editions"
        assert en == zh, (name, en, zh)
    assert grades.total("en_reference") == grades.total("zh_reference")
    assert grades.total("zh_blank")[0] == 0


def test_the_corpus_gets_the_same_diagnoses_in_both_editions(graded):
    grades, cases, _, varying = graded
    named = 0
    for name in cases:
        en, zh = diagnoses(grades.notebooks[f"en_{name}"]), diagnoses(grades.notebooks[f"zh_{name}"])
        if name in varying:
            # which check fails first depends on the run (the answer says why): the same cells
            # fail, and each names a misconception in both editions
            assert {c for c, (_, e) in en.items() if e} == {c for c, (_, e) in zh.items() if e}, name
            assert all(ids for ids, e in [*en.values(), *zh.values()] if e), name
            continue
        assert en == zh, name
        named += sum(bool(ids) for ids, _ in en.values())
    assert named >= 10, "the corpus's diagnoses name misconceptions"


@pytest.mark.parametrize("assignment", assignments(ROOT))
def test_the_gradebook_either_edition_makes_is_the_same(assignment):
    """What nbgrader saves of each edition's notebooks: the same graded cells and points, the same
    locked and test cells; only the handed-out answer cells' text (their translated docstrings and
    comments) may differ, and nbgrader grades nothing with it."""
    from traitlets.config import Config

    en = from_source(ROOT / "solutions" / assignment, assignment, Config())
    zh = from_source(ROOT / "zh" / "solutions" / assignment, assignment, Config())
    assert en.keys() == zh.keys()
    for name in en:
        a, b = en[name], zh[name]
        assert (a.grade, a.task, a.solution) == (b.grade, b.task, b.solution)
        assert a.source.keys() == b.source.keys()
        for cell, (cell_type, locked, source, checksum) in a.source.items():
            if locked or cell in a.grade:
                assert b.source[cell] == (cell_type, locked, source, checksum), cell
            else:
                assert b.source[cell][:2] == (cell_type, locked), cell


@pytest.mark.parametrize("assignment", assignments(ROOT))
def test_switching_the_edition_changes_nothing_in_the_gradebook_nor_the_tests_key(assignment):
    from traitlets.config import Config

    from autograder.grading.sync import compare, tests_key

    en = from_source(ROOT / "solutions" / assignment, assignment, Config())
    zh = from_source(ROOT / "zh" / "solutions" / assignment, assignment, Config())
    assert compare(zh, en).none and compare(en, zh).none
    assert tests_key(en, {}) == tests_key(zh, {})
    graded = next(iter(en.values()))
    changed = {k: (*v[:2], v[2] + "\n# a changed test", v[3]) if k in graded.grade else v
               for k, v in graded.source.items()}
    edited = type(graded)(graded.grade, graded.solution, graded.task, changed)
    assert not compare({**en, next(iter(en)): edited}, en).none, "a changed test still counts"
