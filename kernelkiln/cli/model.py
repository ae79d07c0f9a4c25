"""``kiln model``: a whole model made faster, region by region, and verified end to end."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from kernelkiln.cli.options import CONFIG_OPTION, SET_CONFIG_OPTION, THREADS_OPTION
from kernelkiln.cli.output import wide_console
from kernelkiln.cli.progress import exit_interrupted, progress_observer
from kernelkiln.cli.settings import default_note, load_settings
from kernelkiln.cli.stores import open_memory
from kernelkiln.errors import UserError
from kernelkiln.orchestrator.config import MODEL_BUDGET_PER_TASK, MODEL_WALL_S
from kernelkiln.speedup import fmt_x

if TYPE_CHECKING:
    from kernelkiln.model.report import ModelReport

HELP = """Optimize a whole PyTorch model: capture it, cut it into tasks, optimize them with
memory, splice the winning kernels back, and check and time the model end to end.

MODEL is FILE:FUNCTION, a function returning the torch.nn.Module (random weights are fine);
--inputs FILE:FUNCTION returns a tuple of example inputs. The input function is called
again under fresh torch seeds for the end-to-end check, so drawing with torch.randint or
torch.randn gives the check new inputs.

The model is captured with torch.export at the inputs' shapes (where export fails, through
dynamo, graph by graph; the kernels then run under torch.compile). Regions the lowering can
fuse (a product with its epilogue, a norm, an elementwise chain; attention as the model
runs it) become KernelBench-format task files in OUT/tasks/ (`kiln optimize` and
`kiln eval` take them as they are); identical regions are one task. Tasks are optimized
largest share of the time first, the budget split by share, memory on: a region seen
before (in this model or an earlier one) starts from what was learned. A region is
spliced only when the guard confirmed its kernel correct and faster than torch, and then
faster than its region compiled with each --compile configuration; the report lists the
rest and why.

