"""What the commands write by default stays out of the project's own checks (issue #46, item 6)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WRITTEN = [  # each command's default output, as its --help says
    "kiln-runs/r-3f9c0a1b2c3d4e5f/row_softmax/best.py",  # kiln optimize (make demo)
    "kiln-models/GPT2LMHeadModel/tasks/region_00_mm.py",  # kiln model
    "kiln-bench/runs/r-1/run.json",  # kiln bench
    "kiln-ablate/runs.jsonl",  # kiln ablate
    "kiln-report-r-1.html",  # kiln report
]


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_the_commands_default_outputs_are_ignored_so_ruff_and_git_never_read_them():
    # ruff reads .gitignore (respect-gitignore): `make demo` then `make lint` once failed on the demo's best.py.
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", *WRITTEN], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.stdout.split() == WRITTEN
