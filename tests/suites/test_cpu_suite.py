"""The bundled `cpu` suite: nine op families over three levels, each task with metadata and a tunable seed.

The six memory-bound tasks ship hand-written seeds; the three matmul-shaped ones start from the
candidate kernelkiln generates (the GEMM kernel), which the guard must judge correct too.
"""

from __future__ import annotations

import pytest

from kernelkiln.guard import GuardSession
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.starts import starting_code
from kernelkiln.task import bundled_suites, load_task
from kernelkiln.task import knobs as K
from kernelkiln.testing.guard import fast_config

TASKS = bundled_suites()["cpu"].task_paths()
ROWS = {"batch_size": 6, "dim": 203}
SMALL = {
    "gelu": ROWS,
    "softmax": ROWS,
    "layer_norm": ROWS,
    "rms_norm": ROWS,
    "row_mean": ROWS,
    "transpose": {"M": 70, "N": 45},
    "matmul": {"M": 37, "K": 41, "N": 70},
    "matmul_bias_gelu": {"batch_size": 41, "in_features": 70, "out_features": 37},
    "attention": {"batch": 1, "heads": 2, "seq": 43, "head_dim": 24},
}  # the products are just big enough for the GEMM kernel (not the small-product reduction)
GENERATED = {"matmul", "matmul_bias_gelu", "attention"}
HAND = [p for p in TASKS if p.stem not in GENERATED]
FAMILIES = {"elementwise", "softmax", "norm", "reduction", "transpose", "matmul", "fused_matmul", "attention"}


def test_suite_lists_nine_tasks_covering_every_family_and_levels_one_to_three():
    tasks = [load_task(path) for path in TASKS]
    assert sorted(t.name for t in tasks) == sorted(SMALL)
    assert {t.op_family for t in tasks} == FAMILIES
    assert {t.level for t in tasks} == {1, 2, 3}
    levels = {t.name: t.level for t in tasks}
    assert levels["matmul_bias_gelu"] == 2 and levels["attention"] == 3


def test_every_task_has_three_workloads_with_flops_and_bytes():
    for path in TASKS:
        task = load_task(path)
        assert len(task.workloads) == 3, path
        for w in task.workloads:
            assert w.flops is not None and w.flops >= 0, (path, w.name)
            assert w.bytes is not None and w.bytes > 0, (path, w.name)


def test_every_seed_declares_knobs_whose_current_values_are_options_and_flags_include_fast_math():
    for path in HAND:
        source = load_task(path).start_for("cpu").read_text()
        knobs = K.read_knobs(source)
        assert 2 <= len(knobs) <= 4, path
        for knob in knobs:
            assert knob.value in knob.options, (path, knob.name)
        flags = {k.name: k.options for k in knobs}["FLAGS"]
        assert ["-O3", "-march=native", "-ffast-math"] in flags, path
        assert K.settings_of(K.read_knobs(K.apply(source, K.settings_of(knobs)))) == K.settings_of(knobs)


def test_the_matmul_shaped_tasks_have_no_hand_seed_and_start_from_the_generated_gemm():
    for path in TASKS:
        task = load_task(path)
        assert (task.start_for("cpu") is None) == (path.stem in GENERATED), path
        if path.stem in GENERATED:
            code, origin = starting_code(task, OptimizeConfig())
            assert "generated" in origin and "kiln_micro" in code, path


@pytest.mark.parametrize("path", TASKS, ids=lambda p: p.stem)
def test_each_seed_is_correct_as_shipped_and_with_every_knob_at_its_most_aggressive(path):
    task = load_task(path, SMALL[path.stem])
    source = starting_code(task, OptimizeConfig())[0] if path.stem in GENERATED else task.start_for("cpu").read_text()
    aggressive = K.apply(source, {k.name: k.options[-1] for k in K.read_knobs(source)})
    with GuardSession(task, fast_config()) as guard:
        for label, candidate in (("seed", source), ("aggressive", aggressive)):
            verdict = guard.evaluate(candidate, timed=False)
            assert verdict.correct, (label, verdict.reason)
