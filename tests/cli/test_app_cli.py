"""The `kiln` entry point itself."""

from __future__ import annotations

import subprocess
import sys


def test_registering_every_command_does_not_load_torch():
    # `kiln --help` and usage errors must not wait seconds for torch to import.
    code = "import sys, kernelkiln.cli.app as app; app._register(); print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
