"""``kiln tasks``: the bundled suites and their task files."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from kernelkiln.task import bundled_suites, load_suite


def list_tasks(suite: str | None) -> list[dict]:
    """Bundled tasks (or one suite's) as plain records."""
    suites = [load_suite(suite)] if suite else list(bundled_suites().values())
    rows = []
    for s in suites:
        for path in s.task_paths():
            rows.append({"name": path.stem, "suite": s.name, "path": str(path)})
    return rows


def register(app: typer.Typer) -> None:
    @app.command("tasks")
    def tasks(
        suite: str = typer.Argument(
            None, help="A bundled suite name or a folder of task files (default: all bundled)."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print a JSON list of {name, suite, path}."),
    ) -> None:
        """List tasks: name, suite and the file to pass to `kiln eval`."""
        rows = list_tasks(suite)
        if as_json:
            print(json.dumps(rows, indent=2))
            return
        table = Table("task", "suite", "path")
        for row in rows:
            table.add_row(row["name"], row["suite"], row["path"])
        Console().print(table)
