"""`kiln ablate`: equal-budget comparisons of the system's mechanisms over repeated trajectories.

For every study and repeat k, each arm's unit (``passes.Units``: its memory mode) optimizes the
chosen tasks with the same budget and the same random seed k. Figures come from every unit's
trajectories, each candidate valued by the ablation's consensus (``figures``): per run, geometric
means over its measured tasks of the final and anytime speedups and the evaluations to 95% of the
best known; across the K repeats each arm gets a geometric mean and a 95% t interval, and every
arm a ratio to the study's first arm and to best-of-N (the floor), paired by repeat. Finished
units are kept in DIR/runs.jsonl under a key of everything that decides them, so an interrupted
ablation picks up where it stopped, and arms with the same settings run once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import multiprocessing
import statistics
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelkiln.bench import figures as F
from kernelkiln.bench.passes import Split, Units
from kernelkiln.bench.replay import Replay
from kernelkiln.bench.space_values import TableConsensus
from kernelkiln.bench.stats import geometric_interval, mean_interval, paired_ratio
from kernelkiln.bench.studies import CONTEXT_TIME_BUDGET_S, EMPTY, FLOOR, MEMORY, Arm, Study, merged, scripted_player
from kernelkiln.errors import UserError
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.observer import Observer
from kernelkiln.task import Task, load_task

SPEED_FIGURES = ("speedup", "anytime", "evals_to_95")
TOKEN_FIGURES = ("prompt_tokens", "max_prompt_tokens")


@dataclass(frozen=True)
class Unit:
    """One arm's work at one repeat."""

    key: str
    arm: Arm
    repeat: int
    config: OptimizeConfig
    scripted: bool
    needs: str | None = None  # the unit whose stores it takes (crossfit, or the empty store's)


