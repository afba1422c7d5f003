"""The instructor's outputs: the static site of the lectures and the student handout (the
JupyterHub guide and its examples: tests/test_hub_*.py)."""
from __future__ import annotations

import base64
import html
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from autograder.course import handout, site
from autograder.course.reveals import answer_cells, is_answer
from autograder.learner.cells import RELEASE_DIR, notebooks, role
from autograder.course.layout import LECTURE_DIR, SOURCE_DIR, assignments, lectures, region_lines
from harness import ROOT

PY = sys.executable


OUTPUT_IMAGE = re.compile(
    r'<div class="[^"]*\bjp-OutputArea-output\b[^"]*"[^>]*>\s*<img [^>]*?src="data:image/')


class Links(HTMLParser):
    """Every href and src of a page, the ids it defines, and the pictures among its outputs."""

    def __init__(self):
        super().__init__()
        self.links: list[tuple[str, str]] = []   # (tag, url)
        self.ids: set[str] = set()
        self.output_images = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and a.get("href") is not None:
            self.links.append(("a", a["href"]))
        if tag == "img":
            self.links.append(("img", a.get("src") or ""))


def parse(path: Path) -> Links:
    p = Links()
    text = path.read_text(encoding="utf-8")
    p.feed(text)
    p.output_images = len(OUTPUT_IMAGE.findall(text))
    return p


def image_outputs(nb_path: Path) -> int:
    nb = nbformat.read(nb_path, as_version=4)
    return sum(1 for c in nb.cells for o in c.get("outputs", [])
               if any(k in ("image/svg+xml", "image/png", "image/jpeg") for k in o.get("data", {})))


def check_links(site_dir: Path) -> list[str]:
    """Broken page links, anchors and images across the site."""
    broken = []
    parsed = {p.name: parse(p) for p in site_dir.glob("*.html")}
    for name, page in parsed.items():
        for tag, url in page.links:
            if url.startswith(("http://", "https://", "mailto:")):
                continue
            if url.startswith("data:"):
                head, _, payload = url.partition(",")
                try:
                    data = base64.b64decode(payload, validate=True) if head.endswith(";base64") \
                        else urllib.parse.unquote(payload).encode()
                except ValueError:
                    data = b""
                if len(data) < 20:
                    broken.append(f"{name}: empty or undecodable {head}")
                continue
            target, _, anchor = url.partition("#")
            target_page = target or name
            if target and not (site_dir / target).is_file():
                broken.append(f"{name}: {tag} {url!r} points to no file of the site")
            elif anchor and target_page in parsed and not {anchor, urllib.parse.unquote(anchor)} & parsed[target_page].ids:
                broken.append(f"{name}: anchor {url!r} matches no id")
    return broken


# --- the site ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def built_site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    written = site.build_site(ROOT, out)
    return out, written


def test_site_has_an_index_and_one_page_per_lecture_with_prev_next_navigation(built_site):
    out, written = built_site
    names = [p.stem for p in lectures(ROOT)]
    assert sorted(p.name for p in out.glob("*.html")) == sorted(["index.html"] + [f"{n}.html" for n in names])
    index = parse(out / "index.html")
    assert list(dict.fromkeys(u for t, u in index.links if t == "a" and not u.startswith("zh/"))) == \
        [f"{n}.html" for n in names]
    # the check command is one a learner can type as written: a real exercise, no placeholder
    first = sorted(p for p in (ROOT / RELEASE_DIR).iterdir() if p.is_dir())[0]
    index_text = (out / "index.html").read_text(encoding="utf-8")
    assert f"copy-that check {RELEASE_DIR}/{first.name}/{first.name}.ipynb" in index_text and "aN_slug" not in index_text
    for i, name in enumerate(names):
        text = (out / f"{name}.html").read_text(encoding="utf-8")
        links = [u for _, u in parse(out / f"{name}.html").links]
        assert text.count('class="ct-nav"') == 2, name  # top and bottom
        assert "index.html" in links
        if i > 0:
            assert f'href="{names[i - 1]}.html" rel="prev"' in text, name
        if i + 1 < len(names):
            assert f'href="{names[i + 1]}.html" rel="next"' in text, name


