"""The launcher: a command run under the isolation layers, its report, and the strict refusal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelkiln.isolation import launch, offer
from kernelkiln.isolation.layers import Confinement
from kernelkiln.native.runner import compiler_env, run_confined

OFFERED = offer.offered()


def _run(argv: list[str], workdir: Path, **kwargs):
    return run_confined(
        argv,
        cwd=str(workdir),
        env=compiler_env(argv[0], str(workdir)),
        user=None,
        group=None,
        timeout=30,
        limits=None,
        **kwargs,
    )


def test_every_layer_is_offered_or_says_why_not():
    assert {"network", "filesystem", "pids", "landlock", "seccomp"} <= set(OFFERED)
    for layer, why in OFFERED.items():
        assert why is None or (isinstance(why, str) and why.strip()), layer


def test_the_launcher_reports_the_layers_and_strips_its_line_from_the_output(tmp_path):
    outcome = _run(["/bin/echo", "hello"], tmp_path)
    assert outcome.returncode == 0 and outcome.output == "hello\n"
    assert outcome.isolation is not None
    for layer in ("network", "filesystem", "landlock", "seccomp"):
        if OFFERED.get(layer) is None:
            assert outcome.isolation.held.get(layer) is True, (layer, outcome.isolation.notes)


def test_a_required_layer_that_does_not_hold_stops_the_command_with_its_name(tmp_path):
    marker = tmp_path / "ran"
    outcome = _run(["/usr/bin/touch", str(marker)], tmp_path, required=["pids"])  # the launcher never forks
    assert outcome.refused
    assert "pids layer did not hold" in outcome.output
    assert not marker.exists()


@pytest.mark.skipif(OFFERED.get("landlock") is not None, reason=f"no Landlock: {OFFERED.get('landlock')}")
def test_a_confined_command_reads_neither_home_nor_other_temporary_files_and_writes_only_its_workdir(tmp_path):
    workdir, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    workdir.mkdir()
    elsewhere.mkdir()
    private = elsewhere / "private.txt"
    private.write_text("secret")
    home_file = Path.home() / f".kiln-launch-test-{os.getpid()}"
    home_file.write_text("secret")
    try:
        read_private = _run(["/bin/cat", str(private)], workdir)
        read_home = _run(["/bin/cat", str(home_file)], workdir)
        write_outside = _run(["/usr/bin/touch", str(elsewhere / "new")], workdir)
        write_inside = _run(["/usr/bin/touch", str(workdir / "new")], workdir)
    finally:
        home_file.unlink()
    assert read_private.returncode != 0 and "secret" not in read_private.output
    assert read_home.returncode != 0 and "secret" not in read_home.output
    assert write_outside.returncode != 0 and not (elsewhere / "new").exists()
    assert write_inside.returncode == 0 and (workdir / "new").exists()


@pytest.mark.skipif(OFFERED.get("network") is not None, reason=f"no network namespace: {OFFERED.get('network')}")
def test_a_confined_command_has_no_network_but_loopback_down(tmp_path):
    outcome = _run(["/bin/cat", "/proc/net/dev"], tmp_path)
    interfaces = [line.split(":")[0].strip() for line in outcome.output.splitlines()[2:]]
    assert interfaces == ["lo"]


def test_the_command_line_carries_the_confinement_and_runs_python_isolated(tmp_path):
    argv = launch.argv(Confinement(workspace=str(tmp_path)), ["/bin/true"], limits={"cpu": 5}, required=[])
    assert argv[1:3] == ["-I", "-S"] and argv[-2:] == ["--", "/bin/true"]
