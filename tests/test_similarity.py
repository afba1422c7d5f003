"""The similarity report (issue 26): among 150 submissions of a1_views it finds every planted pair
(a copy with names changed and code reformatted, a helper moved) and no other; no two independently
written answers of the corpus pair up, in any assignment; hostile and broken notebooks are listed,
never fatal; the page escapes what students wrote; nothing is run and no grade changes."""
from __future__ import annotations

import csv
import hashlib
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

import planted
from corpus import ASSIGNMENTS, answers_for, release
from harness import ROOT, SANDBOX, reference_answers, scratch_course, submit

from autograder.grading.similarity import (Collected, SimilarityOptions, answer_cells, collect, compare,
                                           handed_out, subtract, words)


def course_copy(base: Path) -> Path:
    """A course as an instructor has it: the configuration, a1_views's source and release."""
    course = base / "course"
    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    for folder in ("solutions", "exercises"):
        shutil.copytree(ROOT / folder / planted.ASSIGNMENT, course / folder / planted.ASSIGNMENT)
    return course


def tree_hash(folder: Path, leave_out: str = "reports") -> str:
    """Names, links and bytes of everything under ``folder`` but ``leave_out``."""
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if rel.parts[0] == leave_out:
            continue
        h.update(str(rel).encode("utf-8", "surrogateescape") + b"\0")
        if path.is_symlink():
            h.update(str(path.readlink()).encode() + b"\0")
        elif path.is_file():
            h.update(path.read_bytes())
    return h.hexdigest()


def pairs_of(csv_path: Path) -> dict[frozenset, dict]:
    return {frozenset((r["student_a"].removeprefix("'"), r["student_b"].removeprefix("'"))): r
            for r in csv.DictReader(csv_path.open(encoding="utf-8"))}


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    """150 submissions of a1_views, then ``python -m autograder similarity a1_views`` as typed."""
    course = course_copy(tmp_path_factory.mktemp("similarity"))
    kinds = planted.build_class(course)
    before = tree_hash(course)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "autograder", "similarity", planted.ASSIGNMENT], cwd=course,
                          capture_output=True, text=True, timeout=600)
    seconds = time.monotonic() - start
    folder = course / "reports" / planted.ASSIGNMENT
    print(f"similarity on {len(kinds)} submissions: {seconds:.1f} s for the command ({proc.stdout.strip()})")
    return SimpleNamespace(course=course, kinds=kinds, before=before, proc=proc, seconds=seconds,
                           page=(folder / "similarity.html").read_text(encoding="utf-8"),
                           pairs=pairs_of(folder / "similarity.csv"))


def test_the_class_holds_150_submissions_of_every_kind(klass):
    kinds = list(klass.kinds.values())
    assert len(kinds) == 150
    assert kinds.count("planted") == 9 and kinds.count("broken") == 5 and kinds.count("blank") == 10
    assert kinds.count("independent") == 126


def test_every_planted_pair_is_found_among_150_and_no_other_pair(klass):
    assert klass.proc.returncode == 0, klass.proc.stdout + klass.proc.stderr
    assert set(klass.pairs) == planted.PLANTED_PAIRS
    line = " ".join(klass.proc.stdout.split())
    assert re.search(r"a1_views: similarity: 150 submissions \(5 with something not read: see the page\), "
                     r"6 pairs above the thresholds; [\d.]+ s; reports/a1_views/similarity\.html", line), line
    cells = {pair: set(re.findall(r"(\w+) [\d.]+/[\d.]+", row["cells"])) for pair, row in klass.pairs.items()}
    assert {"shares_memory", "count_storages"} <= cells[frozenset(("planted_2_original", "planted_2_copy"))]
    assert {"add_one_", "plus_one", "count_storages"} == cells[frozenset(("planted_3_original", "planted_3_copy_b"))]
    whole = klass.pairs[frozenset(("planted_1_original", "planted_1_copy"))]
    assert "why_not_id" in cells[frozenset(("planted_1_original", "planted_1_copy"))], "the written answer too"
    assert "submission" in whole["reported_for"] and float(whole["similarity_a"]) >= 0.6


