"""The documentation's generated pages (scripts/docs_pages.py) are what the code and the figures make."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_reference_and_results_pages_are_in_step_with_the_code_and_the_figures():
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "docs_pages.py"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_command_option_is_in_the_cli_reference():
    import typer

    from kernelkiln.cli import app

    app.register_commands()
    page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    root = typer.main.get_command(app.app)
    groups = [root, *(c for c in root.commands.values() if hasattr(c, "commands"))]
    commands = [c for g in groups for c in g.commands.values() if not hasattr(c, "commands")]
    flags = {f for c in commands for p in c.params if p.param_type_name == "option" and not p.hidden for f in p.opts}
    assert len(commands) >= 20 and flags and all(f"`{f}`" in page for f in flags)
