"""`kiln ablate`: equal-budget comparisons of the system's mechanisms over repeated trajectories.

For every study and repeat k, each arm optimizes the chosen tasks in order (easy first)
with the same budget and the same random seed k, on a fresh store. A run's figures are
the geometric means over its tasks of the final best speedup over torch eager and of the
anytime speedup (the best-so-far speedup averaged over the budget's evaluations, which
rewards reaching a good kernel early); the context study's are prompt tokens. A speed study
also reports the evaluations each run needed to reach 95% of the best any of its runs found
on a task (the budget + 1 where it never did), a geometric mean over the tasks. Across the
K repeats each arm gets a geometric mean and a 95% interval, and the second arm a paired
ratio to the first. Finished runs are kept in DIR/runs.jsonl under a key of everything
that decides them, so an interrupted ablation picks up where it stopped.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelkiln.bench.stats import geometric_interval, paired_ratio
from kernelkiln.bench.studies import (
    CONTEXT_TIME_BUDGET_S,
    Arm,
    Study,
    merged,
    scripted_player,
)
from kernelkiln.memory.memory import Memory
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.observer import Observer
from kernelkiln.orchestrator.run import Optimizer, TaskSpec
from kernelkiln.orchestrator.task_run import task_id_of
from kernelkiln.stats import geomean
from kernelkiln.store import open_store
from kernelkiln.store.records import Attempt
from kernelkiln.task import Task

SPEED_FIGURES = ("speedup", "anytime", "evals_to_95")
TARGET = 0.95  # evals_to_95: the share of a task's best (over the study's runs) a run must reach
TOKEN_FIGURES = ("prompt_tokens", "max_prompt_tokens")


def incumbent(attempts: list[Attempt], budget: int) -> list[float]:
    """The incumbent's speedup after each of the first ``budget`` evaluations (0 before the first KEEP)."""
    best, curve = 0.0, []
    for a in attempts[:budget]:
        if a.verdict == "KEEP" and a.speedup:
            best = a.speedup
        curve.append(best)
    return curve


def anytime(attempts: list[Attempt], budget: int) -> float | None:
    """The incumbent's speedup after each of ``budget`` evaluations, averaged (0 before the first correct).

    A search that ended early (its space exhausted) keeps its best for the evaluations it did not need.
    """
    curve = incumbent(attempts, budget)
    curve += [curve[-1] if curve else 0.0] * (budget - len(curve))
    mean = sum(curve) / budget
    return mean if mean > 0 else None


def evals_to(curves: dict[str, list[float]], targets: dict[str, float], budget: int) -> float | None:
    """Evaluations until each task's incumbent reached its target (budget + 1 if never), geometric mean over tasks.

    ``curves``: a run's incumbent by task (see ``incumbent``); tasks without a positive target are left out.
    """
    counts = []
    for name, target in targets.items():
        curve = curves.get(name)
        if target > 0 and curve is not None:
            counts.append(next((i + 1 for i, best in enumerate(curve) if best >= target), budget + 1))
    return geomean(counts)


def run_figures(per_task: dict[str, list[Attempt]], budget: int,
                confirmed: dict[str, float | None] | None = None) -> dict[str, Any]:
    """One run's figures from its attempts, task by task (attempts in the order they were made).

    ``confirmed``: each task's best as its confirmation measured it, which replaces the search's figure.
    """
    tasks = {}
    for name, attempts in per_task.items():
        keeps = [a for a in attempts if a.verdict == "KEEP" and a.speedup]
        calls = [c[0] for a in attempts for c in a.case.calls]
        best = (confirmed or {}).get(name) or (keeps[-1].speedup if keeps else None)
        tasks[name] = {"best_speedup": best, "anytime": anytime(attempts, budget),
                       "incumbent": incumbent(attempts, budget),
                       "evaluations": len(attempts), "prompt_tokens": sum(calls),
                       "max_prompt_tokens": max(calls, default=0)}
    rows = tasks.values()
    return {
        "speedup": geomean([t["best_speedup"] for t in rows if t["best_speedup"]]),
        "anytime": geomean([t["anytime"] for t in rows if t["anytime"]]),
        "correct": sum(1 for t in rows if t["best_speedup"]),
        "evaluations": sum(t["evaluations"] for t in rows),
        "prompt_tokens": sum(t["prompt_tokens"] for t in rows) or None,
        "max_prompt_tokens": max((t["max_prompt_tokens"] for t in rows), default=0) or None,
        "tasks": tasks,
    }


