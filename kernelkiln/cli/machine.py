"""``kiln machine``: this machine's measured peaks (bandwidth, FP32 FLOP/s), measured once and cached."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from kernelkiln.errors import UserError
from kernelkiln.platforms import machine


def machine_peaks(refresh: bool, console: Console | None = None) -> tuple[machine.MachineRecord, bool]:
    """(record, whether it came from the cache); measures with a status line on ``console`` when needed."""
    if not refresh:
        cached = machine.load_peaks()
        if cached is not None:
            return cached, True
    from kernelkiln.native import BuildError

    console = console or Console(stderr=True)
    try:
        with console.status("measuring this machine's peaks") as status:
            record = machine.measure(refresh=True, progress=lambda line: status.update(f"kiln machine: {line}"))
    except BuildError as exc:
        raise UserError(f"cannot build the measurement kernels: {exc}") from None
    return record, False


def isolation_offered() -> dict[str, str | None]:
    """Each isolation layer this kernel lets this user apply (None), or why not."""
    from kernelkiln.isolation.offer import offered

    return offered()


def _print_table(record: machine.MachineRecord, cached: bool, console: Console) -> None:
    table = Table(
        "cores",
        "triad GB/s",
        "with write-allocate GB/s",
        "FP32 GFLOP/s",
        title=f"{record.cpu} ({record.cpu_count} CPUs, {record.kernel})",
    )
    for cores, row in sorted(record.per_cores.items(), key=lambda item: int(item[0])):
        mark = " *" if int(cores) == record.cores else ""
        table.add_row(
            cores + mark,
            f"{row['bandwidth_gbs']:.1f}",
            f"{row['bandwidth_write_allocate_gbs']:.1f}",
            f"{row['peak_gflops']:.1f}",
        )
    console.print(table)
    console.print(
        f"bandwidth_gbs {record.bandwidth_gbs:.1f}, peak_gflops {record.peak_gflops:.1f} "
        f"at {machine.cores_text(record.cores)} (*: the guard's default)"
    )
    for layer, why in isolation_offered().items():
        console.print(
            f"isolation {layer}: " + ("offered" if why is None else f"not offered ({why})"),
            markup=False,
            highlight=False,
        )
    if cached:
        console.print(f"cached (measured {record.measured_at}); `kiln machine --refresh` measures again")
    else:
        console.print(f"measured in {record.seconds:.1f} s; cached at {machine.cache_path(record.cpu_key)}")


def register(app: typer.Typer) -> None:
    @app.command("machine")
    def machine_cmd(
        as_json: bool = typer.Option(
            False,
            "--json",
            help="Print one JSON object (bandwidth_gbs, peak_gflops, cores, per_cores, measured_at, cpu, ...).",
        ),
        refresh: bool = typer.Option(False, "--refresh", help="Measure again even when a cached record exists."),
    ) -> None:
        """This machine's peaks for speed-of-light figures: STREAM triad bandwidth and FMA FLOP/s per core count.

        Measured once (a few seconds) and cached per CPU; later calls print the cached record. Also lists the
        isolation layers this kernel offers the guard's workers and builds (probed afresh each time), and why
        any is not offered.
        """
        record, cached = machine_peaks(refresh)
        if as_json:
            out = {
                **record.to_dict(),
                "cached": cached,
                "path": str(machine.cache_path(record.cpu_key)),
                "isolation": isolation_offered(),
            }
            print(json.dumps(out, indent=2))
            return
        _print_table(record, cached, Console())
