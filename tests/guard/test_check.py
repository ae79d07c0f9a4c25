"""The comparison of a candidate's output with the reference's."""

from __future__ import annotations

import torch

from kernelkiln.guard.check import compare
from kernelkiln.task import load_task
from kernelkiln.testing.tasks import TASKS

TASK = load_task(TASKS / "tiny_softmax.py")


def test_reordered_float32_arithmetic_passes():
    x = torch.randn(64, 4096)
    ref = torch.softmax(x, dim=1)
    out = torch.exp(x - x.max(dim=1, keepdim=True).values)
    out = out / out.sum(dim=1, keepdim=True)
    assert compare(TASK, ref, out, "output 0") is None


def test_a_half_precision_result_is_caught_even_when_every_element_is_under_atol():
    ref = torch.softmax(torch.randn(64, 4096), dim=1)
    out = ref.half().float()
    assert torch.isclose(out, ref, rtol=1e-4, atol=1e-4).all()  # elementwise, it would pass
    problem = compare(TASK, ref, out, "output 0")
    assert problem is not None and "relative to the output's size" in problem


def test_the_first_mismatching_element_is_reported_with_expected_and_got():
    ref = torch.ones(4, 4)
    out = ref.clone()
    out[1, 2] = 3.0
    problem = compare(TASK, ref, out, "output 0")
    assert "1 of 16 elements outside tolerance" in problem and "first at (1, 2): got 3" in problem


def test_inputs_and_reference_outputs_stay_reproducible_while_other_threads_make_theirs():
    import threading

    from kernelkiln.guard.check import reference_outputs

    models = {i: TASK.make_model(w, 0) for i, w in enumerate(TASK.workloads)}
    expected = {(i, s): TASK.make_inputs(TASK.workloads[i], s)[0] for i in models for s in range(30)}
    wrong: list[tuple[int, int]] = []

    def generate(index: int) -> None:
        for seed in range(30):
            inputs, outs = reference_outputs(TASK, models[index], index, seed)
            if not torch.equal(inputs[0], expected[(index, seed)]) or outs[0].shape != inputs[0].shape:
                wrong.append((index, seed))

    threads = [threading.Thread(target=generate, args=(i % 2,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
