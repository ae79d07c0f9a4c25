"""What a mount namespace hides and brings back (the plan; the mounts themselves run in the adversarial suite)."""

from __future__ import annotations

from kernelkiln.isolation import namespaces


def test_the_plan_brings_back_each_needed_path_once_and_never_a_whole_home(tmp_path):
    home = tmp_path / "home"
    user = home / "user"
    venv = user / "venvs" / "kiln" / "lib"
    venv.mkdir(parents=True)
    task = user / "venvs" / "kiln" / "lib" / "task.py"
    task.write_text("")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    _masked, hidden, back = namespaces._plan(
        str(scratch), [], [str(home), str(user)], [str(user), str(venv), str(task), str(home)]
    )
    assert hidden == [str(home)]  # /home covers /home/user
    assert back == [str(venv)]  # the venv once (its task file with it); never the home itself


def test_a_workspace_under_a_hidden_home_is_not_brought_back_read_only(tmp_path):
    home = tmp_path / "home"
    workspace = home / "user" / "tmp" / "ws"
    workspace.mkdir(parents=True)
    _, _, back = namespaces._plan(str(workspace), [], [str(home)], [str(workspace)])
    assert back == []


def test_a_distribution_that_forbids_user_namespaces_is_named_by_its_sysctl(tmp_path, monkeypatch):
    sysctl = tmp_path / "proc" / "sys" / "kernel" / "apparmor_restrict_unprivileged_userns"
    sysctl.parent.mkdir(parents=True)
    sysctl.write_text("1\n")
    monkeypatch.setattr(namespaces, "_USERNS_SYSCTLS", ((str(sysctl), "1"),))
    assert namespaces.userns_forbidden_by().endswith("kernel.apparmor_restrict_unprivileged_userns = 1")
    sysctl.write_text("0\n")
    assert namespaces.userns_forbidden_by() is None
