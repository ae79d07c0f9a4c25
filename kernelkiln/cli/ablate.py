"""``kiln ablate``: what each mechanism is worth, at equal budget, with confidence intervals."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from kernelkiln.bench.studies import studies
from kernelkiln.cli.options import CLUSTER_OPTION, CONFIG_OPTION, CONFIRM_OPTION, SET_CONFIG_OPTION, THREADS_OPTION
from kernelkiln.cli.output import print_result
from kernelkiln.cli.paths import target_paths
from kernelkiln.cli.progress import with_progress
from kernelkiln.cli.settings import default_note, load_settings, with_endpoint_window
from kernelkiln.errors import UserError
from kernelkiln.task import load_task

HELP = """Ablate the optimizer's mechanisms: each study runs its arms over the same tasks with the
same evaluation budget, --repeat times (repeat k of every arm shares random seed k).

\b
Studies (all but context and held-out* by default; pick some with --study):
  memory    the other tasks' store (cross-fitted halves) vs an empty store
  held-out  memory built on every other task (leave-one-task-out) and on every
            other op family, and the generic portfolio (the fastest stored
            bests, no similarity), vs an empty store: a store built per task
            and per family at every repeat, meant for --replay
  held-out-parts  held-out memory without experiences and with one
            neighbour, each against memory as it is
  transfer  as memory, with the store lent read-only (--memory-readonly)
  reuse     the suite again on its store: evaluations to the first pass's best
  credit    adoption-traced credit (ATU) vs equal reward for all retrieved
  rules     resident rules by utility vs none vs at random (same token budget)
  agents    --agents agents each seeing its own conclusions vs a shared board
  search    the tuner's search: enumerate (single-knob moves) vs tpe (Optuna)
  context   active vs passive prompts, in tokens (a scripted llm; no network)

Every speed study is also measured against best-of-N (the seed, then random settings at the
same budget): the floor every arm must beat. A candidate is valued by its consensus figure,
the median of all its measurements across the ablation, so no run is ranked by its own luck.
Figures: the final and anytime speedups over torch eager (anytime: the incumbent averaged over
the budget, so reaching a good kernel early counts) and the evaluations until the incumbent
is worth 95% of the task's best known figure (budget + 1 when never; fewer is better); each a
geometric mean over tasks, then over repeats with a 95% t interval, and each arm over the
study's first arm and over best-of-N, paired by repeat. Arms with the same settings run once;
finished runs are kept in DIR/runs.jsonl: run the same command again to continue.
Cost: about (arms) x repeats x tasks x budget evaluations of --time-budget seconds each (a
cross-fitted arm builds its store too: twice that); with --replay DATASET, the search loop's own
time only (the dataset's starting candidates must be the runs'), --jobs N repeats side by side,
and tasks whose optimum is within the noise of their starting candidate left out (--keep-flat keeps
them). To draw the result: `kiln report DIR`.

\b
Examples:
  kiln ablate kb-cpu --tasks 29_Softmax,31_LayerNorm,32_RMSNorm --budget 10 --repeat 5
  kiln ablate kb-cpu --study memory --study transfer --json > ablation.json
  kiln ablate cpu --replay benchmarks/data/spaces.jsonl --study memory --repeat 50 --budget 10
  kiln ablate cpu,kb-cpu --replay spaces.jsonl --study held-out --repeat 50 --jobs 2
