"""Which submissions of an assignment have answer cells that are unusually alike: evidence for a
person to read, never a grade (nothing here touches the gradebook).

- *Read*: the submitted notebooks, never run, with the grader's own intake rules
  (``intake.read_notebook``: no link followed, size capped, broken files reported) and its repair
  of edited nbgrader metadata, so each grade id names the cell that is graded.  The answers are
  the solution cells: code, and the written (hand-graded markdown) answers.
- *Fingerprint*: copydetect (winnowing, as in MOSS) on Pygments' tokens of the code, with every
  name, string, comment and all whitespace normalised away; written answers as their lower-case
  words.  The release's own code of each answer cell (the skeleton handed out) is boilerplate, and
  what more than ``common_count`` submissions share in a cell is common (MOSS's ``-m``): neither
  counts as similarity.
- *Compare*: per answer cell (the same grade id across students) and per submission (all of its
  answer cells together).  A similarity is the fraction of one side's fingerprinted answer found
  in the other's, in both directions; a pair is reported when, both ways, it reaches a threshold.
"""
from __future__ import annotations

import io
import itertools
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from traitlets import Bool, Float, Integer
from traitlets.config import Config, Configurable

from ..learner.cells import role

Key = tuple[str, str]          # (notebook, grade id) of an answer cell


class SimilarityOptions(Configurable):
    """How answers are compared (``c.SimilarityOptions.<name>``); the thresholds are measured on the
    answer corpus, see ``docs/similarity.md``."""

    noise_threshold = Integer(25, help="The shortest run of normalised code, in characters, that counts "
                                       "as a match (copydetect's noise threshold, its default).").tag(config=True)
    text_noise_threshold = Integer(40, help="The same for written answers, in characters of their "
                                            "lower-case words (about seven words).").tag(config=True)
    cell_threshold = Float(0.8, help="Report a pair when one answer cell shares at least this fraction of "
                                     "its fingerprints with the other's, in both directions.").tag(config=True)
    submission_threshold = Float(0.6, help="Report a pair when all their answer cells together share at "
                                           "least this fraction, in both directions.").tag(config=True)
    min_shared = Integer(50, help="A pair is reported only when the matching parts hold at least this many "
                                  "characters of normalised code or text.").tag(config=True)
    common_count = Integer(10, help="A fingerprint found in the same cell of more submissions than this is "
                                    "common code, not evidence (MOSS's -m).").tag(config=True)
    written_answers = Bool(True, help="Compare the written (hand-graded) answers too.").tag(config=True)
    max_cell_chars = Integer(10_000, help="Answer cells longer than this are listed, not compared "
                                          "(the course's longest model answer is 1,465).").tag(config=True)


# ---------------------------------------------------------------------------------------------
# reading

@dataclass
class Collected:
    """The answers of a class, as submitted."""

    assignment: str
    skeletons: dict[Key, tuple[str, str]]               # key -> (kind "code" | "text", release source)
    answers: dict[Key, dict[str, str]]                  # key -> student -> source
    students: list[str]                                 # every submission folder found
    skipped: dict[str, list[str]] = field(default_factory=dict)   # student -> what could not be read


def _clean(text: str) -> str:
    """Text that encodes as UTF-8 (a JSON string may hold a lone surrogate)."""
    return text.encode("utf-8", "replace").decode("utf-8")


def answer_cells(nb) -> dict[str, tuple[str, str]]:
    """grade id -> (kind, source) of a notebook's answer cells: code ones, and markdown ones graded by hand."""
    out = {}
    for cell in nb.cells:
        r = role(cell)
        if r.solution and r.grade_id and cell.get("cell_type") in ("code", "markdown"):
            out[r.grade_id] = ("code" if cell.cell_type == "code" else "text", cell.source)
    return out


