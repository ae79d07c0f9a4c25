"""A command's result on stdout: tables on a console wide enough to read, or JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rich.console import Console


def wide_console() -> Console:
    """stdout console; piped output gets 120 columns instead of rich's 80 so tables stay readable."""
    console = Console()
    return console if console.is_terminal else Console(width=120)


def print_result(result: dict, as_json: bool, table, written: Path) -> None:
    """The result as JSON on stdout, or as ``table`` draws it with the written file's path on stderr."""
    if as_json:
        print(json.dumps(result, indent=2))
        return
    table(result, wide_console())
    print(f"{written.name}: {written}", file=sys.stderr)
