"""``python -m autograder check-assignment aN_slug``: the authoring check.

The assignment is graded exactly as ``grade`` grades a class (the sandbox, the judge, nbgrader's
configured steps), on a scratch copy of the course, so nothing of the instructor's gradebook or
folders is touched; in one run: the reference solution (it must get full marks, with no flag), the
blank release (it must score zero) and the answer corpus, ``tests/answers/aN_slug.py`` where it
exists (a wrong answer must lose points on its own exercise, showing its message, and nowhere
else; a right one must get full marks).  A value the judge refused to send to the learner's
function is said in words: the cell, the value, why it cannot go, and the fix.  The build-time
checks (``authoring.py``) and a release out of date with the source are reported too.
"""
from __future__ import annotations

import copy
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import nbformat
from traitlets.config import Config

from ..course.answers import Answer, cells_testing, corpus_file, load_corpus
from ..course.layout import fill_answers, solution_sources
from ..learner.cells import notebooks, role

DIRECTORIES = ("source_directory", "release_directory", "submitted_directory", "autograded_directory",
               "feedback_directory")


@dataclass
class Verdict:
    """What the check found: ``passed`` lines (what held) and ``problems`` (what is off)."""

    assignment: str
    submissions: int = 0
    seconds: float = 0.0
    passed: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)   # values the judge could not send, in words

    @property
    def ok(self) -> bool:
        return not (self.problems or self.refusals)


@dataclass
class _Graded:
    """One scratch submission's outcome: per test cell (score, max, what it printed), flags, problems."""

    cells: dict[str, tuple[float, float, str]] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def scratch_config(root: Path, scratch: Path, config: Config | None = None) -> Config:
    """The configuration ``grade`` would run with for this course, moved to ``scratch``: its own
    gradebook, and every folder inside it (an absolute one in the configuration included)."""
    from nbgrader.coursedir import CourseDirectory

    from .config import load_config

    cfg = copy.deepcopy(config) if config is not None else load_config(root)
    defaults = CourseDirectory()
    for name in DIRECTORIES:
        value = cfg.CourseDirectory.get(name, getattr(defaults, name))
        cfg.CourseDirectory[name] = value if not Path(value).is_absolute() else getattr(defaults, name)
    cfg.CourseDirectory.root = str(scratch)
    cfg.CourseDirectory.db_url = f"sqlite:///{scratch / 'gradebook.db'}"
    cfg.GradeOptions.report_directory = "reports"
    return cfg