class Ablation:
    """Runs studies' arms over tasks, K repeats each, and summarizes them."""

    def __init__(self, out_dir: Path, base: OptimizeConfig, observer: Observer | None = None,
                 progress: Callable[[str], None] = print):
        self.out_dir, self.base, self.observer, self.progress = out_dir, base, observer, progress
        self.ledger = out_dir / "runs.jsonl"

    def run(self, chosen: list[Study], tasks: list[Task], repeat: int) -> dict[str, Any]:
        """Every study's arms over ``tasks``, ``repeat`` times; the summary is written to DIR/ablation.json."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        done = self._load()
        plan = [(study, arm, k) for k in range(repeat) for study in chosen for arm in study.arms]
        keys = {(s.name, a.label, k): self._key(s, a, k, tasks) for s, a, k in plan}
        todo = [key for key in dict.fromkeys(keys.values()) if key not in done]
        self.progress(f"{len(todo)} runs to go ({len(set(keys.values())) - len(todo)} done earlier), "
                      f"each {len(tasks)} tasks x {self.base.budget} evaluations")
        ran = 0
        for study, arm, k in plan:
            key = keys[(study.name, arm.label, k)]
            if key in done:
                continue
            ran += 1
            self.progress(f"[run {ran}/{len(todo)}] {study.name}: {arm.label}, repeat {k + 1}/{repeat}")
            done[key] = self._run_arm(study, arm, k, tasks, key)
            with self.ledger.open("a") as f:
                f.write(json.dumps({"key": key, "study": study.name, "arm": arm.label, "repeat": k,
                                    "figures": done[key]}) + "\n")
        summary = self._summary(chosen, keys, done, repeat, tasks)
        (self.out_dir / "ablation.json").write_text(json.dumps(summary, indent=2) + "\n")
        return summary

    # -- runs ----------------------------------------------------------------------------
    def config(self, study: Study, arm: Arm, k: int) -> OptimizeConfig:
        """The arm's configuration for repeat ``k``."""
        base = self.base.model_dump(mode="json")
        if study.metric == "tokens":
            base["guard"]["time_budget_s"] = min(base["guard"]["time_budget_s"], CONTEXT_TIME_BUDGET_S)
        return OptimizeConfig.model_validate(merged({**base, "seed": k}, arm.patch))

    def _key(self, study: Study, arm: Arm, k: int, tasks: list[Task]) -> str:
        what = {"config": self.config(study, arm, k).model_dump(mode="json"), "store": arm.store,
                "tasks": [[str(t.path), t.overrides] for t in tasks], "scripted": study.metric == "tokens"}
        return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]

    def _run_arm(self, study: Study, arm: Arm, k: int, tasks: list[Task], key: str) -> dict[str, Any]:
        config = self.config(study, arm, k)
        root = self.out_dir / "runs" / key
        root.mkdir(parents=True, exist_ok=True)
        per_task: dict[str, list[Attempt]] = {}
        confirmed: dict[str, float | None] = {}
        memory = None
        for task in tasks:
            if memory is None or arm.store == "task":
                db = root / f"{'suite' if arm.store == 'suite' else task.name}.db"
                for stale in root.glob(f"{db.name}*"):
                    stale.unlink()  # a run interrupted earlier starts over
                memory = Memory(open_store(f"sqlite:///{db.resolve()}", self.base.store))
            spec = TaskSpec(str(task.path), task.overrides)
            client = None
            if study.metric == "tokens":
                seed = task.seed_for(config.platform)
                client = scripted_player(seed.read_text() if seed else "", config.budget, salt=k)
            result = Optimizer(memory, root, self.observer, client=client).start([spec], config, root / task.name)
            with memory.store.read() as conn:
                per_task[task.name] = memory.store.attempts.for_run(conn, result["run_id"])
            confirmed[task.name] = result["tasks"][task_id_of(task)]["confirmed_speedup"]
        return run_figures(per_task, config.budget, confirmed)

    def _load(self) -> dict[str, dict[str, Any]]:
        if not self.ledger.exists():
            return {}
        done = {}
        for line in self.ledger.read_text().splitlines():
            if line.strip():
                entry = json.loads(line)
                done[entry["key"]] = entry["figures"]
        return done

    # -- the summary -----------------------------------------------------------------------
    def _summary(self, chosen: list[Study], keys: dict, done: dict, repeat: int, tasks: list[Task]) -> dict[str, Any]:
        out = {"budget": self.base.budget, "repeat": repeat, "tasks": [t.name for t in tasks], "studies": {}}
        for study in chosen:
            figures = SPEED_FIGURES if study.metric == "speedup" else TOKEN_FIGURES
            per_arm = {arm.label: {k: done[keys[(study.name, arm.label, k)]] for k in range(repeat)}
                       for arm in study.arms}
            if study.metric == "speedup":
                per_arm = self._with_evals_to_target(per_arm)
            arms = []
            for arm in study.arms:
                runs = per_arm[arm.label]
                row = {"arm": arm.label, "runs": [done[keys[(study.name, arm.label, k)]] for k in range(repeat)]}
                for name in figures:
                    interval = geometric_interval([runs[k][name] for k in range(repeat)])
                    row[name] = interval.as_dict() if interval else None
                arms.append(row)
            first, second = (per_arm[a.label] for a in study.arms)
            ratio = {}
            for name in figures:
                interval = paired_ratio({k: r[name] for k, r in second.items()}, {k: r[name] for k, r in first.items()})
                ratio[name] = interval.as_dict() if interval else None
            out["studies"][study.name] = {"question": study.question, "metric": study.metric, "arms": arms,
                                          "ratio": ratio, "ratio_of": f"{study.arms[1].label} / {study.arms[0].label}"}
        return out

    def _with_evals_to_target(self, per_arm: dict[str, dict[int, dict]]) -> dict[str, dict[int, dict]]:
        """Each run's figures with ``evals_to_95``: the target is TARGET x the best of any run of the study, by task."""
        runs = [run for by_repeat in per_arm.values() for run in by_repeat.values()]
        best: dict[str, float] = {}
        for run in runs:
            for name, task in run["tasks"].items():
                best[name] = max(best.get(name, 0.0), max(task.get("incumbent") or [0.0]))
        targets = {name: TARGET * b for name, b in best.items()}
        return {label: {k: {**run, "evals_to_95": evals_to(
            {n: t["incumbent"] for n, t in run["tasks"].items() if "incumbent" in t}, targets, self.base.budget)}
            for k, run in by_repeat.items()} for label, by_repeat in per_arm.items()}
