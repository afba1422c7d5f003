"""Code that runs inside a kernel, next to the learner's code: the test helpers, the diagrams and
the grader's guard.

Everything here imports torch, the drawing libraries and the standard library only, never the
rest of the package: a test cell stays instant, and nothing of the grading side is loaded into
a kernel.  Whatever it reports could be forged by the code beside it.
"""