def check_assignment(root: Path, assignment: str, config: Config | None = None, jobs: int | None = None,
                     pool=None, log: Callable[[str], None] = print) -> Verdict:
    """Grade the assignment's reference, blank release and corpus on a scratch copy of the course
    at ``root`` (``config``: the course's configuration, else loaded as ``grade`` loads it)."""
    from nbgrader.coursedir import CourseDirectory

    from .authoring import check_assignment as build_problems
    from .runner import Grader

    verdict = Verdict(assignment)
    start = time.monotonic()
    cfg = config if config is not None else _course_config(root)
    source_name = CourseDirectory(config=cfg).source_directory
    release_name = CourseDirectory(config=cfg).release_directory
    source = root / source_name / assignment
    if not source.is_dir():
        raise FileNotFoundError(f"no assignment {assignment!r} in {source_name}/")
    verdict.problems += [p.describe() for p in build_problems(source, f"{source_name}/{assignment}")]
    wrong, right = load_corpus(corpus_file(root, assignment)) if corpus_file(root, assignment).is_file() else ([], [])
    with tempfile.TemporaryDirectory(prefix=f"copy-that-check-{assignment}-") as tmp:
        scratch = Path(tmp) / "course"
        (scratch / source_name).mkdir(parents=True)
        if (root / "nbgrader_config.py").is_file():
            shutil.copy2(root / "nbgrader_config.py", scratch / "nbgrader_config.py")
        shutil.copytree(source, scratch / source_name / assignment,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        scfg = scratch_config(root, scratch, cfg)
        subs = {"reference": {}, "blank": None}
        for kind, items in (("wrong", wrong), ("right", right)):
            for i, a in enumerate(items):
                subs[_student(kind, i, a)] = {a.cell: a.source}
        grader = Grader(scratch, assignment, students=sorted(subs), jobs=jobs, pool=pool, config=scfg, log=log)
        grader.add_assignment(f"{assignment}: grading its reference, blank release and "
                              f"{len(wrong) + len(right)} corpus answers on a scratch copy of the course")
        released = {p.stem: nbformat.read(p, as_version=4) for p in notebooks(scratch / release_name / assignment)}
        reference = {}
        for path in notebooks(source):
            reference.update(solution_sources(nbformat.read(path, as_version=4)))
        for student, answers in subs.items():
            folder = scratch / "submitted" / student / assignment
            folder.mkdir(parents=True)
            for name, nb in released.items():
                if answers is not None:
                    mine = {gid: src for gid, src in {**reference, **answers}.items()
                            if any(role(c).grade_id == gid and role(c).solution for c in nb.cells)}
                    nb = fill_answers(nb, mine)
                nbformat.write(nb, folder / f"{name}.ipynb")
        results = {r.student: r for r in grader.run()}
        graded = {s: _read(scratch, scfg, assignment, s, results.get(s)) for s in subs}
        stale = _stale_release(root / release_name / assignment, scratch / release_name / assignment)
    if stale:
        verdict.problems.append(f"{release_name}/{assignment} is not what {source_name}/ makes ({', '.join(stale)}): "
                                f"learners have an older release; run `python -m autograder build --only {assignment}`")
    tests = {gid for nb in released.values() for gid in (role(c).grade_id for c in nb.cells if role(c).is_test)}
    _judge_verdicts(verdict, graded, tests, released, wrong, right, source_name, assignment)
    verdict.submissions, verdict.seconds = len(subs), time.monotonic() - start
    return verdict


def _course_config(root: Path) -> Config:
    from .config import load_config

    return load_config(root)


def _student(kind: str, index: int, answer: Answer) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", f"{kind}_{index:02d}_{answer.cell}")


def _read(scratch: Path, cfg: Config, assignment: str, student: str, result) -> _Graded:
    """The gradebook's scores and the autograded notebooks' outputs of one scratch submission."""
    from nbgrader.api import Gradebook, MissingEntry

    out = _Graded(flags=list(result.flags) if result else [],
                  problems=list(result.problems) if result else ["it was not graded"])
    folder = scratch / "autograded" / student / assignment
    with Gradebook(cfg.CourseDirectory.db_url) as gb:
        for path in sorted(folder.glob("*.ipynb")):
            nb = nbformat.read(path, as_version=4)
            try:
                grades = {g.name: g for g in gb.find_submission_notebook(path.stem, assignment, student).grades}
            except MissingEntry:
                continue
            for cell in nb.cells:
                gid = role(cell).grade_id
                if role(cell).is_test and gid in grades:
                    g = grades[gid]
                    out.cells[gid] = (float(g.auto_score or 0), float(g.max_score), _printed(cell))
    return out


def _printed(cell) -> str:
    parts = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            parts.append(o.get("text", ""))
        elif o.get("output_type") == "error":
            parts.append(f"{o.get('ename')}: {o.get('evalue')}")
    return "\n".join(parts)


def _stale_release(committed: Path, generated: Path) -> list[str]:
    from ..course.build import compare

    report = compare(generated, committed)
    return [*report.stale, *(f"{p} missing" for p in report.missing), *(f"{p} not generated" for p in report.extra)]


def _judge_verdicts(verdict: Verdict, graded: dict[str, _Graded], tests: set[str], released: dict,
                    wrong: list[Answer], right: list[Answer], source_name: str, assignment: str) -> None:
    where = {role(c).grade_id: f"{source_name}/{assignment}/{name}.ipynb" for name, nb in released.items()
             for c in nb.cells if role(c).grade_id}
    ref = graded["reference"]
    lost = {gid: v for gid, v in ref.cells.items() if v[0] < v[1]}
    missing = tests - set(ref.cells)
    if lost or missing or ref.flags or ref.problems:
        for gid, (score, top, printed) in sorted(lost.items()):
            refused = _refusal(printed)
            if refused:
                verdict.refusals.append(f"{where.get(gid, '?')}, cell {gid}: {refused}")
            else:
                verdict.problems.append(f"the reference solution loses points in {gid} ({score:g}/{top:g}): "
                                        f"{_short(printed)}")
        verdict.problems += [f"the reference solution: {gid} was not graded" for gid in sorted(missing)]
        verdict.problems += [f"the reference solution is flagged: {f}" for f in ref.flags]
        verdict.problems += [f"the reference solution: {p}" for p in ref.problems]
    else:
        total = sum(v[1] for v in ref.cells.values())
        verdict.passed.append(f"reference solution: full marks ({total:g}/{total:g}), no flag")
    blank = {gid: v for gid, v in graded["blank"].cells.items() if v[0] > 0}
    if blank:
        verdict.problems += [f"the blank release scores {v[0]:g}/{v[1]:g} in {gid}: the test passes without the "
                             f"learner's code" for gid, v in sorted(blank.items())]
    else:
        verdict.passed.append("blank release: zero")
    nbs = list(released.values())
    ok_wrong = ok_right = 0
    for i, a in enumerate(wrong):
        g = graded[_student("wrong", i, a)]
        own = set().union(*(cells_testing(nb, a.cell) for nb in nbs))
        label = f"wrong answer {a.why!r} ({a.cell})"
        failing = {gid for gid in own if gid in g.cells and g.cells[gid][0] < g.cells[gid][1]}
        shown = "\n".join(g.cells[gid][2] for gid in sorted(failing))
        elsewhere = {gid for gid in tests - own if gid in g.cells and gid in ref.cells
                     and g.cells[gid][0] != ref.cells[gid][0]}
        if not own:
            verdict.problems.append(f"{label}: no test cell is named test_{a.cell}")
        elif not failing:
            verdict.problems.append(f"{label} gets full marks on {', '.join(sorted(own))}")
        elif a.message and a.message not in shown:
            verdict.problems.append(f"{label} loses points, but its tests do not say {a.message!r}: {_short(shown)}")
        elif elsewhere:
            verdict.problems.append(f"{label} changes the score of other exercises: {', '.join(sorted(elsewhere))}")
        else:
            ok_wrong += 1
    for i, a in enumerate(right):
        g = graded[_student("right", i, a)]
        missed = {gid: v for gid, v in g.cells.items() if v[0] < v[1]}
        if missed or g.flags:
            what = "; ".join(f"{gid}: {_short(v[2])}" for gid, v in sorted(missed.items())) or f"flagged: {g.flags}"
            verdict.problems.append(f"right answer {a.why!r} ({a.cell}) loses points: {what}")
        else:
            ok_right += 1
    if wrong:
        verdict.passed.append(f"{ok_wrong}/{len(wrong)} wrong answers lose points with their message")
    if right:
        verdict.passed.append(f"{ok_right}/{len(right)} right answers get full marks")
    if not wrong and not right:
        verdict.passed.append(f"no answer corpus (tests/answers/{assignment}.py): only the reference and the blank "
                              f"release were graded")


REFUSED = re.compile(r"the judge cannot send (?:an? )?(?:the attribute (?P<attr>'[^']*') of an? )?(?P<what>[\w.]+)")


def _refusal(printed: str) -> str | None:
    """A value the judge refused to send, said in words with the fix; None when the cell failed
    for another reason."""
    if "JudgeError" not in printed:
        return None
    line = next((ln for ln in printed.splitlines() if ln.startswith("JudgeError")), printed)
    m = REFUSED.search(line)
    if m is None:
        return (f"the judge could not run the test with the reference solution ({_short(line)}): a correct "
                f"answer would lose these points. Fix: change what the test hands the learner's function, or "
                f"see docs/authoring.md, 'What a test can hand to a learner's function'")
    what = m.group("what")
    value = f"the attribute {m.group('attr')} of a {what}" if m.group("attr") else f"a {what}"
    said = _short(line.partition(":")[2])
    return (f"the test hands the learner's function {value}, and the judge cannot send it to the learner's "
            f"kernel (the judge says: {said}): the judge sends values by kind (tensors, containers, the torch.nn modules and optimizers it "
            f"knows, the course's fixtures) and {what} is not one of them, so every correct answer would lose "
            f"these points. Fix: if {what} is a class of the course, define it in the assignment's fixtures.py "
            f"(beside the notebook in the source folder) and import it from there; otherwise hand over a value of "
            f"a kind the judge sends, or add a kind (docs/authoring.md, 'Adding a value kind')")


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text[:limit] + ("…" if len(text) > limit else "")
