"""What stored tasks lend a new task's search: exact reuse, the nearest neighbours, traps."""

from __future__ import annotations

import pytest

from kernelkiln.memory.config import TransferConfig
from kernelkiln.memory.memory import Memory
from kernelkiln.memory.prior import FAILED, build, rank_trials
from kernelkiln.memory.signature import distance
from kernelkiln.store.records import Attempt, Signature
from kernelkiln.task import knobs as K

KNOBS = ["ACC", "UNROLL", "FLAGS"]


def sig(
    task_id: str,
    exact: str | None = None,
    family: str = "softmax",
    knobs=KNOBS,
    elements: float = 20.0,
    machine: str = "cpu:m1:1t",
) -> Signature:
    return Signature(
        exact=exact or f"x-{task_id}",
        task_id=task_id,
        platform="cpu",
        machine=machine,
        family=family,
        knobs=list(knobs),
        elements=elements,
        inner=10.0,
    )


def stored(store, signature: Signature, runs: list[list[tuple[dict, str, float | None]]]) -> None:
    """Attempts of ``signature``'s task, one list per run: (knobs, verdict, speedup); the first is each run's seed."""
    with store.write() as conn:
        store.signatures.add(conn, signature)
        for r, attempts in enumerate(runs):
            for i, (knobs, verdict, speedup) in enumerate(attempts):
                vs = None if i == 0 else 1.0
                store.attempts.add(
                    conn,
                    Attempt(
                        task_id=signature.task_id,
                        run_id=f"r{r}-{signature.task_id}",
                        verdict=verdict,
                        speedup=speedup,
                        created_at=1000.0 + 10 * r + i,
                        case={"knobs": knobs, "signature": signature.exact, "speedup_vs_incumbent": vs},
                    ),
                )


def s(acc: int, unroll: int = 1, flags: str = "-O3") -> dict:
    return {"ACC": acc, "UNROLL": unroll, "FLAGS": flags}


def test_distance_needs_the_same_machine_and_a_shared_knob_and_grows_with_family_knobs_and_size():
    a = sig("a")
    assert distance(a, sig("b", machine="cpu:m2:1t")) is None
    assert distance(a, sig("b", knobs=["MR"])) is None
    assert distance(a, sig("b")) == 0.0
    assert distance(a, sig("b", family="norm")) == 1.0
    assert distance(a, sig("b", knobs=["ACC", "UNROLL"])) == pytest.approx(1 / 3, abs=1e-3)
    assert distance(a, sig("b", elements=22.0)) == pytest.approx(0.2)


def test_an_exact_match_lends_its_best_keep_and_every_setting_it_tried(store):
    mine = sig("new", exact="same")
    stored(
        store,
        sig("old", exact="same"),
        [[(s(1), "KEEP", 1.0), (s(4), "KEEP", 1.5), (s(8), "REVERT", 1.2), (s(2), "REJECT", None)]],
    )
    prior = build(store, mine, None, TransferConfig())
    assert prior.reuse == s(4) and prior.reused_from == "old"
    values = {K.key(t.settings): t.value for t in prior.known}
    assert values == {K.key(s(1)): 0.0, K.key(s(8)): 0.5, K.key(s(4)): 1.0, K.key(s(2)): FAILED}
    assert not prior.neighbours  # an exact match is reused, not transferred from


def test_a_setting_the_guard_could_not_measure_is_neither_a_win_nor_a_loss(store):
    mine = sig("new", exact="same")
    stored(store, sig("old", exact="same"), [[(s(1), "KEEP", 1.0), (s(4), "ACCEPT", None), (s(2), "REJECT", None)]])
    values = {K.key(t.settings): t.value for t in build(store, mine, None, TransferConfig()).known}
    assert values == {K.key(s(1)): 0.5, K.key(s(2)): FAILED}  # not measured: no figure, so no rank at all


def test_the_running_run_s_own_attempts_are_never_lent(store):
    stored(store, sig("t", exact="same"), [[(s(1), "KEEP", 1.0), (s(4), "KEEP", 2.0)]])
    assert build(store, sig("t", exact="same"), "r0-t", TransferConfig()).empty