"""


# Every arm runs --repeat times, so an ablation's own default budget is below a run's.
ABLATE_BUDGET = 20


def register(app: typer.Typer) -> None:
    app.command("ablate", help=HELP)(ablate)


def ablate(
    suite: str = typer.Argument(
        ...,
        metavar="SUITE",
        help="A bundled suite (`kiln tasks`), a folder of task files, or several joined by commas.",
    ),
    study: list[str] = typer.Option(
        [],
        "--study",
        metavar="NAME",
        help="memory, held-out, held-out-parts, transfer, reuse, credit, rules, "
        "agents, search or context (repeatable; "
        "default: all but context and the held-out ones).",
    ),
    tasks: str = typer.Option(None, "--tasks", metavar="A,B,...", help="Only these tasks of the suite, by name."),
    config_file: Path = CONFIG_OPTION,
    set_config: list[str] = SET_CONFIG_OPTION,
    budget: int = typer.Option(
        None,
        "--budget",
        help=f"Evaluations per task in every arm (default: {ABLATE_BUDGET}, "
        "fewer than a run's, as every arm runs repeat times).",
    ),
    repeat: int = typer.Option(3, "--repeat", min=1, help="Trajectories per arm (2 or more for intervals)."),
    agents: int = typer.Option(2, "--agents", min=2, max=8, help="Agents per task in the agents study's arms."),
    reuse_budget: int = typer.Option(
        3,
        "--reuse-budget",
        min=1,
        help="Evaluations per task in the reuse study's second pass (it counts those "
        "needed to reach the first pass's best; at most this many are spent).",
    ),
    time_budget: float = typer.Option(
        None,
        "--time-budget",
        metavar="SECONDS",
        help=f"Cap on each evaluation's timing stage {default_note('guard.time_budget_s')}.",
    ),
    confirm: float = CONFIRM_OPTION,
    threads: int = THREADS_OPTION,
    cluster: str = CLUSTER_OPTION,
    out: Path = typer.Option(
        Path("kiln-ablate"), "--out", metavar="DIR", help="Where runs, runs.jsonl and ablation.json go."
    ),
    replay: Path = typer.Option(
        None,
        "--replay",
        metavar="DATASET",
        help="Judge every evaluation from this measured-spaces dataset (`kiln measure`) instead of on this "
        "machine: each verdict drawn from the stored samples as the guard would give it, in milliseconds.",
    ),
    budgets: str = typer.Option(
        None,
        "--budgets",
        metavar="N,M,...",
        help="Also report the figures at these smaller budgets, from each run's first N evaluations (the "
        "tuner's search does not depend on its budget: a run's prefix is the run a smaller budget makes).",
    ),
    machine: str = typer.Option(
        None, "--machine", metavar="KEY", help="The dataset's machine to replay (needed when it holds several)."
    ),
    keep_flat: bool = typer.Option(
        False,
        "--keep-flat",
        help="With --replay: keep the tasks whose measured optimum lies within the noise band of their starting "
        "candidate (left out by default, and named: no search can show anything there, only what trying "
        "other settings first costs).",
    ),
    jobs: int = typer.Option(
        1,
        "--jobs",
        min=1,
        help="With --replay: run this many repeats side by side, one process each (up to the cores; a replay's "
        "repeats share nothing, and the figures are the same as one at a time).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print ablation.json's object instead of the table."),
) -> None:
    # Imported here: registering commands must not load torch (`kiln --help` stays fast).
    from kernelkiln.bench.ablate import Ablation
    from kernelkiln.bench.replay import Replay
    from kernelkiln.evaluation.spaces import Dataset, task_sha
    from kernelkiln.orchestrator.run import order_tasks

    known = studies(agents)
    unknown = [s for s in study if s not in known]
    if unknown:
        raise UserError(f"unknown study {unknown[0]!r} (known: {', '.join(known)})")
    chosen = [known[s] for s in dict.fromkeys(study)] or [
        s for s in known.values() if s.name not in ("context", "held-out", "held-out-parts")
    ]
    paths = target_paths(suite, tasks)
    settings = load_settings(
        config_file,
        {
            "--budget": budget,
            "--time-budget": time_budget,
            "--confirm-budget": confirm,
            "--threads": threads,
            "--cluster": cluster,
        },
        set_config,
        defaults={"budget": ABLATE_BUDGET},
    )
    base = with_endpoint_window(settings).config
    smaller = _budgets(budgets, base.budget)
    if smaller and (base.policy.kind != "tuner" or base.agents != 1 or any(s.name == "agents" for s in chosen)):
        raise UserError("--budgets reads a run's prefixes, which are smaller runs only for one tuner agent")
    replayed = None
    if replay is not None:
        if not replay.is_file():
            raise UserError(f"--replay {replay}: no such dataset (make one with `kiln measure`)")
        dataset = Dataset(replay)
        replayed = Replay(dataset, dataset.one_machine(machine))
    elif machine is not None:
        raise UserError("--machine names a machine of a --replay dataset")
    loaded = [load_task(p) for p in paths]
    if replayed is not None:
        measured = replayed.measured()
        absent = [t.id for t in loaded if measured.get(t.id) != task_sha(t)]  # or another task of that name
        if absent and tasks:
            raise UserError(f"{replay} holds no measured space of {absent[0]} (measure it with `kiln measure`)")
        if absent:
            print(
                f"left out, not measured in {replay} (or another task of that name was): {', '.join(absent)}",
                file=sys.stderr,
                flush=True,
            )
        loaded = [t for t in loaded if measured.get(t.id) == task_sha(t)]
        if not loaded:
            raise UserError(f"{replay} holds no measured space of any task of {suite}")
        flat = [] if keep_flat else replayed.flat([t.id for t in loaded])
        if flat:
            print(
                "left out, flat (the optimum within the starting candidate's noise band; --keep-flat keeps them): "
                + ", ".join(flat),
                file=sys.stderr,
                flush=True,
            )
            loaded = [t for t in loaded if t.id not in flat]
            if not loaded:
                raise UserError(f"every measured space of {suite} in {replay} is flat: nothing to search")
    tasks_in_order = order_tasks(loaded)
    result = with_progress(
        lambda observer, progress: Ablation(out, base, observer, progress, reuse_budget, replayed, jobs).run(
            chosen, tasks_in_order, repeat, smaller
        ),
        f"run the same command again to continue: finished runs are kept in {out}/runs.jsonl",
    )
    # Piped output gets room for the intervals (rich would give it 80 columns).
    print_result(
        result,
        as_json,
        lambda r, console: _table(r, console if console.is_terminal else Console(width=160)),
        out / "ablation.json",
    )


def _budgets(text: str | None, budget: int) -> tuple[int, ...]:
    """--budgets's values, each below the run's budget; a one-line error for anything else."""
    if not text:
        return ()
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise UserError(f"--budgets {text!r}: give whole numbers, e.g. 5,10,20") from None
    wrong = [v for v in values if not 1 <= v < budget]
    if wrong:
        raise UserError(f"--budgets: {wrong[0]} is not between 1 and the budget ({budget}) less one")
    return values


def _ci(cell: dict | None, unit: str) -> str:
    if cell is None:
        return "-"
    fmt = {"x": lambda v: f"{v:.3g}x", "n": lambda v: f"{v:.1f}", "s": lambda v: f"{v:.2f}"}.get(
        unit, lambda v: f"{v:,.0f}"
    )
    if cell["ci95"] is None:
        return fmt(cell["mean"])
    low, high = cell["ci95"]
    bare = {"x": lambda v: f"{v:.3g}"}.get(unit, fmt)
    return f"{fmt(cell['mean'])} [{bare(low)}, {bare(high)}]"


def _scored(arm: dict, replayed: bool) -> list[str]:
    """A replayed arm's Willemsen score and share of runs ending at the measured optimum."""
    share = arm.get("p_optimum")
    return [_ci(arm.get("score"), "s"), "-" if share is None else f"{share:.0%}"] if replayed else []