def test_site_pages_keep_the_outputs_and_every_picture_embedded(built_site):
    out, _ = built_site
    for nb_path in lectures(ROOT):
        page = parse(out / f"{nb_path.stem}.html")
        assert page.output_images >= image_outputs(nb_path), f"{nb_path.name}: pictures missing from the page"
        nb = nbformat.read(nb_path, as_version=4)
        text = (out / f"{nb_path.stem}.html").read_text(encoding="utf-8")
        printed = [o.text.strip().splitlines()[0] for c in nb.cells for o in c.get("outputs", [])
                   if o.output_type == "stream" and o.name == "stdout" and o.text.strip()]
        for line in printed[:3]:
            assert html.escape(line, quote=False) in text, f"{nb_path.name}: output {line!r} not on the page"
    start = parse(out / "00_start_here.html")
    assert start.output_images >= 2  # the memory diagram and the autograd graph


def test_site_has_no_broken_page_anchor_or_image_link(built_site):
    out, _ = built_site
    assert check_links(out) == []
    assert check_links(out / "zh") == []


def test_the_site_has_the_chinese_edition_with_a_switch_to_the_same_lecture_on_every_page(built_site):
    out, _ = built_site
    names = [p.stem for p in lectures(ROOT)]
    assert sorted(p.name for p in (out / "zh").glob("*.html")) == sorted(["index.html"] + [f"{n}.html" for n in names])
    for name in ["index", *names]:
        en, zh = parse(out / f"{name}.html"), parse(out / "zh" / f"{name}.html")
        assert ("a", f"zh/{name}.html") in en.links, name
        assert ("a", f"../{name}.html") in zh.links, name
    page = (out / "zh" / "03_detach.html").read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in page and "显示答案" in page and "Show the answer" not in page
    assert "全部讲义" in page and 'class="ct-nav"' in page
    index = (out / "zh" / "index.html").read_text(encoding="utf-8")
    assert "make lab EDITION=zh" in index and f"copy-that check {RELEASE_DIR}/a1_views/a1_views.ipynb" in index
    assert (out / "zh" / "03_detach.html").stat().st_size > 10_000



class Fetches(HTMLParser):
    """What a page would load from the network: remote URLs in tag attributes (a link's href
    aside: following it is the reader's choice), in scripts, and in style sheets."""

    REMOTE = re.compile(r"^\s*(?:https?:)?//", re.I)

    def __init__(self):
        super().__init__()
        self.found: list[str] = []
        self._inside: str | None = None

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value is None or (tag == "a" and name == "href"):
                continue
            if self.REMOTE.search(value) or (name in ("style", "srcset") and re.search(r"https?://", value)):
                self.found.append(f"<{tag} {name}={value[:90]!r}>")
        self._inside = tag if tag in ("script", "style") else None

    def handle_endtag(self, tag):
        self._inside = None

    def handle_data(self, data):
        if self._inside == "style":
            data = re.sub(r"/\*.*?\*/", "", data, flags=re.S)  # a URL in a CSS comment loads nothing
            self.found += [f"<style> {m.group(0)[:90]!r}" for m in
                           re.finditer(r"https?://\S+|url\(\s*['\"]?//\S+|@import\s+\S+", data)]
        elif self._inside == "script":
            self.found += [f"<script> {m.group(0)[:90]!r}" for m in re.finditer(r"https?://\S+", data)]


def test_site_pages_load_nothing_from_the_network(built_site):
    out, _ = built_site
    pages = sorted(out.glob("*.html"))
    assert pages
    for page in pages:
        fetches = Fetches()
        fetches.feed(page.read_text(encoding="utf-8"))
        assert fetches.found == [], f"{page.name} loads from the network: {fetches.found[:5]}"


def test_the_offline_check_catches_a_cdn_script_and_allows_a_link_in_the_prose():
    fetches = Fetches()
    fetches.feed('<p>See <a href="https://pytorch.org/docs/stable/tensor_view.html">the docs</a>.</p>'
                 '<script src="https://cdn.example.org/mathjax.js"></script>'
                 '<script>import("https://cdn.example.org/mermaid.mjs")</script>'
                 '<style>/* from https://example.org */ @import url(https://fonts.example.org/a.css);</style>'
                 '<img src="data:image/png;base64,AAAA">')
    assert [f.split()[0] for f in fetches.found] == ["<script", "<script>", "<style>"]
    assert "fonts.example.org" in fetches.found[2] and not any("//example.org" in f for f in fetches.found)


