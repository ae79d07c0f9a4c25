"""`kiln ablate`'s plan, units and summary, end to end on tiny tasks."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from kernelkiln.agents.config import TunerConfig
from kernelkiln.bench.ablate import Ablation
from kernelkiln.bench.passes import Units, halves
from kernelkiln.bench.studies import FLOOR, merged, scripted_player, studies
from kernelkiln.errors import UserError
from kernelkiln.llm.messages import Message
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.run import order_tasks
from kernelkiln.store import open_store
from kernelkiln.task import load_task
from kernelkiln.testing.candidates import CANDIDATES
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.tasks import TASKS, tiny_suite
from kernelkiln.testing.turns import tiny_task


def base(budget: int = 2) -> OptimizeConfig:
    return OptimizeConfig(guard=fast_config(), budget=budget, confirm_time_budget_s=None)


def test_halves_deal_each_family_s_tasks_to_both_sides_in_order():
    tasks = [
        tiny_task("tiny_softmax"),
        tiny_task("plain_softmax"),
        tiny_task("tiny_relu"),
        tiny_task("tiny_sigmoid"),
        tiny_task("plain_row_sum"),
    ]
    a, b = halves(tasks)
    assert [t.name for t in a] == ["tiny_softmax", "tiny_relu", "plain_row_sum"]
    assert [t.name for t in b] == ["plain_softmax", "tiny_sigmoid"]


def test_arms_with_equal_settings_share_a_unit_and_read_only_and_reuse_take_the_memory_arm_s_stores(tmp_path):
    chosen = [studies(2)[name] for name in ("memory", "transfer", "reuse", "credit")]
    plan = Ablation(tmp_path, base()).plan(chosen, [tiny_task()], repeat=2)
    memory = plan[("memory", "memory", 0)]
    assert plan[("credit", "memory", 0)].key == memory.key == plan[("reuse", "memory", 0)].key
    assert plan[("transfer", "read-only memory", 0)].needs == memory.key
    assert plan[("reuse", "second pass", 0)].needs == memory.key
    assert plan[("memory", "memory", 1)].key != memory.key  # repeat k: seed k
    assert plan[("floor", "best-of-N", 0)].config.policy.search == "random"
    assert len({u.key for u in plan.values()}) == 2 * 6  # floor, empty, memory, read-only, reuse, uniform credit
    assert plan[("reuse", "second pass", 0)].config.budget == 2  # min(budget, the reuse budget of 3)


def test_the_search_study_compares_tpe_with_the_enumerate_search_as_its_reference(tmp_path):
    study = studies(2)["search"]
    ablation = Ablation(tmp_path, base(3))
    assert [ablation.config(study, arm, k=0).policy.search for arm in study.arms] == ["enumerate", "tpe"]


def test_a_patch_merges_nested_settings_and_leaves_the_rest():
    base_ = {"agents": 1, "memory": {"value": {"eta": 0.2}, "rules": {"beta": 0.1}}}
    patch = studies(3)["credit"].arms[1].patch
    assert merged(base_, patch) == {
        "agents": 1,
        "memory": {"value": {"eta": 0.2, "credit": "uniform"}, "rules": {"beta": 0.1}},
    }


def test_the_scripted_player_submits_distinct_variants_adopting_the_first_experience_shown():
    player = scripted_player((CANDIDATES / "softmax_knobs.py").read_text(), turns=3)
    prompt = [
        Message(role="system", content="s"),
        Message(role="user", content="e-0123456789abcdef e-fedcba9876543210"),
    ]
    calls = [player.complete(prompt).tool_calls[0].arguments for _ in range(3)]
    assert len({c["code"] for c in calls}) == 3
    assert [(a["experience_id"], a["adopted"]) for a in calls[0]["adoptions"]] == [
        ("e-0123456789abcdef", True),
        ("e-fedcba9876543210", False),
    ]


def test_an_arms_config_keeps_the_base_settings_including_the_ones_turned_off(tmp_path):
    ablation = Ablation(tmp_path, OptimizeConfig(guard=fast_config(), budget=7, confirm_time_budget_s=None))
    rules = studies(2)["rules"]
    off, random_rules = (ablation.config(rules, arm, k=1) for arm in rules.arms[1:])
    assert off.confirm_time_budget_s is None and off.budget == 7 and off.policy.seed == 1
    assert off.memory.rules.budget_tokens == 0 and random_rules.memory.rules.selection == "random"
    private = ablation.config(studies(2)["agents"], studies(2)["agents"].arms[0], k=0)
    assert private.agents == 2 and not private.memory.board.shared
    scripted = ablation.config(studies(2)["context"], studies(2)["context"].arms[1], k=0)
    assert scripted.policy.kind == "llm" and scripted.context.mode == "passive"
    floor = ablation.config(studies(2)["search"], FLOOR, k=2)
    assert floor.policy == TunerConfig(search="random", seed=2)


@pytest.fixture(scope="module")
def two_tasks():
    with tiny_suite(("tiny_a", "tiny_b")) as folder:
        yield order_tasks([load_task(p) for p in sorted(folder.glob("*.py"))])


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow
def test_memory_transfer_and_reuse_units_run_once_and_summarize_with_intervals(two_tasks, tmp_path):
    lines: list[str] = []
    ablation = Ablation(tmp_path, base(), progress=lines.append)
    chosen = [studies(2)[name] for name in ("memory", "transfer", "reuse")]
    out = ablation.run(chosen, two_tasks, repeat=2)
    assert json.loads((tmp_path / "ablation.json").read_text()) == out
    assert lines[0].startswith("10 runs to go")  # floor, empty, memory, read-only, second pass; twice
    memory = out["studies"]["memory"]
    empty, crossfit = memory["arms"]
    assert memory["reference"] == "empty store" and "ratio" not in empty
    assert crossfit["ratio"]["anytime"]["k"] == 2 and len(crossfit["ratio"]["anytime"]["ci95"]) == 2
    assert crossfit["vs_floor"]["anytime"]["k"] == 2 and out["floor"]["arm"] == "best-of-N"
    assert all(run["tasks"].keys() == {"tiny_a", "tiny_b"} for run in crossfit["runs"])  # each measured once
    assert len(crossfit["reach"]) == 2 and all(0 <= share <= 1 for share in crossfit["reach"])
    assert 1 <= crossfit["evals_to_95"]["mean"] <= 3 and memory["seconds"] > 0
    reuse = out["studies"]["reuse"]
    assert reuse["metric"] == "reuse" and 1 <= reuse["evaluations_to_first_best"]["mean"] <= 3
    unit = tmp_path / "runs" / ablation.plan(chosen, two_tasks, 2)[("memory", "memory", 0)].key
    assert {p.name for p in unit.glob("*.db")} >= {"A.db", "B.db", "AB.db"}  # what each half built, kept
    lines.clear()
    assert ablation.run(chosen, two_tasks, repeat=2) == out  # every unit is reused from runs.jsonl
    assert lines == ["0 runs to go (10 done earlier), each 2 tasks x 2 evaluations"]


def test_the_read_only_unit_learns_from_the_lent_stores_and_never_writes_them(two_tasks, tmp_path):
    built = tmp_path / "built"
    built.mkdir()
    for name in ("A", "B"):
        open_store(f"sqlite:///{built / f'{name}.db'}").close()
    before = {name: _digest(built / f"{name}.db") for name in ("A", "B")}
    result = Units(tmp_path / "runs", None, lambda task: None).readonly("u", two_tasks, base(1), built)
    assert {name: _digest(built / f"{name}.db") for name in ("A", "B")} == before
    assert {task: [p["role"] for p in passes.values()] for task, passes in result.items()} == {
        "tiny_a": ["measured"],
        "tiny_b": ["measured"],
    }
    with open_store(f"sqlite:///{tmp_path / 'runs' / 'u' / 'tiny_a.db'}").read() as conn:
        assert len(open_store(f"sqlite:///{tmp_path / 'runs' / 'u' / 'tiny_a.db'}").attempts.all(conn)) == 1


def test_the_context_study_counts_prompt_tokens_of_a_scripted_model(two_tasks, tmp_path):
    out = Ablation(tmp_path, base(3), progress=lambda m: None).run([studies(2)["context"]], two_tasks[:1], repeat=1)
    study = out["studies"]["context"]
    active, passive = study["arms"]
    assert active["prompt_tokens"]["mean"] > 0 and passive["prompt_tokens"]["mean"] > 0
    assert active["runs"][0]["tasks"]["tiny_a"]["evaluations"] == 3
    assert passive["ratio"]["max_prompt_tokens"]["mean"] > 0 and "speedup" not in passive["ratio"]
    assert "floor" not in out


def test_held_out_groups_are_each_task_alone_or_each_op_family():
    from kernelkiln.bench.passes import held_out_groups

    tasks = [tiny_task("tiny_softmax"), tiny_task("plain_softmax"), tiny_task("tiny_relu")]
    assert [[t.name for t in g] for g in held_out_groups(tasks, "task")] == [[t.name] for t in tasks]
    families = [[t.name for t in g] for g in held_out_groups(tasks, "family")]
    assert families == [["tiny_softmax", "plain_softmax"], ["tiny_relu"]]


def test_a_held_out_task_is_measured_on_the_others_empty_store_runs_never_on_its_own_or_its_twins(tmp_path):
    from kernelkiln.evaluation.replay_pool import ReplayPool
    from kernelkiln.evaluation.spaces import Dataset
    from kernelkiln.store import open_store
    from kernelkiln.task import knobs as K
    from kernelkiln.testing.spaces import made_up

    seed = (CANDIDATES / "softmax_knobs.py").read_text()
    keys = [K.key({"REPEAT": r, "FLAGS": f}) for r in (4, 2, 1) for f in (["-O2"], ["-O1"])]
    with tiny_suite(("tiny_a", "tiny_b", "tiny_c")) as suite:
        (suite / "tiny_c.py").write_text((suite / "tiny_c.py").read_text() + "\n# not tiny_a's twin\n")
        tasks = [load_task(suite / f"{n}.py") for n in ("tiny_a", "tiny_b", "tiny_c")]
        for task in tasks:
            made_up(tmp_path / "d.jsonl", task, seed, dict(zip(keys, [1.0, 1.1, 1.3, 1.2, 2.0, 1.9], strict=True)))
        pool = ReplayPool(Dataset(tmp_path / "d.jsonl"))
        units = Units(tmp_path / "u", None, lambda t: None, pool)
        units.empty("e", tasks, base(3))
        result = units.held_out("k", tasks, base(3), "task", tmp_path / "u" / "e")
    assert {task: set(passes) for task, passes in result.items()} == {t.name: {"-"} for t in tasks}
    assert all(len(passes["-"]["steps"]) == 3 for passes in result.values())

    def stored(n: int) -> set[str]:
        store = open_store(f"sqlite:///{tmp_path / 'u' / 'e' / f'held-task-{n}.db'}", readonly=True)
        with store.read() as conn:
            ids = {a.task_id for a in store.attempts.all(conn)}
        store.close()
        return ids

    # tiny_a and tiny_b are twins: each one's store holds only tiny_c's run, and tiny_c's holds both twins'.
    assert stored(0) == stored(1) == {"tiny_c"} and stored(2) == {"tiny_a", "tiny_b"}
    assert not list((tmp_path / "u" / "e").glob("held-task-tmp-*"))  # twins' stores, built directly, leave none


def test_held_out_stores_built_by_halving_hold_every_other_task_and_no_temporary_store_is_left(tmp_path):
    from kernelkiln.evaluation.replay_pool import ReplayPool
    from kernelkiln.evaluation.spaces import Dataset
    from kernelkiln.store import open_store
    from kernelkiln.task import knobs as K
    from kernelkiln.testing.spaces import made_up

    seed = (CANDIDATES / "softmax_knobs.py").read_text()
    keys = [K.key({"REPEAT": r, "FLAGS": f}) for r in (4, 2, 1) for f in (["-O2"], ["-O1"])]
    names = ("tiny_a", "tiny_b", "tiny_c", "tiny_d", "tiny_e")
    with tiny_suite(names) as suite:
        for i, name in enumerate(names):  # no twins: five different files
            (suite / f"{name}.py").write_text((suite / f"{name}.py").read_text() + f"\n# task {i}\n")
        tasks = [load_task(suite / f"{n}.py") for n in names]
        for task in tasks:
            made_up(tmp_path / "d.jsonl", task, seed, dict(zip(keys, [1.0, 1.1, 1.3, 1.2, 2.0, 1.9], strict=True)))
        units = Units(tmp_path / "u", None, lambda t: None, ReplayPool(Dataset(tmp_path / "d.jsonl")))
        units.empty("e", tasks, base(2))
        units.held_out("k", tasks, base(2), "task", tmp_path / "u" / "e")

    def stored(n: int) -> list[str]:
        store = open_store(f"sqlite:///{tmp_path / 'u' / 'e' / f'held-task-{n}.db'}", readonly=True)
        with store.read() as conn:
            ids = sorted(a.task_id for a in store.attempts.all(conn))
        store.close()
        return ids

    for n, name in enumerate(names):  # each other task's run once (2 evaluations), the held-out one's never
        assert stored(n) == sorted(t for t in names if t != name for _ in range(2))
    assert not list((tmp_path / "u" / "e").glob("held-task-tmp-*"))


def test_a_replayed_search_of_a_sampled_space_proposes_only_what_was_measured(tmp_path):
    from kernelkiln.evaluation.replay_pool import ReplayPool
    from kernelkiln.evaluation.spaces import Dataset
    from kernelkiln.task import knobs as K
    from kernelkiln.testing.spaces import made_up

    seed = (CANDIDATES / "softmax_knobs.py").read_text()
    own = K.settings_of(K.read_knobs(seed))
    sample = [own] + [s for s in ({**own, "REPEAT": 1}, {**own, "FLAGS": ["-O1"]}) if K.key(s) != K.key(own)]
    with tiny_suite(("tiny_a",)) as suite:
        task = load_task(suite / "tiny_a.py")
        made_up(tmp_path / "d.jsonl", task, seed, {K.key(s): 1.0 + 0.1 * i for i, s in enumerate(sample)})
        pool = ReplayPool(Dataset(tmp_path / "d.jsonl"))
        result = Units(tmp_path / "u", None, lambda t: None, pool).empty("e", [task], base(6))
    steps = result["tiny_a"]["-"]["steps"]
    assert len(steps) == len(sample)  # the sample exhausted, the search stopped: nothing unmeasured was proposed


def test_replayed_repeats_run_side_by_side_give_the_runs_one_at_a_time_gives(tmp_path):
    from kernelkiln.bench.replay import Replay
    from kernelkiln.evaluation.spaces import Dataset
    from kernelkiln.task import knobs as K
    from kernelkiln.testing.spaces import made_up

    seed = (CANDIDATES / "softmax_knobs.py").read_text()
    keys = [K.key({"REPEAT": r, "FLAGS": f}) for r in (4, 2, 1) for f in (["-O2"], ["-O1"])]
    search = studies(2)["search"]
    with tiny_suite(("tiny_a", "tiny_b")) as suite:
        tasks = [load_task(suite / f"{n}.py") for n in ("tiny_a", "tiny_b")]
        for task in tasks:
            made_up(tmp_path / "d.jsonl", task, seed, dict(zip(keys, [1.0, 1.1, 1.3, 1.2, 2.0, 1.9], strict=True)))
        dataset = Dataset(tmp_path / "d.jsonl")
        replay = Replay(dataset, dataset.one_machine(None))
        runs = {}
        for jobs in (1, 2):
            out = tmp_path / f"jobs-{jobs}"
            Ablation(out, base(4), None, lambda _: None, replay=replay, jobs=jobs).run([search], tasks, repeat=3)
            ledger = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
            runs[jobs] = {(e["key"], e["repeat"]): {t: p["-"]["steps"] for t, p in e["tasks"].items()} for e in ledger}
    assert len(runs[1]) == 9 and {r for _, r in runs[1]} == {0, 1, 2}  # three arms (floor, tpe, enumerate) x 3
    assert runs[2] == runs[1]


def test_repeats_side_by_side_need_a_replay(tmp_path):
    with pytest.raises(UserError, match="--replay only"):
        Ablation(tmp_path, base(), jobs=2)


def test_a_held_out_arm_takes_the_empty_stores_runs_whichever_arm_its_study_starts_with(two_tasks, tmp_path):
    # held-out-parts starts with "memory, task out": its held-out units once took themselves as their builder,
    # a unit with no store to lend ("cannot lend store ... no such file" at the first task run)
    ablation = Ablation(tmp_path, base(3), progress=lambda m: None)
    held = ablation.plan([studies(2)["held-out"]], two_tasks, 1)
    parts = ablation.plan([studies(2)["held-out-parts"]], two_tasks, 1)
    empty = held[("held-out", "empty store", 0)].key
    assert {u.needs for (study, _, _), u in parts.items() if study == "held-out-parts"} == {empty}
    assert parts[("held-out-parts", "memory, task out", 0)].key == held[("held-out", "memory, task out", 0)].key


def test_a_resumed_study_runs_a_finished_builder_again_when_the_stores_its_held_out_arms_take_are_gone(tmp_path):
    # A study interrupted after its empty-store runs, resumed after their folder was deleted to free the disk,
    # once failed at its first held-out task ("cannot lend store ...: no such file").
    import shutil

    from kernelkiln.bench.replay import Replay
    from kernelkiln.evaluation.spaces import Dataset
    from kernelkiln.task import knobs as K
    from kernelkiln.testing.spaces import made_up

    seed = (CANDIDATES / "softmax_knobs.py").read_text()
    keys = [K.key({"REPEAT": r, "FLAGS": f}) for r in (4, 2, 1) for f in (["-O2"], ["-O1"])]
    names = ("tiny_a", "tiny_b", "tiny_c")
    with tiny_suite(names) as suite:
        for i, name in enumerate(names):
            (suite / f"{name}.py").write_text((suite / f"{name}.py").read_text() + f"\n# task {i}\n")
        tasks = [load_task(suite / f"{n}.py") for n in names]
        for task in tasks:
            made_up(tmp_path / "d.jsonl", task, seed, dict(zip(keys, [1.0, 1.1, 1.3, 1.2, 2.0, 1.9], strict=True)))
        dataset = Dataset(tmp_path / "d.jsonl")
        replay = Replay(dataset, dataset.one_machine(None))
        out, held_out = tmp_path / "study", studies(2)["held-out"]
        ablation = Ablation(out, base(2), None, lambda _: None, replay=replay)
        plan = ablation.plan([held_out], tasks, 1)
        empty = plan[("held-out", "empty store", 0)].key
        ablation.run([held_out], tasks, repeat=1)
        ledger = (out / "runs.jsonl").read_text().splitlines()
        builders = [line for line in ledger if json.loads(line)["memory"] == "empty"]
        (out / "runs.jsonl").write_text("\n".join(builders) + "\n")  # interrupted after the empty-store runs
        shutil.rmtree(out / "runs" / empty)
        said: list[str] = []
        summary = Ablation(out, base(2), None, said.append, replay=replay).run([held_out], tasks, repeat=1)
    assert "1 of them again" in said[0]
    assert (out / "runs" / empty / "held-task-0.db").exists()
    assert summary["studies"]["held-out"]["arms"]


def test_a_replay_starts_each_task_from_the_seed_its_space_was_measured_of_not_today_s(tmp_path):
    # the lowering changes (a faster GEMM); a dataset measured before still replays, from its own seed
    from kernelkiln.evaluation.replay_pool import ReplayPool
    from kernelkiln.evaluation.spaces import Dataset
    from kernelkiln.task import knobs as K
    from kernelkiln.testing.spaces import made_up

    measured = (CANDIDATES / "softmax_knobs.py").read_text() + "\n# as the lowering wrote it when measured\n"
    own = K.settings_of(K.read_knobs(measured))
    with tiny_suite(("tiny_a",)) as suite:
        task = load_task(suite / "tiny_a.py")
        made_up(tmp_path / "d.jsonl", task, measured, {K.key(own): 1.0, K.key({**own, "REPEAT": 1}): 1.2})
        pool = ReplayPool(Dataset(tmp_path / "d.jsonl"))
        assert pool.measured_start(task) == measured and pool.measured_start(load_task(TASKS / "tiny_relu.py")) is None
        result = Units(tmp_path / "u", None, lambda t: None, pool).empty("e", [task], base(3))
    assert result["tiny_a"]["-"]["steps"]  # judged, where starting from the task's own seed was refused
