"""Tiny task files for tests (data, not imported)."""

from pathlib import Path

TASKS = Path(__file__).resolve().parent
