"""What the formgrader and the feedback serve from a hostile notebook: no live script, link or
attribute of the student's, whatever field carried it.

The page is rendered as the formgrader renders it (nbconvert's ``HTMLExporter`` with the course
configuration and nbgrader's ``formgrade`` template) and as ``generate_feedback`` does (the
``feedback`` template), then parsed, and every place a browser would run something is searched
for the payload's marker: ``<script>`` text, ``on*`` attributes, link, image, frame and form
targets with a scheme other than http(s)/mailto, ``<meta http-equiv>``, ``<base>``, frames.
No kernel runs: the notebook is built in code, as an autograded submission would store it.
"""
from __future__ import annotations

import base64
import copy
import re
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output, new_raw_cell

from autograder.grading.htmlclean import clean_html, get_metadata, safe_url

ROOT = Path(__file__).resolve().parents[1]
MARK = "PWNED"
JS = f"alert('{MARK}')"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nnot really").decode()

LIVE_TAGS = {"script", "iframe", "frame", "object", "embed", "base", "form", "svg", "math", "style", "link"}


class _Live(HTMLParser):
    """Every spot of a page where a browser runs script or follows a target on its own."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.live: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self._in_script = tag == "script"
        for name, value in attrs:
            value = value or ""
            if name.startswith("on"):
                self.live.append(f"<{tag} {name}={value!r}>")
            if name in ("href", "src", "action", "formaction", "xlink:href", "srcdoc", "data", "poster") \
                    and not safe_url(value, image=(tag == "img" and name == "src")):
                self.live.append(f"<{tag} {name}={value[:80]!r}>")
            if name == "http-equiv":
                self.live.append(f"<{tag} http-equiv={value!r}>")
        if tag in LIVE_TAGS and tag != "script":
            self.live.append(f"<{tag}>")

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts.append(data)


def live_spots(html: str) -> list[str]:
    """Every live spot of ``html``, and any script text that holds the payload's marker."""
    parser = _Live()
    parser.feed(html)
    return parser.live + [s[:120] for s in parser.scripts if MARK in s]


def students_live_spots(html: str, baseline: str) -> list[str]:
    """The live spots of ``html`` that the template's own page (``baseline``) does not have, less
    two that run nothing: an isolated HTML output's frame, whose ``data:`` document (an opaque
    origin) must itself be clean, and an SVG shown through ``<img>`` (no script runs in an image)."""
    own = set(live_spots(baseline))
    out = []
    for spot in live_spots(html):
        if spot in own or spot == "<iframe>" or spot.startswith("<img src='data:image/svg+xml;base64,"):
            continue
        if spot.startswith("<iframe src='data:text/html;base64,"):
            continue        # checked whole below
        out.append(spot)
    for frame in re.findall(r'<iframe[^>]*src="data:text/html;base64,([A-Za-z0-9+/=]+)"', html):
        out += [f"in a frame: {s}" for s in live_spots(base64.b64decode(frame).decode())]
    return out