def test_another_machine_or_an_exact_key_of_another_generator_is_not_an_exact_match(store):
    stored(store, sig("old", exact="v1"), [[(s(1), "KEEP", 1.0), (s(4), "KEEP", 2.0)]])
    prior = build(store, sig("old", exact="v2"), None, TransferConfig())
    assert prior.reuse is None and [n.task_id for n in prior.neighbours] == ["old"]  # its old runs still teach
    assert build(store, sig("new", exact="v1", machine="cpu:other:1t"), None, TransferConfig()).empty


def test_neighbours_are_the_nearest_within_the_distance_and_lend_their_best_and_ranked_trials(store):
    stored(store, sig("same_family"), [[(s(1), "KEEP", 1.0), (s(8), "KEEP", 3.0), (s(2), "REVERT", 2.0)]])
    stored(store, sig("bigger", elements=25.0), [[(s(1), "KEEP", 1.0), (s(4), "KEEP", 1.2)]])
    stored(store, sig("other_family", family="norm", elements=30.0), [[(s(1), "KEEP", 1.0)]])
    prior = build(store, sig("new"), None, TransferConfig(neighbours=2))
    assert [(n.task_id, n.best) for n in prior.neighbours] == [("same_family", s(8)), ("bigger", s(4))]
    assert {K.key(t.settings): t.value for t in prior.neighbours[0].trials} == {
        K.key(s(1)): 0.0,
        K.key(s(2)): 0.5,
        K.key(s(8)): 1.0,
    }
    assert [n.task_id for n in build(store, sig("new"), None, TransferConfig(max_distance=0.6)).neighbours] == [
        "same_family",
        "bigger",
    ]
    assert build(store, sig("new"), None, TransferConfig(neighbours=0)).empty


def test_a_value_that_lost_every_evaluation_on_two_neighbours_is_a_trap_its_evidence_pooled(store):
    # Two evaluations of -O2 on each neighbour: fewer than three on either, four in all.
    losing = [
        (s(1), "KEEP", 1.0),
        (s(2, flags="-O2"), "REVERT", 0.2),
        (s(8, flags="-O2"), "REJECT", None),
        (s(4), "KEEP", 1.5),
        (s(8), "ACCEPT", 1.4),
    ]
    stored(store, sig("n1"), [losing])
    stored(store, sig("n2"), [losing])
    prior = build(store, sig("new"), None, TransferConfig())
    assert prior.traps == {("FLAGS", K.key({"v": "-O2"}))}
    assert build(store, sig("new"), None, TransferConfig(trap_tasks=3)).traps == frozenset()
    assert build(store, sig("new"), None, TransferConfig(loss_evidence=5)).traps == frozenset()


def test_a_value_that_won_on_any_neighbour_is_no_trap(store):
    losing = [
        (s(1), "KEEP", 1.0),
        (s(2, flags="-O2"), "REVERT", 0.2),
        (s(8, flags="-O2"), "REJECT", None),
        (s(4), "KEEP", 1.5),
        (s(8), "ACCEPT", 1.4),
    ]
    stored(store, sig("n1"), [losing])
    stored(store, sig("n2"), [losing])
    stored(store, sig("n3", elements=21.0), [[(s(1), "KEEP", 1.0), (s(2, flags="-O2"), "KEEP", 2.0)]])
    assert build(store, sig("new"), None, TransferConfig()).traps == frozenset()


def test_memory_lends_from_its_lent_store_and_learns_nothing_there(store, tmp_path):
    from kernelkiln.store import open_store

    stored(store, sig("old", exact="same"), [[(s(1), "KEEP", 1.0), (s(4), "KEEP", 2.0)]])
    own = open_store(f"sqlite:///{tmp_path / 'own.db'}")
    memory = Memory(own, lent=store)
    assert memory.prior(sig("new", exact="same"), None).reuse == s(4)
    assert Memory(own).prior(sig("new", exact="same"), None).empty
    assert not memory.callbacks.learn


