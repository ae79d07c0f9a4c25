"""Running `kiln` as a user does, for CLI tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import typer


def kiln(*args: str, cwd: Path | str | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m kernelkiln ARGS`` in a subprocess; its exit code, stdout and stderr as text."""
    return subprocess.run(
        [sys.executable, "-m", "kernelkiln", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        check=False,
    )


def interrupt_at(args: list[str], line_prefix: str, timeout: float = 120, sig: int | None = None) -> tuple[int, str]:
    """Run ``kiln ARGS``, press Ctrl-C (SIGINT to its process group) once stderr shows a line starting with
    ``line_prefix`` — or send ``sig`` to the kiln process alone, as ``kill PID`` does; its exit code and all
    it wrote to stderr.

    The child starts with SIGINT at its default, as a terminal's foreground job does: a test runner started in
    the background of a non-interactive shell (as CI may be) ignores SIGINT, an ignored signal is inherited
    across exec, and Python whose SIGINT is ignored at start-up never raises KeyboardInterrupt."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernelkiln", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_sigint_default,
    )
    assert proc.stderr is not None  # stderr=PIPE
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.startswith(line_prefix):
            if sig is None:
                os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
            else:
                os.kill(proc.pid, sig)
            break
    return proc.wait(timeout=timeout), "".join(seen) + proc.communicate(timeout=timeout)[1]


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def command_app(register: Callable[[typer.Typer], object]) -> typer.Typer:
    """A typer app holding one command module's commands (``register(app)``), for in-process CLI tests."""
    app = typer.Typer()

    @app.callback()
    def _root() -> None:  # a callback keeps typer from flattening a lone command into the app itself
        pass

    register(app)
    return app
