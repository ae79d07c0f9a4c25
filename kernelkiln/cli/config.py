"""``kiln config show``: the effective configuration, every field once, with where its value came from."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import typer
from pydantic_core import to_jsonable_python

from kernelkiln.cli.options import CONFIG_OPTION, SET_CONFIG_OPTION
from kernelkiln.cli.settings import load_settings, walk, with_endpoint_window

config_app = typer.Typer(
    help="The configuration `kiln optimize`, `bench` and `ablate` run with: defaults, a TOML file (--config), flags.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add the ``config`` sub-command group to ``app``."""
    app.add_typer(config_app, name="config")


# The docstring's \\[ escapes: rich would read [guard] as markup and drop it from the help.
@config_app.command("show")
def show(
    config_file: Path = CONFIG_OPTION,
    set_config: list[str] = SET_CONFIG_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list of {field, value, source, description}."),
) -> None:
    """Print every field of the configuration once: its dotted path, value, source and description.

    The source is default, file (--config), flag (--set-config) or endpoint (the model's
    context window, read from a vLLM or Ollama server when not set). Any field can be
    set in the file: `budget = 60` at the top, `threads = 4` under `\\[guard]`,
    `pool_size = 40` under `\\[memory.retrieval]`.
    """
    settings = with_endpoint_window(load_settings(config_file, {}, set_config))
    rows = [
        {
            "field": path,
            "value": to_jsonable_python(value),
            "source": settings.source(path),
            "description": " ".join((info.description or "").split()),
        }
        for path, info, value in walk(settings.config)
    ]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    for row in rows:
        print(f"{row['field']} = {json.dumps(row['value'])}  ({row['source']})")
        print(textwrap.fill(row["description"], width=100, initial_indent="    ", subsequent_indent="    "))
