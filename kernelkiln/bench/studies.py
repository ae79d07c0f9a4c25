"""The ablation studies `kiln ablate` runs: arms at equal budget, each the system as built with one change.

An arm is a patch to the run's OptimizeConfig and a *memory* mode, which says what store each
measured task runs on:

- ``empty``: a fresh store per task (nothing learned elsewhere);
- ``crossfit``: the tasks are split in two halves with every op family in both; one half is
  optimized on a fresh store (memory carried from task to task), then the other half is
  measured on that store, memory still learning; then the other way round. Every task is
  measured once, with memory built on the other tasks, never on itself;
- ``readonly``: each task of one half is measured with the store the other half built lent
  read-only (the same stores the crossfit arm built, so the two share their builds);
- ``reuse``: the whole suite again on the store a crossfit pass left (which holds every task):
  how many evaluations each task needs to reach the first pass's best;
- ``task-out``: each task measured on a store built from nothing on every other task (and none identical
  to it): leave-one-task-out, n builds per repeat, affordable on a replayed dataset;
- ``family-out``: as task-out, the store built without any task of the measured task's op family.

The first arm of a study is its reference: the table reports every other arm over it, paired by
repeat. Every speed study is also measured against ``FLOOR``, best-of-N: the seed, then random
settings at the same budget, the floor every arm must beat. Arms with identical settings are one run.

The context study measures prompt tokens, not speed: a scripted model (no network)
plays an llm agent that submits variants of the task's seed with an adoption record
for every experience it was shown, so memory, the graph and the board grow as they
would in a real run while the prompts are assembled actively or passively.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from kernelkiln.task import knobs as K

if TYPE_CHECKING:
    from kernelkiln.llm.scripted import ScriptedClient

Metric = Literal["speedup", "tokens", "reuse"]
MemoryMode = Literal["empty", "crossfit", "readonly", "reuse", "task-out", "family-out"]

# The context study only counts prompt tokens, so its evaluations need no real timing.
CONTEXT_TIME_BUDGET_S = 0.5
SCRIPTED_WINDOW = 8192
SCRIPTED_GENERATION = 1024


@dataclass(frozen=True)
class Arm:
    """One side of a study: a config patch and what store each measured task runs on."""

    label: str
    patch: dict[str, Any] = field(default_factory=dict)
    memory: MemoryMode = "empty"


@dataclass(frozen=True)
class Study:
    """A question answered by comparing arms (the first is the reference)."""

    name: str
    question: str
    metric: Metric
    arms: tuple[Arm, ...]


FLOOR = Arm("best-of-N", {"policy": {"kind": "tuner", "search": "random"}})
EMPTY = Arm("empty store")
MEMORY = Arm("memory", memory="crossfit")
TASK_OUT = Arm("memory, task out", memory="task-out")


def studies(agents: int) -> dict[str, Study]:
    """Every study, by name; ``agents`` is the agents study's agent count."""
    scripted = {
        "policy": {
            "kind": "llm",
            "llm": {
                "model": "scripted",
                "base_url": "http://127.0.0.1:9/v1",
                "context_window": SCRIPTED_WINDOW,
                "max_output_tokens": SCRIPTED_GENERATION,
            },
        }
    }
    private = {"agents": agents, "memory": {"board": {"shared": False}}}
    return {
        s.name: s
        for s in (
            Study("memory", "a store built on the other tasks vs an empty store", "speedup", (EMPTY, MEMORY)),
            Study(
                "held-out",
                "memory built on every other task (leave-one-task-out) or op family, and the generic portfolio, "
                "vs an empty store",
                "speedup",
                (
                    EMPTY,
                    TASK_OUT,
                    Arm("portfolio, task out", {"memory": {"transfer": {"similarity": "none"}}}, "task-out"),
                    Arm("memory, family out", memory="family-out"),
                ),
            ),
            Study(
                "held-out-parts",
                "which part of held-out memory pays: without retrieved experiences (its prior alone), with the nearest "
                "neighbour only; each against memory as it is",
                "speedup",
                (
                    TASK_OUT,
                    Arm("memory, task out, prior only", {"context": {"max_experiences": 0}}, "task-out"),
                    Arm("memory, task out, one neighbour", {"memory": {"transfer": {"neighbours": 1}}}, "task-out"),
                ),
            ),
            Study(
                "transfer",
                "memory built on the other half of the tasks, lent read-only, vs an empty store",
                "speedup",
                (EMPTY, Arm("read-only memory", memory="readonly")),
            ),
            Study(
                "reuse",
                "the same tasks again on the store that holds them: evaluations to reach the first pass's best",
                "reuse",
                (MEMORY, Arm("second pass", memory="reuse")),
            ),
            Study(
                "credit",
                "adoption-traced credit (ATU) vs the same reward for every retrieved experience",
                "speedup",
                (MEMORY, Arm("uniform credit", {"memory": {"value": {"credit": "uniform"}}}, "crossfit")),
            ),
            Study(
                "rules",
                "resident rules chosen by utility vs none vs chosen at random, under the same token budget",
                "speedup",
                (
                    MEMORY,
                    Arm("no rules", {"memory": {"rules": {"budget_tokens": 0}}}, "crossfit"),
                    Arm("random rules", {"memory": {"rules": {"selection": "random"}}}, "crossfit"),
                ),
            ),
            Study(
                "agents",
                f"{agents} agents, each seeing only its own conclusions, vs sharing a board, same evaluations per task",
                "speedup",
                (Arm(f"{agents} agents, private", private), Arm(f"{agents} agents, shared board", {"agents": agents})),
            ),
            Study(
                "search",
                "the tuner's knob search: enumerating single-knob moves, then random settings, vs Optuna's TPE sampler",
                "speedup",
                (Arm("enumerate", {"policy": {"kind": "tuner", "search": "enumerate"}}), EMPTY),
            ),
            Study(
                "context",
                "active (layered, budgeted) vs passive (accumulated) prompts, scripted llm",
                "tokens",
                (
                    Arm("active", {**scripted, "context": {"mode": "active"}}),
                    Arm("passive", {**scripted, "context": {"mode": "passive"}}),
                ),
            ),
        )
    }


