"""The comparison of a candidate's output with the reference's, against the float64 oracle."""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path

import pytest
import torch

from kernelkiln import native
from kernelkiln.guard import GuardSession
from kernelkiln.guard.correctness.check import Expected, compare, judge_trials, make_cases, reference_outputs, summarize
from kernelkiln.guard.correctness.oracle import exact_outputs
from kernelkiln.task import load_task
from kernelkiln.testing.candidates import CANDIDATES
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.hostile import HOSTILE
from kernelkiln.testing.tasks import TASKS

TASK = load_task(TASKS / "tiny_softmax.py")
LONG = load_task(TASKS / "long_row_sum.py")
SEQUENTIAL = native.load(
    r"""
#include <stdint.h>
void row_sum(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        float s = 0.0f;
        for (int64_t c = 0; c < cols; ++c) s += x[r * cols + c];
        y[r] = s;
    }
}
""",
    {"row_sum": "void(const float*, float*, int64_t, int64_t)"},
)


def _sequential(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty(x.shape[0])
    SEQUENTIAL.row_sum(x, y, x.shape[0], x.shape[1])
    return y


def _long_trial(task=LONG, seed: int = 0):
    expected = reference_outputs(task, task.make_model(task.workloads[0], 0), 0, seed)
    return expected.inputs[0], expected.outputs[0], expected.oracle[0]


@pytest.fixture(scope="module")
def world_readable():
    """A folder sandboxed workers (another user) can read task files from."""
    folder = Path(tempfile.mkdtemp(prefix="kiln-check-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


def _task_file(folder: Path, source: Path, name: str, replace: tuple[str, str]) -> Path:
    path = folder / f"{name}.py"
    path.write_text(source.read_text().replace(*replace))
    path.chmod(0o644)
    return path


# -- the rule, on outputs ---------------------------------------------------------------


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


@pytest.mark.parametrize("seed", range(6))
def test_a_sequential_float32_sum_over_65536_columns_passes_against_the_oracle(seed):
    x, ref, exact = _long_trial(seed=seed)
    out = _sequential(x)
    assert compare(LONG, ref, out, "output 0", exact) is None


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_long_sum_computed_in_half_precision_fails(dtype):
    x, ref, exact = _long_trial()
    assert compare(LONG, ref, x.to(dtype).sum(1).float(), "output 0", exact) is not None


@pytest.mark.parametrize("wrong", ["zeroed", "relative_1e-3", "one_element", "stale"])
def test_wrong_long_sums_fail_against_the_oracle(wrong):
    x, ref, exact = _long_trial()
    out = _sequential(x)
    if wrong == "zeroed":
        out = torch.zeros_like(out)
    elif wrong == "relative_1e-3":
        out = out * (1 + 1e-3)
    elif wrong == "one_element":
        out[3] += 0.01 * float(out.pow(2).mean().sqrt())
    else:
        out = _sequential(_long_trial(seed=1)[0])
    assert compare(LONG, ref, out, "output 0", exact) is not None


def test_an_explicit_tolerance_is_the_bound_measured_against_the_oracle(tmp_path):
    tasks = {}
    for name, tolerance in (("strict", '{"atol": 1e-6, "rtol": 1e-6}'), ("loose", '{"atol": 1.0, "rtol": 0.01}')):
        path = tmp_path / f"{name}_sum.py"
        path.write_text(
            (TASKS / "long_row_sum.py")
            .read_text()
            .replace(
                'KILN = {"op_family": "reduction"}', f'KILN = {{"op_family": "reduction", "tolerance": {tolerance}}}'
            )
        )
        tasks[name] = load_task(path)
    x, ref, exact = _long_trial(tasks["strict"])
    problem = compare(tasks["strict"], ref, _sequential(x), "output 0", exact)  # passes under the default rule
    assert problem is not None and "(float64 oracle)" in problem and "reference's own error" not in problem
    x, ref, exact = _long_trial(tasks["loose"])
    assert compare(tasks["loose"], ref, x.half().sum(1).float(), "output 0", exact) is None


def test_a_reference_that_is_not_finite_is_matched_as_it_is():
    ref = torch.tensor([1.0, float("inf"), float("nan")])
    expected = reference_outputs(TASK, TASK.make_model(TASK.workloads[0], 0), 0, 0)
    assert compare(TASK, ref, ref.clone(), "output 0") is None
    problem = compare(
        TASK, expected.outputs[0], torch.full_like(expected.outputs[0], float("nan")), "output 0", expected.oracle[0]
    )
    assert "non-finite values where the reference is finite" in problem


def test_integer_outputs_must_be_equal_and_the_check_reports_that_no_oracle_was_used():
    task = load_task(TASKS / "tiny_argmax.py")
    cases = make_cases(task, task.make_model(task.workloads[0], 0), 0, trials=5, robustness_trials=2)
    expected = cases.expected[0]
    assert expected.oracle == [None]
    wrong = expected.outputs[0].clone()
    wrong[0] += 1
    assert compare(task, expected.outputs[0], wrong, "output 0") == "output 0: 1 of 16 elements differ"
    setup = summarize(task, [cases])
    assert (
        not setup.oracle
        and setup.oracle_note == "workload w0: integer or bool outputs: compared exactly with the reference"
    )
    assert (setup.trials, setup.robustness_trials) == (5, 2)


def test_the_float64_rounding_run_is_made_only_for_an_output_the_cheaper_bounds_refuse():
    calls: list[int] = []
    ref = torch.randn(8, 16)
    [exact] = exact_outputs([ref], [ref.double()], lambda: calls.append(1) or [ref.double()])
    assert compare(TASK, ref, ref.clone(), "output 0", exact) is None and calls == []
    assert compare(TASK, ref, ref + 1, "output 0", exact) is not None and calls == [1]


def test_inputs_and_reference_outputs_stay_reproducible_while_other_threads_make_theirs():
    models = {i: TASK.make_model(w, 0) for i, w in enumerate(TASK.workloads)}
    expected = {(i, s): TASK.make_inputs(TASK.workloads[i], s)[0] for i in models for s in range(30)}
    wrong: list[tuple[int, int]] = []

    def generate(index: int) -> None:
        for seed in range(30):
            trial = reference_outputs(TASK, models[index], index, seed)
            if (
                not torch.equal(trial.inputs[0], expected[(index, seed)])
                or trial.outputs[0].shape != trial.inputs[0].shape
            ):
                wrong.append((index, seed))

    threads = [threading.Thread(target=generate, args=(i % 2,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_robustness_trials_are_dropped_where_the_reference_is_not_finite_on_wider_inputs():
    task = load_task(TASKS / "tiny_sqrt.py")
    cases = make_cases(task, task.make_model(task.workloads[0], 0), 0, trials=5, robustness_trials=3)
    assert len(cases.seeds) == 5 and cases.wide == [False] * 5 and cases.skipped == 3


# -- the rule, in evaluations -----------------------------------------------------------


def test_an_honest_sequential_long_sum_is_accepted_on_every_evaluation():
    with GuardSession(LONG, fast_config()) as guard:
        for _ in range(3):
            verdict = guard.evaluate((CANDIDATES / "row_sum_c.py").read_text(), timed=False)
            assert verdict.verdict == "ACCEPT", verdict.reason
            assert verdict.check.oracle and verdict.check.trials == 5 and verdict.check.robustness_trials == 2


def test_relu_as_identity_is_rejected_as_correct_only_on_the_tasks_inputs():
    with GuardSession(load_task(TASKS / "tiny_relu.py"), fast_config()) as guard:
        verdict = guard.evaluate((HOSTILE / "relu_identity.py").read_text(), timed=False)
    assert verdict.verdict == "REJECT" and verdict.stage == "check"
    assert verdict.reason.startswith("correct on the task's input distribution only: ")
    assert "robustness trial, wider inputs" in verdict.reason


def test_with_robustness_off_only_the_tasks_own_inputs_are_checked(world_readable):
    path = _task_file(
        world_readable, TASKS / "tiny_relu.py", "relu_domain", ('"workloads"', '"robustness": False, "workloads"')
    )
    with GuardSession(load_task(path), fast_config()) as guard:
        verdict = guard.evaluate((HOSTILE / "relu_identity.py").read_text(), timed=False)
    assert verdict.verdict == "ACCEPT", verdict.reason
    assert verdict.check.robustness_trials == 0 and verdict.check.robustness_skipped == 0


def test_robustness_trials_where_the_reference_is_not_finite_are_skipped_and_counted():
    with GuardSession(load_task(TASKS / "tiny_sqrt.py"), fast_config()) as guard:
        verdict = guard.evaluate(
            "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
            "    def forward(self, x):\n        return x ** 0.5\n",
            timed=False,
        )
    assert verdict.verdict == "ACCEPT", verdict.reason
    assert verdict.check.robustness_trials == 0 and verdict.check.robustness_skipped == 2


def test_a_random_reference_falls_back_to_the_float32_reference_and_the_verdict_says_why():
    with GuardSession(load_task(TASKS / "tiny_dropout.py"), fast_config()) as guard:
        verdict = guard.evaluate(
            "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x * 2\n",
            timed=False,
        )
    assert verdict.verdict == "REJECT"
    assert verdict.check.oracle is False and "the reference is random" in verdict.check.oracle_note


_NOISE = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"


@pytest.mark.parametrize(
    ("draw", "verdict"),
    [
        ("torch.randn(x.shape[0], 1)", "ACCEPT"),  # the reference's draw: the same numbers
        ("torch.randn(x.shape[0], 1) * 1.01", "REJECT"),
        ("torch.rand(x.shape[0], 1)", "REJECT"),  # another draw from the same state
        ("torch.randn(x.shape[0], 1).flip(0)", "REJECT"),  # the same numbers in another order
    ],
)
def test_a_forward_that_draws_at_random_is_judged_against_the_reference_s_draws_from_the_same_state(draw, verdict):
    with GuardSession(load_task(TASKS / "tiny_noise.py"), fast_config()) as guard:
        judged = guard.evaluate(_NOISE + f"        return x * 0.5 + {draw}\n", timed=False)
    assert judged.verdict == verdict, judged.reason


def test_a_workload_s_check_may_take_sixteen_times_what_its_reference_took_and_never_less_than_the_floor():
    from kernelkiln.guard.correctness.check import WorkloadCases

    assert WorkloadCases([], [], 0, 30.0).timeout_s(60.0) == 480.0
    assert WorkloadCases([], [], 0, 1.0).timeout_s(60.0) == 60.0


def _trial(outputs: list[torch.Tensor], inputs: list[torch.Tensor]) -> dict:
    return {"types": ["torch.Tensor"] * len(outputs), "outputs": outputs, "inputs_after": inputs, "again": outputs}


def test_the_same_output_on_different_inputs_is_a_stale_result_where_the_reference_tells_them_apart():
    first = reference_outputs(TASK, TASK.make_model(TASK.workloads[0], 0), 0, 1)
    second = reference_outputs(TASK, TASK.make_model(TASK.workloads[0], 0), 0, 2)
    stale = [_trial(first.outputs, first.inputs), _trial(first.outputs, second.inputs)]
    problem = judge_trials(TASK, [first, second], stale, "w0")
    assert problem is not None and "cached or stale result" in problem


def test_the_same_output_is_no_stale_result_where_the_reference_gives_both_inputs_the_same_within_tolerance():
    # a reference all but constant in its input (a network normalizing its batch of two away): 1e-7 apart
    x1, x2 = torch.rand(4, 8), torch.rand(4, 8)
    ref1 = torch.linspace(-1, 1, 32).reshape(4, 8)
    ref2 = ref1 + 1e-7 * torch.sign(ref1)
    expected = [Expected([x1], [ref1], [None]), Expected([x2], [ref2], [None])]
    same = [_trial([ref1.clone()], [x1]), _trial([ref1.clone()], [x2])]
    assert judge_trials(TASK, expected, same, "w0") is None