class Ablation:
    """Runs studies' arms over tasks, K repeats each, and summarizes them."""

    def __init__(
        self,
        out_dir: Path,
        base: OptimizeConfig,
        observer: Observer | None = None,
        progress: Callable[[str], None] = print,
        reuse_budget: int = 3,
        replay: Replay | None = None,
        jobs: int = 1,
    ):
        """``replay``: judge every evaluation from a measured-spaces dataset instead of on this machine;
        ``jobs``: repeats run side by side in that many processes (a replay's only: real evaluations would
        time each other)."""
        if jobs > 1 and replay is None:
            raise UserError("--jobs runs repeats side by side on a --replay only: real evaluations time each other")
        self.out_dir, self.base, self.observer, self.progress = out_dir, base, observer, progress
        self.reuse_budget, self.replay = reuse_budget, replay
        self.ledger = out_dir / "runs.jsonl"
        self.jobs = jobs

    def config(self, study: Study, arm: Arm, k: int) -> OptimizeConfig:
        """The arm's configuration for repeat ``k``."""
        base = self.base.model_dump(mode="json")
        if study.metric == "tokens":
            base["guard"]["time_budget_s"] = min(base["guard"]["time_budget_s"], CONTEXT_TIME_BUDGET_S)
        patch = (
            {**arm.patch, "budget": min(self.base.budget, self.reuse_budget)} if arm.memory == "reuse" else arm.patch
        )
        if patch.get("policy", {}).get("kind", base["policy"]["kind"]) != base["policy"]["kind"]:
            del base["policy"]  # the arm runs another policy: none of the base policy's fields apply
        config = OptimizeConfig.model_validate(merged(base, patch))
        return config.model_copy(update={"policy": config.policy.for_repeat(k)})

    def plan(self, chosen: list[Study], tasks: list[Task], repeat: int) -> dict[tuple[str, str, int], Unit]:
        """Every (study, arm label, repeat)'s unit; arms with equal settings share one."""
        units: dict[tuple[str, str, int], Unit] = {}
        names = [[str(t.path), t.overrides] for t in tasks]
        ids = [t.id for t in tasks]
        floor = Study("floor", "", "speedup", (FLOOR,))
        for k in range(repeat):
            for study in [floor] * any(s.metric == "speedup" for s in chosen) + chosen:
                for arm in study.arms:
                    needs = None
                    if arm.memory in ("readonly", "reuse", "task-out", "family-out"):  # they take stores built
                        # by a crossfit unit (read-only, reuse) or by the empty store's unit (held-out)
                        builder = {"readonly": MEMORY, "reuse": study.arms[0]}.get(arm.memory, EMPTY)
                        built = units.setdefault(
                            ("-", builder.label, k), self._unit(study, builder, k, names, ids, None)
                        )
                        needs = built.key
                    units[(study.name, arm.label, k)] = self._unit(study, arm, k, names, ids, needs)
        return units

    def _unit(self, study: Study, arm: Arm, k: int, names: list, ids: list[str], needs: str | None) -> Unit:
        config = self.config(study, arm, k)
        what = {
            "config": config.model_dump(mode="json"),
            "memory": arm.memory,
            "tasks": names,
            "scripted": study.metric == "tokens",
            "needs": needs,
            **({"replay": self.replay.identity(ids)} if self.replay is not None else {}),
        }
        key = hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]
        return Unit(key, arm, k, config, study.metric == "tokens", needs)

    def run(self, chosen: list[Study], tasks: list[Task], repeat: int, budgets: tuple[int, ...] = ()) -> dict[str, Any]:
        """Every study's arms over ``tasks``, ``repeat`` times; the summary is written to DIR/ablation.json.
        ``budgets``: smaller budgets whose figures are added (``by_budget``), from the runs' prefixes."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        done = self._load()
        plan = self.plan(chosen, tasks, repeat)
        order = sorted({u.key: u for u in plan.values()}.values(), key=lambda u: (u.repeat, u.needs is not None))
        needed = {u.needs for u in order if u.needs is not None and u.key not in done}
        gone = {k for k in needed if k in done and not (self.out_dir / "runs" / k).is_dir()}
        todo = [u for u in order if u.key not in done or u.key in gone]
        self.progress(
            f"{len(todo)} runs to go ({len(order) - len(todo)} done earlier), "
            f"each {len(tasks)} tasks x {self.base.budget} evaluations"
            + (f"; {len(gone)} of them again, the stores other runs take from them gone" if gone else "")
        )
        side_by_side = self.jobs > 1 and len({u.repeat for u in todo}) > 1
        if side_by_side:
            done.update(self._side_by_side(todo, tasks))
        for n, unit in enumerate([] if side_by_side else todo, 1):
            self.progress(
                f"[run {n}/{len(todo)}] {unit.arm.label} ({unit.arm.memory}), repeat {unit.repeat + 1}/{repeat}"
            )
            done[unit.key] = self._record(unit, self._execute(unit, tasks))
        table = TableConsensus(self.replay.dataset, self.replay.machine) if self.replay is not None else None
        summary = Summary(self.base.budget, done, plan, repeat, table).of(chosen, tasks)
        smaller = sorted(b for b in set(budgets) if b < self.base.budget)
        if smaller:
            summary["by_budget"] = {
                str(b): _headline(Summary(b, done, plan, repeat, table).of(chosen, tasks)) for b in smaller
            }
        (self.out_dir / "ablation.json").write_text(json.dumps(summary, indent=2) + "\n")
        return summary

    def _record(self, unit: Unit, entry: dict[str, Any]) -> dict[str, Any]:
        """``entry`` appended to the ledger, under a lock: repeats run side by side append to one file."""
        line = {"key": unit.key, "arm": unit.arm.label, "memory": unit.arm.memory, "repeat": unit.repeat, **entry}
        with self.ledger.open("a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.write(json.dumps(line) + "\n")
        return entry

    def _side_by_side(self, todo: list[Unit], tasks: list[Task]) -> dict[str, dict[str, Any]]:
        """``todo``'s repeats in ``jobs`` processes, each repeat's units in order in one of them (a replay's
        repeats share nothing: each draws with its own seed and builds its own stores)."""
        by_repeat: dict[int, list[Unit]] = {}
        for unit in todo:
            by_repeat.setdefault(unit.repeat, []).append(unit)
        specs = [(str(t.path), t.overrides) for t in tasks]
        done: dict[str, dict[str, Any]] = {}
        context = multiprocessing.get_context("spawn")  # this process runs threads: no fork
        with ProcessPoolExecutor(min(self.jobs, len(by_repeat)), mp_context=context) as executor:
            futures = [executor.submit(_run_units, self._detached(), units, specs) for units in by_repeat.values()]
            self.progress(f"{len(by_repeat)} repeats in {min(self.jobs, len(by_repeat))} processes side by side")
            for n, future in enumerate(as_completed(futures), 1):
                finished = future.result()
                done.update(finished)
                self.progress(f"[{n}/{len(by_repeat)} repeats] {len(finished)} runs finished")
        return done

    def _detached(self) -> Ablation:
        """This ablation without what only this process can hold (its observer and progress line)."""
        return Ablation(self.out_dir, self.base, None, _silent, self.reuse_budget, self.replay)

    def _execute(self, unit: Unit, tasks: list[Task]) -> dict[str, Any]:
        def client_for(task: Task):
            if not unit.scripted:
                return None
            start = task.start_for(unit.config.platform)
            return scripted_player(start.read_text() if start else "", unit.config.budget, salt=unit.repeat)

        pool = self.replay.pool(unit.repeat) if self.replay is not None else None
        units = Units(self.out_dir / "runs", self.observer, client_for, pool)
        built = self.out_dir / "runs" / (unit.needs or "")
        if unit.arm.memory == "crossfit":
            result = units.crossfit(unit.key, tasks, unit.config)
        elif unit.arm.memory == "readonly":
            result = units.readonly(unit.key, tasks, unit.config, built)
        elif unit.arm.memory == "reuse":
            result = units.reuse(unit.key, tasks, unit.config, built)
        elif unit.arm.memory in ("task-out", "family-out"):
            split: Split = "task" if unit.arm.memory == "task-out" else "family"
            result = units.held_out(unit.key, tasks, unit.config, split, built)
        else:
            result = units.empty(unit.key, tasks, unit.config)
        seconds = sum(e["seconds"] for passes in result.values() for e in passes.values())
        return {"tasks": result, "seconds": round(seconds, 1)}

    def _load(self) -> dict[str, dict[str, Any]]:
        if not self.ledger.exists():
            return {}
        done = {}
        for line in self.ledger.read_text().splitlines():
            if line.strip():
                entry = json.loads(line)
                done[entry["key"]] = {"tasks": entry["tasks"], "seconds": entry["seconds"]}
        return done


def _silent(message: str) -> None:
    pass


def _run_units(ablation: Ablation, units: list[Unit], specs: list[tuple[str, dict]]) -> dict[str, dict[str, Any]]:
    """One repeat's units in order, in a process of its own (``Ablation._side_by_side``)."""
    tasks = [load_task(Path(path), overrides) for path, overrides in specs]  # in the order the caller gave
    return {unit.key: ablation._record(unit, ablation._execute(unit, tasks)) for unit in units}


