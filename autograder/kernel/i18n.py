"""The learner's language: English (the source) or Chinese, and the catalog of Chinese messages.

Runs inside learners' kernels and in the learner's tools: the standard library only.
"""
from __future__ import annotations

LANGS = ("en", "zh")
DEFAULT = "en"
LANG_ENV = "COPY_THAT_LANG"     # the learner's choice, over the notebook's own language
META = "copy_that"              # notebook metadata {"copy_that": {"lang": "zh"}}: the notebook's language
LANG_KEY = "lang"


def notebook_lang(nb: dict) -> str:
    """The language a notebook says it is written in (``metadata.copy_that.lang``); English if none."""
    meta = nb.get("metadata", {}) if isinstance(nb, dict) else {}
    value = (meta.get(META) or {}).get(LANG_KEY) if isinstance(meta.get(META), dict) else None
    return value if value in LANGS else DEFAULT
