"""The isolation policy: strict refuses when an offered layer does not hold; best-effort runs and says."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from kernelkiln.errors import UserError
from kernelkiln.guard import GuardSession
from kernelkiln.guard.config import GuardConfig
from kernelkiln.guard.worker import processes, sandbox
from kernelkiln.isolation import offer
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.task import load_task
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.tasks import TASKS


def test_strict_requires_every_offered_layer_that_the_configuration_turns_on():
    required = sandbox.required_layers(GuardConfig(isolation="strict"))
    offered = {layer for layer, why in offer.offered().items() if why is None}
    assert set(required) - {"user"} == offered
    assert "network" not in sandbox.required_layers(GuardConfig(isolation="strict", isolate_network=False))
    assert sandbox.required_layers(GuardConfig(isolation="best-effort")) == []


def test_a_required_layer_that_did_not_hold_is_one_line_naming_it_and_why():
    with pytest.raises(UserError) as caught:
        sandbox.refuse_unless_held(
            ["network", "landlock"],
            {"network": True, "landlock": False},
            {"landlock": "Landlock is disabled"},
            "a worker",
        )
    message = str(caught.value)
    assert "landlock" in message and "Landlock is disabled" in message and "\n" not in message
    sandbox.refuse_unless_held(["network"], {"network": True}, {}, "a worker")  # held: no error


def test_the_tuner_defaults_to_best_effort_and_the_llm_policy_to_strict():
    assert OptimizeConfig(guard=fast_config()).guard.isolation == "best-effort"
    llm = OptimizeConfig(policy={"kind": "llm", "llm": {"model": "m"}}, guard=fast_config())
    replay = OptimizeConfig(policy={"kind": "replay", "session": "s"}, guard=fast_config())
    assert llm.guard.isolation == replay.guard.isolation == "strict"
    set_by_the_guard = OptimizeConfig(policy={"kind": "llm", "llm": {"model": "m"}}, guard={"isolation": "best-effort"})
    assert set_by_the_guard.guard.isolation == "best-effort"
    assert OptimizeConfig(guard=fast_config(isolation="strict")).guard.isolation == "strict"


def test_a_process_that_left_the_session_is_still_found_among_those_a_worker_started():
    code = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    time.sleep(30)\n"
        "    os._exit(0)\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert parent.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 5
        while not processes.started_by(parent.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        found = processes.started_by(parent.pid)
        assert len(found) == 1 and os.getsid(found[0]) == found[0] != parent.pid
    finally:
        for pid in processes.started_by(parent.pid):
            os.kill(pid, 9)
        parent.kill()
        parent.wait()


def test_a_verdict_reached_before_any_worker_still_names_the_policy_in_force():
    with GuardSession(load_task(TASKS / "tiny_softmax.py"), fast_config(isolation="best-effort")) as guard:
        verdict = guard.evaluate("import os\nos.system('true')\n")
    assert verdict.stage == "gate"
    assert verdict.isolation.policy == "best-effort" and verdict.isolation.held == {}