def test_the_page_marks_matches_side_by_side_escapes_student_text_and_says_it_is_no_grade(klass):
    page = klass.page
    assert "Evidence for a person to read, never a grade." in page and "Nothing in the gradebook changed" in page
    assert 'content="default-src \'none\'; img-src data:' in page
    assert "<script" not in page.lower() and "<b>x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page, "the copier's comment is shown, as text"
    assert "=1+1&lt;b&gt;x" in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page), "the page fetches nothing"
    # pair 1 is the most similar; its side by side marks the matching code and greys what was handed out
    first = page.split('id="pair-1"', 1)[1].split('id="pair-2"', 1)[0]
    assert first.count('<table class="side">') == 3 and first.count("<mark>") >= 6
    assert '<span class="given">    &quot;&quot;&quot;Add 1 to every element of t, in place.</span>' in first
    assert "'" + planted.HOSTILE_ID in {r["student_a"] for r in klass.pairs.values()} | \
        {r["student_b"] for r in klass.pairs.values()}, "a student id that is a formula stays text in the CSV"


def test_broken_and_hostile_notebooks_are_listed_and_never_stop_the_run(klass):
    unread = klass.page.split("<h2>Not read or not compared</h2>", 1)[1]
    for student, why in (("broken_empty", "a1_views.ipynb is empty"), ("broken_json", "is not a notebook"),
                         ("broken_bytes", "is not a text file"), ("broken_link", "is a link, not a file"),
                         ("broken_huge_cell", "answer &#x27;plus_one&#x27; is 2,000,170 characters")):
        assert re.search(rf"<td>{student}</td><td><ul><li>[^<]*{why}", unread), student
    assert "odd_surrogate" not in unread, "a lone surrogate in a written answer is read, and compared"


def test_nothing_is_run_and_nothing_but_the_report_folder_changes(klass):
    assert tree_hash(klass.course) == klass.before
    assert not (klass.course / "gradebook.db").exists() and not (klass.course / "autograded").exists()
    assert sorted(p.name for p in (klass.course / "reports" / "a1_views").iterdir()) == \
        ["similarity.csv", "similarity.html"]


def test_without_the_common_code_filter_only_identical_corpus_answers_pair_up(klass):
    """Common code aside or not, no pair is reported for answers that differ: switched off, the
    class's other pairs share the very same corpus answer (the same text, so the same author)."""
    from autograder.grading.config import load_config

    options = SimilarityOptions(config=load_config(klass.course), common_count=10 ** 6)
    collected = collect(klass.course, planted.ASSIGNMENT, load_config(klass.course), options)
    written = collected.answers[(planted.ASSIGNMENT, "why_not_id")]["odd_surrogate"]
    assert written == "a lone surrogate ? and <b>markup</b>", "a lone surrogate is replaced, the rest kept"
    result = compare(collected, options)
    others = [p for p in result.pairs if frozenset((p.a, p.b)) not in planted.PLANTED_PAIRS]
    assert others, "without the filter, students with the same corpus answer pair up"
    for pair in others:
        same = {c.key for c in pair.cells
                if collected.answers[c.key][pair.a] == collected.answers[c.key][pair.b]}
        assert all(c.key in same for c in pair.cells if c.reported), (pair.a, pair.b)
        differing = [c for c in pair.cells if c.key not in same]
        assert all(min(c.similarity_a, c.similarity_b) < options.cell_threshold for c in differing)
        total_a = sum(c.shared for c in pair.cells) / pair.similarity_a      # all of a's answers
        alone = sum(c.shared for c in differing)
        assert alone < options.min_shared or alone / total_a < options.submission_threshold, (pair.a, pair.b)


def corpus_class(assignment: str, answers) -> Collected:
    """Student ``s<i>`` holds the i-th answer of each of ``answers`` (grade id -> sources)."""
    skeletons = {(assignment, gid): ks for gid, ks in answer_cells(release(assignment)).items() if ks[0] == "code"}
    students = sorted({f"s{i}" for sources in answers.values() for i in range(len(sources))})
    by_key = {key: {f"s{i}": src for i, src in enumerate(answers.get(key[1], []))} for key in skeletons}
    return Collected(assignment, skeletons, by_key, students)


