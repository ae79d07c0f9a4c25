"""Runs on a real Ray cluster of two nodes on this machine: one memory, every attempt once, faults survived."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from kernelkiln.evaluation.config import ClusterConfig
from kernelkiln.evaluation.pool import EvaluationInput
from kernelkiln.memory.memory import Memory
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.observer import Observer
from kernelkiln.orchestrator.run import Optimizer, TaskSpec
from kernelkiln.store import open_store
from kernelkiln.task import load_task
from kernelkiln.testing.cluster import AUTH_OFF, FAKE_KEY, EnvironmentProbe, local_cluster
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.hostile import HOSTILE
from kernelkiln.testing.stores import POSTGRES_ENV, fresh_store_url
from kernelkiln.testing.tasks import TASKS

ray = pytest.importorskip("ray", reason="the cluster tests need kernelkiln[ray] (the test extra installs it)")
from kernelkiln.evaluation.ray_pool import RayPool  # noqa: E402 - needs ray

pytestmark = pytest.mark.slow
needs_postgres = pytest.mark.skipif(
    not os.environ.get(POSTGRES_ENV), reason=f"{POSTGRES_ENV} is unset: a cluster of two nodes needs PostgreSQL"
)
SUITE = ("tiny_softmax.py", "tiny_clamp.py", "plain_row_sum.py")


@pytest.fixture(scope="module")
def cluster():
    with local_cluster(nodes=2) as running:
        yield running


@pytest.fixture(autouse=True)
def _no_token_auth(monkeypatch):
    monkeypatch.setenv(*AUTH_OFF)  # drivers (this process, its kiln children) as the test cluster is


@pytest.fixture
def on_cluster(cluster, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", cluster.address)
    return cluster


class _Notes(Observer):
    def __init__(self) -> None:
        self.notes: list[str] = []

    def note(self, line: str) -> None:
        self.notes.append(line)


def _config(**overrides) -> OptimizeConfig:
    settings = dict(
        budget=4,
        agents=2,
        guard=fast_config(time_budget_s=0.3),
        confirm_time_budget_s=0.3,
        cluster=ClusterConfig(address="ray"),
    )
    settings.update(overrides)
    return OptimizeConfig(**settings)


def _attempts(store, run_id: str):
    with store.read() as conn:
        return store.attempts.for_run(conn, run_id), store.runs.get(conn, run_id)


def _stored_once(attempts, tasks: int, budget: int) -> None:
    assert len(attempts) == tasks * budget
    assert len({a.id for a in attempts}) == len(attempts)
    assert len({(a.task_id, a.case.code_hash) for a in attempts}) == len(attempts)


@needs_postgres
def test_a_suite_runs_across_both_nodes_and_every_attempt_is_stored_once(on_cluster, tmp_path):
    store = open_store(fresh_store_url("postgresql", tmp_path))
    specs = [TaskSpec(str(TASKS / name), {}) for name in SUITE]
    notes = _Notes()
    # One agent per task and two devices: two tasks run at once, one on each node.
    result = Optimizer(Memory(store), tmp_path, notes).start(specs, _config(agents=1), tmp_path / "out")
    attempts, run = _attempts(store, result.run_id)
    assert result.status == "done"
    _stored_once(attempts, len(SUITE), 4)
    assert len({a.case.device for a in attempts}) == 2, "both nodes' devices judged candidates"
    assert run.state.device is not None and run.state.device.startswith("cpu: ")
    assert any("2 node(s), 2 device(s)" in line for line in notes.notes)
    with store.read() as conn:  # memory learned on the driver as it does locally
        assert store.board.for_task(conn, "tiny_softmax") or store.experiences.list(conn, kind="experience")
    store.close()


@needs_postgres
def test_a_node_killed_mid_run_has_its_candidate_judged_elsewhere_and_loses_nothing(monkeypatch, tmp_path):
    with local_cluster(nodes=2) as own:  # its own cluster: this test kills a node
        monkeypatch.setenv("RAY_ADDRESS", own.address)
        victim = own.nodes[-1]  # a worker node: the driver attaches to the head

        class KillMidRun(_Notes):
            evaluations = 0

            def evaluating(self, task_id, agent, summary) -> None:
                self.evaluations += 1
                if self.evaluations == 3:  # both agents' candidates are in flight
                    threading.Timer(0.2, own.kill, [victim]).start()

        store = open_store(fresh_store_url("postgresql", tmp_path))
        observer = KillMidRun()
        config = _config(budget=6, guard=fast_config(time_budget_s=1.0))
        result = Optimizer(Memory(store), tmp_path, observer).start(
            [TaskSpec(str(TASKS / "tiny_softmax.py"), {})], config, tmp_path / "out"
        )
        attempts, _ = _attempts(store, result.run_id)
        store.close()
    assert result.status == "done"
    assert any("died" in line and "evaluated again elsewhere" in line for line in observer.notes), observer.notes
    _stored_once(attempts, 1, 6)


@needs_postgres
def test_a_driver_killed_with_sigkill_resumes_on_the_cluster_repeating_nothing(on_cluster, tmp_path):
    from kernelkiln.testing.crash import BUDGET

    url = fresh_store_url("postgresql", tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "KILN_STORE"}
    crashed = subprocess.run(
        [sys.executable, "-m", "kernelkiln.testing.crash", url, str(tmp_path / "out"), "memory-committed", "2", "ray"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert crashed.returncode == -9, crashed.stderr[-2000:]
    run_id = crashed.stdout.split()[0]
    store = open_store(url)
    before, _ = _attempts(store, run_id)
    assert len(before) == 2
    result = Optimizer(Memory(store), tmp_path).resume(run_id)
    attempts, _ = _attempts(store, run_id)
    store.close()
    assert result.status == "done"
    assert {a.id for a in before} <= {a.id for a in attempts}
    _stored_once(attempts, 1, BUDGET)
    assert all(a.case.device for a in attempts), "every attempt, before and after the kill, was judged on the cluster"


def test_secrets_of_the_node_never_reach_an_evaluation_actor(on_cluster):
    pool = RayPool(
        ClusterConfig(address="ray"), "cpu", "postgresql://kiln@127.0.0.1/unused", actor_class=EnvironmentProbe
    )
    try:
        for device in pool.queue.devices:
            assert ray.get(device.handle.secrets_now.remote()) == {}
            started_with = ray.get(device.handle.secrets_at_start.remote())
            assert started_with.get(FAKE_KEY[0]) == "", "the node's key was blanked before the actor started"
    finally:
        pool.close()
    assert os.environ.get(FAKE_KEY[0]) != "", "the driver's environment is its own"


def test_a_hostile_candidate_that_kills_its_worker_leaves_the_actor_judging(on_cluster):
    task = load_task(TASKS / "tiny_softmax.py")
    pool = RayPool(ClusterConfig(address="ray"), "cpu", "postgresql://kiln@127.0.0.1/unused")
    guard = fast_config(time_budget_s=0.3)
    try:
        for hostile in ("native_kills_parent.py", "native_kills_everything.py"):
            item = EvaluationInput(task, guard, (HOSTILE / hostile).read_text(), timed=False)
            verdict = pool.submit([item])[0].result()
            assert verdict.verdict == "REJECT" and verdict.stage == "check", verdict.reason
        seed = EvaluationInput(task, guard, task.start_for("cpu").read_text(), timed=False)
        verdicts = [f.result() for f in pool.submit([seed] * len(pool.queue.devices))]  # every device still judges
        assert all(v.correct for v in verdicts)
        assert pool.queue.stats().retried == 0, "no actor died"
    finally:
        pool.close()


def test_sqlite_is_refused_on_a_cluster_of_two_nodes_in_one_line(on_cluster, tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernelkiln",
            "optimize",
            str(TASKS / "tiny_softmax.py"),
            "--cluster",
            "ray",
            "--store",
            f"sqlite:///{tmp_path / 'k.db'}",
            "--budget",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ},
    )
    assert out.returncode == 2, out.stderr[-2000:]
    lines = [line for line in out.stderr.splitlines() if line.startswith("kiln:")]
    assert len(lines) == 1 and "2 nodes" in lines[0] and "PostgreSQL" in lines[0], out.stderr[-2000:]
    store = open_store(f"sqlite:///{tmp_path / 'k.db'}")
    with store.read() as conn:
        assert store.runs.all(conn) == [], "a refused run is not stored"
    store.close()


@needs_postgres
def test_ctrl_c_stops_tasks_running_at_once_and_the_run_resumes_on_the_cluster(on_cluster, tmp_path):
    import shutil

    from kernelkiln.testing.cli import interrupt_at, kiln

    suite = tmp_path / "suite"
    suite.mkdir()
    for name in ("tiny_clamp.py", "plain_row_sum.py"):  # no KILN seed: copied alone, they load
        shutil.copy(TASKS / name, suite / name)
    url = fresh_store_url("postgresql", tmp_path)
    common = ["--store", url, "--cluster", "ray", "--time-budget", "0.3", "--confirm-budget", "0.3"]
    code, err = interrupt_at(
        ["optimize", str(suite), "--agents", "1", "--budget", "4", "--out", str(tmp_path / "o"), *common], "["
    )
    assert code == 130, err[-2000:]
    run_id = err.split("kiln optimize --resume ")[1].split()[0]
    resumed = kiln("optimize", "--resume", run_id, "--store", url, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    store = open_store(url)
    attempts, run = _attempts(store, run_id)
    store.close()
    assert run.state.status == "done"
    _stored_once(attempts, 2, 4)


def test_ray_client_address_judges_on_the_cluster(cluster, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    task = load_task(TASKS / "tiny_softmax.py")
    pool = RayPool(ClusterConfig(address=cluster.client_address), "cpu", "postgresql://kiln@127.0.0.1/x")
    try:
        item = EvaluationInput(task, fast_config(time_budget_s=0.3), task.start_for("cpu").read_text())
        verdict = pool.submit([item])[0].result()
    finally:
        pool.close()
    assert verdict.correct and verdict.device is not None


def test_cluster_ray_without_an_address_starts_a_local_cluster_and_runs(monkeypatch, tmp_path):
    from kernelkiln.testing.cli import kiln

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv(*FAKE_KEY)  # the local cluster it starts must not inherit it
    out = kiln(
        "optimize",
        str(TASKS / "tiny_clamp.py"),
        "--cluster",
        "ray",
        "--budget",
        "2",
        "--time-budget",
        "0.3",
        "--confirm-budget",
        "0.3",
        "--store",
        f"sqlite:///{tmp_path / 'k.db'}",
        "--out",
        str(tmp_path / "o"),
        "--json",
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "cluster: 1 node(s), 1 device(s) of cpu: " in out.stderr
    assert json.loads(out.stdout)["status"] == "done", "stdout holds the JSON alone (Ray's messages go to stderr)"
