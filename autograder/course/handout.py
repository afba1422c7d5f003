"""``make handout``: the folder (and zip) a student gets: lectures, exercises, the helper package
and a student README; no ``solutions/``, no hidden tests, no answer corpora.  The Chinese edition
comes along in ``zh/`` (its lectures and its exercises) where the course has one.

The exercises are generated afresh from ``solutions/`` with nbgrader (as ``autograder build``
does), so the handout never carries a stale or half-edited release; then every notebook of the
handout is checked for leaks before the zip is written.
"""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .build import editions, generate_into
from ..learner.cells import RELEASE_DIR, role
from ..learner.editions import ZH_DIR, edition_dir
from .layout import LECTURE_DIR, SOURCE_DIR, region_lines

NAME = "copy-that"
# What a student needs to run the lectures and check the exercises, relative to the course root.
FILES = ["nbgrader_config.py", "pyproject.toml", "requirements.txt", "environment.yml"]
PACKAGE = "autograder"
# The part of the package a student runs: the command line, what runs inside kernels, and the
# learner's tools.  The instructor's side (course/, grading/) stays out.
PACKAGE_PARTS = ["__init__.py", "__main__.py", "cli.py", "kernel", "learner"]
# Never in a handout, at any depth.
FORBIDDEN = {SOURCE_DIR, "tests", "gradebook.db", "submitted", "autograded", "feedback", "release", "source", "grading"}
HIDDEN_MARKERS = ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "BEGIN SOLUTION", "END SOLUTION")
IGNORE = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", "*.pyc", ".DS_Store")


class HandoutError(RuntimeError):
    """The handout would give away solutions or hidden tests."""


@dataclass
class Handout:
    folder: Path
    zip: Path | None


def _secret_lines(source_nb: nbformat.NotebookNode) -> set[str]:
    """Lines only the instructor may see: solution and hidden-test regions, model answers."""
    secrets = region_lines(source_nb)
    for cell in source_nb.cells:
        if role(cell).is_manual and cell.cell_type == "markdown":  # the model answer of a written question
            secrets.add(cell.source.strip())
    return secrets


def leaks(folder: Path, root: Path) -> list[str]:
    """What in the handout ``folder`` would give answers away (empty when nothing does)."""
    found = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if FORBIDDEN & set(rel.parts):
            found.append(f"{rel}: not for students")
    for nb_path in sorted(folder.rglob("*.ipynb")):
        text = nb_path.read_text(encoding="utf-8")
        rel = nb_path.relative_to(folder)
        found += [f"{rel}: contains {m!r}" for m in HIDDEN_MARKERS if m in text]
        edition = (ZH_DIR,) if rel.parts[0] == ZH_DIR else ()
        parts = rel.parts[len(edition):]
        if not parts or parts[0] != RELEASE_DIR:  # lectures teach in the open: only exercises can leak answers
            continue
        source = root.joinpath(*edition, SOURCE_DIR, *parts[1:])  # the instructor's version of this notebook
        if not source.is_file():
            continue
        secrets = _secret_lines(nbformat.read(source, as_version=4))
        nb = nbformat.read(nb_path, as_version=4)
        shown = {line.strip() for c in nb.cells for line in c.source.splitlines()}
        shown |= {c.source.strip() for c in nb.cells}
        leaked = sorted(shown & secrets)
        if leaked:
            found.append(f"{rel}: shows solution or hidden-test code, e.g. {leaked[0][:60]!r}")
    return found


