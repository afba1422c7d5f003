import sys
from pathlib import Path

# tests/ holds the harness and the answer corpora imported by the test modules.
sys.path.insert(0, str(Path(__file__).resolve().parent))
