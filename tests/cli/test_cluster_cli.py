"""`--cluster`: on optimize, bench and ablate; a bad address or a missing Ray is one line and exit code 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kernelkiln.testing.cli import kiln
from kernelkiln.testing.tasks import TASKS

# Runs kiln with `import ray` failing, as on a machine without kernelkiln[ray].
_WITHOUT_RAY = """
import sys
class _NoRay:
    def find_spec(self, name, path=None, target=None):
        if name == "ray" or name.startswith("ray."):
            raise ModuleNotFoundError("No module named 'ray'")
sys.meta_path.insert(0, _NoRay())
from kernelkiln.cli.app import main
sys.argv = ["kiln", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize("command", ["optimize", "bench", "ablate"])
def test_every_command_that_runs_agents_takes_cluster(command):
    out = kiln(command, "--help")
    assert out.returncode == 0 and "--cluster" in out.stdout


def test_cluster_ray_without_ray_installed_says_how_to_install_it(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            _WITHOUT_RAY,
            "optimize",
            str(TASKS / "tiny_clamp.py"),
            "--cluster",
            "ray",
            "--budget",
            "1",
            "--store",
            f"sqlite:///{tmp_path / 'k.db'}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr.strip().splitlines()[-1] == "kiln: error: --cluster ray needs Ray: pip install 'kernelkiln[ray]'"


def test_an_unknown_cluster_address_is_refused_in_one_line(tmp_path):
    out = kiln(
        "optimize",
        str(TASKS / "tiny_clamp.py"),
        "--cluster",
        "spark://x:7077",
        "--budget",
        "1",
        "--store",
        f"sqlite:///{tmp_path / 'k.db'}",
    )
    assert out.returncode == 2
    assert "give local, ray or ray://HOST:PORT" in out.stderr and len(out.stderr.strip().splitlines()) == 1
