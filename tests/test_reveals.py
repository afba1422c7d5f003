"""autograder.course.reveals: the rule that keeps a prediction's answer hidden until asked for,
on small notebooks built in code."""
from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder.course.reveals import answer_cells, spoiler_problems


def question(text: str = "**Predict:** does `b` change?"):
    return new_markdown_cell(text)


def collapsed(source: str = "print(b)"):
    cell = new_code_cell(source, outputs=[nbformat.v4.new_output("stream", name="stdout", text="tensor([1.])\n")])
    cell.metadata["jupyter"] = {"outputs_hidden": True}
    return cell


def answer(text: str = "So `b` changed: it is the same tensor.", hidden: bool = True):
    cell = new_markdown_cell(text)
    cell.metadata["tags"] = ["answer"]
    if hidden:
        cell.metadata["jupyter"] = {"source_hidden": True}
    return cell


def tagged(text: str, tag: str):
    cell = new_markdown_cell(text)
    cell.metadata["tags"] = [tag]
    return cell


def nb(*cells):
    return new_notebook(cells=list(cells))


def test_a_notebook_that_follows_the_convention_has_no_problem():
    good = nb(question(), collapsed(), answer(), answer("Two explanations in a row are fine."),
              new_markdown_cell("## Next section"),
              question(), collapsed(), new_code_cell("print(2)"),
              question(), collapsed(), tagged("Now change `a` instead.", "no-spoiler"),
              collapsed())           # a collapsed output as the last cell
    assert spoiler_problems(good) == []


def test_a_visible_paragraph_right_after_a_collapsed_answer_is_a_problem():
    problems = spoiler_problems(nb(question(), collapsed(), new_markdown_cell("So `b` changed.")))
    assert len(problems) == 1 and problems[0].startswith("cell 2 is in view right after the collapsed answer of cell 1")
    # another tag does not count as checked
    assert spoiler_problems(nb(collapsed(), tagged("So `b` changed.", "nondeterministic")))
    # the legacy "collapsed" flag collapses outputs too
    old = new_code_cell("print(b)", metadata={"collapsed": True})
    assert spoiler_problems(nb(old, new_markdown_cell("So `b` changed.")))


def test_an_answer_cell_must_be_hidden_and_follow_a_collapsed_output_or_another_answer():
    shown = spoiler_problems(nb(collapsed(), answer(hidden=False)))
    assert len(shown) == 1 and "shown in full" in shown[0] and "source_hidden" in shown[0]
    stray = spoiler_problems(nb(question(), new_code_cell("print(b)"), answer()))
    assert len(stray) == 1 and "follows no collapsed output" in stray[0]
    first = spoiler_problems(nb(answer()))
    assert len(first) == 1 and "follows no collapsed output" in first[0]
    # a paragraph between the output and the explanation breaks the chain twice over
    broken = spoiler_problems(nb(collapsed(), new_markdown_cell("So."), answer()))
    assert [p.split(" ")[1] for p in broken] == ["1", "2"]


def test_answer_cells_groups_each_collapsed_output_with_the_explanation_after_it():
    notebook = nb(question(), collapsed(), answer(), answer(), new_markdown_cell("next"),
                  collapsed(), new_code_cell("x"), answer())
    assert answer_cells(notebook) == {1: [2, 3], 5: []}
