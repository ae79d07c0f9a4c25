"""``optimize_model``: capture, cut, optimize by time share with memory, splice, verify and time.

Each distinct region becomes a KernelBench-format task in ``OUT/tasks/``; the regions are
optimized largest share first, each as its own optimizer run over the same store (so a
later region, or a later model, reads what earlier ones taught), with the run's budget
split by share. A region's best is spliced only when the guard confirmed it correct and
faster than the region's reference; the rest stays in torch and the report says why.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kernelkiln.errors import UserError, described
from kernelkiln.lowering import Unsupported
from kernelkiln.memory.callbacks import AttemptResult
from kernelkiln.memory.memory import Memory
from kernelkiln.memory.signature import signature
from kernelkiln.model import artifact, verify
from kernelkiln.model.capture import Captured, capture
from kernelkiln.model.profile import Profile, profile
from kernelkiln.model.regions import Partition, Region, partition
from kernelkiln.model.report import EndToEnd, LeftRow, ModelReport, RegionRow
from kernelkiln.model.splice import Kernel, SpliceError, splice
from kernelkiln.model.spliced import SplicedModel
from kernelkiln.model.taskfile import Unrenderable, render, structure_key
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.observer import Observer
from kernelkiln.orchestrator.run import Optimizer, TaskSpec
from kernelkiln.orchestrator.seeds import GENERATED, starting_code
from kernelkiln.orchestrator.task_run import task_id_of
from kernelkiln.platforms import machine_kind
from kernelkiln.platforms.host import default_threads
from kernelkiln.speedup import fmt_x
from kernelkiln.store.records import Attempt
from kernelkiln.task import load_task

PER_TASK = 15  # evaluations per distinct region when no budget is given
MIN_PER_TASK = 3  # the seed, and two tries of memory's best guesses
WALL_S = 1200.0  # the searches' wall time when none is given: a large region's evaluation takes most of a minute
MIN_WALL_S = 60.0  # a task's least: its seed and a few tries, whatever its share


@dataclass
class ModelResult:
    """The spliced model (runs in this process) and the report."""

    model: SplicedModel
    report: ModelReport


class _Notes(Observer):
    """The caller's observer, keeping memory's notes on the current task (an exact match reused, a transfer)."""

    def __init__(self, inner: Observer):
        self.inner = inner
        self.notes: list[str] = []

    def seeded(self, task_id: str, origin: str) -> None:
        self.inner.seeded(task_id, origin)

    def task_started(self, task_id: str, budget: int, done: int, agents: list[str]) -> None:
        self.inner.task_started(task_id, budget, done, agents)

    def evaluating(self, task_id: str, agent: str, summary: str) -> None:
        self.inner.evaluating(task_id, agent, summary)

    def after_verdict(self, result: AttemptResult) -> None:
        self.inner.after_verdict(result)

    def confirming(self, task_id: str, seconds: float) -> None:
        self.inner.confirming(task_id, seconds)

    def task_finished(self, task_id: str, incumbent: Attempt | None) -> None:
        self.inner.task_finished(task_id, incumbent)

    def note(self, line: str) -> None:
        self.notes.append(line)
        self.inner.note(line)


def _describe(x: Any) -> str:
    return f"{x.dtype}{list(x.shape)}".replace("torch.", "") if isinstance(x, torch.Tensor) else repr(x)


def _task_name(k: int, region: Region) -> str:
    main = next((o for o in region.ops if o not in ("view", "clone", "permute")), region.ops[0])
    return f"region_{k:02d}_{re.sub(r'[^a-z0-9]+', '_', main.lower()).strip('_')}"


def _budgets(shares: dict[str, float], total: int | None) -> dict[str, int]:
    """Each task's evaluations: ``total`` split by time share, at least ``MIN_PER_TASK``."""
    if total is None:
        total = PER_TASK * len(shares)
    whole = sum(shares.values()) or 1.0
    return {k: max(MIN_PER_TASK, round(total * s / whole)) for k, s in shares.items()}


