"""The `kiln` entry point itself."""

from __future__ import annotations

import subprocess
import sys


def test_registering_every_command_does_not_load_torch():
    # `kiln --help` and usage errors must not wait seconds for torch to import.
    code = "import sys, kernelkiln.cli.app as app; app._register(); print('torch' in sys.modules)"
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
        "import kernelkiln.cli.app as app; app._register(); "
        "info = next(c for c in app.app.registered_commands if c.name == 'ablate'); "
        "print(repr(info.help.split(chr(10) + chr(10))[2]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "\\n" not in done.stdout and "best-of-N" in done.stdout
