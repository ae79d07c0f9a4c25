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
    spliced_ms: float | None = None
    vs_eager: float | None = None
    vs_eager_interval: tuple[float, float] | None = None
    vs_compile: dict[str, float] = {}  # the spliced model over each configuration, median of per-round ratios
    compile_error: dict[str, str] = {}  # configurations that failed to compile or run, and why
    rounds: int = 0
    disturbed: int = 0  # rounds dropped and run again: the machine kept a batch from running (run-queue wait)
    unmeasured: str = ""  # why no figure could be given: too few clean rounds ("": timed)
    predicted: float | None = None  # over eager, from the spliced regions' figures and shares (``amdahl``)
    kept: bool = True  # False: the model runs in torch at this shape (``dropped`` says why, "" if no kernel applies)
    dropped: str = ""

    @property
    def fastest_compile(self) -> str:
        """The torch.compile configuration that ran fastest here, the one to beat ("": none ran)."""
        return min(self.compile_ms, key=lambda n: self.compile_ms[n], default="")


class ModelReport(_Frozen):
    model: str
    inputs: list[str]  # the example inputs' shapes and dtypes
    threads: int
    budget: int
    regions: list[RegionRow]
    left: list[LeftRow]
    shapes: list[str] = []  # the declared shapes' labels; [] for the example inputs alone
    end_to_end: list[EndToEnd] = []  # one per declared shape
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
        f"{fmt_x(e.vs_eager)}, rounds' 10-90% {fmt_x(low)}-{fmt_x(high)}: {verdict}"
    )


def draws(e: EndToEnd) -> str:
    """``3 fresh input draws and 2 wider ones``."""
    return f"{e.trials - e.wide} fresh input draws" + (f" and {e.wide} wider ones" if e.wide else "")


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def markdown(report: ModelReport) -> str:
    """The report as Markdown (``kiln report OUT --markdown`` prints it)."""
    lines = [
        f"# {report.model}",
        "",
        (f"Declared shapes: {'; '.join(report.shapes)}; inputs at the first: " if report.shapes else "Inputs ")
        + f"{', '.join(report.inputs)}; {report.threads} thread(s); budget {report.budget} evaluations.",
        "",
        "| task | ops | places | share | reference ms | kernel ms | speedup | status | origin | memory | evals |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- | ---: |",
    ]
    for r in report.regions:
        kernel = r.reference_ms / r.speedup if r.speedup else None
        ops = ", ".join(dict.fromkeys(r.ops))
        status = r.status + (f": {r.reason}" if r.reason else "")
        lines.append(
            f"| {r.task} | {ops} | {r.places} | {r.share:.1%} | {_ms(r.reference_ms)} | {_ms(kernel)} | "
            f"{fmt_x(r.speedup)} | {status} | {r.origin or '—'} | {r.memory or '—'} | {r.evaluations} |"
        )
    if report.left:
        lines += ["", "## Stayed in torch", "", "| op | count | why |", "| --- | ---: | --- |"]
        lines += [f"| {x.op} | {x.count} | {x.reason} |" for x in report.left]
    for e in report.end_to_end:
        lines += ["", f"## End to end{' at ' + e.shape if e.shape else ''}", ""]
        verdict = "correct" if e.correct else f"WRONG: {e.failure}"
        lines.append(f"- against eager on {draws(e)}: {verdict} (max abs error {e.max_abs_error:.3g})")
        if not e.kept:
            lines.append(f"- no kernel kept: the model runs in torch here ({e.dropped or 'no kernel applies'})")
        if e.spliced_ms is not None:
            low, high = e.vs_eager_interval or (None, None)
            compiled = "".join(f", torch.compile ({n}) {_ms(ms)} ms" for n, ms in e.compile_ms.items())
            lines.append(
                f"- eager {_ms(e.eager_ms)} ms{compiled}, spliced {_ms(e.spliced_ms)} ms "
                f"({e.rounds} interleaved rounds"
                + (f"; {e.disturbed} more dropped as disturbed and run again" if e.disturbed else "")
                + ")"
            )
            lines.append(
                f"- spliced over eager {fmt_x(e.vs_eager)} (rounds' 10-90%: {fmt_x(low)}-{fmt_x(high)})"
                + "".join(f"; over torch.compile ({n}) {fmt_x(x)}" for n, x in e.vs_compile.items())
                + (f"; the fastest compile here: {e.fastest_compile}" if e.fastest_compile else "")
            )
            if agreement(e):
                lines.append(f"- {agreement(e)}")
        for n, error in e.compile_error.items():
            lines.append(f"- torch.compile ({n}) failed: {error}")
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