def _walls(shares: dict[str, float], total: float | None) -> dict[str, float | None]:
    """Each task's wall time for starting evaluations: ``total`` split by time share, at least ``MIN_WALL_S``."""
    whole = sum(shares.values()) or 1.0
    return {k: None if total is None else max(MIN_WALL_S, total * s / whole) for k, s in shares.items()}


def _exact_match(path: Path, config: OptimizeConfig, memory: Memory) -> str | None:
    """The stored task whose search memory would reuse as this one's (an exact match), if it holds one."""
    task = load_task(path, {})
    code, origin = starting_code(task, config)
    machine = machine_kind(config.platform, config.guard.threads or default_threads())
    sig = signature(
        task, task_id_of(task), code, generated=origin == GENERATED, platform=config.platform, machine=machine
    )
    return memory.prior(sig, None).reused_from


def _left(part: Partition) -> list[LeftRow]:
    from kernelkiln.lowering.trace import op_name

    counts = Counter((op_name(x.node.target), x.reason) for x in part.left)
    return [LeftRow(op=op, count=n, reason=why) for (op, why), n in sorted(counts.items())]


def optimize_model(
    model: torch.nn.Module,
    example_inputs: tuple[Any, ...],
    out: Path,
    memory: Memory,
    config: OptimizeConfig | None = None,
    budget: int | None = None,
    max_wall_s: float | None = WALL_S,
    make_inputs: Callable[[], tuple[Any, ...]] | None = None,
    name: str | None = None,
    observer: Observer | None = None,
    splice_model_kernels: bool = False,
    compare_compile: bool = True,
    say: Callable[[str], None] = lambda line: None,
) -> ModelResult:
    """Optimize ``model`` at ``example_inputs``; tasks, runs and the report go under ``out``.

    ``budget``: evaluations for the whole model (default ``PER_TASK`` per distinct region);
    ``max_wall_s``: seconds for all the searches (split by share like the budget; None: no limit);
    ``make_inputs``: draws fresh inputs for the end-to-end check (default: the examples);
    ``splice_model_kernels``: splice kernels an LLM wrote (they run in this process, unsandboxed).
    """
    config = config or OptimizeConfig()
    threads = config.guard.threads or torch.get_num_threads()
    torch.set_num_threads(threads)
    config = config.model_copy(update={"guard": config.guard.model_copy(update={"threads": threads})})
    example = tuple(example_inputs)
    draw = make_inputs or (lambda: example)
    name = name or type(model).__name__
    out.mkdir(parents=True, exist_ok=True)

    say(f"capturing {name} with torch.export")
    captured = capture(model, example)
    timed = profile(captured, model)
    part = partition(captured)
    groups: dict[str, list[Region]] = {}
    for region in part.regions:
        groups.setdefault(structure_key(region), []).append(region)
    shares = {k: sum(timed.share(r.nodes) for r in rs) for k, rs in groups.items()}
    order = sorted(groups, key=lambda k: -shares[k])
    say(f"{len(part.regions)} regions, {len(groups)} distinct; {len(part.left)} operations stay in torch")

    rows: dict[str, RegionRow] = {}
    paths: dict[str, Path] = {}
    for k, key in enumerate(order):
        rows[key], path = _write_task(k, groups[key], shares[key], timed, out, config)
        if path is not None:
            paths[key] = path
    budgets = _budgets({k: shares[k] for k in paths}, budget)
    walls = _walls({k: shares[k] for k in paths}, max_wall_s)
    kernels: dict[str, Kernel] = {}
    optimizer_observer = _Notes(observer or Observer())
    for n, key in enumerate([k for k in order if k in paths], 1):
        known = _exact_match(paths[key], config, memory)
        if known is not None:  # searched before: its best first, then memory's next guesses
            budgets[key] = min(budgets[key], MIN_PER_TASK)
        held = f"; memory holds it ({known})" if known else ""
        share = f"{shares[key]:.1%} of the time"
        say(f"region {n}/{len(paths)}: {paths[key].name} ({share}, {budgets[key]} evaluations{held})")
        task_config = config.model_copy(update={"budget": budgets[key], "max_wall_s": walls[key]})
        row, kernel = _optimize(
            key, rows[key], paths[key], task_config, memory, optimizer_observer, out, splice_model_kernels
        )
        rows[key] = row
        if kernel is not None:
            kernels[key] = kernel
    spliced, kernels, rows = _spliced(model, captured, groups, kernels, rows, draw, say)
    say(f"timing eager{', torch.compile' if compare_compile else ''} and the spliced model side by side")
    end = _end_to_end(model, spliced, example, draw, compare_compile)
    slower = end.vs_eager_interval is not None and end.vs_eager_interval[1] < 1.0
    if kernels and (not end.correct or slower):  # the user's model is never handed back wrong or slower
        why = (
            f"together the kernels disagree with eager: {end.failure}"
            if not end.correct
            else f"the spliced model was slower than eager end to end ({fmt_x(end.vs_eager)})"
        )
        for key in kernels:
            rows[key] = rows[key].model_copy(update={"status": "dropped", "reason": why})
        say(f"no kernel kept: {why}")
        spliced = SplicedModel(model, captured, None)
        end = end.model_copy(update={"kept": False})
        kernels = {}
    inputs = [_describe(x) for x in example]
    saved = ""
    if kernels:
        places = {k: len(groups[k]) for k in kernels}
        saved = artifact.save(out, name, example, inputs, threads, kernels, places).name
        say(f"saved the kernels in {out / saved}: kernelkiln.load_model({str(out)!r}, model) runs them")
    else:
        artifact.discard(out)
    report = ModelReport(
        model=name,
        inputs=inputs,
        threads=threads,
        budget=sum(budgets.values()),
        regions=[rows[k] for k in order],
        left=_left(part),
        end_to_end=end,
        saved=saved,
    )
    report.write(out)
    return ModelResult(spliced, report)


