"""``kiln optimize``: agents propose, the guard judges, memory learns, until the budget is spent."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.table import Table

from kernelkiln.agents.config import LLMPolicyConfig, PolicyConfig
from kernelkiln.cli.options import (
    CLUSTER_OPTION,
    CONFIG_OPTION,
    SET_CONFIG_OPTION,
    THREADS_OPTION,
    set_option,
    shrink_option,
)
from kernelkiln.cli.output import wide_console
from kernelkiln.cli.paths import target_paths
from kernelkiln.cli.progress import exit_interrupted, progress_observer
from kernelkiln.cli.settings import default_note, default_of, load_settings, with_endpoint_window
from kernelkiln.cli.sizing import task_overrides
from kernelkiln.cli.stores import open_memory, shown
from kernelkiln.errors import UserError
from kernelkiln.orchestrator.results import VERDICTS, RunResult, TaskResult
from kernelkiln.speedup import fmt_x

HELP = """Optimize a task or a suite: agents propose candidates, the guard judges each one,
memory learns from every verdict.

TASK|SUITE is a task file, a bundled task (`kiln tasks`), a suite folder or a bundled suite.
The default policy is the offline tuner: it searches the knobs the task's starting candidate
declares, trying first what memory says worked on similar tasks. `--policy llm` lets a
model write whole candidates (any OpenAI-compatible server, or Anthropic).

\b
Examples:
  kiln optimize row_softmax                          # tuner, 1 agent, 30 evaluations
  kiln optimize examples --agents 2 --budget 20      # a suite, easy tasks first
  kiln optimize KernelBench/ --policy llm --shrink 8  # sizes / 8, on a CPU
  kiln optimize row_softmax --policy llm --model qwen2.5-coder --base-url http://localhost:8000/v1
  kiln optimize row_softmax --config kiln.toml       # settings from a file; flags override it
  kiln optimize row_softmax --policy llm --model M --base-url URL --record session/
  kiln optimize row_softmax --policy replay --replay session/   # the same run again, no network
  kiln optimize --resume r-3f9c0a1b2c3d4e5f          # continue an interrupted run
  kiln optimize kb-cpu --cluster ray --store postgresql://db/kiln --agents 8   # on a Ray cluster

