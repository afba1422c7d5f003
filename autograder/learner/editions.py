"""The course's editions: the English one at the course root and the Chinese one in ``zh/``.

Each edition is a whole course tree of its own, laid out alike: ``course/`` (lectures),
``solutions/`` (the instructor's notebooks) and ``exercises/`` (the release).  So every tool that
finds things relative to a course folder (``check`` and ``--full``, ``progress``, the next steps,
the kernel's "read again" links, links between notebooks) works in ``zh/`` as it does at the root,
and no folder of one edition is ever listed among the other's assignments.  The cells, code,
outputs, grade ids and points are the same in both (the parity gate, ``python -m autograder zh
check``); only the prose differs.

nbgrader grades either edition with the one gradebook: ``COPY_THAT_EDITION=zh`` makes the course's
``nbgrader_config.py`` read ``zh/solutions`` and release into ``zh/exercises`` (:func:`nbgrader_folders`).
"""
from __future__ import annotations

import os
from pathlib import Path

from .cells import LECTURE_DIR, RELEASE_DIR, SOURCE_DIR

EDITIONS = ("en", "zh")
SOURCE_EDITION = "en"              # English is the source of code and outputs
EDITION_ENV = "COPY_THAT_EDITION"  # which edition nbgrader (plain or through `grade`) works on
ZH_DIR = "zh"                      # the Chinese edition's tree, relative to the course root


def edition_dir(edition: str) -> str:
    """The edition's tree relative to the course root: ``""`` for English, ``"zh"`` for Chinese."""
    if edition not in EDITIONS:
        raise ValueError(f"unknown edition {edition!r}: the course has {', '.join(EDITIONS)}")
    return "" if edition == SOURCE_EDITION else ZH_DIR


def edition_root(root: Path, edition: str) -> Path:
    """The folder that holds the edition's ``course/``, ``solutions/`` and ``exercises/``."""
    sub = edition_dir(edition)
    return root / sub if sub else root


def folder(edition: str, kind: str) -> str:
    """One of the edition's folders relative to the course root (``"zh/solutions"``); ``kind`` is
    ``"source"``, ``"release"`` or ``"lectures"``."""
    name = {"source": SOURCE_DIR, "release": RELEASE_DIR, "lectures": LECTURE_DIR}[kind]
    sub = edition_dir(edition)
    return f"{sub}/{name}" if sub else name


def selected_edition(environ: dict | None = None) -> str:
    """The edition named by ``$COPY_THAT_EDITION`` (English when unset); a ValueError for another name."""
    value = (os.environ if environ is None else environ).get(EDITION_ENV, "").strip() or SOURCE_EDITION
    if value not in EDITIONS:
        raise ValueError(f"{EDITION_ENV}={value!r}: the course's editions are {', '.join(EDITIONS)}")
    return value


def nbgrader_folders(environ: dict | None = None) -> tuple[str, str]:
    """(source_directory, release_directory) for nbgrader, by ``$COPY_THAT_EDITION``."""
    edition = selected_edition(environ)
    return folder(edition, "source"), folder(edition, "release")


def edition_of(path: Path, root: Path) -> str:
    """The edition a file of the course belongs to, from where it lies under ``root``."""
    try:
        first = Path(path).resolve().relative_to(Path(root).resolve()).parts[:1]
    except ValueError:
        return SOURCE_EDITION
    return "zh" if first == (ZH_DIR,) else SOURCE_EDITION