class Reveals(HTMLParser):
    """Per cell of a page (by its id anchor): are its outputs inside a <details> reveal?"""

    def __init__(self):
        super().__init__()
        self.open_details = 0
        self.cell: str | None = None
        self.outputs: dict[str, set[bool]] = {}   # cell id -> {inside a reveal?} over its outputs
        self.hidden_inputs: list[str | None] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "details":
            self.open_details += 1
        if tag == "div" and (a.get("id") or "").startswith("cell-id="):
            self.cell = a["id"][len("cell-id="):]
        if "jp-OutputArea-output" in classes:
            self.outputs.setdefault(self.cell, set()).add(self.open_details > 0)
        if "jp-InputArea-editor" in classes and self.open_details:
            self.hidden_inputs.append(self.cell)

    def handle_endtag(self, tag):
        if tag == "details":
            self.open_details -= 1


def test_site_shows_a_predictions_answer_only_behind_a_reveal(built_site):
    out, _ = built_site
    revealed = 0
    for nb_path in lectures(ROOT):
        nb = nbformat.read(nb_path, as_version=4)
        text = (out / f"{nb_path.stem}.html").read_text(encoding="utf-8")
        page = Reveals()
        page.feed(text)
        assert not page.hidden_inputs, f"{nb_path.name}: the code of cells {page.hidden_inputs} is hidden too"
        hidden = 0
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or not cell.get("outputs"):
                continue
            answer = bool(cell.metadata.get("jupyter", {}).get("outputs_hidden"))
            hidden += answer
            where = "behind a reveal" if answer else "in view"
            assert page.outputs.get(cell.id) == {answer}, f"{nb_path.name} cell {i}: outputs should be {where}"
        grouped = {j for followers in answer_cells(nb).values() for j in followers}
        alone = sum(1 for i, c in enumerate(nb.cells) if is_answer(c) and c.cell_type == "markdown" and i not in grouped)
        assert text.count("<summary>Show the answer</summary>") == hidden + alone, nb_path.name
        revealed += hidden
    assert revealed >= 50, "the lectures' Predict answers are collapsed (tests/test_lectures.py)"


REVEAL = re.compile(r'<details class="ct-reveal">(.*?)</details>', re.S)


def test_site_puts_a_collapsed_output_and_its_explanation_behind_one_reveal(tmp_path):
    """The question and the code in view; the output and the 'answer' paragraphs after it behind one
    "Show the answer"; a paragraph checked to give nothing away stays in view."""
    root = tmp_path / "course-root"
    (root / LECTURE_DIR).mkdir(parents=True)
    code = nbformat.v4.new_code_cell("print(b)", outputs=[nbformat.v4.new_output("stream", name="stdout",
                                                                               text="OUTPUT-SEVEN\n")])
    code.metadata["jupyter"] = {"outputs_hidden": True}

    def answer(text):
        return nbformat.v4.new_markdown_cell(text, metadata={"tags": ["answer"], "jupyter": {"source_hidden": True}})

    lecture = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# 01 \u2014 One\n\n**Predict:** QUESTION-TEXT?"), code,
        answer("EXPLAINED-FIRST: so `b` changed."), answer("EXPLAINED-SECOND."),
        nbformat.v4.new_markdown_cell("NEUTRAL-NEXT step.", metadata={"tags": ["no-spoiler"]}),
        nbformat.v4.new_code_cell("print(2)", outputs=[nbformat.v4.new_output("stream", name="stdout", text="IN-VIEW\n")]),
        answer("STRAY-EXPLANATION after no collapsed output."),
    ])
    nbformat.write(lecture, root / LECTURE_DIR / "01_one.ipynb")
    site.build_site(root, root / "site")
    text = (root / "site" / "01_one.html").read_text()
    reveals = REVEAL.findall(text)
    assert len(reveals) == 2 and text.count("<summary>Show the answer</summary>") == 2
    first, stray = reveals
    assert "OUTPUT-SEVEN" in first and "EXPLAINED-FIRST" in first and "EXPLAINED-SECOND" in first
    assert first.index("OUTPUT-SEVEN") < first.index("EXPLAINED-FIRST") < first.index("EXPLAINED-SECOND")
    assert "STRAY-EXPLANATION" in stray
    outside = REVEAL.sub("", text)
    for shown in ("QUESTION-TEXT", "print", "NEUTRAL-NEXT", "IN-VIEW"):
        assert shown in outside, f"{shown} should stay in view"
    for hidden in ("OUTPUT-SEVEN", "EXPLAINED", "STRAY-EXPLANATION"):
        assert hidden not in outside, f"{hidden} is on the page outside a reveal"
    # each explanation is on the page once: moved into the reveal, not also left below it
    assert text.count("EXPLAINED-FIRST") == 1


