"""``make site``: the lectures as static HTML, outputs and pictures included, for reading anywhere.

Each notebook of ``course/`` is rendered with nbconvert's JupyterLab template, as stored (the
lectures are committed executed), with every image embedded in the page (``data:`` URIs) and
none of the scripts the template would fetch from a CDN (MathJax, Mermaid, require.js: the
lectures use no TeX and no Mermaid), so the folder can be opened from disk without a network,
copied, or served by any static host.  The answer to a "Predict" question waits behind one
"Show the answer" reveal: the outputs of the cell that answers it (stored collapsed,
``outputs_hidden``) and the ``answer`` paragraphs that explain it (see
:mod:`autograder.course.reveals`); the question and the code stay in view.  An index page lists the
lectures; every page links to the index and to the previous and next lecture.

The Chinese edition (``zh/course/``, where the course has one) is rendered the same way into
``zh/`` of the site, its navigation, reveals and index in Chinese; every page of either edition has
a switch to the same lecture in the other language.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from ..learner.cells import RELEASE_DIR, notebooks
from ..learner.editions import ZH_DIR
from .layout import LECTURE_DIR
from .reveals import answer_cells, is_answer

COURSE_TITLE = "Copy That"
# what a page says, per language (the Chinese edition's site is in zh/ of the English one)
WORDS = {
    "en": {"lang": "en", "show": "Show the answer", "home": "all lectures", "switch": "中文",
           "not_run": "(stored without outputs: run it in JupyterLab)", "index_title": "lectures",
           "heading": "what PyTorch copies, and what it does not", "start": "start here",
           "intro": ("The lectures with their outputs, memory diagrams and autograd graphs, to read in a browser "
                     "without installing anything ({first}). To run them and do the exercises, set up the course and "
                     "open it in JupyterLab (<code>make lab</code>){check}"),
           "check": ("; check an exercise in one of its terminals: <code>copy-that check {example}</code> for the first "
                     "one (each assignment has its folder in <code>{release}/</code>).")},
    "zh": {"lang": "zh-CN", "show": "显示答案", "home": "全部讲义", "switch": "English",
           "not_run": "（保存时未运行：请在 JupyterLab 中运行）", "index_title": "讲义",
           "heading": "PyTorch 会拷贝什么，又不会拷贝什么", "start": "从这里开始",
           "intro": ("这些讲义带有输出、内存示意图和计算图，无需安装即可在浏览器里阅读（{first}）。要运行它们并完成练习，"
                     "请装好课程环境，在 JupyterLab 中打开中文版（<code>make lab EDITION=zh</code>）{check}"),
           "check": ("；在它的终端里检查练习，第一个练习是 <code>copy-that check {example}</code>"
                     "（每个作业在 <code>{release}/</code> 中有自己的文件夹）。")},
}


TEMPLATE = r"""
{%- extends 'index.html.j2' -%}
{#- Nothing from the network: no require.js, MathJax, Mermaid or widget scripts. -#}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{% block extra_css %}
{{ super() }}
<style>{{ resources.copy_that.css }}</style>
{% endblock extra_css %}
{%- block body_header -%}
{{ super() }}
{{ resources.copy_that.nav }}
{%- endblock body_header -%}
{#- A prediction's answer (outputs stored collapsed, then the paragraphs that explain it) waits
    behind one reveal; the code stays visible. -#}
{% block output_group scoped -%}
{%- if cell.metadata.get('copy_that', {}).get('reveal') -%}
<details class="ct-reveal"><summary>{{ resources.copy_that.show }}</summary>
{{ super() }}
{%- for answer in cell.metadata.copy_that.answers %}
<div class="jp-RenderedHTMLCommon jp-RenderedMarkdown jp-MarkdownOutput ct-answer" data-mime-type="text/markdown">
{{ answer | markdown2html | strip_files_prefix }}
</div>
{%- endfor %}
</details>
{%- else -%}
{{ super() }}
{%- endif -%}
{%- endblock output_group %}
{#- An explanation that follows no collapsed output still waits behind a reveal of its own. -#}
{% block markdowncell scoped -%}
{%- if cell.metadata.get('copy_that', {}).get('reveal') -%}
<details class="ct-reveal"><summary>{{ resources.copy_that.show }}</summary>
{{ super() }}
</details>
{%- else -%}
{{ super() }}
{%- endif -%}
{%- endblock markdowncell %}
{#- Diagrams carry their text drawing (text/plain) as the picture's alternative text. -#}
{% block data_svg scoped -%}
<div class="jp-RenderedSVG jp-OutputArea-output {{ extra_class }}" data-mime-type="image/svg+xml">
<img src="data:image/svg+xml;base64,{{ output.data['image/svg+xml'] | text_base64 | escape_html }}" alt="{{ output.data.get('text/plain', 'a picture') | escape_html }}">
</div>
{%- endblock data_svg %}
{% block body_footer %}
{{ resources.copy_that.nav }}
{{ super() }}
{% endblock body_footer %}
"""

CSS = """
nav.ct-nav { display: flex; justify-content: space-between; gap: 1em; align-items: baseline;
  max-width: 1100px; margin: 0.5em auto; padding: 0.6em 1em; border: 1px solid #ddd;
  border-radius: 6px; background: #f7f7f9; font-family: system-ui, sans-serif; font-size: 15px; }
nav.ct-nav a { text-decoration: none; }
nav.ct-nav .ct-prev, nav.ct-nav .ct-next { flex: 1; }
nav.ct-nav .ct-next { text-align: right; }
nav.ct-nav .ct-home { font-weight: 600; }
nav.ct-nav .ct-lang { margin-left: 1em; font-weight: normal; }
details.ct-reveal > summary { cursor: pointer; margin: 0.3em 0 0.3em 1em; color: #1a5fb4;
  font-family: system-ui, sans-serif; font-size: 14px; }
details.ct-reveal > .ct-answer { padding: 0.2em 1em 0.2em 2em; }
"""

INDEX_CSS = """
body { font-family: system-ui, sans-serif; max-width: 900px; margin: 2em auto; padding: 0 1em;
  line-height: 1.5; color: #222; }
ol.ct-lectures li { margin-bottom: 1em; }
.ct-lang { float: right; }
ol.ct-lectures a { font-size: 1.15em; font-weight: 600; text-decoration: none; }
.ct-blurb { color: #444; }
.ct-note { color: #777; font-size: 0.9em; }
code { background: #f3f3f3; padding: 0 0.2em; border-radius: 3px; }
"""


@dataclass
class Page:
    """One lecture of the site."""

    notebook: Path
    html_name: str
    title: str
    blurb: str          # first paragraph after the title, as HTML
    has_outputs: bool   # False for a lecture stored without running it


def _plain(markdown: str) -> str:
    """The text of one line of markdown (``detach()`` -> detach())."""
    from nbconvert.filters.markdown import markdown2html

    return html.unescape(re.sub(r"<[^>]+>", "", markdown2html(markdown))).strip()


def title_and_blurb(nb: nbformat.NotebookNode, fallback: str) -> tuple[str, str]:
    from nbconvert.filters.markdown import markdown2html

    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.strip().splitlines()
        title = next((_plain(l.lstrip("#").strip()) for l in lines if l.startswith("# ")), None)
        if title is None:
            continue
        rest = "\n".join(l for l in lines if not l.startswith("#")).strip()
        para = re.split(r"\n\s*\n", rest)[0] if rest else ""
        return title, (markdown2html(para).strip() if para else "")
    return fallback, ""


def pages(root: Path) -> list[Page]:
    """The lectures of ``course/`` in order (any number of them), with titles for the navigation."""
    out = []
    for path in notebooks(root / LECTURE_DIR):
        nb = nbformat.read(path, as_version=4)
        title, blurb = title_and_blurb(nb, path.stem.replace("_", " "))
        code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
        has_outputs = not code or any(c.get("outputs") for c in code)
        out.append(Page(path, path.stem + ".html", title, blurb, has_outputs))
    return out


def _nav(prev: Page | None, nxt: Page | None, lang: str = "en", other: str | None = None) -> str:
    """The bar above and below a page: previous, the index (and the same page in the other
    language, ``other``), next."""
    words = WORDS[lang]

    def link(page: Page | None, cls: str, arrow: str) -> str:
        if page is None:
            return f'<span class="{cls}"></span>'
        text = f"{arrow} {html.escape(page.title)}" if arrow == "\u2190" else f"{html.escape(page.title)} {arrow}"
        return f'<span class="{cls}"><a href="{html.escape(page.html_name)}" rel="{cls[3:]}">{text}</a></span>'

    switch = _switch(lang, other)
    return ('<nav class="ct-nav">' + link(prev, "ct-prev", "\u2190")
            + f'<span><a class="ct-home" href="index.html">{COURSE_TITLE}: {words["home"]}</a>{switch}</span>'
            + link(nxt, "ct-next", "\u2192") + "</nav>")


def _switch(lang: str, other: str | None) -> str:
    """The link to the same page in the other language (none when there is no other edition)."""
    if other is None:
        return ""
    to = "zh-CN" if lang == "en" else "en"
    return f' <a class="ct-lang" href="{html.escape(other)}" hreflang="{to}" lang="{to}">{WORDS[lang]["switch"]}</a>'


HREF = re.compile(r'(<a\b[^>]*?)\shref="([^"]*)"')


def fix_links(page_html: str, site_names: set[str]) -> str:
    """Links between lectures (``02_clone.ipynb``) go to their pages; links to files outside the
    site (an exercise notebook) become plain text, so the site holds no broken link."""
    def repl(m: re.Match) -> str:
        tag, href = m.group(1), html.unescape(m.group(2))
        if re.match(r"^(#|[a-z][a-z0-9+.\-]*:|//)", href, re.I):  # anchors, http:, mailto:, data:
            return m.group(0)
        target, _, anchor = href.partition("#")
        name = Path(target).name
        if target.endswith(".ipynb") and Path(name).stem + ".html" in site_names and "/" not in target.lstrip("./"):
            new = Path(name).stem + ".html" + (f"#{anchor}" if anchor else "")
            return f'{tag} href="{html.escape(new)}"'
        if target in site_names:
            return m.group(0)
        return f'{tag} title="{html.escape(href)} (in the course folder)"'

    return HREF.sub(repl, page_html)


def _exporter():
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    return HTMLExporter(template_name="lab", extra_loaders=[DictLoader({"copy_that.html.j2": TEMPLATE})],
                        template_file="copy_that.html.j2", embed_images=True)


def group_reveals(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Mark what the page shows behind a reveal: each collapsed output, with the ``answer``
    paragraphs after it moved into its reveal; an ``answer`` paragraph left on its own (after no
    collapsed output) gets a reveal of its own."""
    groups = answer_cells(nb)
    moved: set[int] = set()
    for i, followers in groups.items():
        cell = nb.cells[i]
        if not cell.get("outputs"):       # nothing to reveal in the cell: its explanation stands alone
            continue
        cell.metadata["copy_that"] = {"reveal": True, "answers": [nb.cells[j].source for j in followers]}
        moved.update(followers)
    for i, cell in enumerate(nb.cells):
        if i not in moved and cell.cell_type == "markdown" and is_answer(cell):
            cell.metadata["copy_that"] = {"reveal": True}
    nb.cells = [c for i, c in enumerate(nb.cells) if i not in moved]
    return nb


def render_page(page: Page, prev: Page | None, nxt: Page | None, site_names: set[str], lang: str = "en",
                other: str | None = None) -> str:
    """One lecture as a standalone HTML page, images embedded, with the navigation bars (and the
    switch to ``other``, the same lecture in the other language)."""
    nb = group_reveals(nbformat.read(page.notebook, as_version=4))
    resources = {
        "metadata": {"name": page.title, "path": str(page.notebook.parent)},
        "copy_that": {"nav": _nav(prev, nxt, lang, other), "css": CSS, "show": WORDS[lang]["show"]},
    }
    body, _ = _exporter().from_notebook_node(nb, resources=resources)
    if lang != "en":
        body = body.replace('<html lang="en">', f'<html lang="{WORDS[lang]["lang"]}">', 1)
    return fix_links(body, site_names | ({other} if other else set()))


def render_index(all_pages: list[Page], example: str | None = None, lang: str = "en", other: str | None = None) -> str:
    """The index page; ``example`` is an exercise notebook to name in the check command."""
    words = WORDS[lang]
    items = []
    for p in all_pages:
        note = "" if p.has_outputs else f' <span class="ct-note">{words["not_run"]}</span>'
        items.append(f'<li><a href="{html.escape(p.html_name)}">{html.escape(p.title)}</a>{note}'
                     f'<div class="ct-blurb">{p.blurb}</div></li>')
    first = f'<a href="{html.escape(all_pages[0].html_name)}">{words["start"]}</a>' if all_pages else words["start"]
    check = words["check"].format(example=html.escape(example), release=RELEASE_DIR) if example else "."
    switch = f'<p class="ct-lang">{_switch(lang, other).strip()}</p>\n' if other else ""
    return f"""<!DOCTYPE html>
<html lang="{words['lang']}">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>{COURSE_TITLE}: {words['index_title']}</title><style>{INDEX_CSS}</style></head>
<body>
{switch}<h1>{COURSE_TITLE}: {words['heading']}</h1>
<p>{words['intro'].format(first=first, check=check)}</p>
<ol class="ct-lectures">
{chr(10).join(items)}
</ol>
</body>
</html>
"""


def first_exercise(root: Path) -> str | None:
    """The first exercise notebook of the course, relative to its root (``exercises/a1_views/a1_views.ipynb``)."""
    release = root / RELEASE_DIR
    folders = sorted(p for p in release.iterdir() if p.is_dir() and not p.name.startswith(".")) if release.is_dir() else []
    for folder in folders:
        found = notebooks(folder)
        if found:
            return found[0].relative_to(root).as_posix()
    return None


def build_site(root: Path, out: Path) -> list[Path]:
    """Render every lecture of ``root/course`` and an index into ``out``, and the Chinese edition's
    (``root/zh/course``) into ``out/zh``; return the files written."""
    chinese = (root / ZH_DIR / LECTURE_DIR).is_dir()
    written = _build_edition(root, out, "en", ZH_DIR if chinese else None)
    if chinese:
        written += _build_edition(root / ZH_DIR, out / ZH_DIR, "zh", "..")
    return written


def _build_edition(root: Path, out: Path, lang: str, other_dir: str | None) -> list[Path]:
    """One edition's pages and index; ``other_dir`` is where the other edition's pages are, from here."""
    all_pages = pages(root)
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*.html"):  # a lecture renamed or removed since the last build
        stale.unlink()
    names = {p.html_name for p in all_pages} | {"index.html"}
    theirs = ({p.stem + ".html" for p in notebooks(root / other_dir / LECTURE_DIR)} if other_dir else set())

    def other(name: str) -> str | None:
        if other_dir is None:
            return None
        return f"{other_dir}/{name if name in theirs else 'index.html'}"

    written = []
    for i, page in enumerate(all_pages):
        prev = all_pages[i - 1] if i > 0 else None
        nxt = all_pages[i + 1] if i + 1 < len(all_pages) else None
        target = out / page.html_name
        target.write_text(render_page(page, prev, nxt, names, lang, other(page.html_name)), encoding="utf-8")
        written.append(target)
    index = out / "index.html"
    index.write_text(fix_links(render_index(all_pages, first_exercise(root), lang, other("index.html")),
                               names | ({other("index.html")} if other_dir else set())), encoding="utf-8")
    return [index, *written]
