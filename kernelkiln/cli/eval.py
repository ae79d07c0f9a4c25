"""``kiln eval``: run the guard on one candidate and print its verdict."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from kernelkiln.cli.options import set_option, shrink_option
from kernelkiln.cli.output import wide_console
from kernelkiln.cli.paths import resolve_task_path
from kernelkiln.cli.sizing import task_overrides
from kernelkiln.errors import UserError
from kernelkiln.guard.config import GuardConfig

if TYPE_CHECKING:
    from kernelkiln.guard.verdict import CheckSetup, TimingSetup, Verdict
from kernelkiln.platforms import get_platform
from kernelkiln.task import Task, load_task


def read_source(path: Path | None, task: Task, what: str, platform: str = "cpu") -> str:
    """The candidate file's text; without a path, the task's seed for ``platform``."""
    if path is None:
        path = task.start_for(platform)
        if path is None and platform == "cpu" and what == "candidate":
            from kernelkiln.lowering import Unsupported, generate  # imports torch

            try:
                return generate(task).source
            except Unsupported as exc:
                raise UserError(
                    f"{task.path}: no candidate given, no KILN['start'], and kernelkiln cannot generate one: {exc}"
                ) from None
        if path is None:
            raise UserError(f"{task.path}: no {what} given and the task declares no KILN['start'] for {platform}")
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {what} {path}: {exc}") from None


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.4g} ms"


def _timing_line(verdict: Verdict, setup: TimingSetup) -> str:
    """Where the timed workers and the guard ran (``setup``, the verdict's timing), and what was taken out."""
    where = (
        f"workers on cores {_cores(setup.placement.worker_cores)}, guard on {_cores(setup.placement.guard_cores)}"
        if setup.placement.worker_cores
        else "not pinned (no core to spare)"
    )
    taken = "run-queue waits taken out" if setup.accounting else "wall clock only (no schedstat)"
    dropped = sum(w.dropped for w in verdict.workloads)
    threads = f"{setup.threads} thread{'' if setup.threads == 1 else 's'} per worker; " if setup.threads else ""
    return (
        f"{threads}{where}; {taken}; request {setup.request_s * 1e6:.0f} µs ± {setup.request_jitter_s * 1e6:.0f}, "
        f"batches of {setup.batch_target_s * 1e3:.1f} ms"
        + (f"; {dropped} disturbed round(s) run again" if dropped else "")
        + "".join(f"\n  {note}" for note in setup.notes)
    )


def _check_line(check: CheckSetup) -> str:
    """Against what the outputs were measured, and on how many trials."""
    against = (
        "against the float64 oracle"
        if check.oracle
        else f"against the float32 reference with the task's tolerance ({check.oracle_note})"
    )
    skipped = f", {check.robustness_skipped} skipped (reference not finite)" if check.robustness_skipped else ""
    return f"{against}; {check.trials} trials, {check.robustness_trials} robustness trials on wider inputs{skipped}"


def _cores(cores: list[int] | None) -> str:
    return ",".join(map(str, cores or []))


def render(verdict: Verdict, task: Task, console: Console) -> None:
    """The human-readable report of one verdict."""
    if verdict.workloads:
        table = Table(title=f"{task.name}: candidate vs reference", title_justify="left")
        for col in ("workload", "t_ref", "t_cand", "speedup", "spread", "rounds×reps"):
            table.add_column(col, justify="left" if col == "workload" else "right", no_wrap=col != "workload")
        has_inc = any(w.t_inc_s is not None for w in verdict.workloads)
        if has_inc:
            table.add_column("t_inc", justify="right")
            table.add_column("vs inc", justify="right")
        has_sol = any(w.sol_fraction is not None for w in verdict.workloads)
        if has_sol:
            table.add_column("SOL", justify="right")
        for w in verdict.workloads:
            sizes = "\n".join(f"{k}={v}" for k, v in w.sizes.items())
            row = [
                f"{w.name}\n[dim]{sizes}[/]",
                _ms(w.t_ref_s),
                _ms(w.t_cand_s),
                f"{w.speedup:.3f}x",
                f"±{w.spread:.1%}",
                f"{w.rounds}×{w.reps}",
            ]
            if has_inc:
                row += [_ms(w.t_inc_s), f"{w.speedup_vs_incumbent:.3f}x"]
            if has_sol:
                row.append("-" if w.sol_fraction is None else f"{w.sol_fraction:.0%}")
            table.add_row(*row)
        console.print(table)
    colour = {"KEEP": "green", "ACCEPT": "cyan", "REVERT": "yellow", "REJECT": "red"}[verdict.verdict]
    console.print(f"verdict: [bold {colour}]{verdict.verdict}[/] (stage: {verdict.stage})")
    console.print(f"reason:  {verdict.reason}", markup=False, highlight=False)
    if verdict.speedup is not None:
        console.print(f"speedup over the reference (geometric mean): {verdict.speedup:.3f}x")
    for d in verdict.diagnostics[:10]:
        if d.get("candidate_line"):
            line = f"candidate line {d['candidate_line']} (native source line {d['line']}): "
        else:
            line = f"line {d.get('line')}: " if d.get("line") else ""
        console.print(f"  {d.get('severity', 'error')}: {line}{d.get('message')}", markup=False, highlight=False)
    if verdict.check is not None:
        console.print(f"check: {_check_line(verdict.check)}", style="dim", markup=False, highlight=False)
    if verdict.timing is not None:
        console.print(f"timing: {_timing_line(verdict, verdict.timing)}", style="dim", markup=False, highlight=False)
    for line in _isolation_lines(verdict):
        console.print(line, style="dim", markup=False, highlight=False)


def _isolation_lines(verdict: Verdict) -> list[str]:
    """What held around the candidate's worker and builds, what did not and why, what was refused."""
    iso = verdict.isolation
    if not iso.held:
        return []
    lines = []
    for where, layers in (("worker", iso.held), ("build", iso.build)):
        if layers:
            held = ", ".join(k for k, v in layers.items() if v)
            missing = "; ".join(f"{k}: {iso.notes.get(k, 'not applied')}" for k, v in layers.items() if not v)
            lines.append(
                f"isolation ({iso.policy}), {where}: {held}" + (f" (did not hold: {missing})" if missing else "")
            )
    if iso.denied:
        lines.append(f"refused system calls: {', '.join(iso.denied)}")
    return lines


def register(app: typer.Typer) -> None:
    @app.command("eval")
    def eval_cmd(
        task: str = typer.Argument(..., help="A KernelBench-format task file, or a bundled task name (`kiln tasks`)."),
        candidate: Path = typer.Argument(
            None,
            help="Python file defining ModelNew (default: the task's starting candidate, "
            "else the one `kiln lower` generates).",
        ),
        incumbent: Path = typer.Option(
            None, "--incumbent", help="Judge against this candidate instead of the reference."
        ),
        overrides: list[str] = set_option(),
        shrink: str | None = shrink_option(),
        threads: int = typer.Option(
            None,
            "--threads",
            min=1,
            help="Intra-op threads for reference and candidate alike (default: all cores but one, kept for the guard).",
        ),
        time_budget: float = typer.Option(
            None,
            "--time-budget",
            min=0.1,
            help="Seconds the timing stage may take (default 20); it stops earlier once the speedup is precise.",
        ),
        platform: str = typer.Option(
            "cpu", "--platform", help="Where the candidate runs and is timed: cpu or cuda (needs a visible NVIDIA GPU)."
        ),
        lock_clocks: int = typer.Option(
            None,
            "--lock-clocks",
            metavar="MHZ",
            min=1,
            help="Lock the GPU's clocks at MHZ while timing (nvidia-smi -lgc); refuses to run if locking fails.",
        ),
        isolation: str = typer.Option(
            "strict",
            "--isolation",
            metavar="strict|best-effort",
            help="strict (default): stop when an isolation layer this kernel offers cannot be applied around "
            "the workers or builds; best-effort: judge with what holds. The verdict says which layers held.",
        ),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
    ) -> None:
        """Gate, build, check and time CANDIDATE against TASK's reference; print the verdict.

        The verdict is REJECT (failed gate/build/check, with the reason), KEEP (faster beyond the measured
        noise), ACCEPT (within the noise band) or REVERT (slower). Exit code 0 whenever a verdict was reached,
        2 for unusable input.

        Examples: `kiln eval row_softmax` (a bundled task and its starting candidate);
        `kiln eval task.py new.py --set batch_size=64 --json`;
        `kiln eval level2/19_ConvTranspose2d_GELU_GroupNorm.py new.py --shrink 8`;
        `kiln eval task.py new.py --incumbent best.py`.
        """
        # Imported here: registering commands must not load torch (`kiln --help` stays fast).
        from kernelkiln.guard.session import GuardSession

        get_platform(platform)  # one clear line when this machine lacks it
        path = resolve_task_path(task)
        loaded = load_task(path, task_overrides([path], overrides, shrink)[0])
        source = read_source(candidate, loaded, "candidate", platform)
        inc_source = read_source(incumbent, loaded, "incumbent") if incumbent else None
        err = Console(stderr=True)
        if isolation not in ("strict", "best-effort"):
            raise UserError(f"--isolation must be strict or best-effort, not {isolation!r}")
        settings = {
            k: v
            for k, v in {
                "threads": threads,
                "time_budget_s": time_budget,
                "lock_clocks_mhz": lock_clocks,
                "isolation": isolation,
            }.items()
            if v is not None
        }
        if platform != "cpu":
            settings["platform"] = platform
        with GuardSession(loaded, GuardConfig(**settings)) as session:
            with (
                err.status(
                    f"evaluating {candidate or loaded.start_for(platform) or 'the generated starting candidate'} "
                    f"on {loaded.name} "
                    f"({len(loaded.workloads)} workload(s))…",
                    spinner="dots",
                )
                if not as_json
                else contextlib.nullcontext()
            ):
                verdict = session.evaluate(source, inc_source)
        if as_json:
            print(json.dumps({"task": loaded.name, **verdict.model_dump()}, indent=2))
        else:
            render(verdict, loaded, wide_console())
