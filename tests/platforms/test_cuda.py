"""The CUDA platform and the guard on a GPU: these run where a GPU is visible (scripts/gpu_check.sh)."""

from __future__ import annotations

import pytest
import torch

from kernelkiln.guard import GuardConfig, GuardSession
from kernelkiln.platforms import get_platform
from kernelkiln.task import bundled_suites, load_task

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU (scripts/gpu_check.sh runs these on one)"
)

EXAMPLES = bundled_suites()["examples"].path


def test_event_markers_measure_work_queued_on_the_device():
    cuda = get_platform("cuda")
    x = torch.randn(4096, 4096, device="cuda")
    start = cuda.marker()
    for _ in range(10):
        x = x @ x.T / 4096
    end = cuda.marker()
    assert cuda.elapsed(start, end) > 0 and cuda.flush_bytes() > 0


def test_work_on_a_side_stream_is_waited_for_by_synchronize():
    cuda = get_platform("cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = torch.randn(2048, 2048, device="cuda")
        for _ in range(20):
            y = y @ y.T / 2048
    cuda.synchronize()
    assert side.query()  # nothing left queued on the side stream


@pytest.mark.parametrize(
    "task, seed",
    [("row_softmax", "row_softmax_triton.py"), ("layer_norm", "layer_norm_triton.py"), ("matmul", "matmul_triton.py")],
)
def test_the_guard_times_each_bundled_triton_seed_on_the_gpu(task, seed):
    loaded = load_task(EXAMPLES / f"{task}.py")
    source = (EXAMPLES / "seeds" / seed).read_text()
    with GuardSession(loaded, GuardConfig(platform="cuda", time_budget_s=2.0)) as guard:
        verdict = guard.evaluate(source)
    assert verdict.correct and verdict.timed and verdict.speedup > 0, verdict.reason