def _write_task(
    k: int, regions: list[Region], share: float, timed: Profile, out: Path, config: OptimizeConfig
) -> tuple[RegionRow, Path | None]:
    first = regions[0]
    name = _task_name(k, first)
    row = RegionRow(
        task=f"tasks/{name}.py",
        ops=list(first.ops),
        places=len(regions),
        share=share,
        reference_ms=timed.share(first.nodes) * timed.total * 1e3,
        status="not run",
    )
    title = f"{name}: {len(regions)} place(s) in the model, {share:.1%} of its time at the example inputs."
    try:
        source = render(first, title, timed.spreads)
    except Unrenderable as exc:
        return row.model_copy(update={"status": "refused", "reason": str(exc)}), None
    path = out / "tasks" / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    try:  # the seed the run starts from, made once: starting_code keeps it for the run and memory's lookup
        starting_code(load_task(path, {}), config)
    except (Unsupported, UserError) as exc:
        return row.model_copy(update={"status": "refused", "reason": str(exc)}), None
    return row, path


def _optimize(
    key: str,
    row: RegionRow,
    path: Path,
    config: OptimizeConfig,
    memory: Memory,
    observer: _Notes,
    out: Path,
    splice_model_kernels: bool,
) -> tuple[RegionRow, Kernel | None]:
    run_dir = out / "runs" / path.stem
    observer.notes.clear()
    result = Optimizer(memory, out / "runs", observer).start([TaskSpec(str(path), {})], config, run_dir)
    notes = list(observer.notes)
    (summary,) = result["tasks"].values()
    confirmation = summary.get("confirmation")
    if confirmation is not None:
        speedup = summary["confirmed_speedup"] if confirmation["correct"] else None
    else:
        speedup = summary["best_speedup"]
    origin = "generated" if config.policy.kind == "tuner" else "model-written"
    row = row.model_copy(
        update={
            "budget": config.budget,
            "evaluations": summary["attempts"],
            "speedup": speedup,
            "origin": origin if summary["best"] else "",
            "memory": "reused" if any("exact match" in n for n in notes) else ("transfer" if notes else "new"),
            "run": str(run_dir.relative_to(out)),
        }
    )
    if summary["best"] is None:
        return row.model_copy(update={"status": "failed", "reason": summary["reason"] or "no correct candidate"}), None
    if confirmation is not None and not confirmation["correct"]:
        return row.model_copy(update={"status": "failed", "reason": confirmation["reason"]}), None
    beat = confirmation["verdict"] == "KEEP" if confirmation is not None else (speedup or 0.0) > 1.0
    if not beat:
        return row.model_copy(update={"status": "slower", "reason": "its best did not beat torch beyond noise"}), None
    if origin == "model-written" and not splice_model_kernels:
        reason = "written by a model: splicing runs it in your process (--splice-model-kernels)"
        return row.model_copy(update={"status": "unchecked", "reason": reason}), None
    kernel = Kernel(key, Path(summary["best"]).read_text(), origin)
    return row.model_copy(update={"status": "spliced"}), kernel


