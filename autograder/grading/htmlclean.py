"""An allow-list sanitizer over the HTML that nbconvert renders from a student's notebook.

The formgrader (its manual grading page) and the feedback HTML are both nbconvert's
``HTMLExporter`` with nbgrader's templates.  Neither can be subclassed through configuration, but
the exporter's Jinja filters can: ``nbgrader_config.py`` replaces three of them for every
``HTMLExporter`` that reads the course configuration (the formgrader's, ``generate_feedback``'s):

- ``markdown2html``: the rendered markdown (written answers, every markdown cell, markdown
  outputs), whatever link or image form produced it (inline, reference, autolink, raw HTML,
  entity-encoded schemes, attachments), goes through :func:`clean_html` after rendering;
- ``clean_html``: what nbconvert's templates already pass through it when ``sanitize_html`` is on
  (HTML outputs, raw cells, inline SVG) gets this allow-list instead of nbconvert's;
- ``get_metadata``: an output's ``width`` and ``height``, which the classic template writes into
  an *unquoted* attribute, are numbers or nothing; ``alt`` is text.

What is kept: formatting tags (headings, emphasis, lists, tables, code, quotes, images, links),
links to ``http``, ``https``, ``mailto`` and relative or fragment targets, images from those or from
a ``data:image/png|jpeg|gif`` URI.  Everything else, event handlers, ``style``, ``id``, forms,
frames, ``javascript:``/``vbscript:``/``data:text/html`` however spelled, is removed; a tag outside
the list is escaped into visible text so that the instructor sees what was attempted.
"""
from __future__ import annotations

import re
from html import escape as html_escape
from numbers import Real

import bleach
from jinja2 import pass_context

MAX_CLEAN_CHARS = 128 << 10
MAX_DEPTH = 48
"""HTML longer than MAX_CLEAN_CHARS, or whose tags open more than MAX_DEPTH deep, is not parsed
at all: it is shown as escaped text.  The HTML5 parser under bleach is quadratic in the depth of
unclosed tags (32 KiB of ``<div>`` took 35 s), and the formgrader renders on its one thread."""
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9]*)[^>]*?(/?)>")
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
                   "track", "wbr"})

TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "caption", "cite", "code", "dd", "del", "details", "div",
    "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img",
    "ins", "kbd", "li", "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strike",
    "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "tt",
    "u", "ul", "var",
})
PROTOCOLS = frozenset({"http", "https", "mailto"})
_DATA_IMAGE = re.compile(r"data:image/(?:png|jpeg|gif);base64,[a-z0-9+/=\s]*\Z", re.IGNORECASE)
_SCHEME = re.compile(r"([a-z][a-z0-9+.\-]*):")
_INVISIBLE = re.compile(r"[\x00-\x20\x7f-\x9f\u200b-\u200f\u2028\u2029\ufeff]+")
_PLAIN_ATTRS = {
    "a": {"title"}, "abbr": {"title"}, "img": {"alt", "title", "width", "height"},
    "td": {"colspan", "rowspan", "align"}, "th": {"colspan", "rowspan", "align", "scope"},
    "ol": {"start"}, "details": {"open"},
}
_NUMBER = re.compile(r"\d{1,5}(?:\.\d{1,3})?(?:px|%)?\Z")


def safe_url(value: str, image: bool = False) -> bool:
    """Whether a link (or, with ``image``, an image source) goes somewhere harmless."""
    compact = _INVISIBLE.sub("", value).lower()
    if image and _DATA_IMAGE.match(compact):
        return True
    scheme = _SCHEME.match(compact)
    if scheme is None:
        # no scheme: relative or fragment; a colon before any / ? # would be read as one
        head = re.split(r"[/?#]", compact, maxsplit=1)[0]
        return ":" not in head
    return scheme.group(1) in PROTOCOLS


def _allowed(tag: str, name: str, value: str) -> bool:
    if name == "class":
        return True
    if tag == "a" and name == "href":
        return safe_url(value)
    if tag == "img" and name == "src":
        return safe_url(value, image=True)
    if name in ("width", "height"):
        return bool(_NUMBER.match(value.strip()))
    return name in _PLAIN_ATTRS.get(tag, ())


# bleach checks the protocol of href/src again after us; data: passes that second check only for
# what _allowed kept (an image), and bleach's own list never widens ours.
_CLEANER = bleach.Cleaner(tags=TAGS, attributes=_allowed, protocols=PROTOCOLS | {"data"},
                          strip=False, strip_comments=True)


def clean_html(html) -> str:
    """``html`` with only the allow-listed tags, attributes and URL schemes left live."""
    text = html.decode("utf-8", "replace") if isinstance(html, bytes) else str(html)
    why = too_costly(text)
    if why:
        return "<pre>" + html_escape(text[:4096]) + f"\n[... HTML not shown: {why}]</pre>"
    return _CLEANER.clean(text)


def too_costly(text: str) -> str | None:
    """Why parsing ``text`` could stall (too long, nested too deep), checked in one linear scan.

    Depth is counted as a parser would nest: an end tag closes only an element it matches (and the
    ones opened inside it); one that matches nothing open (``<b></i>``) closes nothing, so a run of
    them cannot hide what it leaves open."""
    if len(text) > MAX_CLEAN_CHARS:
        return f"{len(text):,} characters, over {MAX_CLEAN_CHARS:,}"
    stack: list[str] = []
    for m in _TAG.finditer(text):
        name = m.group(2).lower()
        if m.group(1):
            if name in stack:
                del stack[len(stack) - 1 - stack[::-1].index(name):]
        elif not m.group(3) and name not in _VOID:
            stack.append(name)
            if len(stack) > MAX_DEPTH:
                return f"tags nested over {MAX_DEPTH} deep"
    return None


@pass_context
def markdown2html(context, source) -> str:
    """nbconvert's markdown rendering (attachments included), then :func:`clean_html`."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    cell = context.get("cell", {}) or {}
    attachments = cell.get("attachments", {}) if isinstance(cell, dict) else {}
    path = context.get("resources", {}).get("metadata", {}).get("path", "")
    renderer = IPythonRenderer(escape=False, attachments=attachments if isinstance(attachments, dict) else {},
                               embed_images=False, path=path, anchor_link_text="\u00b6",
                               exclude_anchor_links=False)
    return clean_html(MarkdownWithMath(renderer=renderer).render(str(source)))


def get_metadata(output, key, mimetype=None):
    """nbconvert's ``get_metadata``, with only values safe where the template writes them:
    ``width``/``height`` a plain number, ``alt`` a string, ``unconfined`` a boolean."""
    from nbconvert.filters.metadata import get_metadata as original

    try:
        value = original(output, key, mimetype)
    except (AttributeError, TypeError):      # metadata that is not a mapping
        return None
    if key in ("width", "height"):
        if isinstance(value, bool) or not isinstance(value, (Real, str)):
            return None
        return str(value) if _NUMBER.match(str(value).strip()) else None
    if key == "alt":
        return value if isinstance(value, str) else None
    if key == "unconfined":
        return value is True
    return value
