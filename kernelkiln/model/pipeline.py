"""``optimize_model``: capture, cut, optimize by time share with memory, splice, verify and time.

The model is captured at each declared shape and the same region at every shape is one
place. Each distinct region becomes a KernelBench-format task in ``OUT/tasks/`` (one
workload per shape); the tasks are
optimized largest share first, each as its own optimizer run over the same store (so a
later region, or a later model, reads what earlier ones taught), with the run's budget
split by share. A region's best is spliced only when the guard confirmed it correct and
faster than the region's reference; the rest stays in torch and the report says why.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from kernelkiln.errors import UserError
from kernelkiln.lowering import Unsupported
from kernelkiln.memory.callbacks import AttemptResult
from kernelkiln.memory.memory import Memory
from kernelkiln.memory.signature import signature
from kernelkiln.model import against, artifact
from kernelkiln.model.capture import Captured, ExportFailed, capture
from kernelkiln.model.compilers import COMPILERS
from kernelkiln.model.dynamo import capture_graphs
from kernelkiln.model.endtoend import assemble, assemble_compiled
from kernelkiln.model.profile import Profile, profile
from kernelkiln.model.regions import Partition, Region, partition
from kernelkiln.model.report import LeftRow, ModelReport, RegionRow, amdahl
from kernelkiln.model.shapes import Declared, Place, Shape, places
from kernelkiln.model.splice import Kernel
from kernelkiln.model.taskfile import Spread, Unrenderable, render_workloads, workloads_key
from kernelkiln.orchestrator.config import MODEL_BUDGET_PER_TASK, MODEL_WALL_S, OptimizeConfig
from kernelkiln.orchestrator.observer import Observer
from kernelkiln.orchestrator.run import Optimizer, TaskSpec
from kernelkiln.orchestrator.starts import GENERATED, starting_code
from kernelkiln.orchestrator.task_run import task_id_of
from kernelkiln.platforms import machine_kind
from kernelkiln.platforms.host import fit_threads
from kernelkiln.store.records import Attempt
from kernelkiln.task import load_task

MIN_PER_TASK = 3  # the seed, and two tries of memory's best guesses


def model_config() -> OptimizeConfig:
    """The configuration a whole model is optimized with when none is given (``kiln model``'s defaults too)."""
    return OptimizeConfig(budget=MODEL_BUDGET_PER_TASK, max_wall_s=MODEL_WALL_S)


MIN_WALL_S = 60.0  # a task's least: its seed and a few tries, whatever its share


@dataclass
class ModelResult:
    """The model running the kernels in this process (a ``SplicedModel``, compiled in the form measured fastest;
    through dynamo, the model compiled with ``backend.Backend``; when none was kept, the user's own as the
    fastest baseline runs it: compiled with the fastest configuration where one beat eager) and the report."""

    model: torch.nn.Module
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


def _task_name(k: int, region: Region) -> str:
    main = next((o for o in region.ops if o not in ("view", "clone", "permute")), region.ops[0])
    return f"region_{k:02d}_{re.sub(r'[^a-z0-9]+', '_', main.lower()).strip('_')}"


def _budgets(shares: dict[str, float], total: int) -> dict[str, int]:
    """Each task's evaluations: ``total`` split by time share, at least ``MIN_PER_TASK``."""
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
    machine = machine_kind(config.platform, fit_threads(config.guard.threads)[0])
    sig = signature(
        task, task_id_of(task), code, generated=origin == GENERATED, platform=config.platform, machine=machine
    )
    return memory.prior(sig, None).reused_from


@dataclass
class Timed:
    """One declared shape as captured: its graphs (one from torch.export; dynamo's, in order), their
    profiles, and the regions of them all (``home``: a region's graph, by the region's id)."""

    captures: list[Captured]
    profiles: list[Profile]
    part: Partition
    home: dict[int, int]
    through: str  # "export" or "dynamo"

    def _profile(self, region: Region) -> Profile:
        return self.profiles[self.home[id(region)]]

    def share(self, region: Region) -> float:
        """Of the shape's time, all its graphs together."""
        total = sum(p.total for p in self.profiles)
        p = self._profile(region)
        return p.share(region.nodes) * p.total / total if total else 0.0

    def ms(self, region: Region) -> float:
        p = self._profile(region)
        return p.share(region.nodes) * p.total * 1e3

    def spreads(self, region: Region) -> dict[str, Spread]:
        return self._profile(region).spreads


def _capture(model: torch.nn.Module, shapes: Sequence[Declared], name: str, say: Callable[[str], None]) -> list[Timed]:
    """Each shape captured (torch.export; dynamo's graphs if export fails at the first), profiled and cut."""
    through_dynamo = False
    timed: list[Timed] = []
    for shape in shapes:
        at = f" at {shape.label}" if shape.label else ""
        if not through_dynamo:
            say(f"capturing {name} with torch.export{at}")
            try:
                captures = [capture(model, shape.example)]
            except ExportFailed as exc:
                if timed:  # the first shape exported: the others must be captured the same way
                    raise
                say(f"{exc}: capturing it through dynamo, graph by graph, instead")
                through_dynamo = True
        if through_dynamo:
            captures = capture_graphs(model, shape.example)
            say(f"dynamo captured {len(captures)} graph(s){at}")
        profiles = [profile(c, model) for c in captures]
        parts = [partition(c) for c in captures]
        home = {id(r): g for g, p in enumerate(parts) for r in p.regions}
        merged = Partition(tuple(r for p in parts for r in p.regions), tuple(x for p in parts for x in p.left))
        timed.append(Timed(captures, profiles, merged, home, "dynamo" if through_dynamo else "export"))
    return timed


def _left(parts: list[Partition]) -> list[LeftRow]:
    """What stayed in torch, at the first shape (the others' are the same operations at other sizes)."""
    from kernelkiln.lowering.trace import op_name

    counts = Counter((op_name(x.node.target), x.reason) for x in parts[0].left)
    return [LeftRow(op=op, count=n, reason=why) for (op, why), n in sorted(counts.items())]


def optimize_model(
    model: torch.nn.Module,
    shapes: Sequence[Declared],
    out: Path,
    memory: Memory,
    config: OptimizeConfig | None = None,
    model_budget: int | None = None,
    name: str | None = None,
    observer: Observer | None = None,
    splice_model_kernels: bool = False,
    compilers: tuple[str, ...] = tuple(COMPILERS),
    say: Callable[[str], None] = lambda line: None,
) -> ModelResult:
    """Optimize ``model`` at the declared ``shapes``; tasks, runs, the report and the saved kernels go under ``out``.

    ``config.budget``: evaluations per task on average (the model's total, split between its tasks by time
    share), or ``model_budget`` for the whole model; ``config.max_wall_s``: seconds for all the searches
    (split by share like the budget; None: no limit); without a config, ``model_config()``;
    ``splice_model_kernels``: splice kernels an LLM wrote (they run in this process, unsandboxed);
    ``compilers``: the torch.compile configurations timed beside it (``model.compilers``; none: eager alone).
    """
    config = config or model_config()
    threads = fit_threads(config.guard.threads)[0]  # the guard's rule, never every core (the CLI says so once)
    torch.set_num_threads(threads)
    config = config.model_copy(update={"guard": config.guard.model_copy(update={"threads": threads})})
    name = name or type(model).__name__
    out.mkdir(parents=True, exist_ok=True)

    timed = _capture(model, shapes, name, say)
    parts = [t.part for t in timed]
    groups: dict[str, list[Place]] = {}
    for place in places(parts):
        groups.setdefault(workloads_key(place.ordered()), []).append(place)
    # A task's share: its places' share of each shape's time, averaged over the declared shapes.
    shares = {
        k: sum(timed[w].share(r) for p in ps for w, r in p.regions.items()) / len(shapes) for k, ps in groups.items()
    }
    order = sorted(groups, key=lambda k: -shares[k])
    left = sum(len(p.left) for p in parts)
    per = " over the declared shapes" if len(shapes) > 1 else ""
    say(f"{sum(len(p.regions) for p in parts)} regions{per}, {len(groups)} distinct; {left} operations stay in torch")

    rows: dict[str, RegionRow] = {}
    paths: dict[str, Path] = {}
    for k, key in enumerate(order):
        rows[key], path = _write_task(k, groups[key], shares[key], timed, shapes, out, config)
        if path is not None:
            paths[key] = path
    total = model_budget if model_budget is not None else config.budget * len(paths)
    budgets = _budgets({k: shares[k] for k in paths}, total)
    walls = _walls({k: shares[k] for k in paths}, config.max_wall_s)
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
    if compilers:
        for key in list(kernels):
            say(f"timing {paths[key].name}'s kernel against its region, eager and under torch.compile")
            rows[key], beats = _against(rows[key], paths[key], kernels[key], compilers)
            if not beats:
                del kernels[key]
    through = timed[0].through
    at = [
        Shape(d, t.captures[0] if through == "export" else None, {k: [p.regions[w] for p in ps if w in p.regions]
              for k, ps in groups.items()})
        for w, (d, t) in enumerate(zip(shapes, timed, strict=True))
    ]  # fmt: skip
    done = (assemble if through == "export" else assemble_compiled)(model, at, kernels, compilers, say)
    for key, why in done.failures.items():
        rows[key] = rows[key].model_copy(update={"status": "failed", "reason": why})
    for key in set(kernels) - set(done.failures) - set(done.kernels):  # kept nowhere: every shape dropped them
        why = "; ".join(e.dropped for e in done.ends if e.dropped)
        rows[key] = rows[key].model_copy(update={"status": "dropped", "reason": why})
    saved = ""
    if done.kernels:
        kept = [s for s, k in zip(at, done.kept, strict=True) if k]
        saved = artifact.save(out, name, kept, threads, done.kernels, through, done.form).name
        say(f"saved the kernels in {out / saved}: kernelkiln.load_model({str(out)!r}, model) runs them")
    else:
        artifact.discard(out)
    report = ModelReport(
        model=name,
        inputs=shapes[0].inputs(),
        threads=threads,
        budget=sum(budgets.values()),
        regions=[rows[k] for k in order],
        left=_left(parts),
        shapes=[s.label for s in shapes if s.label],
        end_to_end=[
            e.model_copy(update={"predicted": amdahl([rows[k] for k in order]) if e.kept else None}) for e in done.ends
        ],
        handed_back=done.handed,
        saved=saved,
    )
    report.write(out)
    return ModelResult(done.model, report)


def _against(row: RegionRow, path: Path, kernel: Kernel, baselines: tuple[str, ...]) -> tuple[RegionRow, bool]:
    """``row`` with its kernel judged against the region's eager and compiled forms; whether it is kept."""
    judged = against.judge(path, kernel, baselines)
    row = row.model_copy(update={"fastest": judged.fastest, "vs_fastest": judged.vs_fastest})
    if judged.failure:
        return row.model_copy(update={"status": "slower", "reason": judged.failure}), False
    return row, True


def _write_task(
    k: int,
    places: list[Place],
    share: float,
    timed: list[Timed],
    shapes: Sequence[Declared],
    out: Path,
    config: OptimizeConfig,
) -> tuple[RegionRow, Path | None]:
    first = places[0]
    regions = first.ordered()
    at = sorted(first.regions)
    name = _task_name(k, regions[0])
    row = RegionRow(
        task=f"tasks/{name}.py",
        ops=list(regions[0].ops),
        places=len(places),
        share=share,
        reference_ms=timed[at[0]].ms(regions[0]),
        status="not run",
    )
    title = f"{name}: {len(places)} place(s) in the model, {share:.1%} of its time at the declared inputs."
    try:
        spreads = [timed[w].spreads(r) for w, r in zip(at, regions, strict=True)]
        source = render_workloads(regions, title, spreads, [shapes[w].label or f"w{w}" for w in at])
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
    (summary,) = result.tasks.values()
    origin = "generated" if config.policy.kind == "tuner" else "model-written"
    row = row.model_copy(
        update={
            "budget": config.budget,
            "evaluations": summary.attempts,
            "speedup": summary.speedup,
            "origin": origin if summary.best else "",
            "memory": "reused" if any("exact match" in n for n in notes) else ("transfer" if notes else "new"),
            "run": str(run_dir.relative_to(out)),
        }
    )
    confirmation = summary.confirmation
    if summary.best is None:
        return row.model_copy(update={"status": "failed", "reason": summary.reason or "no correct candidate"}), None
    if confirmation is not None and not confirmation.correct:
        return row.model_copy(update={"status": "failed", "reason": confirmation.reason}), None
    beat = confirmation.verdict == "KEEP" if confirmation is not None else (summary.speedup or 0.0) > 1.0
    if not beat:
        return row.model_copy(update={"status": "slower", "reason": "its best did not beat torch beyond noise"}), None
    if origin == "model-written" and not splice_model_kernels:
        reason = "written by a model: splicing runs it in your process (--splice-model-kernels)"
        return row.model_copy(update={"status": "unchecked", "reason": reason}), None
    kernel = Kernel(key, Path(summary.best).read_text(), origin)
    return row.model_copy(update={"status": "spliced"}), kernel
