"""``kiln lower``: the starting candidate kernelkiln generates from a task's reference, for a user or a model to
start from (``kiln seed``, its earlier name, still runs it)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from kernelkiln.cli.options import set_option, shrink_option
from kernelkiln.cli.paths import resolve_task_path
from kernelkiln.cli.sizing import task_overrides
from kernelkiln.errors import UserError


def register(app: typer.Typer) -> None:
    app.command("lower")(lower_cmd)
    app.command("seed", hidden=True)(lower_cmd)  # the command's earlier name; scripts and notes still call it


def lower_cmd(
    task: str = typer.Argument(..., help="A KernelBench-format task file, or a bundled task name (`kiln tasks`)."),
    out: Path = typer.Option(None, "--out", metavar="FILE", help="Write the candidate here (default: stdout)."),
    overrides: list[str] = set_option(),
    shrink: str | None = shrink_option(),
    threads: int = typer.Option(
        None,
        "--threads",
        min=1,
        help="THREADS' largest value: the guard's thread count (default: all cores but one).",
    ),
    check: bool = typer.Option(
        False,
        "--check",
        help="Judge the candidate's correctness with the guard (gate, "
        "build, check on every workload; no timing) and say so.",
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print one JSON object (the source under 'source' when there is no --out)."
    ),
) -> None:
    """Generate a CPU candidate (C with OpenMP, KNOBS to tune) from TASK's reference operations.

    kernelkiln traces the reference at each workload's real inputs, fuses its elementwise ops, reductions,
    softmax, normalizations, pooling, scans and losses into as few loop nests as the data allows, runs
    products and 1-, 2- and 3-d convolutions (transposed too) as a packed GEMM with the elementwise ops after
    them fused on each tile, and writes one C function per workload shape. `kiln optimize` starts from this
    candidate when the task has no starting candidate of its own (`KILN["start"]`). A reference with
    operations kernelkiln cannot lower yet (a sort, a random tensor made in forward) is refused naming them (exit 2).

    Examples: `kiln lower kernelkiln/suites/kb_cpu/level1/29_Softmax.py --out softmax.py --check`;
    `kiln lower level2/19_ConvTranspose2d_GELU_GroupNorm.py --shrink 8`; `kiln lower level3/9_ResNet18.py
    --shrink 20ms` (sizes chosen so the reference's forward takes about 20 ms); then `kiln eval TASK
    softmax.py`.
    """
    from kernelkiln.lowering import Unsupported, generate  # imports torch
    from kernelkiln.task import load_task

    path = resolve_task_path(task)
    loaded = load_task(path, task_overrides([path], overrides, shrink)[0])
    try:
        generated = generate(loaded, threads=threads)
    except Unsupported as exc:
        raise UserError(f"{path}: cannot generate a starting candidate: {exc}") from None
    summary: dict[str, Any] = {
        "task": loaded.name,
        "kernels": generated.fused,
        "kinds": list(generated.kinds),
        "knobs": list(generated.knobs),
        "ops": list(generated.ops),
    }
    if check:
        summary["check"] = _check(loaded, generated.source, threads)
    if out is not None:
        try:
            out.write_text(generated.source)
        except OSError as exc:
            raise UserError(f"cannot write {out}: {exc}") from None
        summary["out"] = str(out)
    if as_json:
        print(json.dumps({**summary, **({} if out else {"source": generated.source})}, indent=2))
    else:
        if out is None:
            sys.stdout.write(generated.source)
        verdict = summary.get("check")
        judged = (
            f"; the guard judges it {'correct' if verdict['correct'] else 'WRONG: ' + verdict['reason']}"
            if verdict
            else ""
        )
        print(
            f"kiln: starting candidate for {loaded.name}: {generated.fused} loop nest(s) "
            f"({', '.join(generated.kinds)}), "
            f"knobs {', '.join(generated.knobs)}{judged}" + (f"; written to {out}" if out else ""),
            file=sys.stderr,
        )
    if check and not summary["check"]["correct"]:
        raise typer.Exit(1)  # a lowering bug: the candidate disagrees with its own reference


def _check(task, source: str, threads: int | None) -> dict:
    from kernelkiln.guard.config import GuardConfig
    from kernelkiln.guard.session import GuardSession

    settings = {"isolation": "best-effort", **({"threads": threads} if threads else {})}
    with GuardSession(task, GuardConfig(**settings)) as session:
        verdict = session.evaluate(source, timed=False)
    return {"correct": verdict.correct, "verdict": verdict.verdict, "stage": verdict.stage, "reason": verdict.reason}