def _spliced(
    model: torch.nn.Module,
    captured: Captured,
    groups: dict[str, list[Region]],
    kernels: dict[str, Kernel],
    rows: dict[str, RegionRow],
    draw: Callable[[], tuple[Any, ...]],
    say: Callable[[str], None],
) -> tuple[SplicedModel, dict[str, Kernel], dict[str, RegionRow]]:
    """The model with every kernel that runs and agrees spliced; a kernel that does not is dropped, with why."""
    say(f"splicing {len(kernels)} kernel(s) and checking the model end to end")
    kept = dict(kernels)
    for key, kernel in kernels.items():  # each alone first: a failure names its region
        try:
            alone = SplicedModel(model, captured, splice(captured, {key: groups[key]}, {key: kernel}))
            result = verify.check(model, alone, draw, trials=1)
            failure = result.failure
        except (SpliceError, RuntimeError) as exc:
            failure = described(exc)
        if failure:
            del kept[key]
            rows[key] = rows[key].model_copy(update={"status": "failed", "reason": f"in the model: {failure}"})
    graph = splice(captured, {k: groups[k] for k in kept}, kept)
    return SplicedModel(model, captured, graph), kept, rows


def _end_to_end(
    model: torch.nn.Module,
    spliced: SplicedModel,
    example: tuple[Any, ...],
    draw: Callable[[], tuple[Any, ...]],
    compare_compile: bool,
) -> EndToEnd:
    result = verify.check(model, spliced, draw)
    arms: dict[str, Callable[[], Any]] = {"eager": lambda: model(*example)}
    compile_error = ""
    if compare_compile:
        compiled = torch.compile(model)
        try:
            with torch.no_grad():
                compiled(*example)
            arms["compile"] = lambda: compiled(*example)
        except Exception as exc:
            compile_error = described(exc)[:300]
    arms["spliced"] = lambda: spliced(*example)
    timing = verify.time_arms(arms)
    ms = {k: v * 1e3 for k, v in timing.seconds.items()}
    return EndToEnd(
        correct=not result.failure,
        trials=result.trials,
        max_abs_error=result.max_abs_error,
        failure=result.failure,
        eager_ms=ms["eager"],
        compile_ms=ms.get("compile"),
        spliced_ms=ms["spliced"],
        vs_eager=timing.speedup["spliced"],
        vs_eager_interval=timing.interval["spliced"],
        vs_compile=timing.ratio("compile", "spliced") if "compile" in timing.seconds else None,
        compile_error=compile_error,
        rounds=timing.rounds,
    )
