"""``kiln ablate``: what each mechanism is worth, at equal budget, with confidence intervals."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from kernelkiln.bench.studies import studies
from kernelkiln.cli.bench import print_result
from kernelkiln.cli.optimize import with_progress
from kernelkiln.cli.settings import (
    CONFIG_OPTION,
    SET_CONFIG_OPTION,
    default_note,
    load_settings,
    with_endpoint_window,
)
from kernelkiln.errors import UserError
from kernelkiln.task import load_suite, load_task

HELP = """Ablate the optimizer's mechanisms: each study runs two arms over the same tasks with the
same evaluation budget, --repeat times (repeat k of every arm shares random seed k).

\b
Studies (all by default; pick some with --study):
  memory   memory carried from earlier tasks vs every task starting empty
  agents   one agent vs --agents agents sharing the board (same evaluations per task)
  credit   adoption-traced credit (ATU) vs the same reward for every retrieved experience
  rules    resident rules vs none
  search   the tuner's knob search: enumerate (single-knob moves, then random) vs tpe (Optuna)
  context  active vs passive prompts, in tokens (a scripted model plays the llm; no network)

Speed studies report the final best speedup over torch eager, the anytime speedup
(best-so-far averaged over the budget: reaching a good kernel early counts) and the
evaluations to 95% of the best any run of the study found (budget + 1 when not reached;
fewer is better), each a geometric mean over the tasks, then over repeats with a 95%
interval, and the second arm over the first, paired by repeat. Arms with the same settings
run once. Finished runs are kept in DIR/runs.jsonl: run the same command again to continue
an interrupted one.
Cost: about (arms) x repeats x tasks x budget evaluations of --time-budget seconds each.

\b
Examples:
  kiln ablate cpu --tasks row_mean,rms_norm,layer_norm,softmax --budget 12 --repeat 3
  kiln ablate cpu --study memory --study credit --json > ablation.json