The spliced model is checked and timed in each form (kernels called directly, and
compiled with each configuration, the kernels' ops left whole) beside eager and each
configuration. Kernels are kept only where the fastest form beats the fastest of them
beyond the rounds' spread; otherwise none is kept and the report says the model is best
run as that baseline runs it (torch.compile with the fastest configuration): kiln never
hands back a model slower than your best compile.

The kept kernels are saved in OUT/model/ with their binaries and the machine they were
built for; from Python, kernelkiln.load_model(OUT, model) runs them in a freshly built
model (on another CPU it refuses, or rebuilds with rebuild=True).

--shapes declares the sizes to optimize for: `--shapes seq=1,128 --shapes batch=1,4`
calls the --inputs function with seq= and batch= keyword arguments, once per combination,
and captures the model at each. The same region at every shape is one task with one
workload per shape, so one search finds one kernel for all of them; a call at any other
shape runs the model in torch, counted in the model's .fallbacks.

Under torch.compile: torch.compile(model, backend=kernelkiln.backend(OUT), dynamic=False)
runs the saved kernels wherever the compiled graph holds their regions.

\b
Examples:
  kiln model models.py:gpt2 --inputs models.py:tokens
  kiln model models.py:gpt2 --inputs models.py:tokens --budget 60 --threads 1 --out gpt2-run
  kiln model models.py:bert --inputs models.py:tokens --json > report.json
  kiln model models.py:gpt2 --inputs models.py:tokens --shapes seq=1,64,128

Results: OUT/model.md and OUT/model.json (the regions table and the end-to-end figures;
`kiln report OUT` prints it), OUT/tasks/*.py, OUT/runs/<task>/ (each task's run),
OUT/model/ (the kept kernels, for kernelkiln.load_model and kernelkiln.backend).

\b
Exit codes:
  0    done (the report says which regions were spliced)
  2    bad input, or a model torch.export cannot capture (why, and the fix)
  3    the spliced model disagrees with eager (no kernel is kept)
  130  interrupted
"""

WRONG = 3


def register(app: typer.Typer) -> None:
    app.command("model", help=HELP)(model)


def model(
    target: str = typer.Argument(..., metavar="MODEL", help="FILE:FUNCTION returning the torch.nn.Module."),
    inputs: str = typer.Option(
        ..., "--inputs", metavar="FILE:FUNCTION", help="Returns a tuple of example inputs (the shapes optimized for)."
    ),
    budget: int = typer.Option(
        None,
        "--budget",
        min=1,
        help=f"Evaluations per task on average (default {MODEL_BUDGET_PER_TASK}): the model's total is split "
        "between its tasks by time share.",
    ),
    model_budget: int = typer.Option(
        None,
        "--model-budget",
        min=1,
        help="Evaluations for the whole model instead, split between its tasks by time share.",
    ),
    max_wall: float = typer.Option(
        None,
        "--max-wall",
        metavar="SECONDS",
        help=f"Wall time for all the searches, split between tasks by time share like the budget (at least 60 s "
        f"each; 0: no limit; default {MODEL_WALL_S:.0f}). Each task's best is still judged again after its share ends.",
    ),
    out: Path = typer.Option(
        None,
        "--out",
        metavar="DIR",
        help="Where tasks, runs and the report go (default: kiln-models/<the model's class>).",
    ),
    store: str = typer.Option(
        None, "--store", metavar="URL", help="Memory's store: sqlite:///PATH or postgresql://… (default: $KILN_STORE)."
    ),
    threads: int = THREADS_OPTION,
    agents: int = typer.Option(None, "--agents", help=f"Agents per task {default_note('agents')}."),
    time_budget: float = typer.Option(
        None,
        "--time-budget",
        metavar="SECONDS",
        help=f"Cap on each evaluation's timing {default_note('guard.time_budget_s')}.",
    ),
    confirm: float = typer.Option(
        None,
        "--confirm-budget",
        metavar="SECONDS",
        help=f"Timing of each task's best judged again {default_note('confirm_time_budget_s')}.",
    ),
    splice_model_kernels: bool = typer.Option(
        False,
        "--splice-model-kernels",
        help="Splice kernels an LLM wrote (--config with an llm policy): they run in this process, outside the "
        "guard's sandbox. Kernels kernelkiln's lowering generated are spliced without it.",
    ),
    shapes: list[str] = typer.Option(
        [],
        "--shapes",
        metavar="NAME=N[,N...]",
        help="Sizes to optimize for, passed to the --inputs function as keyword arguments (repeat for more: every "
        "combination is a declared shape). Each task then serves them all; a call at any other shape runs in torch.",
    ),
    compile_with: str = typer.Option(
        "default,strongest",
        "--compile",
        metavar="NAMES",
        help="The torch.compile configurations each kernel and the spliced model must beat (the fastest of them "
        "and eager): default (torch.compile(model)) and strongest (Inductor with freezing, max_autotune and "
        "cpp_wrapper: minutes of compilation on a large model). The spliced model is also compiled with each.",
    ),
    no_compile: bool = typer.Option(
        False, "--no-compile", help="Compare with eager alone: no torch.compile baseline, no compiled form."
    ),
    config_file: Path = CONFIG_OPTION,
    set_config: list[str] = SET_CONFIG_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print model.json's object (a refusal too) instead of tables."),
) -> None:
    from kernelkiln.model import shapes as declared_shapes
    from kernelkiln.model.compilers import names
    from kernelkiln.model.factory import inputs_maker, make_model
    from kernelkiln.model.pipeline import optimize_model
    from kernelkiln.orchestrator.run import Interrupted

    observer = None
    try:
        settings = load_settings(
            config_file,
            {
                "--budget": budget,
                "--max-wall": max_wall,
                "--agents": agents,
                "--store": store,
                "--threads": threads,
                "--time-budget": time_budget,
                "--confirm-budget": confirm,
            },
            set_config,
            defaults={"budget": MODEL_BUDGET_PER_TASK, "max_wall_s": MODEL_WALL_S},
        )
        try:
            compilers = () if no_compile else names(compile_with)
        except ValueError as exc:
            raise UserError(f"--compile: {exc}") from None
        sizes = declared_shapes.parse(shapes)
        user_model = make_model(target)
        declared = declared_shapes.declare(inputs_maker(inputs, list(sizes)), sizes)
        name = type(user_model).__name__
        folder = out or Path("kiln-models") / name
        memory = open_memory(settings.config.store, settings.config.memory.readonly, folder)
        observer = progress_observer()
        result = optimize_model(
            user_model,
            declared,
            folder,
            memory,
            settings.config,
            model_budget=model_budget,
            name=name,
            observer=observer,
            splice_model_kernels=splice_model_kernels,
            compilers=compilers,
            say=lambda line: print(f"kiln: {line}", file=sys.stderr),
        )
    except UserError as exc:
        if as_json:
            print(json.dumps({"status": "refused", "reason": str(exc)}))
        raise
    except Interrupted as stop:
        exit_interrupted(f"the task's run {stop.result.run_id} can be resumed with `kiln optimize --resume`")
    finally:
        if observer is not None:
            observer.close()
    report = result.report
    if as_json:
        print(json.dumps({"status": "done", "out": str(folder), **report.model_dump(mode="json")}, indent=2))
    else:
        _show(report, folder)
    wrong = [e for e in report.end_to_end if not e.correct]
    if wrong:
        at = f" at {wrong[0].shape}" if wrong[0].shape else ""
        print(f"kiln: the spliced model disagrees with eager{at}: {wrong[0].failure}", file=sys.stderr)
        raise typer.Exit(WRONG)


def _show(report: ModelReport, folder: Path) -> None:
    from kernelkiln.model.report import end_to_end_lines, region_vs_fastest

    console = wide_console()
    table = Table(title=f"{report.model}: regions, largest share first", title_justify="left")
    for col in ("task", "places", "share", "speedup", "vs fastest", "status", "memory", "evals"):
        table.add_column(col, justify="left" if col in ("task", "status", "memory") else "right")
    for r in report.regions:
        status = r.status + (f": {r.reason}" if r.reason else "")
        table.add_row(
            r.task, str(r.places), f"{r.share:.1%}", fmt_x(r.speedup), region_vs_fastest(r), status, r.memory or "—",
            str(r.evaluations),
        )  # fmt: skip
    console.print(table)
    for left in report.left:
        console.print(f"stayed in torch: {left.op} ×{left.count}: {left.reason}", markup=False)
    for e in report.end_to_end:
        console.print(f"end to end{' at ' + e.shape if e.shape else ''}:", markup=False)
        for line in end_to_end_lines(e):
            console.print(f"  {line}", markup=False)
    if report.handed_back:
        console.print(f"handed back: {report.handed_back}", markup=False)
    if report.saved:
        console.print(
            f"saved: {folder / report.saved} (kernelkiln.load_model({str(folder)!r}, model) runs the kernels)",
            markup=False,
        )
    console.print(f"report: {folder / 'model.md'}; tasks: {folder / 'tasks'}", markup=False)
