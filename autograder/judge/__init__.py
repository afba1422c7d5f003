"""The judge: hidden tests run outside the learner's kernel, the learner's functions called in it
with their arguments and answers by value.

- ``Judge`` (judge.py): the grader's end, ``Judge(rpc, fixtures).run_cell(source) -> outputs``;
- ``agent`` (agent.py): the kernel's end, imported there before any learner code;
- ``kinds/``: one module per kind of value, both ends, in one registry;
- ``wire`` (the operations, value codes and sections), ``allow`` (every allow-list and cap).

The kernel imports ``autograder.judge.agent``: this package's ``__init__`` loads the judge's end
only when ``Judge`` is asked for.  Nothing here imports ``autograder.grading``.
"""
from __future__ import annotations

from .wire import AGENT, MAX_REPLY, JudgeError

__all__ = ["AGENT", "MAX_REPLY", "Judge", "JudgeError"]


def __getattr__(name: str):
    if name == "Judge":
        from .judge import Judge

        return Judge
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