def hostile_notebook() -> nbformat.NotebookNode:
    """An autograded submission whose every student-controlled field carries a payload."""
    nb = new_notebook()
    nb.metadata["title"] = f"<img src=x onerror={JS}>"
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {"x": f"</script><script>{JS}</script>"}, "version_major": 2, "version_minor": 0}}
    code = new_code_cell("print('hello')", execution_count=1)
    code.metadata["tags"] = [f'"><img src=x onerror={JS}>']
    code.id = "ok-id"
    code.outputs = [
        # an image's size is written into an unquoted attribute by the classic template
        new_output("display_data", data={"image/png": PNG, "text/plain": "a plot"},
                   metadata={"image/png": {"width": f"1 onerror={JS} src=x", "height": f"2 onload={JS}"}}),
        new_output("display_data", data={"image/jpeg": PNG}, metadata={"width": f"3 onerror={JS}",
                                                                       "alt": f'"><script>{JS}</script>'}),
        new_output("display_data", data={"text/html": (
            f'<img src=x onerror="{JS}"><script>{JS}</script><svg onload="{JS}"></svg>'
            f'<iframe srcdoc="<script>{JS}</script>"></iframe><a href="javascript:{JS}">h</a>'
            f'<form action="javascript:{JS}"><button>go</button></form>'
            f'<meta http-equiv="refresh" content="0;url=javascript:{JS}"><style>*{{x:url(javascript:{JS})}}</style>'
            f'<a href="java&#x09;script:{JS}">tab</a><a href="&#106;avascript:{JS}">ent</a>'
            '<table class="dataframe"><tr><th>a</th></tr><tr><td>1</td></tr></table>')}),
        new_output("display_data", data={"text/html": f"<b>isolated</b><img src=x onerror={JS}>"},
                   metadata={"text/html": {"isolated": True}}),
        new_output("display_data", data={"text/markdown": f"[out][r]\n\n[r]: javascript:{JS}\n\n<javascript:{JS}>"}),
        new_output("display_data", data={"application/javascript": JS}),
        new_output("display_data", data={"image/svg+xml": f'<svg xmlns="http://www.w3.org/2000/svg" onload="{JS}"/>'}),
        new_output("display_data", data={"text/latex": f"$<img src=x onerror={JS}>$"}),
        new_output("stream", name="stdout", text=f"<script>{JS}</script>\n\x1b[31m<img src=x onerror={JS}>\x1b[0m"),
        new_output("error", ename="E", evalue=f"<script>{JS}</script>", traceback=[f"<img src=x onerror={JS}>"]),
    ]
    written = new_markdown_cell(
        "My **written** answer, with a [good link](https://pytorch.org/docs).\n\n"
        f"[reference][bad]\n\n[bad]: javascript:{JS}\n\n"
        f"<javascript:{JS}>\n\n"
        f"[entity](&#106;avascript:{JS})\n\n"
        f"[spaced]( javascript:{JS})\n\n"
        f"[data](data:text/html;base64,{base64.b64encode(f'<script>{JS}</script>'.encode()).decode()})\n\n"
        f"![img](javascript:{JS})\n\n"
        f'[title](https://x.example "t\\" onmouseover=\\"{JS}")\n\n'
        f'<a href="javascript:{JS}">raw</a> <img src=x onerror="{JS}"> <details open ontoggle="{JS}">d</details>\n\n'
        "![attached](attachment:a.svg)\n\n$\\href{javascript:" + JS + "}{math}$\n")
    written.attachments = {"a.svg": {"image/svg+xml": base64.b64encode(
        f'<svg xmlns="http://www.w3.org/2000/svg" onload="{JS}"/>'.encode()).decode()}}
    written.metadata["nbgrader"] = {"solution": True, "grade": True, "grade_id": "written", "points": 1,
                                    "locked": False, "schema_version": 3, "task": False, "score": 1}
    raw = new_raw_cell(f"<script>{JS}</script><img src=x onerror={JS}>")
    raw.metadata["raw_mimetype"] = "text/html"
    nb.cells = [code, written, raw]
    return nb


def _exporter(template: str):
    from nbconvert import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    # what the formgrader (and generate_feedback) add on top of the course configuration
    config.HTMLExporter.template_name = template
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    config.HTMLExporter.extra_template_paths = [str(Path(handlers.static_path) / "node_modules/bootstrap/dist/css")]
    return HTMLExporter(config=config)


RESOURCES = {"base_url": "", "notebook_id": "a1_views", "index": 0, "total": 1, "student": "s1",
             "assignment_id": "a1_views", "submission_id": "x", "first_name": "", "last_name": "",
             "notebook_path": "autograded/s1/a1_views/a1_views.ipynb",
             "nbgrader": {"notebook": "a1_views", "assignment": "a1_views", "student": "s1", "score": 1,
                          "max_score": 2, "late_penalty": 0, "timestamp": "2026-01-01"}}


@pytest.mark.parametrize("template", ["formgrade", "feedback"])
def test_no_payload_is_live_in_the_served_page(template):
    exporter = _exporter(template)
    html, _ = exporter.from_notebook_node(hostile_notebook(), resources=dict(RESOURCES))
    baseline, _ = exporter.from_notebook_node(new_notebook(), resources=dict(RESOURCES))
    spots = students_live_spots(html, baseline)
    assert spots == [], spots
    # the student's work is still there: formatting, a good link, a table, the image, the text
    assert "<strong>written</strong>" in html and 'href="https://pytorch.org/docs"' in html
    assert '<table class="dataframe">' in html and "data:image/png;base64," in html
    assert "onerror" in html, "the hostile markup is shown as text, not dropped silently"


