"""Replayed verdicts: drawn from a dataset's samples as the guard would give them, never guessed."""

from __future__ import annotations

import pytest

from kernelkiln.errors import UserError
from kernelkiln.evaluation.pool import EvaluationInput
from kernelkiln.evaluation.replay_pool import ReplayPool
from kernelkiln.task import knobs as K
from kernelkiln.testing.candidates import CANDIDATES
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.spaces import made_up
from kernelkiln.testing.turns import tiny_task

SEED = (CANDIDATES / "softmax_knobs.py").read_text()
FAST = {"REPEAT": 1, "FLAGS": ["-O2"]}
SLOW = {"REPEAT": 4, "FLAGS": ["-O1"]}
TWIN = {"REPEAT": 2, "FLAGS": ["-O2"]}


@pytest.fixture
def pool(tmp_path):
    own = K.key(K.settings_of(K.read_knobs(SEED)))
    figures = {own: 1.0, K.key(FAST): 1.5, K.key(SLOW): 0.6, K.key(TWIN): 1.0}
    return ReplayPool(made_up(tmp_path / "d.jsonl", tiny_task(), SEED, figures), seed=3)


def _judge(pool: ReplayPool, code: str, incumbent: str | None = None):
    return pool.submit([EvaluationInput(tiny_task(), fast_config(), code, incumbent)])[0].result()


def test_a_configuration_is_judged_from_its_samples_against_the_reference_and_the_incumbent(pool):
    fast, slow, twin = (K.apply(SEED, s) for s in (FAST, SLOW, TWIN))
    alone = _judge(pool, fast)
    assert alone.verdict == "KEEP" and alone.speedup == pytest.approx(1.5, rel=0.01) and alone.timed
    assert alone.seconds == 2.0 and alone.workloads[0].t_cand_s == pytest.approx(1e-3 / 1.5, rel=0.01)
    assert _judge(pool, slow, incumbent=SEED).verdict == "REVERT"
    assert _judge(pool, fast, incumbent=SEED).speedup_vs_incumbent == pytest.approx(1.5, rel=0.01)
    assert _judge(pool, twin, incumbent=SEED).verdict == "ACCEPT"


def test_the_same_study_seed_draws_the_same_verdicts(tmp_path, pool):
    again = ReplayPool(pool.dataset, seed=3)
    code = K.apply(SEED, FAST)
    assert [_judge(pool, code).speedup for _ in range(3)] == [_judge(again, code).speedup for _ in range(3)]


def test_a_configuration_the_dataset_does_not_hold_fails_the_run_instead_of_being_guessed(pool):
    with pytest.raises(UserError, match="has no measurement of tiny_softmax at"):
        _judge(pool, K.apply(SEED, {"REPEAT": 2, "FLAGS": ["-O1"]}))


def test_code_other_than_the_measured_seed_at_some_settings_is_refused(pool):
    with pytest.raises(UserError, match="not the measured seed"):
        _judge(pool, K.apply(SEED, FAST) + "\n# an edit\n")


def test_a_task_the_dataset_did_not_measure_is_refused(pool):
    with pytest.raises(UserError, match="holds no measured space of tiny_relu"):
        pool.space(tiny_task("tiny_relu"))


def test_a_configuration_measured_as_not_measured_replays_as_it_was_said(pool):
    twin = K.key(TWIN)
    rows = pool.spaces["tiny_softmax"][twin]
    said = "not measured: workload w0: only 2 of 3 timing rounds were clean"
    rows[:] = [
        r.model_copy(update={"timed": False, "verdict": "ACCEPT", "stage": "time", "reason": said}) for r in rows
    ]
    verdict = _judge(pool, K.apply(SEED, TWIN))
    assert verdict.unmeasured and verdict.reason == said and verdict.correct
