"""``kiln bench``: the optimizer over a suite, and the field's metrics over the runs."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from kernelkiln.cli.options import (
    CLUSTER_OPTION,
    CONFIG_OPTION,
    CONFIRM_OPTION,
    SET_CONFIG_OPTION,
    THREADS_OPTION,
    set_option,
    shrink_option,
)
from kernelkiln.cli.output import print_result
from kernelkiln.cli.progress import with_progress
from kernelkiln.cli.settings import default_note, load_settings, with_endpoint_window
from kernelkiln.cli.sizing import task_overrides
from kernelkiln.errors import UserError
from kernelkiln.speedup import fmt_x
from kernelkiln.task import load_suite

HELP = """Benchmark the optimizer on a suite: correct rate, fast_p, speedups over torch eager and
torch.compile, self-speedup, speed-of-light fraction, evaluations and tokens.

Each of the --repeat runs optimizes every task of SUITE (a bundled suite such as `cpu`,
or a folder of task files) with memory on, on a store of its own (DIR/repeat-K.db)
unless --store is given. torch.compile's speedup over eager is measured once per task
beforehand (skip it with --no-compile). SOL fractions need `kiln machine` first.

\b
Examples:
  kiln bench cpu --budget 20 --out bench-cpu
  kiln bench cpu --agents 2 --repeat 3 --json > bench.json
  kiln bench KernelBench/level1 --shrink 8 --out bench-kb1   # GPU-sized tasks, sizes / 8
"""


def register(app: typer.Typer) -> None:
    app.command("bench", help=HELP)(bench)


def bench(
    suite: str = typer.Argument(..., metavar="SUITE", help="A bundled suite (`kiln tasks`) or a folder of task files."),
    config_file: Path = CONFIG_OPTION,
    set_config: list[str] = SET_CONFIG_OPTION,
    agents: int = typer.Option(None, "--agents", help=f"Agents per task {default_note('agents')}."),
    budget: int = typer.Option(None, "--budget", help=f"Evaluations per task {default_note('budget')}."),
    repeat: int = typer.Option(1, "--repeat", min=1, help="Independent runs over the suite."),
    out: Path = typer.Option(Path("kiln-bench"), "--out", metavar="DIR", help="Where runs and bench.json go."),
    store: str = typer.Option(
        None,
        "--store",
        metavar="URL",
        help="One store for every repeat (default: a fresh SQLite store per repeat in DIR).",
    ),
    threads: int = THREADS_OPTION,
    confirm: float = CONFIRM_OPTION,
    cluster: str = CLUSTER_OPTION,
    no_compile: bool = typer.Option(False, "--no-compile", help="Skip the torch.compile baseline."),
    as_json: bool = typer.Option(False, "--json", help="Print bench.json's object instead of the table."),
    overrides: list[str] = set_option("NAME=VALUE"),
    shrink: str | None = shrink_option(),
) -> None:
    # Imported here: registering commands must not load torch (`kiln --help` stays fast).
    from kernelkiln.bench.run import Bench

    paths = load_suite(suite).task_paths()
    if not paths:
        raise UserError(f"suite {suite} holds no task files")
    settings = load_settings(
        config_file,
        {
            "--agents": agents,
            "--budget": budget,
            "--store": store,
            "--threads": threads,
            "--cluster": cluster,
            "--confirm-budget": confirm,
        },
        set_config,
    )
    config = with_endpoint_window(settings).config
    sizes = task_overrides(paths, overrides, shrink)
    result = with_progress(
        lambda observer, progress: Bench(out, config.store.url, observer, not no_compile, progress).run(
            paths, config, repeat, sizes
        ),
        f"a bench does not resume; what was judged is in {out}/repeat-K.db",
    )
    print_result(result, as_json, _table, out / "bench.json")


def _table(result: dict, console: Console) -> None:
    table = Table(
        title="kiln bench (speedups: geometric mean over workloads; means over repeats)", title_justify="left"
    )
    columns = ("task", "correct", "vs eager", "vs compile", "self-speedup", "SOL fraction", "reached", "evaluations")
    for col in columns:
        table.add_column(col, justify="left" if col == "task" else "right")
    for name, t in result["tasks"].items():
        sol = "-" if t["sol_fraction"] is None else f"{t['sol_fraction']:.2g}"
        reached = "-" if t.get("achieved") is None else f"{t['achieved']:.3g} {t['achieved_unit']} ({t['bound']})"
        table.add_row(
            name,
            f"{t['correct']:.0%}" if isinstance(t["correct"], float) else str(t["correct"]),
            fmt_x(t["best_speedup"]),
            fmt_x(t["speedup_compile"]),
            fmt_x(t["self_speedup"]),
            sol,
            reached,
            f"{t['evaluations']:.0f}",
        )
    console.print(table)
    fast = ", ".join(f"fast_{p} {v:.0%}" for p, v in result["fast_p"].items())
    console.print(
        f"correct {result['correct_rate']:.0%}; {fast}; geomean vs eager "
        f"{fmt_x(result['geomean_speedup_eager'])}, vs torch.compile {fmt_x(result['geomean_speedup_compile'])}; "
        f"median self-speedup {fmt_x(result['median_self_speedup'])}"
    )
    medians = result.get("median_sol_fraction") or {}
    if medians:
        console.print(
            "median SOL fraction: "
            + "; ".join(f"{b}-bound {m['median']:.2g} over {m['tasks']:.0f} task(s)" for b, m in medians.items())
            + " (memory: bytes the reference must move over the triad bandwidth; compute: FLOPs over the FMA peak)"
        )
    for task, why in result.get("compile_notes", {}).items():
        console.print(f"torch.compile on {task}: {why}", style="dim")
    for run in result["repeats"]:
        console.print(
            f"report: kiln report {run['out']} --store {run['store']}", style="dim", markup=False, highlight=False
        )