def test_the_unsanitized_page_would_be_live():
    """The control: the same notebook through nbconvert's defaults (no course configuration) has
    live payloads, so the test above can fail."""
    from nbconvert import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers

    plain = HTMLExporter(template_name="formgrade", extra_template_basedirs=[handlers.template_path])
    html, _ = plain.from_notebook_node(hostile_notebook(), resources=dict(RESOURCES))
    baseline, _ = plain.from_notebook_node(new_notebook(), resources=dict(RESOURCES))
    spots = students_live_spots(html, baseline)
    assert any("onerror" in s for s in spots) and any("javascript" in s.lower() for s in spots), spots


@pytest.mark.parametrize("url,image,ok", [
    ("https://pytorch.org", False, True), ("#frag", False, True), ("notes/a.html", False, True),
    ("mailto:a@b.c", False, True), ("javascript:x", False, False), ("JaVaScRiPt:x", False, False),
    ("java\tscript:x", False, False), ("\u200bjavascript:x", False, False), ("vbscript:x", False, False),
    ("data:text/html,x", False, False), ("data:image/png;base64,AAAA", True, True),
    ("data:image/png;base64,AAAA", False, False), ("data:image/svg+xml;base64,AA", True, False),
    ("file:///etc/passwd", False, False), ("a:b/c", False, False),
])
def test_safe_url(url, image, ok):
    assert safe_url(url, image=image) is ok


def test_clean_html_keeps_formatting_and_escapes_the_rest():
    out = clean_html('<h2>Answer</h2><p><em>x</em> <code>y</code></p><ul><li>1</li></ul>'
                     '<img src="x" onerror="e()"><script>s()</script>')
    assert "<h2>Answer</h2>" in out and "<em>x</em>" in out and "<li>1</li>" in out
    assert "onerror" not in out and "<script>" not in out and "&lt;script&gt;" in out


def test_clean_html_does_not_parse_what_is_too_long():
    from autograder.grading.htmlclean import MAX_CLEAN_CHARS

    from autograder.grading.htmlclean import MAX_DEPTH

    long = "<p>" + "x" * MAX_CLEAN_CHARS + "</p><img src=x onerror=e()>"
    deep = "<b>" * (MAX_DEPTH + 1) + "<img src=x onerror=e()>"
    for html, why in ((long, "characters, over"), (deep, "nested over")):
        out = clean_html(html)
        assert "<b>" not in out and "<img" not in out and why in out and len(out) < 8192, out[-200:]
    assert clean_html("<b>" * MAX_DEPTH + "y") .count("<b>") == MAX_DEPTH


@pytest.mark.parametrize("meta,key,expected", [
    ({"width": 10}, "width", "10"), ({"width": "10px"}, "width", "10px"), ({"width": "1 onerror=x"}, "width", None),
    ({"width": True}, "width", None), ({"width": [1]}, "width", None), ({"alt": 5}, "alt", None),
    ({"unconfined": "yes"}, "unconfined", False), ({"image/png": {"height": "7"}}, "height", "7"),
])
def test_get_metadata_keeps_only_safe_values(meta, key, expected):
    output = new_output("display_data", data={"image/png": PNG}, metadata=meta)
    assert get_metadata(output, key, "image/png") == expected


# --- at autograding: bounded before parsed, metadata cleaned, the student flagged ------------------

def _inert(nb):
    from autograder.grading.inert import InertStudentContent

    return InertStudentContent().preprocess(nb, {"nbgrader": {"student": "s1", "notebook": "a1_views"}})


def test_autograding_bounds_what_it_would_parse_and_flags_the_student():
    nb = new_notebook()
    cell = new_code_cell("x", execution_count=1)
    deep = "<div>" * 6_000                     # 30 KB: ~30 s of parsing; never parsed here
    cell.outputs = [new_output("display_data", data={"text/html": deep}),
                    new_output("display_data", data={"text/html": "<b>kept</b>"})]
    nb.cells = [cell]
    nb, resources = _inert(nb)
    first, second = nb.cells[0].outputs
    assert "text/html" not in first.data and "not shown" in first.data["text/plain"]
    assert second.data["text/html"] == "<b>kept</b>"
    assert any("nested over" in f for f in resources["inert_flags"]), resources


