"""The typer options several commands declare alike: one declaration each, shared by every command that takes it.

Options that read the same in every command live here; a command whose option says
something of its own (another default, another help line) declares it in its signature.
"""

from __future__ import annotations

from typing import Any

import typer

from kernelkiln.cli.settings import default_note

CONFIG_OPTION = typer.Option(
    None,
    "--config",
    metavar="FILE",
    help="A TOML file holding any part of the configuration (see `kiln config show`); flags given override it.",
)
SET_CONFIG_OPTION = typer.Option(
    [],
    "--set-config",
    metavar="PATH=VALUE",
    help="Set one field by its dotted path, e.g. memory.retrieval.pool_size=40 (VALUE "
    "in TOML syntax; a bare word is a string). Repeatable.",
)

SET_HELP = "Override a module-level size variable: --set dim=4096, --set input_shape='(4096,)' (repeatable)."
SHRINK_HELP = (
    "Divide every size variable by about K so a GPU-sized task runs on a CPU: --shrink 8 turns "
    "batch_size=128 into 16 and keeps kernel sizes, strides, group and head counts; --shrink 20ms "
    "chooses the factor instead (1 to 4096) so the reference's forward takes at most about 20 ms on "
    "one thread. The sizes chosen are printed; --set values win."
)


def set_option(metavar: str | None = None) -> Any:
    """``--set NAME=VALUE`` (repeatable): the size overrides a task is loaded with."""
    return typer.Option([], "--set", metavar=metavar, help=SET_HELP)


def shrink_option() -> Any:
    """``--shrink K`` or ``--shrink 20ms``: every size variable divided by about K, or to a time."""
    return typer.Option(None, "--shrink", metavar="K|TIME", help=SHRINK_HELP)


# The run's options, as `kiln optimize`, `bench` and `ablate` declare them.
THREADS_OPTION = typer.Option(None, "--threads", help="Intra-op threads (default: all cores but one).")
CLUSTER_OPTION = typer.Option(
    None,
    "--cluster",
    metavar="local|ray|ray://HOST:PORT",
    help="Where candidates are judged: this machine, or one evaluation actor per "
    "device of a Ray cluster (ray: $RAY_ADDRESS, else a new local one; needs "
    f"kernelkiln\\[ray]) {default_note('cluster.address')}.",  # escaped: rich would read [ray] as markup and drop it
)
# `kiln bench` and `ablate` (optimize's own help names the figure it reports).
CONFIRM_OPTION = typer.Option(
    None,
    "--confirm-budget",
    metavar="SECONDS",
    help="When a task ends, judge its best again timing for this long and report "
    f"that figure (0: the search's own, noisier, figure) "
    f"{default_note('confirm_time_budget_s')}.",
)

# The memory's store, as `kiln memory` and `kiln report` open it.
STORE_OPTION = typer.Option(
    None,
    "--store",
    metavar="URL",
    help="A SQLite file (PATH or sqlite:///PATH) or postgresql://… (default: $KILN_STORE, else the user data dir).",
)
