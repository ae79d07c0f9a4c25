"""Recording sessions against the scripted model: for tests, and to re-make the bundled ones.

``python -m kernelkiln.testing.sessions.make`` records every session of ``NAMES`` afresh.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelkiln.llm.messages import Message, ToolSpec
from kernelkiln.llm.scripted import ScriptedClient
from kernelkiln.memory.memory import Memory
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.results import RunResult
from kernelkiln.orchestrator.run import Optimizer, TaskSpec
from kernelkiln.store import open_store
from kernelkiln.task import knobs as K
from kernelkiln.testing.candidates import CANDIDATES
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.llm import text_reply
from kernelkiln.testing.sessions import SESSIONS
from kernelkiln.testing.tasks import TASKS

TINY = TASKS / "tiny_softmax.py"
SEED = (CANDIDATES / "softmax_knobs.py").read_text()
# The seed is REPEAT=4, -O2: each call hands in the next of the other settings.
VARIANTS: list[dict[str, Any]] = [{"REPEAT": r, "FLAGS": f} for r, f in itertools.product([2, 1, 4], [["-O2"], ["-O1"]])
            if (r, f) != (4, ["-O2"])]
_EXPERIENCE = re.compile(r"\be-[0-9a-f]{16}\b")


def submits(protocol: str = "tools") -> Callable[[list[Message], list[ToolSpec]], Any]:
    """A scripted reply that hands in the next knob variant of the seed, adopting every experience shown.

    Thread-safe: the agents of a multi-agent run share it and never get the same variant.
    """
    lock, counter = threading.Lock(), itertools.count()

    def reply(messages: list[Message], tools: list[ToolSpec]) -> Any:
        with lock:
            settings = VARIANTS[next(counter) % len(VARIANTS)]
        code = K.apply(SEED, settings)
        summary = f"repeat {settings['REPEAT']}, {settings['FLAGS'][0]}"
        shown = list(dict.fromkeys(_EXPERIENCE.findall(messages[1].content)))
        if protocol == "text":
            return text_reply(code, summary, adopted=shown, prose="Fewer passes.")
        return {"tool_calls": [{"name": "submit_candidate", "arguments": {
            "code": code, "summary": summary,
            "adoptions": [{"experience_id": i, "adopted": True, "why": "it applies"} for i in shown]}}]}
    return reply


def session_config(directory: Path | None = None, *, agents: int = 1, budget: int = 3, protocol: str = "tools",
                   replay: Path | None = None, **overrides: Any) -> OptimizeConfig:
    """A quick run of the scripted llm (recording into ``directory``), or of the replay of ``replay``."""
    base: dict[str, Any] = {"agents": agents, "budget": budget, "guard": fast_config(), "confirm_time_budget_s": None}
    policy: dict[str, Any] = ({"kind": "replay", "session": str(replay)} if replay is not None else
                              {"kind": "llm", "llm": {"model": "scripted", "base_url": "http://127.0.0.1:9/v1",
                                                      "reply_protocol": protocol}})
    if directory is not None:
        policy["record"] = str(directory)
    return OptimizeConfig(**{**base, "policy": policy, **overrides})


def run_scripted(config: OptimizeConfig, store_dir: Path, task: Path = TINY, protocol: str = "tools",
                 overrides: dict[str, Any] | None = None) -> RunResult:
    """``config`` on ``task`` with a fresh store under ``store_dir`` and the scripted model; what run.json holds."""
    store_dir.mkdir(parents=True, exist_ok=True)
    store = open_store(f"sqlite:///{store_dir / 'kiln.db'}")
    try:
        client = ScriptedClient([submits(protocol)] * 40)
        optimizer = Optimizer(Memory(store), store_dir / "runs", client=client)
        return optimizer.start([TaskSpec(str(task), dict(overrides or {}))], config, store_dir / "out")
    finally:
        store.close()


def make(name: str) -> Path:
    """Record the bundled session ``name`` afresh."""
    agents, protocol = {"tools_one_agent": (1, "tools"), "tools_two_agents": (2, "tools"),
                        "text_one_agent": (1, "text")}[name]
    target = SESSIONS / name
    shutil.rmtree(target, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        run_scripted(session_config(target, agents=agents, budget=2 + agents, protocol=protocol), Path(tmp),
                     protocol=protocol)
    header = target / "session.json"
    data = json.loads(header.read_text())
    data["config"] = {}  # the run's full settings would date the fixture for nothing
    header.write_text(json.dumps(data, indent=2) + "\n")
    return target


if __name__ == "__main__":
    from kernelkiln.testing.sessions import NAMES

    for session in NAMES:
        print(make(session))
