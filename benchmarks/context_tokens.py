"""Prompt tokens per call over a 30-turn scripted llm run: active (budgeted) vs passive context.

    python benchmarks/context_tokens.py [--json] [--turns 30] [--window 8192] [--protocol tools|text]

The same scripted model plays both runs on the tiny softmax task: every turn it submits
a fresh variant of the seed (with an adoption record for every experience it was
shown), so memory, the graph and the board grow as in a real run. Tokens are the
scripted client's estimates of each prompt (about four characters per token), counted
the same way for both modes. Active context must stay under the window minus the
reserved generation; passive accumulates everything (KOPE measured −93% total tokens).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from kernelkiln.bench.studies import scripted_player
from kernelkiln.memory.memory import Memory
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.run import Optimizer, TaskSpec
from kernelkiln.store import open_store
from kernelkiln.testing.candidates import CANDIDATES
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.tasks import TASKS

SEED = (CANDIDATES / "softmax_knobs.py").read_text()
GENERATION = 1024


def run(mode: str, turns: int, window: int, tmp: Path, protocol: str = "tools") -> list[int]:
    client = scripted_player(SEED, turns, protocol=protocol)
    memory = Memory(open_store(f"sqlite:///{tmp / (mode + '.db')}"))
    llm = {
        "model": "scripted",
        "base_url": "http://127.0.0.1:9/v1",
        "context_window": window,
        "max_output_tokens": GENERATION,
        "reply_protocol": protocol,
    }
    config = OptimizeConfig(
        policy={"kind": "llm", "llm": llm}, budget=turns + 1, guard=fast_config(), context={"mode": mode}
    )
    result = Optimizer(memory, tmp, client=client).start(
        [TaskSpec(str(TASKS / "tiny_softmax.py"), {})], config, tmp / mode
    )
    with memory.store.read() as conn:
        attempts = memory.store.attempts.for_run(conn, result.run_id)
    return [call[0] for a in attempts for call in a.case.calls]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--window", type=int, default=8192)
    parser.add_argument("--protocol", choices=("tools", "text"), default="tools")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        active = run("active", args.turns, args.window, Path(tmp), args.protocol)
        passive = run("passive", args.turns, args.window, Path(tmp), args.protocol)
    limit = args.window - GENERATION
    out = {
        "turns": args.turns,
        "window": args.window,
        "protocol": args.protocol,
        "prompt_limit": limit,
        "active_per_call": active,
        "passive_per_call": passive,
        "active_max": max(active),
        "passive_max": max(passive),
        "active_total": sum(active),
        "passive_total": sum(passive),
        "active_within_limit": max(active) <= limit,
        "reduction": 1 - sum(active) / sum(passive),
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"prompt tokens per call, active: {active[0]} … {active[-1]} (max {out['active_max']}, limit {limit})")
    print(f"prompt tokens per call, passive: {passive[0]} … {passive[-1]} (max {out['passive_max']})")
    print(f"total: active {out['active_total']}, passive {out['passive_total']}: {out['reduction']:.0%} fewer")


if __name__ == "__main__":
    main()
