"""Running `kiln` as a user does, for CLI tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def kiln(*args: str, cwd: Path | str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m kernelkiln ARGS`` in a subprocess; its exit code, stdout and stderr as text."""
    return subprocess.run([sys.executable, "-m", "kernelkiln", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, check=False)