def student_readme(root: Path, release: Path | None = None) -> str:
    """The README.md of the handout: setup, the lectures and exercises in order, how to check."""
    from .site import title_and_blurb, pages

    lectures = "\n".join(f"{i}. `course/{p.notebook.name}`: {p.title}" for i, p in enumerate(pages(root), 1))
    release = release or root / RELEASE_DIR
    items = []
    for nb_path in sorted(release.glob("*/*.ipynb")):
        title, _ = title_and_blurb(nbformat.read(nb_path, as_version=4), nb_path.stem)
        items.append(f"- `{RELEASE_DIR}/{nb_path.parent.name}/{nb_path.name}`: {title}")
    exercises = "\n".join(items)
    return f"""# Copy That: what PyTorch copies, and what it does not

A hands-on course in JupyterLab: names and views, `clone()`, `detach()`, the grad modes,
`copy_()`, `deepcopy` and `state_dict`, autograd graphs, copies between devices. Read a lecture,
predict each answer before you run the cell, then do its exercise and check it yourself.

## Set up (once)

With Python 3.11 (the course pins exact versions, so you see what the grader sees):

```bash
python3.11 -m venv .venv
.venv/bin/pip install -r requirements.txt
.venv/bin/pip install --no-deps -e .
.venv/bin/copy-that doctor      # versions, Graphviz, GPU: says what to fix
```

or with conda: `conda env create -f environment.yml && conda activate copy-that`.
Pictures need Graphviz's `dot` (Debian/Ubuntu: `sudo apt-get install graphviz`, macOS:
`brew install graphviz`); without it the diagrams are drawn as text.

## Work

```bash
.venv/bin/copy-that lab --browser
```

It opens `course/00_start_here.ipynb`; its terminals (File → New → Terminal) run `copy-that`.

Lectures, in order:

{lectures}

Exercises (write the body of each function; the visible tests print ✓ lines):

{exercises}

## Check your work

In a JupyterLab terminal (File → New → Terminal; in another shell, write `.venv/bin/copy-that`):

```bash
copy-that check exercises/a1_views/a1_views.ipynb           # one exercise
copy-that check exercises/a1_views/a1_views.ipynb --watch   # again on every save, with hints
copy-that progress                                          # every exercise in one table
```

`check` reads the notebook as saved on disk: save in JupyterLab first (Ctrl-S). Typed inside an
exercise's folder, `copy-that check` alone checks the notebook there.

Only the visible tests run here. Hidden tests (other dtypes, non-contiguous views, the traps the
lectures warn about) and the written answers count when your instructor grades the assignment,
so a ✓ everywhere is a good sign, not the final grade. Submit the way your instructor tells you
(on JupyterHub: the Assignments tab).
""" + (CHINESE_SECTION if (root / ZH_DIR / LECTURE_DIR).is_dir() else "")


CHINESE_SECTION = """
## 中文版

`zh/` 是本课程的中文版（讲义在 `zh/course/`，练习在 `zh/exercises/`），单元格、代码和评分都与英文版相同。
用 `.venv/bin/copy-that lab --lang zh --browser` 打开它；在中文笔记本上，`check`、`progress` 和 `--watch`
会自动用中文输出（`--lang en` 可改回英文）。
"""


def make_handout(root: Path, out: Path, make_zip: bool = True) -> Handout:
    """Write ``out/copy-that/`` (and ``out/copy-that.zip``) from the course at ``root``.

    Raises :class:`HandoutError`, and leaves nothing behind, when anything would leak.
    """
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="copy-that-handout-", dir=out) as tmp:
        stage = Path(tmp) / NAME
        stage.mkdir()
        for edition in editions(root) if (root / SOURCE_DIR).is_dir() else ["en"]:
            sub = edition_dir(edition)
            here, there = (root / sub, stage / sub) if sub else (root, stage)
            shutil.copytree(here / LECTURE_DIR, there / LECTURE_DIR, ignore=IGNORE)
            if (here / SOURCE_DIR).is_dir():
                generate_into(root, there / RELEASE_DIR, edition=edition)
            else:  # a course without instructor sources: hand out the release as it is
                shutil.copytree(here / RELEASE_DIR, there / RELEASE_DIR, ignore=IGNORE)
        package = Path(__file__).resolve().parent.parent
        (stage / PACKAGE).mkdir()
        for part in PACKAGE_PARTS:
            if (package / part).is_dir():
                shutil.copytree(package / part, stage / PACKAGE / part, ignore=IGNORE)
            else:
                shutil.copy2(package / part, stage / PACKAGE / part)
        for name in FILES:
            if (root / name).is_file():
                shutil.copy2(root / name, stage / name)
        (stage / "README.md").write_text(student_readme(root, stage / RELEASE_DIR), encoding="utf-8")
        problems = leaks(stage, root)
        if problems:
            raise HandoutError("the handout would give answers away:\n  " + "\n  ".join(problems))
        folder = out / NAME
        if folder.exists():
            shutil.rmtree(folder)
        stage.rename(folder)
    archive = None
    if make_zip:
        archive = Path(shutil.make_archive(str(out / NAME), "zip", root_dir=out, base_dir=NAME))
    return Handout(folder, archive)