class Summary:
    """ablation.json's object from the finished units."""

    def __init__(
        self,
        budget: int,
        done: dict[str, dict],
        plan: dict[tuple[str, str, int], Unit],
        repeat: int,
        table: TableConsensus | None = None,
    ):
        """``table``: a replayed study's figures (the dataset's), in place of the ablation's own consensus."""
        self.budget, self.done, self.plan, self.repeat, self.table = budget, done, plan, repeat, table
        self.consensus = table or F.Consensus(
            {task: _steps(entry)}
            for unit in done.values()
            for task, passes in unit["tasks"].items()
            for entry in passes.values()
        )

    def _trajectories(self, key: str, pass_name: str | None = None) -> dict[str, F.Trajectory]:
        """The unit's measured trajectories by task; with ``pass_name``, that pass's, whatever their role."""
        return {
            task: _steps(entry)[: self.budget]  # a smaller budget's figures are its runs' prefixes
            for task, passes in self.done[key]["tasks"].items()
            for name, entry in passes.items()
            if (name == pass_name if pass_name is not None else entry["role"] == "measured")
        }

    def _runs(self, study: str, arm: Arm) -> dict[int, dict]:
        return {
            k: F.run_figures(self._trajectories(self.plan[(study, arm.label, k)].key), self.consensus, self.budget)
            for k in range(self.repeat)
        }

    def of(self, chosen: list[Study], tasks: list[Task]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "budget": self.budget,
            "repeat": self.repeat,
            "tasks": [t.name for t in tasks],
            "figures": "consensus: each candidate valued by the median of its measurements across the ablation",
            "studies": {},
            "seconds": sum(self.done[k]["seconds"] for k in {u.key for u in self.plan.values()}),
        }
        floor = self._runs("floor", FLOOR) if ("floor", FLOOR.label, 0) in self.plan else None
        if floor is not None:
            out["floor"] = self._arm_row(FLOOR, floor, SPEED_FIGURES, "floor")
        for study in chosen:
            out["studies"][study.name] = self._reuse(study) if study.metric == "reuse" else self._compare(study, floor)
        return out

    def _arm_row(self, arm: Arm, runs: dict[int, dict], figures: tuple[str, ...], study: str) -> dict[str, Any]:
        row: dict[str, Any] = {
            "arm": arm.label,
            "memory": arm.memory,
            "runs": [{k: v for k, v in runs[k].items() if k != "normalized"} for k in sorted(runs)],
        }
        for name in figures:
            interval = geometric_interval([runs[k][name] for k in sorted(runs)])
            row[name] = interval.as_dict() if interval else None
        curves = [c for k in sorted(runs) for c in runs[k]["normalized"].values()]
        if self.table is not None:  # replayed: against the measured optimum, and random search's exact curve
            row.update(self._against_table(runs))
        row["reach"] = F.reach_share(curves, self.budget)
        row["curve"] = [statistics.fmean(c[i] for c in curves) for i in range(self.budget)] if curves else []
        row["seconds"] = sum(self.done[self.plan[(study, arm.label, k)].key]["seconds"] for k in range(self.repeat))
        return row

    def _against_table(self, runs: dict[int, dict]) -> dict[str, Any]:
        """Willemsen's score (mean over tasks, then a 95% interval over repeats) and the share of (task, repeat)
        runs whose final incumbent is the measured optimum."""
        assert self.table is not None
        table = self.table
        scores: list[float | None] = []
        finals: list[bool] = []
        for k in sorted(runs):
            per_task = [
                s
                for task, curve in runs[k]["normalized"].items()
                if (s := F.willemsen(curve, table.random(task, self.budget))) is not None
            ]
            if per_task:
                scores.append(statistics.fmean(per_task))
            finals += [curve[-1] >= 1.0 - 1e-9 for curve in runs[k]["normalized"].values() if curve]
        interval = mean_interval(scores)
        return {
            "score": interval.as_dict() if interval else None,
            "p_optimum": sum(finals) / len(finals) if finals else None,
        }

    def _compare(self, study: Study, floor: dict[int, dict] | None) -> dict[str, Any]:
        figures = SPEED_FIGURES if study.metric == "speedup" else TOKEN_FIGURES
        per_arm = {arm.label: self._runs(study.name, arm) for arm in study.arms}
        arms = [self._arm_row(arm, per_arm[arm.label], figures, study.name) for arm in study.arms]
        reference = per_arm[study.arms[0].label]
        for row, arm in zip(arms, study.arms, strict=True):
            mine = per_arm[arm.label]
            if arm is not study.arms[0]:
                row["ratio"] = {n: _paired(mine, reference, n) for n in figures}
                if study.metric == "speedup":
                    row["wilcoxon"] = F.across_tasks(mine, reference)
            if len(study.arms) > 2:  # e.g. transfer over the generic portfolio, paired by repeat
                row["vs_arms"] = {
                    other.label: {n: _paired(mine, per_arm[other.label], n) for n in figures}
                    for other in study.arms[1:]
                    if other is not arm
                }
            if floor is not None and study.metric == "speedup":
                row["vs_floor"] = {n: _paired(mine, floor, n) for n in figures}
        units = {self.plan[(study.name, a.label, k)].key for a in study.arms for k in range(self.repeat)}
        units |= {
            needs
            for a in study.arms
            for k in range(self.repeat)
            if (needs := self.plan[(study.name, a.label, k)].needs) is not None
        }
        return {
            "question": study.question,
            "metric": study.metric,
            "arms": arms,
            "reference": study.arms[0].label,
            "seconds": sum(self.done[u]["seconds"] for u in units),
        }

    def _reuse(self, study: Study) -> dict[str, Any]:
        _, second_arm = study.arms
        runs = []
        for k in range(self.repeat):
            second = self.plan[(study.name, second_arm.label, k)]
            assert second.needs is not None  # a reuse arm takes the stores its first arm built
            first = self._trajectories(second.needs, pass_name="A")
            runs.append(F.reuse_figures(self._trajectories(second.key), first, self.consensus, second.config.budget))
        interval = mean_interval([r["evaluations_to_first_best"] for r in runs])
        units = {self.plan[(study.name, a.label, k)].key for a in study.arms for k in range(self.repeat)}
        return {
            "question": study.question,
            "metric": "reuse",
            "second_pass_budget": runs and self.plan[(study.name, second_arm.label, 0)].config.budget,
            "evaluations_to_first_best": interval.as_dict() if interval else None,
            "in_one": [r["in_one"] for r in runs],
            "runs": runs,
            "seconds": sum(self.done[u]["seconds"] for u in units),
        }


_HEADLINE = ("speedup", "anytime", "evals_to_95", "score", "p_optimum", "ratio", "wilcoxon", "vs_floor")


def _headline(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary's figures per study and arm (and the floor's), without runs and curves."""
    out = {
        name: {a["arm"]: {k: a[k] for k in _HEADLINE if k in a} for a in study["arms"]}
        for name, study in summary["studies"].items()
        if "arms" in study
    }
    if "floor" in summary:
        out["floor"] = {summary["floor"]["arm"]: {k: summary["floor"][k] for k in _HEADLINE if k in summary["floor"]}}
    return out


def _paired(arm: dict[int, dict], reference: dict[int, dict], name: str) -> dict | None:
    interval = paired_ratio({k: r[name] for k, r in arm.items()}, {k: r[name] for k, r in reference.items()})
    return interval.as_dict() if interval else None


def _steps(entry: dict) -> F.Trajectory:
    return [F.Step.from_list(s) for s in entry["steps"]]
