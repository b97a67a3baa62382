"""Paths the tests share, computed once from this file so a test's own depth in tests/ does not matter."""
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
FIXTURES = TESTS / "fixtures"
EXPERIMENTS = REPO / "experiments"
