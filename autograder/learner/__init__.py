"""Tools that run on the learner's machine with the learner's rights: run one notebook and score
its visible tests (``check``), watch it, the progress table, the environment check.

Shipped in the handout together with ``kernel/``; imports nothing of ``course/`` or ``grading/``.
"""