def test_independently_written_right_answers_of_the_corpus_never_pair_up():
    """Different right answers (the reference among them) are independent work: in each assignment,
    student i holds the i-th of each function, so every two students differ in every answer. With
    no common-code filter (each answer is held once), no cell and no submission reaches a threshold;
    the closest pairs are printed (the thresholds' measurement)."""
    options = SimilarityOptions(common_count=10 ** 6)
    loose = SimilarityOptions(common_count=10 ** 6, min_shared=0, cell_threshold=0.0, submission_threshold=0.0)
    closest_cell, closest_submission, compared = (0.0, ""), (0.0, ""), 0
    for assignment in ASSIGNMENTS:
        wrong, right = answers_for(assignment)
        answers = {gid: [source] + [a.source for a in right if a.cell == gid]
                   for gid, source in reference_answers(assignment).items()}
        both = corpus_class(assignment, answers)
        result = compare(both, options)
        assert not result.pairs, [(p.a, p.b, p.similarity_a, p.similarity_b, [c.key[1] for c in p.cells])
                                  for p in result.pairs]
        for pair in compare(both, loose).pairs:
            compared += 1
            closest_submission = max(closest_submission, (min(pair.similarity_a, pair.similarity_b),
                                                          f"{assignment} {pair.a}/{pair.b}"))
            for c in pair.cells:
                closest_cell = max(closest_cell, (min(c.similarity_a, c.similarity_b),
                                                  f"{assignment} {c.key[1]} {pair.a}/{pair.b}, {c.shared:.0f} chars"))
    print(f"{compared} pairs of independent submissions share code; closest cell {closest_cell}, "
          f"closest submission {closest_submission}")
    assert compared >= 10, "the corpus's answers share enough code for this to be a test"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_disguised_copy_of_any_corpus_answer_with_enough_code_of_its_own_is_found(assignment):
    """Each answer of the corpus beside a copy of it with every name changed, comments gone, two-space
    indents and blank lines moved: found whenever the answer holds at least ``min_shared`` characters
    of code beyond the skeleton; a shorter one is never evidence (nor reported)."""
    options = SimilarityOptions(common_count=10 ** 6)
    loose = SimilarityOptions(common_count=10 ** 6, min_shared=0, cell_threshold=0.0, submission_threshold=0.0)
    wrong, right = answers_for(assignment)
    items = [(gid, src) for gid, src in reference_answers(assignment).items()] + \
        [(a.cell, a.source) for a in right + wrong]
    found = 0
    for gid, source in items:
        if answer_cells(release(assignment))[gid][0] != "code":
            continue
        both = corpus_class(assignment, {gid: [source, planted.disguise(source, {gid})]})
        evidence = compare(both, loose).pairs
        shared = evidence[0].cells[0].shared if evidence else 0
        result = compare(both, options)
        if shared >= options.min_shared:
            [pair] = result.pairs
            [cell] = pair.cells
            assert cell.reported and min(cell.similarity_a, cell.similarity_b) >= options.cell_threshold, gid
            found += 1
        else:
            assert not result.pairs, f"{gid}: {shared} characters in common are no evidence"
    print(f"{assignment}: {found} of {len(items)} answers long enough; their copies found")
    assert found or assignment in SHORT_ANSWERS_ONLY


# assignments whose every corpus answer is too short, beyond the skeleton, to be evidence
SHORT_ANSWERS_ONLY = ()


def test_written_answers_match_on_their_words_and_marks_land_on_the_text():
    text = "Views share *memory*: id() names the object,\nnot the bytes."
    normal, spans = words(text)
    assert normal == "views share memory id names the object not the bytes"
    assert len(spans) == len(normal) and text[spans[0][0]:spans[4][1]] == "Views"
    assert text[spans[normal.index("memory")][0]:spans[normal.index("memory")][1]] == "memory"
    skeleton = "def f(t):\n    \"\"\"Doc.\"\"\"\n    # YOUR CODE HERE\n"
    source = "def f(t):\n    \"\"\"Doc.\"\"\"\n    return t.clone()\n"
    assert handed_out(source, skeleton) == [(0, 9), (10, 24)]
    assert subtract([(0, 40)], [(0, 9), (10, 24)]) == [(9, 10), (24, 40)]
    assert subtract([(5, 8)], [(0, 9)]) == [] and subtract([(0, 3)], [(5, 9)]) == [(0, 3)]


