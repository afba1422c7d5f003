"""The similarity page of an assignment's report folder: ``similarity.html`` (the reported pairs,
most similar first, each with the two students' answer cells side by side and the matching parts
marked) and ``similarity.csv`` (one row per pair).

Every piece of student text is escaped, the page loads nothing and runs nothing (the grading
report's Content-Security-Policy), and the CSV keeps a cell that starts like a formula as text.
"""
from __future__ import annotations

import csv
import html
import time
from datetime import datetime, timezone
from pathlib import Path

from traitlets.config import Config

from .report import _CSP, _cell
from .similarity import CellMatch, Pair, SimilarityOptions, SimilarityResult, _clean, collect, compare, handed_out

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
p.note { background: #eef4fb; border-left: 4px solid #3b6ea5; padding: 0.6em 1em; max-width: 60em; }
table { border-collapse: collapse; margin: 0.6em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; vertical-align: top; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
table.side { width: 100%; table-layout: fixed; }
table.side td { width: 50%; }
pre { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; font-size: 0.85em; }
mark { background: #ffd76a; } span.given { color: #999; }
details { margin: 0.4em 0 1em; } summary { cursor: pointer; }
"""


def _e(value) -> str:
    return html.escape(_clean("" if value is None else str(value)), quote=True)


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def marked(source: str, marks: list[tuple[int, int]], given: list[tuple[int, int]] = ()) -> str:
    """``source`` as escaped HTML: the spans in ``marks`` inside ``<mark>``, those in ``given`` (the
    skeleton handed out) greyed; each list sorted and disjoint, and the two apart."""
    tags = sorted([(s, e, "mark") for s, e in marks] + [(s, e, "span class=\"given\"") for s, e in given])
    parts, at = [], 0
    for start, end, tag in tags:
        if start < at:
            continue
        parts.append(_e(source[at:start]))
        parts.append(f"<{tag}>{_e(source[start:end])}</{tag.split()[0]}>")
        at = end
    parts.append(_e(source[at:]))
    return "".join(parts)


def cell_label(result: SimilarityResult, cell: CellMatch) -> str:
    notebooks = {key[0] for key in result.collected.skeletons}
    notebook, gid = cell.key
    return gid if len(notebooks) == 1 else f"{notebook}/{gid}"


def _side_by_side(result: SimilarityResult, pair: Pair, cell: CellMatch) -> str:
    answers = result.collected.answers[cell.key]
    skeleton = result.collected.skeletons[cell.key][1]
    flag = " (reaches the cell threshold)" if cell.reported else ""
    return (f"<h4>{_e(cell_label(result, cell))}: {_pct(cell.similarity_a)} of {_e(pair.a)}'s answer is in "
            f"{_e(pair.b)}'s, {_pct(cell.similarity_b)} the other way{flag}</h4>"
            f"<table class=\"side\"><tr><th>{_e(pair.a)}</th><th>{_e(pair.b)}</th></tr>"
            f"<tr><td><pre>{marked(answers[pair.a], cell.marks_a, handed_out(answers[pair.a], skeleton))}</pre></td>"
            f"<td><pre>{marked(answers[pair.b], cell.marks_b, handed_out(answers[pair.b], skeleton))}</pre></td>"
            "</tr></table>")


def render_html(result: SimilarityResult, max_pairs: int = 300) -> str:
    """The page: what it is (evidence, never a grade), the settings, the pairs, what was not read."""
    col, opt = result.collected, result.options
    a = _e(col.assignment)
    parts = [
        "<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{_CSP}\">",
        f"<title>{a}: similar answers</title><style>{_STYLE}</style></head><body>",
        f"<h1>{a}: similar answers</h1>",
        "<p class=\"note\"><strong>Evidence for a person to read, never a grade.</strong> These pairs of "
        "submissions have answer cells that are more alike than the thresholds below, once names, strings, "
        "comments and formatting are set aside and the code handed out and the code most of the class "
        "shares are left out. Alike is not copied: small exercises have few good answers, and students may "
        "work together where that is allowed. Nothing in the gradebook changed. "
        "<a href=\"report.html\">The grading report</a>.</p>",
        "<h2>Summary</h2><table>",
    ]
    compared = len({s for key in result.compared for s in col.answers[key]})
    rows = [("submissions found", len(col.students)), ("submissions with answers compared", compared),
            ("submissions with something not read", len(col.skipped)),
            ("pairs that shared any fingerprint", result.candidates), ("pairs reported", len(result.pairs)),
            ("time (s)", f"{result.seconds:.1f}"),
            ("written", datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))]
    parts += [f"<tr><th>{_e(k)}</th><td class=\"n\">{_e(v)}</td></tr>" for k, v in rows]
    parts.append("</table>")
    parts.append("<h2>Settings</h2><table>"
                 f"<tr><th>a pair is reported when, both ways, its answers together share at least</th>"
                 f"<td class=\"n\">{_pct(opt.submission_threshold)}</td></tr>"
                 f"<tr><th>or one answer cell shares at least</th><td class=\"n\">{_pct(opt.cell_threshold)}</td></tr>"
                 f"<tr><th>and the matching parts hold at least (characters of normalised code or text)</th>"
                 f"<td class=\"n\">{opt.min_shared}</td></tr>"
                 f"<tr><th>shortest match (characters of normalised code; of written words)</th>"
                 f"<td class=\"n\">{opt.noise_threshold}; {opt.text_noise_threshold}</td></tr>"
                 f"<tr><th>a fingerprint in more submissions than this is common, not evidence</th>"
                 f"<td class=\"n\">{opt.common_count}</td></tr></table>")
    parts.append("<h2>Answer cells</h2><table><tr><th>cell</th><th>kind</th><th>answers compared</th>"
                 "<th>common fingerprints left out</th></tr>")
    for key, (kind, _) in col.skeletons.items():
        label = key[1] if len({k[0] for k in col.skeletons}) == 1 else f"{key[0]}/{key[1]}"
        parts.append(f"<tr><td>{_e(label)}</td><td>{'code' if kind == 'code' else 'written'}</td>"
                     f"<td class=\"n\">{result.compared.get(key, 0)}</td><td class=\"n\">{result.common.get(key, 0)}</td></tr>")
    parts.append("</table>")
    parts.append(f"<h2>Pairs, most similar first ({len(result.pairs)})</h2>")
    if not result.pairs:
        parts.append("<p>No pair reaches the thresholds.</p>")
    else:
        parts.append("<table><tr><th>#</th><th>first</th><th>second</th><th>of the first's answers, in the "
                     "second's</th><th>the other way</th><th>cells that match (both ways)</th></tr>")
        for i, p in enumerate(result.pairs, 1):
            cells = ", ".join(f"{_e(cell_label(result, c))} ({_pct(c.similarity_a)}/{_pct(c.similarity_b)})"
                              for c in p.cells)
            parts.append(f"<tr><td class=\"n\"><a href=\"#pair-{i}\">{i}</a></td><td>{_e(p.a)}</td><td>{_e(p.b)}</td>"
                         f"<td class=\"n\">{_pct(p.similarity_a)}</td><td class=\"n\">{_pct(p.similarity_b)}</td>"
                         f"<td>{cells}</td></tr>")
        parts.append("</table>")
        for i, p in enumerate(result.pairs[:max_pairs], 1):
            parts.append(f"<h3 id=\"pair-{i}\">{i}. {_e(p.a)} and {_e(p.b)}: {_pct(p.similarity_a)} / "
                         f"{_pct(p.similarity_b)}</h3><details open><summary>side by side</summary>")
            parts += [_side_by_side(result, p, c) for c in p.cells]
            parts.append("</details>")
        if len(result.pairs) > max_pairs:
            parts.append(f"<p>{len(result.pairs) - max_pairs} more pairs: see similarity.csv.</p>")
    if col.skipped:
        parts.append("<h2>Not read or not compared</h2><table><tr><th>student</th><th>what</th></tr>")
        for student, problems in sorted(col.skipped.items()):
            parts.append(f"<tr><td>{_e(student)}</td><td><ul>"
                         + "".join(f"<li>{_e(p)}</li>" for p in problems) + "</ul></td></tr>")
        parts.append("</table>")
    parts += ["</body></html>", ""]
    return "\n".join(parts)


def write_csv(result: SimilarityResult, path: Path) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["student_a", "student_b", "similarity_a", "similarity_b", "shared_characters", "reported_for",
                    "cells"])
        for p in result.pairs:
            cells = "; ".join(f"{cell_label(result, c)} {c.similarity_a:.2f}/{c.similarity_b:.2f}" for c in p.cells)
            w.writerow([_cell(_clean(x) if isinstance(x, str) else x) for x in (p.a, p.b, round(p.similarity_a, 4), round(p.similarity_b, 4),
                                           round(p.shared), "; ".join(p.reasons), cells)])
    return path


def write(result: SimilarityResult, folder: Path) -> Path:
    """similarity.html and similarity.csv in ``folder``; the HTML's path."""
    folder.mkdir(parents=True, exist_ok=True)
    write_csv(result, folder / "similarity.csv")
    page = folder / "similarity.html"
    tmp = folder / ".similarity.html.tmp"
    tmp.write_text(render_html(result), encoding="utf-8")
    tmp.replace(page)
    return page


def run(root: Path, assignment: str, config: Config | None = None, folder: Path | None = None) -> SimilarityResult:
    """Read, compare, and write ``similarity.html`` and ``similarity.csv`` into ``folder`` (default:
    ``<report_directory>/<assignment>/``, beside the grading report).  ``config``: the course's, as
    nbgrader loads it, unless given."""
    from .config import GradeOptions, load_config

    start = time.monotonic()
    config = config if config is not None else load_config(Path(root))
    options = SimilarityOptions(config=config)
    collected = collect(root, assignment, config, options)
    result = compare(collected, options)
    result.seconds = time.monotonic() - start
    if folder is None:
        folder = Path(root) / GradeOptions(config=config).report_directory / assignment
    if collected.students:
        result.page = write(result, folder)
    return result