"""


# Every arm runs --repeat times, so an ablation's own default budget is below a run's.
ABLATE_BUDGET = 20


def register(app: typer.Typer) -> None:
    app.command("ablate", help=HELP)(ablate)


def ablate(
    suite: str = typer.Argument(..., help="A bundled suite (`kiln tasks`) or a folder of task files."),
    study: list[str] = typer.Option([], "--study", metavar="NAME", help="memory, agents, credit, rules, search or "
                                                                        "context (repeatable; default: all)."),
    tasks: str = typer.Option(None, "--tasks", metavar="A,B,...", help="Only these tasks of the suite, by name."),
    config_file: Path = CONFIG_OPTION,
    set_config: list[str] = SET_CONFIG_OPTION,
    budget: int = typer.Option(None, "--budget", help=f"Evaluations per task in every arm (default: {ABLATE_BUDGET}, "
                                                      "fewer than a run's, as every arm runs repeat times)."),
    repeat: int = typer.Option(3, "--repeat", min=1, help="Trajectories per arm (2 or more for intervals)."),
    agents: int = typer.Option(3, "--agents", min=2, max=8, help="Agents in the agents study's second arm."),
    time_budget: float = typer.Option(None, "--time-budget", metavar="SECONDS",
                                      help="Cap on each evaluation's timing stage "
                                           f"{default_note('guard.time_budget_s')}."),
    confirm: float = typer.Option(None, "--confirm-budget", metavar="SECONDS",
                                  help="When a task ends, judge its best again timing for this long and report "
                                       f"that figure (0: the search's own, noisier, figure) "
                                       f"{default_note('confirm_time_budget_s')}."),
    threads: int = typer.Option(None, "--threads", help="Intra-op threads (default: all cores but one)."),
    cluster: str = typer.Option(None, "--cluster", metavar="local|ray|ray://HOST:PORT",
                                help="Where candidates are judged: this machine, or one evaluation actor per "
                                     "device of a Ray cluster (ray: $RAY_ADDRESS, else a new local one; needs "
                                     f"kernelkiln[ray]) {default_note('cluster.address')}."),
    out: Path = typer.Option(Path("kiln-ablate"), "--out", metavar="DIR", help="Where runs, runs.jsonl and "
                                                                             "ablation.json go."),
    as_json: bool = typer.Option(False, "--json", help="Print ablation.json's object instead of the table."),
) -> None:
    # Imported here: registering commands must not load torch (`kiln --help` stays fast).
    from kernelkiln.bench.ablate import Ablation
    from kernelkiln.orchestrator.run import order_tasks

    known = studies(agents)
    unknown = [s for s in study if s not in known]
    if unknown:
        raise UserError(f"unknown study {unknown[0]!r} (known: {', '.join(known)})")
    chosen = [known[s] for s in dict.fromkeys(study)] or list(known.values())
    paths = load_suite(suite).task_paths()
    if tasks:
        by_name = {p.stem: p for p in paths}
        wanted = [t.strip() for t in tasks.split(",") if t.strip()]
        missing = [t for t in wanted if t not in by_name]
        if missing:
            raise UserError(f"suite {suite} has no task {missing[0]!r} (it has: {', '.join(by_name)})")
        paths = [by_name[t] for t in wanted]
    if not paths:
        raise UserError(f"suite {suite} holds no task files")
    settings = load_settings(config_file, {
        "--budget": ("budget", budget), "--time-budget": ("guard.time_budget_s", time_budget),
        "--confirm-budget": ("confirm_time_budget_s", confirm), "--threads": ("guard.threads", threads),
        "--cluster": ("cluster.address", cluster),
    }, set_config, defaults={"budget": ABLATE_BUDGET})
    base = with_endpoint_window(settings).config
    tasks_in_order = order_tasks([load_task(p) for p in paths])
    result = with_progress(lambda observer, progress: Ablation(out, base, observer, progress).run(
        chosen, tasks_in_order, repeat),
        f"run the same command again to continue: finished runs are kept in {out}/runs.jsonl")
    print_result(result, as_json, _table, out / "ablation.json")


def _ci(cell: dict | None, unit: str) -> str:
    if cell is None:
        return "-"
    fmt = {"x": lambda v: f"{v:.3g}x", "n": lambda v: f"{v:.1f}"}.get(unit, lambda v: f"{v:,.0f}")
    if cell["ci95"] is None:
        return fmt(cell["mean"])
    low, high = cell["ci95"]
    return f"{fmt(cell['mean'])} [{fmt(low)}, {fmt(high)}]"


# (title, figure, unit of an arm's figure: x a speedup, n a count of evaluations, "" tokens)
_COLUMNS = {"speedup": (("final speedup", "speedup", "x"), ("anytime speedup", "anytime", "x"),
                        ("evaluations to 95%", "evals_to_95", "n")),
            "tokens": (("prompt tokens per run", "prompt_tokens", ""), ("largest prompt", "max_prompt_tokens", ""))}


def _table(result: dict, console: Console) -> None:
    console.print(f"kiln ablate: {len(result['tasks'])} tasks, {result['budget']} evaluations each, "
                  f"{result['repeat']} repeats; geometric means [95% CI]")
    for metric, columns in _COLUMNS.items():
        rows = {name: s for name, s in result["studies"].items() if s["metric"] == metric}
        if not rows:
            continue
        table = Table()
        table.add_column("study")
        table.add_column("arm", no_wrap=True)
        for title, _, _ in columns:
            table.add_column(title, justify="right", no_wrap=True)
        for name, s in rows.items():
            for arm in s["arms"]:
                table.add_row(name, arm["arm"], *(_ci(arm.get(key), unit) for _, key, unit in columns))
            table.add_row("", s["ratio_of"], *(_ci(s["ratio"].get(key), "x") for _, key, _ in columns), style="bold",
                          end_section=True)
        console.print(table)
