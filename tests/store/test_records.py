import json

from kernelkiln.store.records import Attempt, BoardEntry, Experience, Measurement, Rule, Run, StageRecord


def test_records_round_trip_through_json():
    records = [
        Run(note="n", config={"a": 1}),
        Attempt(
            task_id="t",
            verdict="KEEP",
            speedup=2.0,
            measurements=[Measurement(workload="w", t_ref_ms=2, t_cand_ms=1, speedup=2)],
        ),
        Experience(text="tile it", platform="cpu", conditions=["contiguous"], q=0.3),
        Rule(id="e-1", text="tile", tokens=1, frequency=0.5, resident=True),
        StageRecord(task_id="t", stage="optimization", score=0.4),
        BoardEntry(task_id="t", kind="win", summary="tiling 2x"),
    ]
    for record in records:
        assert type(record).model_validate_json(record.model_dump_json()) == record


def test_unknown_fields_are_ignored():
    data = json.loads(Experience(text="x").model_dump_json())
    data["from_the_future"] = 42
    assert Experience.model_validate(data).text == "x"


def test_summaries_are_capped_at_160_chars():
    attempt = Attempt(task_id="t", verdict="KEEP", summary="x" * 500)
    assert len(attempt.summary) == 160 and attempt.summary.endswith("…")


def test_tags_text_joins_the_tags():
    exp = Experience(text="x", platform="cpu", op_family="matmul", stage="optimization", conditions=["k%8==0"])
    assert exp.tags_text == "cpu matmul optimization k%8==0"


def test_correct_means_not_rejected():
    assert Attempt(task_id="t", verdict="REVERT").correct
    assert not Attempt(task_id="t", verdict="REJECT").correct