def test_site_takes_any_number_of_lectures_and_rewrites_links_between_them(tmp_path):
    root = tmp_path / "course-root"
    (root / LECTURE_DIR).mkdir(parents=True)
    (root / SOURCE_DIR).mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    png = base64.b64encode(bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201b1f6a2a50000000049454e44ae426082")).decode()
    first = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# One `clone()`\n\nFirst [next lecture](20_two.ipynb#Part-2), "
                                      "[an exercise](../exercises/a1/a1.ipynb)."),
        nbformat.v4.new_code_cell("show()", outputs=[nbformat.v4.new_output(
            "display_data", data={"image/png": png, "text/plain": "<Figure>"})]),
    ])
    second = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Two\n\n## Part 2\n\ntext"),
                                             nbformat.v4.new_code_cell("print(1)")])
    nbformat.write(first, root / LECTURE_DIR / "10_one.ipynb")
    nbformat.write(second, root / LECTURE_DIR / "20_two.ipynb")
    out = root / "build" / "site"
    (out).mkdir(parents=True)
    (out / "99_removed.html").write_text("stale")
    proc = subprocess.run([PY, "-m", "autograder", "site"], cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.glob("*.html")) == ["10_one.html", "20_two.html", "index.html"]
    one = (out / "10_one.html").read_text()
    assert 'href="20_two.html#Part-2"' in one
    assert 'href="../exercises' not in one and "an exercise" in one  # outside the site: plain text
    assert parse(out / "10_one.html").output_images == 1
    index = (out / "index.html").read_text()
    assert "One clone()" in index.replace("<code>", "").replace("</code>", "")
    assert "stored without outputs" in index  # 20_two was never run
    assert check_links(out) == []


# --- the handout ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def made_handout(tmp_path_factory):
    return handout.make_handout(ROOT, tmp_path_factory.mktemp("handout"))


def hidden_and_solution_lines(nb_path: Path) -> set[str]:
    """Lines found only inside ``### BEGIN SOLUTION`` / ``### BEGIN HIDDEN TESTS`` regions."""
    return region_lines(nbformat.read(nb_path, as_version=4))


def test_handout_holds_course_exercises_and_a_student_readme(made_handout):
    folder = made_handout.folder
    assert folder.name == "copy-that"
    assert sorted(p.name for p in notebooks(folder / LECTURE_DIR)) == sorted(p.name for p in lectures(ROOT))
    for a in assignments(ROOT):
        assert (folder / RELEASE_DIR / a / f"{a}.ipynb").is_file(), a
    assert (folder / "autograder" / "kernel" / "checks.py").is_file() and (folder / "pyproject.toml").is_file()
    shipped = sorted(p.name for p in (folder / "autograder").iterdir() if p.is_dir() and p.name != "__pycache__")
    assert shipped == ["kernel", "learner"], f"the handout ships the instructor's side too: {shipped}"
    # nor the judge's agent, whose graph walks would answer a7 (it lives in autograder/judge/)
    assert not [p for p in (folder / "autograder").rglob("*.py") if "judge" in p.name or "def serve(" in p.read_text()]
    readme = (folder / "README.md").read_text()
    for words in ("pip install -r requirements.txt", "copy-that check", "--watch", "copy-that progress",
                  "copy-that lab", "Hidden tests", "course/00_start_here.ipynb", "copy-that lab --lang zh"):
        assert words in readme, words
    # the Chinese edition comes along: its lectures and its release, never its solutions
    assert sorted(p.name for p in notebooks(folder / "zh" / LECTURE_DIR)) == sorted(p.name for p in lectures(ROOT))
    for a in assignments(ROOT):
        assert (folder / "zh" / RELEASE_DIR / a / f"{a}.ipynb").is_file(), a
    assert not (folder / "zh" / SOURCE_DIR).exists()


