"""Copy That: test helpers, diagrams and grading tools for the PyTorch copies course."""

__version__ = "0.1.0"