def collect(root: Path, assignment: str, config: Config | None = None,
            options: SimilarityOptions | None = None) -> Collected:
    """Every submission's answer cells, read from ``submitted/`` (never run)."""
    import nbformat
    from nbgrader.coursedir import CourseDirectory

    from .intake import read_notebook, repair

    options = options or SimilarityOptions(config=config)
    coursedir = CourseDirectory(config=config or Config())
    coursedir.root = str(Path(root).resolve())

    def folder(step: str, student: str) -> Path:
        return Path(coursedir.format_path(step, student, assignment))

    release_dir = folder(coursedir.release_directory, ".")
    releases = {p.stem: nbformat.read(p, as_version=4) for p in sorted(release_dir.glob("*.ipynb"))
                if not p.name.startswith(".")}
    if not releases:
        raise FileNotFoundError(f"no released notebook in {release_dir}: nothing to compare answers against")
    skeletons = {(name, gid): kind_source for name, nb in releases.items()
                 for gid, kind_source in answer_cells(nb).items()
                 if options.written_answers or kind_source[0] == "code"}
    submitted = Path(coursedir.format_path(coursedir.submitted_directory, ".", "."))
    students = sorted(p.parent.name for p in submitted.glob(f"*/{assignment}")
                      if p.is_dir() and not p.is_symlink() and not p.parent.is_symlink())
    found = Collected(assignment, skeletons, {key: {} for key in skeletons}, students)
    for student in students:
        for name, release in releases.items():
            path = folder(coursedir.submitted_directory, student) / f"{name}.ipynb"
            if not path.exists() and not path.is_symlink():
                found.skipped.setdefault(student, []).append(f"{name}.ipynb was not submitted")
                continue
            nb, problem = read_notebook(path)
            if nb is None:
                found.skipped.setdefault(student, []).append(_clean(problem))
                continue
            try:
                repair(nb, release)
                cells = answer_cells(nb)
            except Exception as exc:     # metadata no notebook tool writes (a list for a grade id...)
                found.skipped.setdefault(student, []).append(
                    f"{name}.ipynb has cell metadata that cannot be read ({type(exc).__name__}): not compared")
                continue
            for gid, (kind, source) in cells.items():
                key = (name, gid)
                if key not in skeletons or skeletons[key][0] != kind:
                    continue
                if len(source) > options.max_cell_chars:
                    found.skipped.setdefault(student, []).append(
                        f"answer {gid!r} is {len(source):,} characters (over {options.max_cell_chars:,}): not compared")
                    continue
                found.answers[key][student] = _clean(source)
    return found


# ---------------------------------------------------------------------------------------------
# fingerprints

_WORD = re.compile(r"\w+")


def words(text: str) -> tuple[str, list[tuple[int, int]]]:
    """A written answer as its lower-case words, one space apart, and for each character of that
    the span of the original text it stands for (so matches can be marked in what was written)."""
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    for m in _WORD.finditer(text):
        if out:
            out.append(" ")
            spans.append((spans[-1][1], m.start()))
        word = m.group().lower()
        out.append(word)
        spans += [(m.start(), m.end())] * len(word)
    return "".join(out), spans


class Fingerprints:
    """copydetect's fingerprints of one answer, and how to map its matches back onto the source."""

    def __init__(self, kind: str, source: str, k: int, window: int, boilerplate):
        from copydetect import CodeFingerprint

        self.kind, self.source, self.window = kind, source, window
        if kind == "code":
            self.spans = None
            self.fp = CodeFingerprint("answer.py", k, window, boilerplate, filter=True, language="python",
                                      fp=io.StringIO(source))
        else:
            text, self.spans = words(source)
            self.fp = CodeFingerprint("answer.txt", k, window, boilerplate, filter=False, fp=io.StringIO(text))

    @property
    def hashes(self) -> set:
        return self.fp.hashes

    @property
    def size(self) -> float:
        """How much of the answer its fingerprints cover (characters of normalised code or text)."""
        return float(self.fp.token_coverage)

    def without(self, drop) -> "Fingerprints":
        """The same answer with the fingerprints in ``drop`` (a sorted array) removed as boilerplate,
        without tokenizing it again."""
        import copy

        import numpy as np
        from copydetect.utils import get_document_fingerprints, get_token_coverage

        other = copy.copy(self)
        other.fp = copy.copy(self.fp)
        other.fp.hashes, other.fp.hash_idx = get_document_fingerprints(
            self.fp.filtered_code, self.fp.k, self.window, np.asarray(drop))
        other.fp.token_coverage = get_token_coverage(other.fp.hash_idx, self.fp.k, len(self.fp.filtered_code))
        return other

    def marks(self, slices) -> list[tuple[int, int]]:
        """copydetect's slices of a match as (start, end) spans of the source, merged and in order."""
        if slices is None or len(slices) == 0 or len(slices[0]) == 0:
            return []
        spans = []
        for start, end in zip(slices[0].tolist(), slices[1].tolist()):
            if self.spans is not None:        # positions in the words, back to the written text
                if not self.spans:
                    continue
                start, end = self.spans[min(start, len(self.spans) - 1)][0], self.spans[min(end, len(self.spans)) - 1][1]
            start, end = max(0, min(int(start), len(self.source))), max(0, min(int(end), len(self.source)))
            if end > start:
                spans.append((start, end))
        merged: list[tuple[int, int]] = []
        for start, end in sorted(spans):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        return merged


