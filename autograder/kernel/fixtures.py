"""Small models that test cells use, in a module that the kernel and the judge both import.

A test judged outside the kernel (``autograder.judge``) sends a model to the learner's
function by value: its class by module and name (every ``nn.Module`` class defined here goes, as
torch.nn's own do) and its state.  A model class defined in a notebook cell exists in one process
only, so the course's test models live here, where both sides find the same code.  Standard library
and torch only.
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


class TinyNet(nn.Module):
    """Two Linear layers with a ReLU between them (assignment 6's visible test)."""

    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(3, 4)
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x)))


class Block(nn.Module):
    """Linear, BatchNorm1d (buffers that a forward pass in training mode updates), Linear."""

    def __init__(self, width, classes):
        super().__init__()
        self.lin = nn.Linear(width, width)
        self.norm = nn.BatchNorm1d(width)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        return self.head(torch.relu(self.norm(self.lin(x))))


class Tied(nn.Module):
    """An embedding whose weight the output layer shares, and a frozen scale."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(6, 3)
        self.out = nn.Linear(3, 6, bias=False)
        self.out.weight = self.emb.weight
        self.scale = nn.Parameter(torch.ones(3), requires_grad=False)

    def forward(self, i):
        return self.out(self.emb(i) * self.scale)


class MLP(nn.Module):
    """Linear, BatchNorm1d, ReLU, Dropout per layer; a constructor that needs arguments."""

    def __init__(self, sizes, dropout):
        super().__init__()
        layers = []
        for a, b in zip(sizes, sizes[1:]):
            layers += [nn.Linear(a, b), nn.BatchNorm1d(b), nn.ReLU(), nn.Dropout(dropout)]
        self.layers = nn.Sequential(*layers[:-3])

    def forward(self, x):
        return self.layers(x)


class LM(nn.Module):
    """Embedding, LayerNorm, Linear: a tiny language-model head."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(6, 3)
        self.norm = nn.LayerNorm(3)
        self.out = nn.Linear(3, 6, bias=False)

    def forward(self, i):
        return self.out(self.norm(self.emb(i)))


class SnapshotBeforeForward:
    """A forward pre-hook (``module.register_forward_pre_hook(hook)``): before every forward pass of
    the module, a copy of its ``state_dict()`` goes to ``self.trace`` (assignment 9's hidden tests)."""

    def __init__(self):
        self.trace = []

    def __call__(self, module, args):
        self.trace.append({name: t.detach().clone() for name, t in module.state_dict().items()})


# the forward pre-hooks a module sent by value may carry
HOOKS = (SnapshotBeforeForward,)