def test_autograding_spends_a_budget_of_markup_per_notebook():
    nb = new_notebook()
    cell = new_code_cell("x", execution_count=1)
    block = "<p>" + "x" * (100 << 10) + "</p>"
    cell.outputs = [new_output("display_data", data={"text/html": block}) for _ in range(8)]
    nb.cells = [cell]
    nb, resources = _inert(nb)
    shown = [o for o in nb.cells[0].outputs if "text/html" in o.data]
    assert len(shown) == 5 and any("spent" in f for f in resources["inert_flags"])


def test_autograding_keeps_only_a_numeric_size_in_output_metadata():
    nb = new_notebook()
    cell = new_code_cell("x", execution_count=1)
    cell.outputs = [new_output("display_data", data={"image/png": PNG},
                               metadata={"image/png": {"width": "1 onerror=x", "height": 20, "alt": "a plot"},
                                         "filenames": {"image/png": "javascript:x"}, "anything": "<script>"})]
    nb.cells = [cell]
    nb, resources = _inert(nb)
    assert nb.cells[0].outputs[0].metadata == {"image/png": {"height": "20", "alt": "a plot"}}
    assert "inert_flags" not in resources


def test_mismatched_end_tags_count_as_open():
    """``<b></i>`` closes nothing in a parser: 120 KiB of it took the parser 90 s; it is now refused
    by the linear scan, while end tags that do close keep the depth down."""
    from autograder.grading.htmlclean import too_costly

    assert "nested over" in too_costly("<b></i>" * 17_000)
    assert too_costly("<div><span></span></div>" * 5_000) is None
    assert too_costly("<div><b>x</div>" * 5_000) is None      # the </div> closes the <b> opened inside it


def _markup_notebook(html: str, kb: int = 24):
    nb = new_notebook()
    cell = new_code_cell("x", execution_count=1)
    table = "<table>" + "<tr><td>1</td></tr>" * (kb * 1024 // 19) + "</table>"
    cell.outputs = [new_output("display_data", data={"text/html": table}),
                    new_output("display_data", data={"text/html": html})]
    nb.cells = [cell, new_markdown_cell("[link](javascript:alert(1)) <img src=x onerror=e()>")]
    return nb


def test_a_notebook_with_much_markup_is_cleaned_in_a_child_as_it_would_be_in_place():
    from autograder.grading.inert import InertStudentContent

    who = {"nbgrader": {"student": "s1", "notebook": "a1_views"}}
    payload = '<img src=x onerror="e()"><script>s()</script><div>' * 2 + "<b></i>" * 60
    nb = _markup_notebook(payload)
    assert InertStudentContent()._markup(nb) >= InertStudentContent().in_place_below
    in_child, flags_child = InertStudentContent().preprocess(copy.deepcopy(nb), dict(who))
    in_place, flags_place = InertStudentContent(clean_limit=0).preprocess(copy.deepcopy(nb), dict(who))
    assert in_child == in_place and flags_child.get("inert_flags") == flags_place.get("inert_flags")
    assert "nested over" in " ".join(flags_child["inert_flags"])       # the <b></i> run, refused
    text = nbformat.writes(in_child)
    assert "<img" not in text and "javascript:" not in text and "<script>" not in text


def test_cleaning_past_its_time_limit_shows_no_markup_and_flags_the_student():
    from autograder.grading.inert import InertStudentContent

    nb, resources = InertStudentContent(clean_limit=0.05).preprocess(
        _markup_notebook("<p>fine</p>"), {"nbgrader": {"student": "s1", "notebook": "a1_views"}})
    assert any("markup was not shown: cleaning it took over 0.05 s" in f for f in resources["inert_flags"])
    outputs = nb.cells[0].outputs
    assert all("text/html" not in o.data and "not shown" in o.data["text/plain"] for o in outputs)
    assert nb.cells[1].source.startswith("[") and "not shown" in nb.cells[1].source
    assert "javascript" not in nbformat.writes(nb)
