"""One preprocessor run on one notebook in a child process, given a time limit.

Cleaning a student's HTML is the one step after the kernel whose cost the student's content sets:
the HTML5 parser under bleach is slow on some markup (a run of mismatched end tags took 90 s for
120 KiB before ``htmlclean.too_costly`` learnt to count them).  The cheap bounds catch the shapes
known to stall; the time limit holds for the ones nobody has found yet.  Past it, the child is
killed and only that student's notebook pays: the caller shows none of its markup and flags it.

The parent hands the child the preprocessor's class and configured traits and the notebook as
JSON on stdin, and reads back the notebook as JSON and the flags it raised; the child is this
project's own code, and what it reads back is validated as a notebook before it is used.
"""
from __future__ import annotations

import json
import pickle
import subprocess
import sys

import nbformat


class Overrun(Exception):
    """The child took longer than its limit, or ended without an answer."""


def run_limited(preprocessor, nb: nbformat.NotebookNode, resources: dict, limit: float,
                flags_key: str, overrides: dict | None = None) -> tuple[nbformat.NotebookNode, list[str]]:
    """``preprocessor`` (a configured instance, with ``overrides`` of its traits) applied to ``nb``
    in a child process; the notebook it returns and the flags it left in ``resources[flags_key]``.
    Raises :class:`Overrun`."""
    cls = type(preprocessor)
    traits = {name: getattr(preprocessor, name) for name in preprocessor.trait_names(config=True)}
    traits.update(overrides or {})
    request = pickle.dumps({"class": f"{cls.__module__}.{cls.__qualname__}", "traits": traits,
                            "nb": nbformat.writes(nb), "resources": resources, "flags_key": flags_key})
    try:
        done = subprocess.run([sys.executable, "-m", __name__], input=request, capture_output=True,
                              timeout=limit)
    except subprocess.TimeoutExpired:
        raise Overrun(f"took over {limit:g} s") from None
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
        raise Overrun(f"ended with exit status {done.returncode} ({tail[0][:200]})")
    try:
        answer = json.loads(done.stdout)
        cleaned = nbformat.reads(answer["nb"], as_version=4)
        flags = [str(f) for f in answer["flags"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise Overrun(f"answered something that is not a notebook ({type(exc).__name__})") from None
    return cleaned, flags


def _child() -> None:
    from traitlets.utils.importstring import import_item

    request = pickle.loads(sys.stdin.buffer.read())
    preprocessor = import_item(request["class"])(**request["traits"])
    nb = nbformat.reads(request["nb"], as_version=4)
    nb, resources = preprocessor(nb, request["resources"])
    json.dump({"nb": nbformat.writes(nb), "flags": list(resources.get(request["flags_key"], []))}, sys.stdout)


if __name__ == "__main__":
    _child()
