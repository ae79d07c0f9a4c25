"""``kiln measure``: judge tasks' knob spaces with the real guard into a dataset that studies replay."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from kernelkiln.cli.options import CONFIG_OPTION, SET_CONFIG_OPTION, THREADS_OPTION
from kernelkiln.cli.output import print_result
from kernelkiln.cli.paths import target_paths
from kernelkiln.cli.progress import with_progress
from kernelkiln.cli.settings import default_note, load_settings
from kernelkiln.errors import UserError

HELP = """Measure tasks' knob spaces once, with the real guard, so that search studies replay them
(`kiln ablate SUITE --replay DATASET`) in minutes instead of hours.

For each task: its starting candidate (the task's, or one generated from the reference), and every
setting of its knobs when the space has at most --whole-up-to configurations, else it and a
seeded uniform sample (--sample configurations in all; a study then searches only those). Each
configuration is judged against the reference --rounds times, each round a pass over every task,
so its samples come from different processes at different times. DATASET is JSON Lines (see
docs/guide/spaces.md): this machine's signature, then one row per judgement with every kept timing
round. Rows are appended as they are made: run the same command again to continue.
Cost: about rounds x configurations x (build + check + --time-budget) seconds.

\b
Examples:
  kiln measure cpu --tasks softmax,gelu --out spaces.jsonl
  kiln measure kb-cpu --rounds 3 --time-budget 1 --out kb.jsonl
"""


def register(app: typer.Typer) -> None:
    app.command("measure", help=HELP)(measure)


def measure(
    target: str = typer.Argument(
        ..., metavar="TASK|SUITE", help="A task file, a bundled task, a suite, or suites joined by commas."
    ),
    out: Path = typer.Option(..., "--out", metavar="DATASET", help="The dataset file to append to (JSON Lines)."),
    tasks: str = typer.Option(None, "--tasks", metavar="A,B,...", help="Only these tasks of the suite, by name."),
    rounds: int = typer.Option(2, "--rounds", min=1, help="Judgements of each configuration, one per pass."),
    whole_up_to: int = typer.Option(
        400, "--whole-up-to", min=1, help="Measure a space whole when it has at most this many configurations."
    ),
    sample: int = typer.Option(300, "--sample", min=1, help="Configurations measured of a larger space."),
    time_budget: float = typer.Option(
        None,
        "--time-budget",
        metavar="SECONDS",
        help=f"Cap on each judgement's timing stage {default_note('guard.time_budget_s')}.",
    ),
    config_file: Path = CONFIG_OPTION,
    set_config: list[str] = SET_CONFIG_OPTION,
    threads: int = THREADS_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print the summary's object instead of the table."),
) -> None:
    # Imported here: registering commands must not load torch (`kiln --help` stays fast).
    from kernelkiln.bench.measure import Measurer, plan_space
    from kernelkiln.bench.space_values import space_values
    from kernelkiln.evaluation.spaces import Dataset
    from kernelkiln.orchestrator.starts import NoStart, starting_code
    from kernelkiln.task import load_task

    settings = load_settings(
        config_file,
        {"--time-budget": time_budget, "--threads": threads},
        set_config,
    )
    config = settings.config
    if config.platform != "cpu":
        raise UserError("kiln measure measures CPU knob spaces only (platform = cpu)")
    dataset = Dataset(out)
    plans, skipped = [], []
    for path in target_paths(target, tasks):
        task = load_task(path)
        try:
            start, _ = starting_code(task, config)
        except NoStart as exc:
            skipped.append(f"{task.id}: {exc}")
            continue
        plans.append(plan_space(task, start, whole_up_to, sample))
    for line in skipped:
        print(f"skipped {line}", file=sys.stderr, flush=True)
    if not plans:
        raise UserError("no task to measure: none has a starting candidate with knobs (see the lines above)")
    measurer = Measurer(dataset, config.guard, rounds)

    def work(observer, progress) -> int:
        measurer.progress = progress
        return measurer.run(plans)

    made = with_progress(work, f"run the same command again to continue: every judgement is kept in {out}")
    result = {
        "dataset": str(out),
        "machine": measurer.machine.key,
        "judgements_made": made,
        "tasks": [v.as_dict() for v in space_values(dataset, measurer.machine.key, [p.task.id for p in plans])],
        "planned": {p.task.id: {"size": p.size, "measured": len(p.configs), "whole": p.whole} for p in plans},
    }
    # Piped output gets room for every column (rich would give it 80).
    print_result(
        result, as_json, lambda r, console: _table(r, console if console.is_terminal else Console(width=160)), out
    )


def _table(result: dict, console: Console) -> None:
    console.print(
        f"kiln measure: {result['judgements_made']} judgements made this time; {result['dataset']} "
        f"(machine {result['machine']})"
    )
    table = Table(
        title="space values (optimum over the starting candidate and over the space's median)", title_justify="left"
    )
    columns = (
        "task",
        "configs",
        "measured",
        "start",
        "median",
        "optimum",
        "opt/start",
        "opt/median",
        "random to 95%",
        "rounds' rank corr.",
    )
    for column in (*columns, "flat"):
        table.add_column(column, justify="left" if column == "task" else "right", no_wrap=True)
    for row in result["tasks"]:
        planned = result["planned"][row["task"]]
        table.add_row(
            row["task"],
            str(planned["size"]),
            f"{row['timed']}" + ("" if planned["whole"] else " (sample)"),
            *(f"{row[k]:.3f}x" if row[k] is not None else "-" for k in ("start", "median", "optimum")),
            *(f"{row[k]:.3f}" if row[k] is not None else "-" for k in ("over_start", "over_median")),
            f"{row['random_evals_to_95']:.1f}" if row["random_evals_to_95"] is not None else "-",
            f"{row['rounds_agreement']:.2f}" if row["rounds_agreement"] is not None else "-",
            "yes" if row["flat"] else "",
        )
    console.print(table)
