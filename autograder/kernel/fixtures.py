"""Small models that test cells use, in a module that the kernel and the judge both import.

A test judged outside the kernel (``autograder.grading.judge``) sends a model to the learner's
function by value: its class by name, from a fixed list, and its state.  A model class defined in
a notebook cell exists in one process only, so the course's test models live here, where both
sides find the same code.  Standard library and torch only.
"""
from __future__ import annotations

import torch
import torch.nn as nn


class Recorder(nn.Module):
    """A small model for the tests: Linear then Dropout(0.5).

    Every forward pass appends (torch.is_grad_enabled(), self.training) to self.calls,
    so the tests can see the conditions it ran under.
    """

    def __init__(self, n_in=3, n_out=1):
        super().__init__()
        self.lin = nn.Linear(n_in, n_out)
        self.drop = nn.Dropout(0.5)
        self.calls = []

    def forward(self, x):
        self.calls.append((torch.is_grad_enabled(), self.training))
        return self.drop(self.lin(x))


# the classes a judged test may send by value, besides torch.nn's own
MODELS = (Recorder,)
