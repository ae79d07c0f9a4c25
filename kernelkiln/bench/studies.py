"""The ablation studies `kiln ablate` runs: two arms each, at equal budget.

Each arm is the system as built with one change: a patch to the run's OptimizeConfig,
and whether memory is shared across the suite's tasks or starts empty for every task.
The first arm of a study is its reference; the table reports the second over the first.
Arms with identical settings are one run (the default arm serves several studies).

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
    from kernelkiln.testing.llm import ScriptedClient

Metric = Literal["speedup", "tokens"]

# The context study only counts prompt tokens, so its evaluations need no real timing.
CONTEXT_TIME_BUDGET_S = 0.5
SCRIPTED_WINDOW = 8192
SCRIPTED_GENERATION = 1024


@dataclass(frozen=True)
class Arm:
    """One side of a study: a config patch and the scope of memory's store."""

    label: str
    patch: dict[str, Any] = field(default_factory=dict)
    store: Literal["suite", "task"] = "suite"  # task: memory starts empty for every task


@dataclass(frozen=True)
class Study:
    """A question answered by comparing two arms."""

    name: str
    question: str
    metric: Metric
    arms: tuple[Arm, Arm]


def studies(agents: int) -> dict[str, Study]:
    """Every study, by name; ``agents`` is the several-agents arm's count."""
    scripted = {"policy": "llm", "llm": {"model": "scripted", "base_url": "http://127.0.0.1:9/v1",
                                         "context_window": SCRIPTED_WINDOW, "max_output_tokens": SCRIPTED_GENERATION}}
    return {s.name: s for s in (
        Study("memory", "memory carried from earlier tasks vs every task starting empty", "speedup",
              (Arm("memory on"), Arm("memory off", store="task"))),
        Study("agents", f"one agent vs {agents} agents sharing the board, same evaluations per task", "speedup",
              (Arm("1 agent", {"agents": 1}), Arm(f"{agents} agents", {"agents": agents}))),
        Study("credit", "adoption-traced credit (ATU) vs the same reward for every retrieved experience", "speedup",
              (Arm("ATU"), Arm("uniform", {"memory": {"value": {"credit": "uniform"}}}))),
        Study("rules", "resident rules vs none (a rules budget of 0 tokens)", "speedup",
              (Arm("rules on"), Arm("rules off", {"memory": {"rules": {"budget_tokens": 0}}}))),
        Study("search", "the tuner's knob search: Optuna's TPE sampler vs enumerating single-knob moves, then "
              "random settings", "speedup",
              (Arm("enumerate", {"search": "enumerate"}), Arm("tpe", {"search": "tpe"}))),
        Study("context", "active (layered, budgeted) vs passive (accumulated) prompts, scripted llm", "tokens",
              (Arm("active", {**scripted, "context": {"mode": "active"}}),
               Arm("passive", {**scripted, "context": {"mode": "passive"}}))),
    )}


def merged(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``patch`` applied, nested dicts merged key by key."""
    out = dict(base)
    for key, value in patch.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


_EXPERIENCE_ID = re.compile(r"\be-[0-9a-f]{16}\b")


def scripted_player(seed_code: str, turns: int, salt: int = 0,
                    protocol: Literal["tools", "text"] = "tools") -> ScriptedClient:
    """A scripted model that submits ``turns`` variants of ``seed_code``, adopting the first experience shown.

    Variants cycle through one knob's options and carry a distinct comment, so no two are
    the same code; each reply records an adoption decision for every experience id in the prompt,
    as a ``submit_candidate`` call or, with ``protocol="text"``, in the text reply protocol.
    """
    from kernelkiln.testing.llm import ScriptedClient  # only the context study loads the test double

    knobs = [k for k in K.read_knobs(seed_code) if len(k.options) > 1] if seed_code else []

    def reply(number: int):
        def submit(messages, tools):
            ids = list(dict.fromkeys(_EXPERIENCE_ID.findall(" ".join(m.content for m in messages))))
            code = seed_code
            if knobs:
                knob = knobs[(number + salt) % len(knobs)]
                code = K.apply(seed_code, {knob.name: knob.options[(number + salt) % len(knob.options)]})
            code = f"{code}\n# variant {number}\n"
            if protocol == "text":
                adoptions = {"adopted": ids[:1], "not_adopted": [{"id": i, "why": "scripted"} for i in ids[1:]]}
                return {"text": f"Turn {number}: trying a variant.\n\n```python\n{code}```\n\n"
                                f"Summary: variant {number}\n\n```json\n{json.dumps(adoptions)}\n```\n"}
            return {"text": f"Turn {number}: trying a variant.", "tool_calls": [{
                "name": "submit_candidate", "arguments": {
                    "code": code, "summary": f"variant {number}",
                    "adoptions": [{"experience_id": i, "adopted": n == 0, "why": "scripted"}
                                  for n, i in enumerate(ids)]}}]}
        return submit
    return ScriptedClient([reply(i) for i in range(3 * turns)])  # room for the policy's re-asks