def test_handout_has_no_solutions_and_no_hidden_tests(made_handout):
    folder, archive = made_handout.folder, made_handout.zip
    parts = {part for p in folder.rglob("*") for part in p.relative_to(folder).parts}
    assert not parts & {"solutions", "tests", "tools", "gradebook.db", "submitted", "autograded", ".ipynb_checkpoints"}
    with zipfile.ZipFile(archive) as z:
        names = z.namelist()
        assert names and all(n.startswith("copy-that/") for n in names)
        assert not [n for n in names if "/solutions/" in n or "/tests/" in n]
        zipped = {n[len("copy-that/"):] for n in names if not n.endswith("/")}
        assert zipped == {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
        for name in names:
            if name.endswith(".ipynb"):
                text = z.read(name).decode()
                for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
                    assert marker not in text, f"{name}: {marker}"
    for a, edition in [(a, e) for a in assignments(ROOT) for e in ("", "zh/")]:
        secret = hidden_and_solution_lines(ROOT / f"{edition}{SOURCE_DIR}" / a / f"{a}.ipynb")
        given = nbformat.read(folder / f"{edition}{RELEASE_DIR}" / a / f"{a}.ipynb", as_version=4)
        shown = {line.strip() for c in given.cells for line in c.source.splitlines()}
        assert not secret & shown, f"{a}: {sorted(secret & shown)[:3]}"
        hidden_cells = [c for c in given.cells if role(c).is_test and (role(c).grade_id or "").endswith("_hidden")]
        for cell in hidden_cells:
            assert all(not l.strip() or l.lstrip().startswith("#") for l in cell.source.splitlines()), a


def test_handout_refuses_to_leak_a_hidden_test(tmp_path):
    root = tmp_path / "course-root"
    shutil.copytree(ROOT / LECTURE_DIR, root / LECTURE_DIR)
    shutil.copytree(ROOT / RELEASE_DIR / "a1_views", root / RELEASE_DIR / "a1_views")
    shutil.copytree(ROOT / "autograder", root / "autograder", ignore=shutil.ignore_patterns("__pycache__"))
    leaky = root / RELEASE_DIR / "a1_views" / "a1_views.ipynb"
    nb = nbformat.read(leaky, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("### BEGIN HIDDEN TESTS\nassert True\n### END HIDDEN TESTS"))
    nbformat.write(nb, leaky)
    out = tmp_path / "out"
    with pytest.raises(handout.HandoutError, match="BEGIN HIDDEN TESTS"):
        handout.make_handout(root, out)
    assert not (out / "copy-that").exists() and not (out / "copy-that.zip").exists()


def test_a_student_can_check_an_exercise_with_the_handouts_own_package(made_handout):
    folder = made_handout.folder
    env = dict(os.environ, COLUMNS="200")
    out = subprocess.run([PY, "-c", "import autograder, sys; print(autograder.__file__)"], cwd=folder,
                         capture_output=True, text=True, env=env)
    assert Path(out.stdout.strip()).is_relative_to(folder)
    out = subprocess.run([PY, "-m", "autograder", "check", "exercises/a1_views/a1_views.ipynb"], cwd=folder,
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 1 and "0/5 visible tests pass" in " ".join(out.stdout.split()), out.stdout + out.stderr
    usage = subprocess.run([PY, "-m", "autograder", "--help"], cwd=folder, capture_output=True, text=True, env=env).stdout
    assert "{doctor,check,answers,lab,progress}" in usage, f"a student's copy offers other commands than the learner's: {usage}"
