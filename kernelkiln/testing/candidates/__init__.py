"""Correct candidates for the tiny test tasks (data, not imported)."""

from pathlib import Path

CANDIDATES = Path(__file__).resolve().parent