def test_grade_without_similarity_loads_none_of_it():
    """Off (the default), grade pays nothing for it: neither copydetect nor the module is imported."""
    code = ("import sys\nimport autograder.cli, autograder.grading.runner, autograder.grading.report, "
            "autograder.grading.config\nautograder.cli.build_parser()\n"
            "print('copydetect' in sys.modules, 'autograder.grading.similarity' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "False"], out.stdout + out.stderr


@SANDBOX
def test_grade_with_similarity_writes_the_page_the_report_links_it_and_no_grade_changes(tmp_path):
    course = scratch_course(tmp_path / "course", "a1_views")
    release_nb = nbformat.read(ROOT / "exercises" / "a1_views" / "a1_views.ipynb", as_version=4)
    submit(course, "a1_views", "alice", planted.in_skeleton(release_nb, planted.P3_ORIGINAL))
    submit(course, "a1_views", "bob", planted.in_skeleton(release_nb, planted.P3_COPY_B))
    submit(course, "a1_views", "carol", planted.in_skeleton(release_nb, {}))
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", "a1_views", "--jobs", "1", "--similarity"],
                          cwd=course, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    print(proc.stdout)
    out = " ".join(proc.stdout.split())
    assert "a1_views: similarity: 3 submissions, 1 pair above the thresholds" in out, out
    folder = course / "reports" / "a1_views"
    assert set(pairs_of(folder / "similarity.csv")) == {frozenset(("alice", "bob"))}
    assert '<a href="similarity.html">Similar answers</a>' in (folder / "report.html").read_text()
    gradebook = (course / "gradebook.db").read_bytes()
    again = subprocess.run([sys.executable, "-m", "autograder", "similarity", "a1_views"], cwd=course,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert (course / "gradebook.db").read_bytes() == gradebook, "comparing answers changes nothing in the gradebook"


def test_cell_metadata_that_no_tool_writes_is_listed_not_fatal(tmp_path):
    """A grade id that is a list (the grader's repair cannot hash it), cell metadata that is a list:
    that notebook is listed, the others are compared."""
    import json

    from autograder.grading.config import load_config

    course = course_copy(tmp_path)
    good = json.loads(nbformat.writes(planted.in_skeleton(
        nbformat.read(ROOT / "exercises" / "a1_views" / "a1_views.ipynb", as_version=4), planted.P2_ORIGINAL)))
    odd_id, odd_meta = json.loads(json.dumps(good)), json.loads(json.dumps(good))
    for cell in odd_id["cells"]:
        if "nbgrader" in cell["metadata"]:
            cell["metadata"]["nbgrader"]["grade_id"] = ["shares_memory"]
    odd_meta["cells"][3]["metadata"] = []
    for student, nb in (("good", good), ("odd_id", odd_id), ("odd_meta", odd_meta)):
        submit(course, "a1_views", student, json.dumps(nb).encode())
    collected = collect(course, "a1_views", load_config(course))
    assert collected.skipped["odd_id"] == ["a1_views.ipynb has cell metadata that cannot be read (TypeError): "
                                           "not compared"]
    assert collected.skipped["odd_meta"][0].startswith("a1_views.ipynb is not a notebook")
    assert "good" in collected.answers[("a1_views", "shares_memory")] and "good" not in collected.skipped


def test_the_command_names_the_assignments_when_given_none_or_an_unknown_one(tmp_path):
    course = course_copy(tmp_path)
    for argv in ([], ["a0_nothing"]):
        proc = subprocess.run([sys.executable, "-m", "autograder", "similarity", *argv], cwd=course,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2 and "there are: a1_views" in proc.stdout, proc.stdout + proc.stderr
    proc = subprocess.run([sys.executable, "-m", "autograder", "similarity", "--all"], cwd=course,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "a1_views: similarity: no submissions found, no page written" in proc.stdout
    assert not (course / "reports").exists()
