"""The grading report's page, ``<report_directory>/<assignment>/report.html``: one self-contained file
an instructor works from (counts, the runs so far, a histogram, each test cell's pass rate and most
common diagnosis among attempted work, a row per student with links to the graded notebook and its
feedback), with ``report.csv`` and ``cells.csv`` beside it (``report.write_csv``).

Everything a student controls is escaped.  The page fetches nothing, and its Content-Security-Policy
allows exactly one script, by its hash: the one below, which sorts and filters the students' rows
through the DOM (text only, never markup).  Without it the page is complete, the rows unsorted.
"""
from __future__ import annotations

import base64
import hashlib
import html
from pathlib import Path

from .report import (STATUS_BROKEN, STATUS_FAILED, STATUS_INTERRUPTED, Report, StudentRow, write_csv)

def histogram_svg(report: Report) -> str | None:
    """The distribution of total scores, as an SVG image: bars drawn here, no plotting library
    to load (matplotlib was most of the time a report took)."""
    scores = [r.score for r in report.students if r.score is not None and r.status != STATUS_INTERRUPTED]
    if not scores:
        return None
    top = report.max_score or max(scores) or 1.0
    step = max(top / 30, 1.0) if top > 30 else 1.0
    edges = [i * step for i in range(int(top / step) + 2)]
    counts = [0] * (len(edges) - 1)
    for score in scores:    # bins [edge, next edge), the last one closed, as matplotlib counts
        counts[min(max(int(score // step), 0), len(counts) - 1)] += 1
    width, height, left, right, above, below = 640, 280, 48, 16, 30, 44
    plot_w, plot_h = width - left - right, height - above - below
    most = max(counts) or 1
    bar = plot_w / len(counts)
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="13">'
           f'{html.escape(report.assignment)}: {len(scores)} submissions</text>']
    for i, n in enumerate(counts):
        h = plot_h * n / most
        x = left + i * bar
        svg.append(f'<rect x="{x + 0.5:.1f}" y="{above + plot_h - h:.1f}" width="{max(bar - 1, 0.5):.1f}" '
                   f'height="{h:.1f}" fill="#3b6ea5"/>')
        if len(counts) <= 16 or i % max(1, len(counts) // 10) == 0:
            svg.append(f'<text x="{x + bar / 2:.1f}" y="{above + plot_h + 14}" text-anchor="middle">'
                       f'{edges[i]:g}</text>')
    for t in range(0, most + 1, -(-most // 4)):
        y = above + plot_h - plot_h * t / most
        svg.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{t}</text>')
        svg.append(f'<line x1="{left}" x2="{left - 3}" y1="{y:.1f}" y2="{y:.1f}" stroke="#222"/>')
    svg += [f'<line x1="{left}" x2="{left}" y1="{above}" y2="{above + plot_h}" stroke="#222"/>',
            f'<line x1="{left}" x2="{left + plot_w}" y1="{above + plot_h}" y2="{above + plot_h}" stroke="#222"/>',
            f'<text x="{left + plot_w / 2}" y="{height - 8}" text-anchor="middle">total score (of {top:g})</text>',
            f'<text transform="translate(12 {above + plot_h / 2}) rotate(-90)" text-anchor="middle">students</text>',
            "</svg>"]
    return "".join(svg)



SCRIPT = """(function () {
  var table = document.getElementById("students");
  if (!table) { return; }
  var body = table.tBodies[0], heads = table.tHead.rows[0].cells;
  var rows = Array.prototype.slice.call(body.rows);
  var filter = document.getElementById("filter"), only = document.getElementById("only");
  var shown = document.getElementById("shown");
  document.getElementById("controls").hidden = false;
  function apply() {
    var text = filter.value.toLowerCase(), kind = only.value, n = 0;
    rows.forEach(function (row) {
      var ok = (!text || row.textContent.toLowerCase().indexOf(text) >= 0) &&
               (!kind || row.getAttribute("data-" + kind) === "1");
      row.hidden = !ok;
      if (ok) { n += 1; }
    });
    shown.textContent = n + " of " + rows.length + " students shown";
  }
  function key(row, col, numeric) {
    var cell = row.cells[col], v = cell.getAttribute("data-v");
    v = v === null ? cell.textContent : v;
    return numeric ? (v === "" ? -Infinity : parseFloat(v)) : v.toLowerCase();
  }
  Array.prototype.forEach.call(heads, function (th, col) {
    var button = document.createElement("button");
    button.type = "button";
    button.textContent = th.textContent;
    th.textContent = "";
    th.appendChild(button);
    button.addEventListener("click", function () {
      var up = th.getAttribute("aria-sort") !== "ascending", numeric = th.classList.contains("n");
      Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", up ? "ascending" : "descending");
      rows.sort(function (a, b) {
        var x = key(a, col, numeric), y = key(b, col, numeric);
        var c = x < y ? -1 : x > y ? 1 : 0;
        return up ? c : -c;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
  filter.addEventListener("input", apply);
  only.addEventListener("change", apply);
  apply();
})();
"""
SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode("ascii")
CSP = f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src '{SCRIPT_HASH}'"
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; vertical-align: top; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
th button { font: inherit; font-weight: bold; border: 0; background: none; padding: 0; cursor: pointer; }
th[aria-sort=ascending] button::after { content: " \\25B2"; } th[aria-sort=descending] button::after { content: " \\25BC"; }
tr.flagged td { background: #fff6d5; } tr.bad td { background: #fde4e4; }
ul { margin: 0; padding-left: 1.1em; } code { white-space: pre-wrap; }
#controls { margin: 0.5em 0; } #controls label { margin-right: 1em; }
"""
# the row filters: (value, label, the rows it keeps)
FILTERS = [("flagged", "flagged", lambda r: bool(r.flags)), ("problems", "with problems", lambda r: bool(r.problems)),
           ("late", "late", lambda r: r.seconds_late > 0), ("pending", "waiting for hand grading", lambda r: r.pending > 0),
           ("bad", "broken, failed or not graded",
            lambda r: r.status in (STATUS_FAILED, STATUS_BROKEN, STATUS_INTERRUPTED))]


def _e(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _num(value, digits: int = 2) -> str:
    if value is None:
        return ""
    return f"{value:.{digits}f}".rstrip("0").rstrip(".") if isinstance(value, float) else _e(value)


def _items(texts: list[str]) -> str:
    return "<ul>" + "".join(f"<li>{_e(t)}</li>" for t in texts) + "</ul>" if texts else ""


def _late(row: StudentRow) -> str:
    if row.seconds_late <= 0:
        return ""
    late = f"late by {_duration(row.seconds_late)}"
    return _e(f"{late}: −{row.late_penalty:g} (raw {row.raw_score:g})" if row.late_penalty else late)


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def _pending(row: StudentRow) -> str:
    return _e(f"{row.pending} cell{'s' if row.pending != 1 else ''} waiting") if row.pending else ""


def _v(value) -> str:
    """A sort key for a number column (the script reads it; empty sorts first)."""
    return "" if value is None else f"{float(value):.6g}"


def _runs(report: Report) -> list[str]:
    if not report.runs:
        return []
    parts = ["<h2>Runs</h2><table><tr><th>when (UTC)</th><th>graded</th><th>unchanged</th><th>wall time (s)</th>"
             "<th>mean of the students graded in that run</th></tr>"]
    for run in reversed(report.runs[-20:]):
        parts.append(f"<tr><td>{_e(run.get('when'))}</td><td class=\"n\">{_e(run.get('graded'))}</td>"
                     f"<td class=\"n\">{_e(run.get('unchanged'))}</td><td class=\"n\">{_num(run.get('wall'), 1)}</td>"
                     f"<td class=\"n\">{_num(run.get('mean'))}</td></tr>")
    parts.append("</table>")
    return parts


def _students(report: Report) -> list[str]:
    options = "".join(f"<option value=\"{value}\">{_e(label)}</option>" for value, label, _ in FILTERS)
    parts = ["<h2>Students</h2>",
             "<div id=\"controls\" hidden><label>find <input id=\"filter\" type=\"search\"></label>"
             f"<label>show <select id=\"only\"><option value=\"\">every student</option>{options}</select></label>"
             "<span id=\"shown\"></span> (click a column's name to sort)</div>",
             "<table id=\"students\"><thead><tr><th>student</th><th>status</th><th class=\"n\">score</th>"
             "<th class=\"n\">auto</th><th class=\"n\">max</th><th>late</th><th>hand grading</th><th>flags</th>"
             "<th>problems</th><th class=\"n\">timeouts</th><th class=\"n\">time (s)</th><th>open</th></tr></thead><tbody>"]
    for r in report.students:
        cls = "bad" if r.status in (STATUS_FAILED, STATUS_BROKEN, STATUS_INTERRUPTED) else \
            "flagged" if r.flags else ""
        data = "".join(f" data-{value}=\"{int(keep(r))}\"" for value, _, keep in FILTERS)
        links = " ".join(f"<a href=\"{_e(href)}\">{_e(label)}</a>" for label, href in r.links)
        parts.append(f"<tr class=\"{cls}\"{data}><td>{_e(r.student)}</td><td>{_e(r.status)}</td>"
                     f"<td class=\"n\" data-v=\"{_v(r.score)}\">{_num(r.score)}</td>"
                     f"<td class=\"n\" data-v=\"{_v(r.auto_score)}\">{_num(r.auto_score)}</td>"
                     f"<td class=\"n\" data-v=\"{_v(r.max_score)}\">{_num(r.max_score)}</td>"
                     f"<td data-v=\"{r.seconds_late:.0f}\">{_late(r)}</td><td data-v=\"{r.pending}\">{_pending(r)}</td>"
                     f"<td>{_items(r.flags)}</td><td>{_items(r.problems)}</td>"
                     f"<td class=\"n\" data-v=\"{r.timeouts}\">{r.timeouts or ''}</td>"
                     f"<td class=\"n\" data-v=\"{_v(r.seconds)}\">{_num(r.seconds, 1)}</td><td>{links}</td></tr>")
    parts.append("</tbody></table>")
    return parts


def render_html(report: Report) -> str:
    """The page, every piece of student text escaped, with its one script."""
    svg = histogram_svg(report)
    parts = [
        "<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">",
        f"<title>{_e(report.assignment)}: grading report</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_e(report.assignment)}: grading report</h1>",
    ]
    if report.similarity_page:
        parts.append(f"<p><a href=\"{_e(report.similarity_page)}\">Similar answers</a>: pairs of submissions "
                     "whose answers are unusually alike (evidence for a person to read, never a grade).</p>")
    parts.append("<h2>Counts</h2><table>")
    parts += [f"<tr><th>{_e(k)}</th><td class=\"n\">{v}</td></tr>" for k, v in report.counts.items()]
    parts += [f"<tr><th>mean score (every submission, after late penalties)</th><td class=\"n\">{_num(report.mean)}</td></tr>",
              f"<tr><th>median score (every submission)</th><td class=\"n\">{_num(report.median)}</td></tr>",
              f"<tr><th>maximum possible</th><td class=\"n\">{_num(report.max_score)}</td></tr>",
              f"<tr><th>this run's wall time (s)</th><td class=\"n\">{_num(report.wall_seconds, 1)}</td></tr>", "</table>"]
    parts += _runs(report)
    if svg is not None:
        parts.append("<h2>Distribution</h2><img alt=\"histogram of total scores\" src=\"data:image/svg+xml;base64,"
                     + base64.b64encode(svg.encode("utf-8")).decode("ascii") + "\">")
    parts.append("<h2>Test cells</h2><p>The most common diagnosis is among attempted work: a test that failed with "
                 "the handed-out <code>NotImplementedError</code> counts as not attempted.</p><table><tr><th>notebook</th>"
                 "<th>cell</th><th>points</th><th>students</th><th>pass rate</th><th>most common diagnosis</th>"
                 "<th>of</th><th>not attempted</th></tr>")
    for c in report.cells:
        rate = "" if c.pass_rate is None else f"{100 * c.pass_rate:.0f}%"
        parts.append(f"<tr><td>{_e(c.notebook)}</td><td>{_e(c.cell)}</td><td class=\"n\">{_num(c.points)}</td>"
                     f"<td class=\"n\">{c.students}</td><td class=\"n\">{rate}</td>"
                     f"<td><code>{_e(c.diagnosis)}</code></td><td class=\"n\">{c.diagnosis_count or ''}</td>"
                     f"<td class=\"n\">{c.not_attempted or ''}</td></tr>")
    parts.append("</table>")
    if report.misconceptions is not None:
        parts.append("<h2>Misconceptions</h2><table><tr><th>misconception</th><th>students</th></tr>")
        for name, count in sorted(report.misconceptions.items(), key=lambda kv: (-kv[1], str(kv[0]))):
            parts.append(f"<tr><td>{_e(name)}</td><td class=\"n\">{_e(count)}</td></tr>")
        if not report.misconceptions:
            parts.append("<tr><td colspan=\"2\">no failing test named a misconception</td></tr>")
        parts.append("</table>")
    parts += _students(report)
    parts += [f"<script>{SCRIPT}</script>", "</body></html>", ""]
    return "\n".join(parts)


def write_report(report: Report, folder: Path) -> Path:
    """report.html, report.csv and cells.csv in ``folder``; the HTML's path."""
    folder.mkdir(parents=True, exist_ok=True)
    write_csv(report, folder)
    if (folder / "similarity.html").is_file():
        report.similarity_page = "similarity.html"
    page = folder / "report.html"
    tmp = folder / ".report.html.tmp"
    tmp.write_text(render_html(report), encoding="utf-8")
    tmp.replace(page)
    return page