# (title, figure, unit of an arm's figure: x a speedup, n a count of evaluations, "" tokens)
_COLUMNS = {
    "speedup": (
        ("final speedup", "speedup", "x"),
        ("anytime speedup", "anytime", "x"),
        ("evaluations to 95%", "evals_to_95", "n"),
    ),
    "tokens": (("prompt tokens per run", "prompt_tokens", ""), ("largest prompt", "max_prompt_tokens", "")),
}


def _table(result: dict, console: Console) -> None:
    console.print(
        f"kiln ablate: {len(result['tasks'])} tasks, {result['budget']} evaluations each, "
        f"{result['repeat']} repeats; geometric means [95% CI]; candidates valued by consensus"
    )
    floor = result.get("floor")
    for name, s in result["studies"].items():
        if s["metric"] == "reuse":
            console.print(
                f"{name}: the second pass needed {_ci(s['evaluations_to_first_best'], 'n')} evaluations per "
                f"task to reach 95% of the first pass's best (at most {s['second_pass_budget']}); "
                f"reached in one: {s['in_one']} of {len(result['tasks'])} tasks per repeat"
            )
            continue
        columns = _COLUMNS[s["metric"]]
        table = Table(title=f"{name}: {s.get('question', '')}", title_justify="left")
        table.add_column("arm", no_wrap=True)
        for title, _, _ in columns:
            table.add_column(title, justify="right", no_wrap=True)
        speed = s["metric"] == "speedup" and floor is not None
        replayed = "score" in (floor or {})  # figures against the measured optimum
        if replayed:
            table.add_column("Willemsen score", justify="right", no_wrap=True)
            table.add_column("P(optimum)", justify="right", no_wrap=True)

        if speed:
            assert floor is not None  # speed implies a floor
            table.add_column("anytime / best-of-N", justify="right", no_wrap=True)
            cells = (_ci(floor.get(key), unit) for _, key, unit in columns)
            table.add_row(floor["arm"], *cells, *_scored(floor, replayed), "", style="dim")
        for arm in s["arms"]:
            extra = _scored(arm, replayed) + ([_ci(arm.get("vs_floor", {}).get("anytime"), "x")] if speed else [])
            table.add_row(arm["arm"], *(_ci(arm.get(key), unit) for _, key, unit in columns), *extra)
            if "ratio" in arm:
                table.add_row(
                    f"{arm['arm']} / {s['reference']}",
                    *(_ci(arm["ratio"].get(key), "x") for _, key, _ in columns),
                    *([""] * (2 * replayed + speed)),
                    style="bold",
                )
        console.print(table)
        tested = [a for a in s["arms"] if a.get("wilcoxon", {}).get("evals_to_95_p") is not None]
        for arm in tested:
            w = arm["wilcoxon"]
            console.print(
                f"  {arm['arm']}: fewer evaluations to 95% than {s['reference']} on {w['fewer']} of {w['tasks']} "
                f"tasks, more on {w['more']} (Wilcoxon signed-rank across tasks, p = {w['evals_to_95_p']:.2g})"
            )
