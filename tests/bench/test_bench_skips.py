"""A bench skips the tasks its policy cannot start, says why, and refuses a suite with none it can."""

from __future__ import annotations

import json
import shutil

import pytest

from kernelkiln.bench.run import Bench
from kernelkiln.errors import UserError
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.tasks import TASKS


def tuner(**overrides) -> OptimizeConfig:
    return OptimizeConfig(guard=fast_config(), budget=1, confirm_time_budget_s=None, **overrides)


def write_unlowerable(folder):
    """A task with no KILN seed and an operation the lowering lacks (aten.sort)."""
    shutil.copy(TASKS / "tiny_sort.py", folder / "tiny_sort.py")


def test_a_tuner_bench_skips_a_task_it_cannot_seed_and_runs_the_rest(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(TASKS / "tiny_relu.py", suite / "tiny_relu.py")  # no KILN seed: the generated one starts it
    write_unlowerable(suite)
    said = []
    out = Bench(tmp_path / "out", compile_baseline=False, progress=said.append).run(
        sorted(suite.glob("*.py")), tuner(), repeat=1
    )
    assert json.loads((tmp_path / "out" / "bench.json").read_text()) == out
    assert out["tasks_run"] == 1 and set(out["tasks"]) == {"tiny_relu"}
    assert set(out["skipped"]) == {"tiny_sort"} and "no lowering yet for aten.sort" in out["skipped"]["tiny_sort"]
    assert f"tiny_sort: skipped: {out['skipped']['tiny_sort']}" in said
    assert out["correct_rate"] == 1.0  # the generated seed is judged correct; no claim about its speed


def test_a_bench_whose_tasks_the_tuner_cannot_start_is_refused(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    write_unlowerable(suite)
    with pytest.raises(
        UserError,
        match=r"no task of the suite can be optimized with the tuner policy: .*"
        r"no lowering yet for aten\.sort",
    ):
        Bench(tmp_path / "out", compile_baseline=False, progress=lambda m: None).run(
            sorted(suite.glob("*.py")), tuner(), repeat=1
        )
    assert not (tmp_path / "out" / "bench.json").exists()
