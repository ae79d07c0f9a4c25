"""Worker isolation: environment scrubbing and sandbox user ids."""

from __future__ import annotations

from kernelkiln.guard.worker import sandbox


def test_the_worker_environment_keeps_only_allow_listed_variables(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    env = sandbox.scrubbed_env()
    assert "OPENAI_API_KEY" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert env["OMP_NUM_THREADS"] == "2" and "PATH" in env


def test_sandbox_user_ids_are_distinct_per_slot_and_unprivileged():
    uids = {sandbox.allocate_uid(slot) for slot in range(4)}
    assert len(uids) == 4 and min(uids) >= 200_000


def test_workspaces_belong_to_the_worker_user(tmp_path):
    path = sandbox.make_workspace(None)
    try:
        assert path.is_dir() and (path.stat().st_mode & 0o777) == 0o700
    finally:
        sandbox.remove_workspace(path)


def test_only_the_cpu_platform_runs_triton_under_its_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # never inherited: the guard decides per platform
    assert "TRITON_INTERPRET" not in sandbox.scrubbed_env()
    assert sandbox.platform_env("cpu") == {"TRITON_INTERPRET": "1"}
    assert sandbox.platform_env("cuda") == {}
