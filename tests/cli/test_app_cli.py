"""The `kiln` entry point itself."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def test_registering_every_command_does_not_load_torch():
    # `kiln --help` and usage errors must not wait seconds for torch to import.
    code = "import sys, kernelkiln.cli.app as app; app.register_commands(); print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_help_prose_is_reflowed_but_blocks_marked_b_keep_their_lines():
    from kernelkiln.cli.app import reflow

    text = "First line\nstill first.\n\nA paragraph broken\nat 95 columns.\n\n\b\nExamples:\n  kiln a\n  kiln b"
    assert reflow(text).split("\n\n") == [
        "First line still first.",
        "A paragraph broken at 95 columns.",
        "\b\nExamples:\n  kiln a\n  kiln b",
    ]


def test_every_command_help_is_reflowed_when_registered():
    code = (
        "import kernelkiln.cli.app as app; app.register_commands(); "
        "info = next(c for c in app.app.registered_commands if c.name == 'ablate'); "
        "print(repr(info.help.split(chr(10) + chr(10))[2]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "\\n" not in done.stdout and "best-of-N" in done.stdout


def _blocks_kept_as_typed() -> dict[str, list[str]]:
    """Each command's lines that typer prints as typed (its ``\\b`` blocks), by command name."""
    code = (
        "import json, kernelkiln.cli.app as app; app.register_commands(); "
        "apps = [app.app, *(g.typer_instance for g in app.app.registered_groups)]; "
        "print(json.dumps({c.name: [line for p in (c.help or '').split(chr(10) * 2) if p.startswith(chr(8)) "
        "for line in p.split(chr(10))[1:]] for a in apps for c in a.registered_commands}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_every_block_kept_as_typed_fits_a_100_column_terminal_and_its_lists_an_80_column_one():
    # rich pads the help a column each side, and a block's line too long for the terminal wraps to its left edge.
    blocks = _blocks_kept_as_typed()
    assert blocks["optimize"] and blocks["ablate"] and blocks["bench"]
    too_wide = [
        (name, line)
        for name, lines in blocks.items()
        for line in lines
        if len(line) > 98 or (len(line) > 78 and not line.lstrip().startswith("kiln "))
    ]
    assert too_wide == []


@pytest.mark.parametrize(
    ("command", "words"), [(("optimize", "--help"), "kernelkiln[ray]"), (("config", "show", "--help"), "`[guard]`")]
)
def test_help_keeps_square_brackets_rich_would_read_as_markup(command, words):
    done = subprocess.run(
        [sys.executable, "-m", "kernelkiln", *command], capture_output=True, text=True, check=True, timeout=60
    )
    assert words in done.stdout