def test_rank_trials_takes_each_setting_s_median_rank_and_figure():
    trials = {
        K.key(t.settings): (t.value, t.speedup)
        for t in rank_trials([(s(1), 1.0), (s(1), 3.0), (s(2), 2.0), (s(4), None)])
    }
    assert trials[K.key(s(1))] == (0.5, 2.0)
    assert trials[K.key(s(2))] == (0.5, 2.0)
    assert trials[K.key(s(4))] == (FAILED, None)


def test_an_exported_and_imported_memory_lends_the_same_prior(sqlite_store, tmp_path):
    import io

    from kernelkiln.store import open_store
    from kernelkiln.store.transfer import export_jsonl, import_records, read_jsonl

    stored(sqlite_store, sig("old", exact="same"), [[(s(1), "KEEP", 1.0), (s(4), "KEEP", 2.0)]])
    stored(sqlite_store, sig("near"), [[(s(1), "KEEP", 1.0), (s(8), "KEEP", 3.0)]])
    text = io.StringIO()
    assert export_jsonl(sqlite_store, text)["signature"] == 2
    (tmp_path / "mem.jsonl").write_text(text.getvalue())
    copy = open_store(f"sqlite:///{tmp_path / 'copy.db'}")
    assert import_records(copy, read_jsonl(tmp_path / "mem.jsonl"))["signature"] == 2
    assert import_records(copy, read_jsonl(tmp_path / "mem.jsonl"))["signature"] == 0
    mine = sig("new", exact="same")
    assert build(copy, mine, None, TransferConfig()) == build(sqlite_store, mine, None, TransferConfig())


def test_the_generic_portfolio_lends_the_fastest_bests_anywhere_whatever_their_distance(store):
    stored(store, sig("same_family"), [[(s(1), "KEEP", 1.0), (s(8), "KEEP", 1.3)]])
    stored(store, sig("far", family="norm", knobs=["ACC", "LANES"], elements=40.0), [[(s(1), "KEEP", 1.0)]])
    stored(store, sig("fast_far", family="gemm", elements=35.0), [[(s(1), "KEEP", 1.0), (s(4), "KEEP", 3.0)]])
    stored(store, sig("new", exact="x-twin"), [[(s(2), "KEEP", 9.0)]])  # an exact match is reuse, not portfolio
    nearest = build(store, sig("mine", exact="x-twin"), None, TransferConfig(neighbours=2, exact=False))
    assert [n.task_id for n in nearest.neighbours] == ["same_family"]  # the others lie beyond max_distance
    portfolio = TransferConfig(neighbours=2, exact=False, similarity="none")
    chosen = build(store, sig("mine", exact="x-twin"), None, portfolio).neighbours
    assert [(n.task_id, n.best) for n in chosen] == [("fast_far", s(4)), ("same_family", s(8))]


def test_a_run_lends_its_result_the_latest_keep_even_where_an_earlier_keep_measured_higher(store):
    # A later KEEP beat the earlier one side by side although its own figure against the reference came out
    # lower: the run returned it, so reuse and transfer take it (the highest figure cost a replayed reuse study
    # 4 evaluations where 1 should do).
    stored(store, sig("old", exact="same"), [[(s(1), "KEEP", 1.0), (s(4), "KEEP", 2.52), (s(8), "KEEP", 2.49)]])
    assert build(store, sig("new", exact="same"), None, TransferConfig()).reuse == s(8)
    near = build(store, sig("new"), None, TransferConfig()).neighbours
    assert [(n.task_id, n.best) for n in near] == [("old", s(8))]


def test_of_several_runs_the_fastest_result_is_lent(store):
    runs = [
        [(s(1), "KEEP", 1.0), (s(2), "KEEP", 1.4)],
        [(s(1), "KEEP", 1.0), (s(4), "KEEP", 1.9), (s(8), "REVERT", 2.5)],
    ]
    stored(store, sig("old", exact="same"), runs)
    assert build(store, sig("new", exact="same"), None, TransferConfig()).reuse == s(4)