def merged(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``patch`` applied, nested dicts merged key by key."""
    out = dict(base)
    for key, value in patch.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


_EXPERIENCE_ID = re.compile(r"\be-[0-9a-f]{16}\b")


def scripted_player(
    start_code: str, turns: int, salt: int = 0, protocol: Literal["tools", "text"] = "tools"
) -> ScriptedClient:
    """A scripted model that submits ``turns`` variants of ``seed_code``, adopting the first experience shown.

    Variants cycle through one knob's options and carry a distinct comment, so no two are
    the same code; each reply records an adoption decision for every experience id in the prompt,
    as a ``submit_candidate`` call or, with ``protocol="text"``, in the text reply protocol.
    """
    from kernelkiln.llm.scripted import ScriptedClient  # only the context study needs it

    knobs = [k for k in K.read_knobs(start_code) if len(k.options) > 1] if start_code else []

    def reply(number: int):
        def submit(messages, tools):
            ids = list(dict.fromkeys(_EXPERIENCE_ID.findall(" ".join(m.content for m in messages))))
            code = start_code
            if knobs:
                knob = knobs[(number + salt) % len(knobs)]
                code = K.apply(start_code, {knob.name: knob.options[(number + salt) % len(knob.options)]})
            code = f"{code}\n# variant {number}\n"
            if protocol == "text":
                adoptions = {"adopted": ids[:1], "not_adopted": [{"id": i, "why": "scripted"} for i in ids[1:]]}
                return {
                    "text": f"Turn {number}: trying a variant.\n\n```python\n{code}```\n\n"
                    f"Summary: variant {number}\n\n```json\n{json.dumps(adoptions)}\n```\n"
                }
            return {
                "text": f"Turn {number}: trying a variant.",
                "tool_calls": [
                    {
                        "name": "submit_candidate",
                        "arguments": {
                            "code": code,
                            "summary": f"variant {number}",
                            "adoptions": [
                                {"experience_id": i, "adopted": n == 0, "why": "scripted"} for n, i in enumerate(ids)
                            ],
                        },
                    }
                ],
            }

        return submit

    return ScriptedClient([reply(i) for i in range(3 * turns)])  # room for the policy's re-asks
