"""Every bundled example's seed candidates are correct: the CPU seeds natively, the Triton ones interpreted."""

from __future__ import annotations

import pytest

from kernelkiln.guard import GuardSession
from kernelkiln.task import bundled_suites, load_task
from kernelkiln.task import knobs as K
from kernelkiln.testing.guard import fast_config

EXAMPLES = bundled_suites()["examples"].task_paths()
SMALL = {
    "row_softmax": {"batch_size": 8, "dim": 200},
    "log_softmax": {"batch_size": 8, "dim": 200},
    "row_sum": {"batch_size": 8, "dim": 200},
    "layer_norm": {"batch_size": 8, "dim": 200},
    "matmul": {"M": 48, "K": 40, "N": 72},
}


def test_the_matmul_example_and_the_suite_matmul_share_one_op_family():
    suite = {p.stem: p for p in bundled_suites()["cpu"].task_paths()}
    example = {p.stem: p for p in EXAMPLES}
    assert load_task(example["matmul"]).op_family == load_task(suite["matmul"]).op_family == "matmul"


def test_every_example_has_a_cpu_seed_with_knobs():
    for path in EXAMPLES:
        task = load_task(path)
        assert task.start_for("cpu") is not None, path
        assert K.read_knobs(task.start_for("cpu").read_text()), path


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_each_seed_is_correct_on_small_workloads(path):
    task = load_task(path, SMALL[path.stem])
    with GuardSession(task, fast_config()) as guard:
        for platform, seed in sorted(task.starts.items()):
            verdict = guard.evaluate(seed.read_text(), timed=False)
            assert verdict.correct, (platform, verdict.reason)
            if platform == "cuda":  # a Triton seed: interpreted on this CPU-only check, never timed
                assert not verdict.timed and "interpreter" in verdict.reason