Results: a table per task, DIR/<task>/best.py (a standalone candidate `kiln eval` accepts)
and DIR/run.json (the same figures; --json prints it). Ctrl-C stops cleanly; the run
resumes with --resume RUN_ID, losing only the evaluations that were in flight.
A task that got no candidate (llm, replay: none from the model; the starting candidate
is not the model's) has a line on stderr saying why, and its reason in run.json.

\b
Exit codes (2 and 3 say why on stderr, one line per problem):
  0    a task got a candidate (llm, replay: from the model)
  2    bad input, or an endpoint down, refusing the key or lacking the model
  3    no task got a candidate: each evaluated nothing, or (llm, replay)
       only its starting candidate: the model never gave a usable one
  130  interrupted (Ctrl-C or SIGTERM); resume with --resume RUN_ID
"""

NO_CANDIDATE = 3


def register(app: typer.Typer) -> None:
    app.command("optimize", help=HELP)(optimize)


def optimize(
    target: str = typer.Argument(None, metavar="TASK|SUITE", help="Task file or name, suite folder or name."),
    config_file: Path = CONFIG_OPTION,
    set_config: list[str] = SET_CONFIG_OPTION,
    policy: str = typer.Option(
        None,
        "--policy",
        help="tuner (offline knob search), llm, or replay (a recorded session, offline: "
        f"--replay DIR) {default_note('policy.kind')}.",
    ),
    agents: int = typer.Option(
        None, "--agents", help=f"Agents per task, each with its own strategy lens, 1-8 {default_note('agents')}."
    ),
    budget: int = typer.Option(
        None, "--budget", help=f"Evaluations per task, shared by its agents {default_note('budget')}."
    ),
    model: str = typer.Option(None, "--model", help="Model name (llm policy)."),
    base_url: str = typer.Option(
        None,
        "--base-url",
        metavar="URL",
        help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 (vLLM) or "
        "http://localhost:11434/v1 (Ollama). Default: the provider's API.",
    ),
    provider: str = typer.Option(
        None, "--provider", help=f"openai (any compatible server) or anthropic {default_note('policy.llm.provider')}."
    ),
    api_key_env: str = typer.Option(
        None,
        "--api-key-env",
        metavar="VAR",
        help="Environment variable holding the API key (default: OPENAI_API_KEY or "
        "ANTHROPIC_API_KEY). Keys are never logged or shown to candidates.",
    ),
    context_window: int = typer.Option(
        None,
        "--context-window",
        metavar="TOKENS",
        help="The model's context window, for prompt budgeting (default: what the "
        "endpoint reports, as vLLM, SGLang, llama-server, LM Studio, TGI and Ollama do, else "
        f"{default_of('policy.llm.context_window')}).",
    ),
    reply_protocol: str = typer.Option(
        None,
        "--reply-protocol",
        metavar="auto|tools|text",
        help="How the model hands in candidates: tools (function calling), text "
        "(a python block, a Summary line and a JSON block; for servers "
        "without tool calling) or auto (tools, then text for the rest of the "
        f"run if the endpoint refuses them) {default_note('policy.llm.reply_protocol')}.",
    ),
    record: str = typer.Option(
        None,
        "--record",
        metavar="DIR",
        help="Save every exchange with the model (request, reply, usage, latency) under DIR, "
        "one JSON-lines file per task and agent; no API key is written.",
    ),
    replay: str = typer.Option(
        None,
        "--replay",
        metavar="DIR",
        help="With --policy replay: answer from the session recorded in DIR, offline, "
        "and stop with exit code 2 when the prompts diverge from it.",
    ),
    context: str = typer.Option(
        None,
        "--context",
        help="active (budgeted layers) or passive (accumulate "
        f"everything; for ablations) {default_note('context.mode')}.",
    ),
    max_tokens: int = typer.Option(None, "--max-tokens", help="Stop starting turns after this many tokens."),
    max_wall: float = typer.Option(None, "--max-wall", metavar="SECONDS", help="Stop starting turns after this."),
    store: str = typer.Option(
        None,
        "--store",
        metavar="URL",
        help="sqlite:///PATH or postgresql://… (default: $KILN_STORE, else the user data dir).",
    ),
    overrides: list[str] = set_option("NAME=VALUE"),
    shrink: str | None = shrink_option(),
    start_file: Path = typer.Option(
        None,
        "--start",
        metavar="FILE",
        help="Start from this candidate (one task). Default: the task's KILN start, else "
        "the candidate `kiln lower` generates from the reference's operations.",
    ),
    from_scratch: bool = typer.Option(
        False, "--from-scratch", help="llm policy: the model writes the first candidate instead of starting from one."
    ),
    earlier_start: Path = typer.Option(None, "--seed", hidden=True),  # --start's earlier name
    earlier_scratch: bool = typer.Option(False, "--no-seed", hidden=True),  # --from-scratch's earlier name
    threads: int = THREADS_OPTION,
    platform: str = typer.Option(
        None,
        "--platform",
        help="Where candidates run and are timed: cpu or cuda (needs a "
        f"visible NVIDIA GPU) {default_note('platform')}.",
    ),
    cluster: str = CLUSTER_OPTION,
    lock_clocks: int = typer.Option(
        None,
        "--lock-clocks",
        metavar="MHZ",
        help="Lock the GPU's clocks at MHZ while timing (nvidia-smi -lgc); refuses to run if locking fails.",
    ),
    confirm: float = typer.Option(
        None,
        "--confirm-budget",
        metavar="SECONDS",
        help="When a task ends, judge its best again timing for this long and report "
        f"that figure (0: report the search's own, noisier, figure) "
        f"{default_note('confirm_time_budget_s')}.",
    ),
    time_budget: float = typer.Option(
        None,
        "--time-budget",
        metavar="SECONDS",
        help=f"Cap on the timing stage of each evaluation {default_note('guard.time_budget_s')}.",
    ),
    out: Path = typer.Option(
        None, "--out", metavar="DIR", help="Where best.py files and run.json go (default: kiln-runs/RUN_ID)."
    ),
    resume: str = typer.Option(
        None,
        "--resume",
        metavar="RUN_ID",
        help="Continue an interrupted run (with the settings it was started with; only the store's are read).",
    ),
    isolation: str = typer.Option(
        None,
        "--isolation",
        metavar="strict|best-effort",
        help="strict: stop when an isolation layer this kernel offers cannot be applied "
        "around a worker or build; best-effort: run with what holds (every verdict "
        "says). Default: strict for --policy llm, best-effort for the tuner.",
    ),
    memory_readonly: bool = typer.Option(
        False,
        "--memory-readonly",
        help="Apply the store's memory, write nothing to it (a team's store in a CI "
        "job; a strong model's memory lent to a weaker run): it is opened "
        "read-only and nothing is learned; this run's own records go to "
        "readonly.db in the --out folder (default kiln-runs). Resume such a "
        "run with --memory-readonly and the same --store and --out.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print run.json's object instead of the table."),
) -> None:
    # Imported here: registering commands must not load torch (`kiln --help` stays fast).
    from kernelkiln.orchestrator.run import Interrupted, Optimizer, TaskSpec

    settings = load_settings(
        config_file,
        {
            "--policy": policy,
            "--agents": agents,
            "--budget": budget,
            "--model": model,
            "--base-url": base_url,
            "--provider": provider,
            "--api-key-env": api_key_env,
            "--context-window": context_window,
            "--context": context,
            "--reply-protocol": reply_protocol,
            "--max-tokens": max_tokens,
            "--max-wall": max_wall,
            "--store": store,
            "--threads": threads,
            "--platform": platform,
            "--cluster": cluster,
            "--lock-clocks": lock_clocks,
            "--confirm-budget": confirm,
            "--time-budget": time_budget,
            "--isolation": isolation,
            "--record": record,
            "--replay": replay,
            "--start": str(start_file or earlier_start) if start_file or earlier_start else None,
            "--from-scratch": False if from_scratch or earlier_scratch else None,
            "--memory-readonly": True if memory_readonly else None,
        },
        set_config,
    )
    store_config = settings.config.store
    memory = open_memory(store_config, settings.config.memory.readonly, out or Path("kiln-runs"))
    observer = progress_observer()
    optimizer = Optimizer(memory, Path("kiln-runs"), observer)
    try:
        if resume:
            if target or overrides or shrink is not None:
                raise UserError(
                    "--resume continues a stored run at its own sizes: give no TASK|SUITE, --set or --shrink with it"
                )
            result = optimizer.resume(resume, cluster)
        else:
            with _refusal_as_json(as_json):
                if not target:
                    raise UserError("give a TASK or SUITE to optimize (see `kiln tasks`), or --resume RUN_ID")
                paths = target_paths(target)
                _check_endpoint(settings.config.policy)
                config = with_endpoint_window(settings).config
                specs = [
                    TaskSpec(str(p), o) for p, o in zip(paths, task_overrides(paths, overrides, shrink), strict=True)
                ]
            result = optimizer.start(specs, config, out)
    except Interrupted as stop:
        observer.close()
        _report(stop.result, as_json)
        again = f" --store {shown(store_config.url)}" if store_config.url else ""
        if memory.lent is not None:
            again += " --memory-readonly" + (f" --out {out}" if out else "")
        memory.store.close()
        exit_interrupted(f"resume with `kiln optimize --resume {stop.result.run_id}{again}`")
    finally:
        observer.close()
    _report(result, as_json)
    _outcome(result.tasks)


def _outcome(tasks: dict[str, TaskResult]) -> None:
    """One line on stderr per task whose policy gave no candidate; exit 3 when no task got one."""
    for name, t in tasks.items():
        if t.status != "evaluated":
            what = "nothing was evaluated" if t.status == "no candidate" else t.status
            print(f"kiln: {name}: {what}: {t.reason}", file=sys.stderr)
    if tasks and not any(t.status == "evaluated" for t in tasks.values()):
        raise typer.Exit(NO_CANDIDATE)


@contextmanager
def _refusal_as_json(as_json: bool) -> Iterator[None]:
    """A UserError before the run starts is printed as ``{"status": "refused", "reason"}`` under --json."""
    try:
        yield
    except UserError as exc:
        if as_json:
            print(json.dumps({"status": "refused", "reason": str(exc)}))
        raise


def _check_endpoint(policy: PolicyConfig) -> None:
    """An llm policy's endpoint answers and serves its model, before anything is evaluated (exit 2 if not)."""
    if isinstance(policy, LLMPolicyConfig):
        from kernelkiln.llm.preflight import check_endpoint  # the SDKs load only for an llm run

        if (note := check_endpoint(policy.llm)) is not None:
            print(note, file=sys.stderr, flush=True)


# -- output -------------------------------------------------------------------------------
def _report(result: RunResult, as_json: bool) -> None:
    if as_json:
        print(result.json_text(), end="")
        return
    console = wide_console()
    table = Table(title=f"run {result.run_id} ({result.status})", title_justify="left")
    for col in ("task", "best", "in search", "start", "attempts", *VERDICTS, "tokens", "best.py"):
        table.add_column(col, justify="left" if col in ("task", "best.py") else "right")
    for name, t in result.tasks.items():
        confirmed = t.confirmation
        best = (
            fmt_x(t.confirmed_speedup) if confirmed and confirmed.correct else (confirmed.verdict if confirmed else "—")
        )
        table.add_row(
            name,
            best,
            fmt_x(t.best_speedup),
            fmt_x(t.start_speedup),
            str(t.attempts),
            *(str(t.verdicts.get(k, 0)) for k in VERDICTS),
            str(t.tokens),
            t.best or "—",
        )
    console.print(table)
    console.print(
        "Speedups over the PyTorch reference (geometric mean over workloads). best: the best candidate "
        "judged again with a longer timing budget when its task ended; in search: as the search measured "
        "it; start: the starting candidate's first evaluation."
    )
    for name, t in result.tasks.items():
        if t.confirmation and not t.confirmation.correct:
            console.print(
                f"{name}: its best failed when judged again: {t.confirmation.reason}", style="red", markup=False
            )
