"""The platform layer: the CPU platform everywhere, and one clear line where a device is missing."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from kernelkiln.errors import UserError
from kernelkiln.platforms import get_platform
from kernelkiln.platforms.host import last_level_cache_bytes

NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")


def test_the_cpu_platform_flushes_twice_the_last_level_cache_and_times_with_the_wall_clock():
    cpu = get_platform("cpu")
    assert cpu.available() is None and cpu.device == "cpu"
    assert cpu.flush_bytes() == 2 * last_level_cache_bytes() > 0
    start = cpu.marker()
    cpu.synchronize()
    assert cpu.elapsed(start, cpu.marker()) >= 0.0


def test_the_cpu_platform_refuses_to_lock_clocks_but_releasing_them_is_a_no_op():
    cpu = get_platform("cpu")
    assert "not supported" in cpu.lock_clocks(1500)
    assert cpu.lock_clocks(None) is None


def test_an_unknown_platform_is_a_user_error_naming_the_known_ones():
    with pytest.raises(UserError, match="known: cpu, cuda"):
        get_platform("tpu")


@NO_GPU
def test_cuda_without_a_gpu_is_one_clear_line():
    with pytest.raises(UserError) as err:
        get_platform("cuda")
    assert "no CUDA device is visible" in str(err.value) and "\n" not in str(err.value)


@NO_GPU
@pytest.mark.parametrize("command", ["eval", "optimize"])
def test_the_cli_refuses_platform_cuda_without_a_gpu_in_one_line(command, tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernelkiln",
            command,
            "row_softmax",
            "--platform",
            "cuda",
            *(["--store", f"sqlite:///{tmp_path / 'k.db'}"] if command == "optimize" else []),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "--platform cuda: no CUDA device is visible" in lines[0]