def handed_out(source: str, skeleton: str) -> list[tuple[int, int]]:
    """The spans of ``source``'s lines that are lines of the skeleton as handed out (blank ones aside)."""
    given = {line.strip() for line in skeleton.splitlines() if line.strip()}
    spans, at = [], 0
    for line in source.splitlines(keepends=True):
        if line.strip() and line.strip() in given:
            spans.append((at, at + len(line.rstrip("\r\n"))))
        at += len(line)
    return spans


def subtract(marks: list[tuple[int, int]], holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``marks`` (sorted, disjoint spans) less the parts inside ``holes`` (sorted, disjoint)."""
    out = []
    for start, end in marks:
        for h_start, h_end in holes:
            if h_end <= start or h_start >= end:
                continue
            if h_start > start:
                out.append((start, h_start))
            start = max(start, h_end)
            if start >= end:
                break
        if start < end:
            out.append((start, end))
    return out


# ---------------------------------------------------------------------------------------------
# comparing

@dataclass
class CellMatch:
    """What two students' answers in one cell share."""

    key: Key
    similarity_a: float          # the fraction of a's fingerprinted answer found in b's
    similarity_b: float
    shared: float                # characters of normalised code or text in the matching parts (a's side)
    marks_a: list[tuple[int, int]]
    marks_b: list[tuple[int, int]]
    reported: bool = False       # reaches the cell threshold both ways (and min_shared)


@dataclass
class Pair:
    a: str
    b: str
    similarity_a: float          # all answer cells together: the fraction of a's found in b's
    similarity_b: float
    shared: float
    cells: list[CellMatch]
    reasons: list[str]           # "submission" and/or "cell <grade id>"


@dataclass
class SimilarityResult:
    collected: Collected
    options: SimilarityOptions
    pairs: list[Pair]            # the reported ones, most similar first
    compared: dict[Key, int]     # key -> answers compared (those with something of their own)
    common: dict[Key, int]       # key -> fingerprints set aside as common
    candidates: int              # pairs of answers that shared any fingerprint
    seconds: float
    page: Path | None = None     # similarity.html, once written

    def summary(self, cwd: Path | None = None) -> str:
        """One line for the terminal: what was read, how many pairs, the time, where the page is."""
        col = self.collected
        if not col.students:
            return f"{col.assignment}: similarity: no submissions found, no page written"
        page = self.page
        if page is not None and cwd is not None and page.is_relative_to(cwd):
            page = page.relative_to(cwd)
        unread = f" ({len(col.skipped)} with something not read: see the page)" if col.skipped else ""
        return (f"{col.assignment}: similarity: {len(col.students)} submissions{unread}, {len(self.pairs)} "
                f"pair{'' if len(self.pairs) == 1 else 's'} above the thresholds; {self.seconds:.1f} s; "
                f"{page} (evidence for a person to read, never a grade)")


def _fingerprint_all(collected: Collected, options: SimilarityOptions):
    """key -> student -> Fingerprints, skeleton and common code removed; and the common counts."""
    import numpy as np
    from copydetect import CodeFingerprint

    by_key: dict[Key, dict[str, Fingerprints]] = {}
    common_counts: dict[Key, int] = {}
    for key, (kind, skeleton) in collected.skeletons.items():
        k = options.noise_threshold if kind == "code" else options.text_noise_threshold
        base = skeleton if kind == "code" else words(skeleton)[0]
        boiler = np.unique(np.array(list(CodeFingerprint(
            "skeleton", k, 1, filter=kind == "code", language="python" if kind == "code" else None,
            fp=io.StringIO(base)).hashes), dtype=np.int64))
        cache: dict[str, Fingerprints | str] = {}    # the same source (a blank cell, a common answer) once
        prints: dict[str, Fingerprints] = {}
        for student, source in collected.answers[key].items():
            if source not in cache:
                try:
                    cache[source] = Fingerprints(kind, source, k, 1, boiler)
                except Exception as exc:      # (never seen: a broken answer is listed, the rest compared)
                    cache[source] = f"{type(exc).__name__}: {str(exc)[:200]}"
            found = cache[source]
            if isinstance(found, str):
                collected.skipped.setdefault(student, []).append(
                    f"answer {key[1]!r} could not be fingerprinted ({found}): not compared")
            elif found.hashes:
                prints[student] = found
        seen: dict[int, int] = defaultdict(int)
        for fp in prints.values():
            for h in fp.hashes:
                seen[h] += 1
        common = sorted(h for h, n in seen.items() if n > options.common_count)
        common_counts[key] = len(common)
        if common:
            drop = np.unique(np.concatenate([boiler, np.array(common, dtype=np.int64)]))
            trimmed: dict[int, Fingerprints] = {}
            for student, fp in list(prints.items()):
                if fp.hashes.isdisjoint(common):
                    continue
                if id(fp) not in trimmed:
                    trimmed[id(fp)] = fp.without(drop)
                prints[student] = trimmed[id(fp)]
            prints = {s: fp for s, fp in prints.items() if fp.hashes}
        by_key[key] = prints
    return by_key, common_counts


def compare(collected: Collected, options: SimilarityOptions | None = None) -> SimilarityResult:
    """Every pair of submissions whose answers share fingerprints, and the ones to report."""
    from copydetect import compare_files

    options = options or SimilarityOptions()
    start = time.monotonic()
    by_key, common = _fingerprint_all(collected, options)
    totals: dict[str, float] = defaultdict(float)          # student -> size of all their answers
    for prints in by_key.values():
        for student, fp in prints.items():
            totals[student] += fp.size
    matches: dict[tuple[str, str], list[CellMatch]] = defaultdict(list)
    candidates = 0
    for key, prints in by_key.items():
        holders: dict[int, list[str]] = defaultdict(list)
        for student, fp in prints.items():
            for h in fp.hashes:
                holders[h].append(student)
        pairs = {tuple(sorted(p)) for students in holders.values() for p in itertools.combinations(students, 2)}
        candidates += len(pairs)
        for a, b in sorted(pairs):
            fa, fb = prints[a], prints[b]
            overlap, (sim_a, sim_b), (slices_a, slices_b) = compare_files(fa.fp, fb.fp)
            if not overlap:
                continue
            skeleton = collected.skeletons[key][1]
            match = CellMatch(key, float(sim_a), float(sim_b), float(overlap),
                              subtract(fa.marks(slices_a), handed_out(fa.source, skeleton)),
                              subtract(fb.marks(slices_b), handed_out(fb.source, skeleton)))
            match.reported = (min(match.similarity_a, match.similarity_b) >= options.cell_threshold
                              and match.shared >= options.min_shared)
            matches[(a, b)].append(match)
    reported = []
    for (a, b), cells in matches.items():
        shared_a = sum(c.similarity_a * by_key[c.key][a].size for c in cells)
        shared_b = sum(c.similarity_b * by_key[c.key][b].size for c in cells)
        pair = Pair(a, b, shared_a / totals[a], shared_b / totals[b], sum(c.shared for c in cells),
                    sorted(cells, key=lambda c: (-min(c.similarity_a, c.similarity_b), c.key)), [])
        if min(pair.similarity_a, pair.similarity_b) >= options.submission_threshold and pair.shared >= options.min_shared:
            pair.reasons.append("submission")
        pair.reasons += [f"cell {c.key[1]}" for c in pair.cells if c.reported]
        if pair.reasons:
            reported.append(pair)
    reported.sort(key=lambda p: (-min(p.similarity_a, p.similarity_b), -p.shared, p.a, p.b))
    return SimilarityResult(collected, options, reported, {k: len(v) for k, v in by_key.items()}, common,
                            candidates, time.monotonic() - start)
