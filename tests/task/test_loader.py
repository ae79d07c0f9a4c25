"""Loading KernelBench files unmodified, with overrides, workloads and metadata."""

from __future__ import annotations

import textwrap

import pytest
import torch

from kernelkiln.errors import UserError
from kernelkiln.task import bundled_suites, load_suite, load_task, parse_overrides
from kernelkiln.testing.tasks import TASKS

# Verbatim layout of a KernelBench level-1 file (module-level sizes, positional init args).
KERNELBENCH = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Simple model that performs a single square matrix multiplication (C = A * B)
    """
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)

N = 2048

def get_inputs():
    A = torch.randn(N, N)
    B = torch.randn(N, N)
    return [A, B]

def get_init_inputs():
    return []  # No special initialization inputs needed
'''


def write(tmp_path, text, name="task.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_a_kernelbench_file_loads_unmodified_and_set_shrinks_it(tmp_path):
    task = load_task(write(tmp_path, KERNELBENCH), {"N": 32})
    assert task.size_vars == {"N": 2048}
    [workload] = task.workloads
    assert workload.sizes == {"N": 32}
    a, b = task.make_inputs(workload, seed=1)
    assert a.shape == (32, 32) and b.shape == (32, 32)
    assert task.module.N == 32  # the module at the task's own sizes, --set applied


def test_inputs_are_deterministic_per_seed(tmp_path):
    task = load_task(write(tmp_path, KERNELBENCH), {"N": 8})
    w = task.workloads[0]
    assert torch.equal(task.make_inputs(w, 3)[0], task.make_inputs(w, 3)[0])
    assert not torch.equal(task.make_inputs(w, 3)[0], task.make_inputs(w, 4)[0])


def test_kiln_metadata_gives_workloads_metrics_tolerances_and_seed():
    task = load_task(bundled_suites()["examples"].path / "row_softmax.py")
    assert [w.name for w in task.workloads] == ["square", "wide", "tall"]
    assert task.workloads[0].flops == 5.0 * 256 * 1024
    assert task.workloads[1].bytes == 8.0 * 32 * 8192
    assert task.op_family == "softmax"
    assert task.start_path is not None and task.start_path.is_file()
    assert task.tolerance(torch.float32).atol == pytest.approx(1e-4)


def test_set_overrides_every_workload():
    task = load_task(bundled_suites()["examples"].path / "row_softmax.py", {"dim": 64})
    assert {w.sizes["dim"] for w in task.workloads} == {64}


def test_positional_init_args_construct_the_reference():
    task = load_task(TASKS / "tiny_linear.py")
    model = task.make_model(task.workloads[0], seed=0)
    assert model.linear.in_features == 32 and model.linear.out_features == 16


@pytest.mark.parametrize(
    "text, message",
    [
        ("def broken(:\n", "syntax error"),
        ("raise RuntimeError('boom')\n", "failed to import: RuntimeError: boom"),
        ("x = 1\n", "missing Model, get_inputs, get_init_inputs"),
        (KERNELBENCH + "KILN = {'speed': 1}\n", "unknown KILN key"),
        (KERNELBENCH + "KILN = {'workloads': [{'M': 3}]}\n", "unknown size variable"),
        (KERNELBENCH + "KILN = {'seed': 'nope.py'}\n", "missing file"),
        (KERNELBENCH + "KILN = {'robustness': 'no'}\n", r"KILN\['robustness'\] must be True or False"),
        (
            KERNELBENCH.replace("torch.randn(N, N)\n    B", "torch.randn(N, -N)\n    B"),
            "get_inputs/get_init_inputs failed",
        ),
    ],
)
def test_a_broken_task_is_one_clear_user_error(tmp_path, text, message):
    with pytest.raises(UserError, match=message) as info:
        load_task(write(tmp_path, text))
    assert "\n" not in str(info.value)


def test_robustness_trials_are_on_unless_the_task_turns_them_off(tmp_path):
    assert load_task(write(tmp_path, KERNELBENCH)).robustness is True
    assert load_task(write(tmp_path, KERNELBENCH + "KILN = {'robustness': False}\n", "off.py")).robustness is False


def test_a_tolerance_from_kiln_is_marked_explicit_and_a_default_one_is_not(tmp_path):
    task = load_task(write(tmp_path, KERNELBENCH + "KILN = {'tolerance': {'float16': {'atol': 0.1, 'rtol': 0.1}}}\n"))
    assert task.tolerance(torch.float16).explicit and task.tolerance(torch.float16).atol == 0.1
    assert not task.tolerance(torch.float32).explicit


def test_unknown_override_names_the_known_variables(tmp_path):
    with pytest.raises(UserError, match=r"--set M: no such module-level size variable \(known: N\)"):
        load_task(write(tmp_path, KERNELBENCH), {"M": 3})


def test_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="task file not found"):
        load_task(tmp_path / "nope.py")


def test_overrides_parse_literals_and_reject_malformed_items():
    assert parse_overrides(["N=64", "alpha=0.5", "mode=fast"]) == {"N": 64, "alpha": 0.5, "mode": "fast"}
    with pytest.raises(UserError):
        parse_overrides(["N"])


def test_a_suite_is_a_folder_of_task_files():
    suite = load_suite("examples")
    assert {p.stem for p in suite.task_paths()} >= {"row_softmax", "row_sum", "matmul"}
    assert load_suite(str(TASKS)).name == "tasks"
    with pytest.raises(UserError, match="no such suite"):
        load_suite("not-a-suite")


def test_a_task_may_name_a_starting_candidate_per_platform(tmp_path):
    from kernelkiln.task import load_task

    (tmp_path / "cpu_seed.py").write_text("# cpu\n")
    (tmp_path / "gpu_seed.py").write_text("# gpu\n")
    task_file = tmp_path / "t.py"
    task_file.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        return x * 2\n\n\nn = 8\n\n\ndef get_inputs():\n    return [torch.randn(n)]\n\n\n"
        "def get_init_inputs():\n    return []\n\n\n"
        "KILN = {'start': {'cpu': 'cpu_seed.py', 'cuda': 'gpu_seed.py'}}\n"
    )
    task = load_task(task_file)
    assert task.start_for("cpu").name == "cpu_seed.py" and task.start_for("cuda").name == "gpu_seed.py"
    assert task.start_path == task.start_for("cpu") and task.start_for("xpu") is None


def test_a_seed_that_is_neither_a_path_nor_a_platform_map_is_a_one_line_error(tmp_path):
    import pytest

    from kernelkiln.errors import UserError
    from kernelkiln.task import load_task

    task_file = tmp_path / "t.py"
    task_file.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        return x * 2\n\n\nn = 8\n\n\ndef get_inputs():\n    return [torch.randn(n)]\n\n\n"
        "def get_init_inputs():\n    return []\n\n\nKILN = {'seed': ['a.py']}\n"
    )
    with pytest.raises(UserError, match="path or a dict"):
        load_task(task_file)


def test_kiln_seed_the_earlier_name_of_start_still_names_the_starting_candidate_and_both_is_an_error(tmp_path):
    import pytest

    from kernelkiln.errors import UserError
    from kernelkiln.task import load_task

    (tmp_path / "mine.py").write_text("# cpu\n")
    body = (
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        return x * 2\n\n\ndef get_inputs():\n    return [torch.randn(8)]\n\n\n"
        "def get_init_inputs():\n    return []\n\n\n"
    )
    (tmp_path / "old.py").write_text(body + "KILN = {'seed': 'mine.py'}\n")
    assert load_task(tmp_path / "old.py").start_for("cpu").name == "mine.py"
    (tmp_path / "both.py").write_text(body + "KILN = {'seed': 'mine.py', 'start': 'mine.py'}\n")
    with pytest.raises(UserError, match="KILN gives both 'start' and 'seed' \\(its earlier name\\): keep 'start'"):
        load_task(tmp_path / "both.py")


def test_a_task_importing_a_missing_package_is_one_line_naming_what_to_install(tmp_path):
    import pytest

    from kernelkiln.errors import UserError
    from kernelkiln.task import load_task

    body = (
        "import torch\nimport torch.nn as nn\nfrom {module} import rearrange\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return x * 2\n\n\ndef get_inputs():\n    return [torch.randn(8)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    (tmp_path / "kb.py").write_text(body.format(module="einops_not_installed_here.sub"))
    with pytest.raises(UserError) as raised:
        load_task(tmp_path / "kb.py")
    assert str(raised.value) == (
        f"{tmp_path / 'kb.py'}: imports einops_not_installed_here, which is not installed: "
        "pip install einops_not_installed_here"
    )


def test_a_kernelbench_dependency_names_the_kernelbench_extra(tmp_path, monkeypatch):
    import sys

    import pytest

    from kernelkiln.errors import UserError
    from kernelkiln.task import load_task

    monkeypatch.setitem(sys.modules, "einops", None)  # as if it were not installed
    (tmp_path / "kb.py").write_text(
        "import torch\nimport torch.nn as nn\nfrom einops import rearrange\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return x\n\n\ndef get_inputs():\n    return [torch.randn(8)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    with pytest.raises(
        UserError,
        match=r"imports einops, which is not installed: pip install einops \(or every "
        r"package KernelBench's files import: pip install 'kernelkiln\[kernelbench\]'\)",
    ):
        load_task(tmp_path / "kb.py")
