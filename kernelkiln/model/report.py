"""What ``kiln model`` found and did: the regions table, what stayed in torch, the end-to-end figures."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from kernelkiln.atomic import write_atomic
from kernelkiln.errors import UserError
from kernelkiln.speedup import fmt_x

RegionStatus = Literal["spliced", "slower", "refused", "failed", "unchecked", "dropped", "not run"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RegionRow(_Frozen):
    """One task: the regions of one structure, wherever they occur in the model."""

    task: str  # its file, relative to the output folder
    ops: list[str]
    places: int
    share: float  # of the eager graph's time, all places together (the mean over declared shapes)
    reference_ms: float  # one place, as the graph ran it at the first declared shape (the example inputs)
    budget: int = 0
    evaluations: int = 0
    speedup: float | None = None  # the guard's (confirmed) figure over the region's reference
    fastest: str = ""  # the region's fastest baseline: "eager" or a torch.compile configuration ("": not judged)
    vs_fastest: float | None = None  # the kernel over that baseline at its worst workload (``model.against``)
    status: RegionStatus
    reason: str = ""
    origin: str = ""  # "generated" (kernelkiln's lowering, tuned) or "model-written"
    memory: str = ""  # "reused" (an exact match's best first), "transfer" (from similar tasks), "new"
    run: str = ""  # its optimizer run's folder, relative to the output folder


class LeftRow(_Frozen):
    """Operations that stayed in torch for one reason."""

    op: str
    count: int
    reason: str


class EndToEnd(_Frozen):
    """At one declared shape, the spliced model against eager and torch.compile, side by side in one run."""

    shape: str = ""  # its label (seq=128); "" for the example inputs alone
    correct: bool
    trials: int  # fresh input draws checked, the wider ones included
    wide: int = 0  # of them, on wider inputs (floating inputs redrawn as the guard's robustness trials)
    max_abs_error: float
    failure: str = ""
    eager_ms: float | None = None
    compile_ms: dict[str, float] = {}  # per torch.compile configuration that ran (model/compilers.py)
    spliced_ms: float | None = None  # the spliced model in its form (``forms_ms[form]``: kept for --json readers)
    vs_eager: float | None = None
    vs_eager_interval: tuple[float, float] | None = None
    vs_compile: dict[str, float] = {}  # the spliced model over each configuration, median of per-round ratios
    compile_error: dict[str, str] = {}  # configurations that failed to compile or run, and why
    rounds: int = 0
    disturbed: int = 0  # rounds dropped and run again: the machine kept a batch from running (run-queue wait)
    unmeasured: str = ""  # why no figure could be given: too few clean rounds ("": timed)
    form: str = "eager"  # how the spliced model runs: its kernels called directly, or compiled with a configuration
    forms_ms: dict[str, float] = {}  # the spliced model per form: "eager" (kernels called directly), each configuration
    spliced_compile_error: dict[str, str] = {}  # configurations under which the spliced model failed, and why
    vs_fastest: float | None = None  # the spliced model (its form) over the fastest of eager and every configuration
    vs_fastest_interval: tuple[float, float] | None = None
    predicted: float | None = None  # over eager, from the spliced regions' figures and shares (``amdahl``)
    kept: bool = True  # False: the model runs in torch at this shape (``dropped`` says why, "" if no kernel applies)
    dropped: str = ""

    @property
    def fastest_compile(self) -> str:
        """The torch.compile configuration that ran fastest here, the one to beat ("": none ran)."""
        return min(self.compile_ms, key=lambda n: self.compile_ms[n], default="")

    @property
    def fastest(self) -> str:
        """The baseline the spliced model must beat: "eager" or the fastest torch.compile configuration."""
        return fastest_of(self.eager_ms, self.compile_ms)


class ModelReport(_Frozen):
    model: str
    inputs: list[str]  # the example inputs' shapes and dtypes
    threads: int
    budget: int
    regions: list[RegionRow]
    left: list[LeftRow]
    shapes: list[str] = []  # the declared shapes' labels; [] for the example inputs alone
    end_to_end: list[EndToEnd] = []  # one per declared shape
    handed_back: str = ""  # what the run hands back: "spliced", "spliced, compiled (strongest)", "torch.compile
    # (strongest)" (no kernel kept, a configuration fastest) or "eager"
    saved: str = ""  # the folder of the saved kernels (``load_model``), relative to the output folder; "" if none

    def write(self, out: Path) -> None:
        write_atomic(out / "model.json", self.model_dump_json(indent=2) + "\n")
        write_atomic(out / "model.md", markdown(self))


def amdahl(regions: list[RegionRow]) -> float | None:
    """The model's speedup over eager the spliced regions' own figures predict (Amdahl's law over their shares
    of eager's time); None when no region is spliced with a figure."""
    spliced = [r for r in regions if r.status == "spliced" and r.speedup]
    if not spliced:
        return None
    share = sum(r.share for r in spliced)
    return 1.0 / max(1e-9, 1.0 - share + sum(r.share / (r.speedup or 1.0) for r in spliced))


def agreement(e: EndToEnd) -> str:
    """Whether the measured end-to-end figure confirms the regions' prediction: ``""`` when there is none."""
    if e.predicted is None or e.vs_eager is None or e.vs_eager_interval is None:
        return ""
    low, high = e.vs_eager_interval
    verdict = "confirmed" if low <= e.predicted <= high else "NOT confirmed"
    return (
        f"the regions predict {fmt_x(e.predicted)} over eager (Amdahl over their shares); measured "
        f"{spread(e.vs_eager, e.vs_eager_interval)}: {verdict}"
    )


def fastest_of(eager_ms: float | None, compile_ms: dict[str, float]) -> str:
    """The fastest of eager and the torch.compile configurations timed: "eager" or a configuration's name."""
    arms = {"eager": eager_ms or float("inf"), **compile_ms}
    return min(arms, key=lambda n: arms[n])


def short_of(interval: tuple[float, float] | None) -> bool:
    """Not faster beyond noise: the rounds' 10th percentile at or below 1 (and so any median at or below it). A
    keep needs a measurement that supports it."""
    return interval is not None and interval[0] <= 1.0


def spread(ratio: float | None, interval: tuple[float, float]) -> str:
    """``1.01x, rounds' 10-90% 0.94x-1.14x``."""
    return f"{fmt_x(ratio)}, rounds' 10-90% {fmt_x(interval[0])}-{fmt_x(interval[1])}"


def baseline(name: str) -> str:
    """``eager`` or ``torch.compile (strongest)``."""
    return "eager" if name == "eager" else f"torch.compile ({name})"


def form_name(name: str) -> str:
    """A spliced model's form in words: ``kernels called directly`` or ``compiled (strongest)``."""
    return "kernels called directly" if name == "eager" else f"compiled ({name})"


def draws(e: EndToEnd) -> str:
    """``3 fresh input draws and 2 wider ones``."""
    return f"{e.trials - e.wide} fresh input draws" + (f" and {e.wide} wider ones" if e.wide else "")


def region_vs_fastest(r: RegionRow) -> str:
    """The kernel over its region's fastest baseline, naming it: ``1.30x (strongest)``."""
    return "—" if r.vs_fastest is None else f"{fmt_x(r.vs_fastest)} ({r.fastest})"


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def end_to_end_lines(e: EndToEnd) -> list[str]:
    """What ``e`` says, a line per fact: the check, why no kernel is kept, the times, the ratios, the failures."""
    verdict = "correct" if e.correct else f"WRONG: {e.failure}"
    lines = [f"against eager on {draws(e)}: {verdict} (max abs error {e.max_abs_error:.3g})"]
    if not e.kept:
        lines.append(f"no kernel kept: the model runs in torch here ({e.dropped or 'no kernel applies'})")
    if e.spliced_ms is not None:
        compiled = "".join(f", torch.compile ({n}) {_ms(ms)} ms" for n, ms in e.compile_ms.items())
        lines.append(
            f"eager {_ms(e.eager_ms)} ms{compiled}, spliced {_ms(e.spliced_ms)} ms ({e.rounds} interleaved rounds"
            + (f"; {e.disturbed} more dropped as disturbed and run again" if e.disturbed else "")
            + ")"
        )
        if len(e.forms_ms) > 1:
            forms = ", ".join(f"{form_name(n)} {_ms(ms)} ms" for n, ms in e.forms_ms.items())
            lines.append(f"the spliced model's forms: {forms}; the fastest: {form_name(e.form)}")
        low, high = e.vs_eager_interval or (None, None)
        lines.append(
            f"spliced over eager {fmt_x(e.vs_eager)} (rounds' 10-90%: {fmt_x(low)}-{fmt_x(high)})"
            + "".join(f"; over torch.compile ({n}) {fmt_x(x)}" for n, x in e.vs_compile.items())
            + (f"; the fastest compile here: {e.fastest_compile}" if e.fastest_compile else "")
        )
        if e.vs_fastest is not None and e.vs_fastest_interval is not None:
            low, high = e.vs_fastest_interval
            lines.append(
                f"over the fastest baseline ({baseline(e.fastest)}): {fmt_x(e.vs_fastest)} "
                f"(rounds' 10-90%: {fmt_x(low)}-{fmt_x(high)}; kernels are kept only above 1 at 10%)"
            )
        if agreement(e):
            lines.append(agreement(e))
    lines += [f"torch.compile ({n}) failed: {error}" for n, error in e.compile_error.items()]
    lines += [
        f"the spliced model under torch.compile ({n}) failed: {error}" for n, error in e.spliced_compile_error.items()
    ]
    return lines


def markdown(report: ModelReport) -> str:
    """The report as Markdown (``kiln report OUT --markdown`` prints it)."""
    lines = [
        f"# {report.model}",
        "",
        (f"Declared shapes: {'; '.join(report.shapes)}; inputs at the first: " if report.shapes else "Inputs ")
        + f"{', '.join(report.inputs)}; {report.threads} thread(s); budget {report.budget} evaluations.",
        "",
        "| task | ops | places | share | reference ms | kernel ms | speedup | vs fastest | status | origin | memory "
        "| evals |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- | ---: |",
    ]
    for r in report.regions:
        kernel = r.reference_ms / r.speedup if r.speedup else None
        ops = ", ".join(dict.fromkeys(r.ops))
        status = r.status + (f": {r.reason}" if r.reason else "")
        lines.append(
            f"| {r.task} | {ops} | {r.places} | {r.share:.1%} | {_ms(r.reference_ms)} | {_ms(kernel)} | "
            f"{fmt_x(r.speedup)} | {region_vs_fastest(r)} | {status} | {r.origin or '—'} | {r.memory or '—'} | "
            f"{r.evaluations} |"
        )
    if report.left:
        lines += ["", "## Stayed in torch", "", "| op | count | why |", "| --- | ---: | --- |"]
        lines += [f"| {x.op} | {x.count} | {x.reason} |" for x in report.left]
    for e in report.end_to_end:
        lines += ["", f"## End to end{' at ' + e.shape if e.shape else ''}", ""]
        lines += [f"- {line}" for line in end_to_end_lines(e)]
    if report.handed_back:
        lines += ["", f"Handed back: {report.handed_back}."]
    if report.saved:
        lines += ["", "## Saved", ""]
        lines.append(
            f"- `{report.saved}/`: the spliced kernels, their binaries and the example inputs; "
            "`kernelkiln.load_model(OUT, model)` runs them in your model (on this machine's CPU, or rebuilt)"
        )
    return "\n".join(lines) + "\n"


def read(folder: Path) -> ModelReport | None:
    """The report ``kiln model`` wrote in ``folder``; None when it holds none."""
    path = folder / "model.json"
    if not path.is_file():
        return None
    try:
        return ModelReport.model_validate_json(path.read_text())
    except ValidationError as exc:
        raise UserError(
            f"{path} is not a report this kernelkiln reads ({exc.error_count()} field(s) differ: written by another "
            "version?): rerun `kiln model`"
        ) from None


def html(report: ModelReport) -> str:
    """The report as one self-contained HTML page: Markdown's tables as HTML tables."""
    body, table = [], False
    for line in markdown(report).splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if set("".join(cells)) <= set("-: "):
                continue
            tag = "th" if not table else "td"
            body.append(
                ("<table>" if not table else "") + "<tr>" + "".join(f"<{tag}>{escape(c)}</{tag}>" for c in cells)
            )
            table = True
            continue
        if table:
            body.append("</table>")
            table = False
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            body.append(f"<h{level}>{escape(line.lstrip('# '))}</h{level}>")
        elif line.startswith("- "):
            body.append(f"<p>{escape(line[2:])}</p>")
        elif line:
            body.append(f"<p>{escape(line)}</p>")
    if table:
        body.append("</table>")
    style = (
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 8px}"
    )
    title = escape(report.model)
    return f"<!doctype html><meta charset=utf-8><title>{title}</title><style>{style}</style>\n" + "\n".join(body) + "\n"
