"""Entry point of ``kiln``: one typer app, one sub-command module per concept."""

from __future__ import annotations

import inspect
import signal
import sys

import typer

from kernelkiln.errors import UserError

app = typer.Typer(
    name="kiln",
    help="kernelkiln: verified, faster kernels from a PyTorch reference, and a memory of what worked.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_state = {"debug": False}


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show full tracebacks on errors.")) -> None:
    _state["debug"] = debug


def register_commands() -> None:
    """Add every sub-command to ``app`` (once): imported here so `kiln --help` stays fast and each command
    lives in its own module."""
    if app.registered_commands:
        return
    from kernelkiln.cli import ablate as ablate_cmd
    from kernelkiln.cli import bench as bench_cmd
    from kernelkiln.cli import config as config_cmd
    from kernelkiln.cli import eval as eval_cmd
    from kernelkiln.cli import lower as lower_cmd
    from kernelkiln.cli import machine as machine_cmd
    from kernelkiln.cli import measure as measure_cmd
    from kernelkiln.cli import memory as memory_cmd
    from kernelkiln.cli import model as model_cmd
    from kernelkiln.cli import optimize as optimize_cmd
    from kernelkiln.cli import report as report_cmd
    from kernelkiln.cli import tasks as tasks_cmd

    ablate_cmd.register(app)
    bench_cmd.register(app)
    config_cmd.register(app)
    eval_cmd.register(app)
    machine_cmd.register(app)
    measure_cmd.register(app)
    model_cmd.register(app)
    optimize_cmd.register(app)
    report_cmd.register(app)
    lower_cmd.register(app)
    tasks_cmd.register(app)
    memory_cmd.register(app)
    groups = [group.typer_instance for group in app.registered_groups if group.typer_instance is not None]
    for typer_app in [app, *groups]:
        for info in typer_app.registered_commands:
            info.help = reflow(info.help or inspect.getdoc(info.callback) or "")


def reflow(text: str) -> str:
    """Help prose as paragraphs the terminal wraps: typer keeps a paragraph's line breaks (only a
    ``\\b`` block, a list or an example, should keep them), so a narrow terminal showed ragged lines."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(p if p.startswith("\b") else " ".join(p.split("\n")) for p in paragraphs)


def _terminated(signum, frame) -> None:
    raise KeyboardInterrupt  # `kill PID` stops a run as Ctrl-C does: cleanly, with what to do next


def main() -> None:
    """Run ``kiln``; user errors become one line on stderr and exit code 2."""
    signal.signal(signal.SIGTERM, _terminated)
    register_commands()
    try:
        code = app(standalone_mode=False)
    except UserError as exc:
        if _state["debug"]:
            raise
        print(f"kiln: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except typer.Abort:
        print("kiln: aborted", file=sys.stderr)
        sys.exit(130)
    except SystemExit:
        raise
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:  # usage errors: click's, or the click typer vendors (typer >= 0.20 has no click dep)
        show, exit_code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
        if callable(show) and isinstance(exit_code, int):
            show()
            sys.exit(exit_code)
        if _state["debug"]:
            raise
        print(
            f"kiln: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)", file=sys.stderr
        )
        sys.exit(1)
    if isinstance(code, int) and code:  # typer.Exit(code) without standalone mode comes back as a value
        sys.exit(code)
