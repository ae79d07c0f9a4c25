"""A small stored run written directly into a SQLite store: two tasks, two agents, a drafting point."""

from __future__ import annotations

import json

import pytest

from kernelkiln.store import open_store
from kernelkiln.store.records import Experience, NoCandidate, Rule, Run, RunState, RunTask
from kernelkiln.testing.memory_fakes import attempt

HOSTILE = "<script>alert(1)</script>"
START = 1000.0


@pytest.fixture
def stored(tmp_path):
    """``(store URL, run id, out DIR, {name: attempt})``; the DIR holds the run's run.json."""
    url = f"sqlite:///{tmp_path / 'kiln.db'}"
    out = tmp_path / "out"
    store = open_store(url)
    tasks = [RunTask(path=f"{name}.py", id=name) for name in ("softmax", "row_sum")]
    run = Run(
        id="r-test", created_at=START, config={"budget": 5}, state=RunState(status="done", out=str(out), tasks=tasks)
    )
    t = iter(range(1, 100))

    def make(name, task, verdict, speedup, parent=None, agent="a1", objective="optimization", summary=None, **case):
        a = attempt(
            task,
            verdict=verdict,
            speedup=speedup,
            parent=parent,
            agent=agent,
            lens="general",
            run_id=run.id,
            summary=summary or f"{name} move",
            created_at=START + next(t),
            case={"objective": objective, **case},
        )
        made[name] = a
        return a

    made: dict = {}
    seed = make("seed", "softmax", "KEEP", 0.5, objective="correctness", move="seed")
    make("slow", "softmax", "REVERT", 0.4, parent=seed)
    make("bad", "softmax", "REJECT", None, parent=seed, agent="a2", summary=HOSTILE)
    flat = make("flat", "softmax", "ACCEPT", 0.52, parent=seed, agent="a2")
    make("draft", "softmax", "KEEP", 0.9, parent=flat, agent="a2", objective="draft")
    rs = make("rs_seed", "row_sum", "KEEP", 1.0, objective="correctness", move="seed")
    make("rs_best", "row_sum", "KEEP", 1.5, parent=rs)
    lesson = Experience(
        id="e-during", text="draft lesson", source_attempt_id=made["draft"].id, created_at=START + 20, q=0.4
    )
    with store.write() as conn:
        store.runs.add(conn, run)
        for a in made.values():
            store.attempts.add(conn, a)
        store.experiences.add(conn, Experience(id="e-before", text="older lesson", created_at=START - 100))
        store.experiences.add(conn, lesson)
        store.rules.upsert(
            conn, Rule(id="e-during", text="Fuse the passes <b>always</b>", tokens=10, frequency=0.5, resident=True)
        )
    store.close()
    out.mkdir()
    (out / "run.json").write_text(
        json.dumps(
            {
                "run_id": run.id,
                "status": "done",
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "cost_usd": 0.0,
                "tasks": {
                    "softmax": {
                        "best_speedup": 0.9,
                        "seed_speedup": 0.5,
                        "attempts": 5,
                        "verdicts": {"KEEP": 2, "ACCEPT": 1, "REVERT": 1, "REJECT": 1},
                    },
                    "row_sum": {
                        "best_speedup": 1.5,
                        "seed_speedup": 1.0,
                        "attempts": 2,
                        "verdicts": {"KEEP": 2, "ACCEPT": 0, "REVERT": 0, "REJECT": 0},
                    },
                },
            }
        )
    )
    return url, run.id, out, made


@pytest.fixture
def start_only(tmp_path):
    """``(store URL, run id)``: an llm run whose one task evaluated only its seed, and why the model gave nothing."""
    url = f"sqlite:///{tmp_path / 'seed-only.db'}"
    store = open_store(url)
    why = NoCandidate(
        turns=3,
        reasons=["the model answered 3 times in text without a usable python block"],
        stops=["a1 stopped after 3 turns in a row without a candidate"],
    )
    run = Run(
        id="r-seed-only",
        created_at=START,
        config={"budget": 5, "policy": {"kind": "llm", "llm": {"model": "m"}}},
        state=RunState(
            status="done",
            tasks=[RunTask(path="softmax.py", id="softmax")],
            finished=["softmax"],
            no_candidate={"softmax": why},
        ),
    )
    seed = attempt("softmax", verdict="KEEP", speedup=0.5, run_id=run.id, created_at=START + 1, case={"move": "seed"})
    with store.write() as conn:
        store.runs.add(conn, run)
        store.attempts.add(conn, seed)
    store.close()
    return url, run.id
