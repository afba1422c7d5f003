"""``python -m autograder zh sync | check | stamp``: the Chinese edition's commands (parse, call, print)."""
from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

SHOWN_IDS = 12


def add_commands(sub, instructor) -> None:
    """The ``zh`` command and its three subcommands, on the main parser's ``sub``."""
    p = instructor("zh", help="the Chinese edition (zh/): sync it with English, check parity, stamp translations",
                   description="The Chinese edition lives in zh/ (zh/course, zh/solutions, zh/exercises): the same "
                               "cells, code, outputs and grading as English, its prose translated.")
    zh = p.add_subparsers(dest="zh_command", required=True)
    s = zh.add_parser("sync", help="copy code, outputs and metadata from English into the Chinese notebooks, keep "
                                   "their translations, add new cells untranslated; list what is left to translate")
    s.add_argument("notebook", nargs="*", help="notebooks of either edition (default: all)")
    s.add_argument("--prune", action="store_true", help="remove Chinese notebooks whose English one is gone")
    s.set_defaults(func=cmd_sync)
    c = zh.add_parser("check", help="the parity gate: fails on any difference but translated prose, on an "
                                    "untranslated or stale cell, on a message without its Chinese form")
    c.add_argument("notebook", nargs="*", help="notebooks of either edition (default: all, and the message catalog)")
    c.add_argument("--all-ids", action="store_true", help="list every cell id, not the first few per notebook")
    c.set_defaults(func=cmd_check)
    t = zh.add_parser("stamp", help="record which English text a translated cell was translated from")
    t.add_argument("notebook", help="a Chinese notebook (or its English one)")
    t.add_argument("--cell", action="append", metavar="ID",
                   help="stamp this cell (repeatable); default: every cell translated and not yet stamped")
    t.set_defaults(func=cmd_stamp)


def _root():
    from .course.layout import find_root

    return find_root()


def cmd_sync(args: argparse.Namespace) -> int:
    from .course.translation import sync_course

    root = _root()
    try:
        notes = sync_course(root, [Path(p) for p in args.notebook] or None, prune=args.prune)
    except ValueError as exc:
        print(exc)
        return 2
    if not args.notebook:
        _sync_catalog(root)
    left = 0
    for path, n in notes.items():
        did = []
        if n.created:
            did.append("created")
        if n.added and not n.created:
            did.append(f"{len(n.added)} new cell(s) in English: {_ids(n.added)}")
        if n.removed:
            did.append(f"{len(n.removed)} cell(s) removed: {_ids(n.removed)}")
        if n.reset:
            did.append(f"code changed in English, comments back in English: {_ids(n.reset)}")
        todo = [f"{len(ids)} {what}: {_ids(ids)}" for what, ids in
                (("untranslated", n.untranslated), ("stale", n.stale), ("not stamped", n.unstamped)) if ids]
        left += len(n.untranslated) + len(n.stale) + len(n.unstamped)
        if did or todo or n.changed:
            print(f"{path}: " + "; ".join(did + todo or ["updated"]))
    print(f"{len(notes)} Chinese notebook(s) in step with English; {left} cell(s) to translate or stamp. "
          "Then `python -m autograder build` regenerates zh/exercises/.")
    return 0


def _sync_catalog(root: Path) -> None:
    """The message catalog given every key the package and the assignments use; say what changed."""
    from .course.messages import extract, load_catalog, sync_catalog, write_catalog

    catalog, added, dropped = sync_catalog(extract(root), load_catalog())
    path = write_catalog(catalog)
    for section, key in added:
        print(f"{path.name}: new message ({section}), to translate: {key!r}")
    for key, value in dropped.items():
        print(f"{path.name}: dropped, used nowhere any more: {key!r}" + (f" (was {value!r})" if value else ""))
    untranslated = sum(1 for entries in catalog.values() for v in entries.values() if not v)
    print(f"{path.name}: {sum(map(len, catalog.values()))} messages, {untranslated} untranslated")


def _ids(ids: list[str], limit: int = SHOWN_IDS) -> str:
    shown = ", ".join(str(i) for i in ids[:limit])
    return shown + (f", … (+{len(ids) - limit})" if len(ids) > limit else "")


def cmd_check(args: argparse.Namespace) -> int:
    from .course.parity import TRANSLATION_KINDS, gate

    root = _root()
    only = [Path(p) for p in args.notebook] or None
    try:
        report = gate(root, only)
    except ValueError as exc:
        print(exc)
        return 2
    limit = None if args.all_ids else SHOWN_IDS
    grouped: dict[tuple[str, str], list] = defaultdict(list)
    for p in report.problems:
        if p.kind in TRANSLATION_KINDS:
            grouped[(p.where, p.kind)].append(p)
        else:
            print(p.describe())
    for (where, kind), found in grouped.items():
        ids = [p.cell for p in found]
        print(f"{where}: {len(ids)} {kind} cell(s): {_ids(ids, limit or len(ids))}\n  {found[0].text}")
    done = f"{report.translated}/{report.cells} cells translated or needing no translation"
    if report.ok:
        print(f"the Chinese edition matches the English one: {done}")
        return 0
    structural = len([p for p in report.problems if p.kind not in TRANSLATION_KINDS])
    print(f"{len(report.problems)} problem(s), {structural} of them differences between the editions; {done}")
    return 1


def cmd_stamp(args: argparse.Namespace) -> int:
    from .course.translation import stamp_file

    root = _root()
    try:
        done = stamp_file(root, Path(args.notebook), args.cell)
    except (ValueError, KeyError) as exc:
        print(str(exc).strip("'\""))
        return 2
    print(f"stamped {len(done)} cell(s)" + (f": {_ids(done)}" if done else
                                            " (none translated and unstamped; name stale cells with --cell ID)"))
    return 0
