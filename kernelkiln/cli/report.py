"""``kiln report``: a run (or several), or an ablation, as one self-contained HTML page, or Markdown for an issue."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from kernelkiln.cli.options import STORE_OPTION
from kernelkiln.cli.stores import shown
from kernelkiln.errors import UserError
from kernelkiln.report import ablation as ablation_page
from kernelkiln.report import collect, render_html, render_markdown
from kernelkiln.report.ablation_data import parse
from kernelkiln.report.sources import read_ablation_json, read_run_json
from kernelkiln.store import open_store

HELP = """Report on optimizer runs or an ablation: one HTML file that works offline (no scripts, no CDN) or Markdown.

RUN|DIR is a run id (looked up in the store) or an output DIR of `kiln optimize` holding
run.json. Several may be given (e.g. a bench's repeats): they share one page. The store
each run was read from is named on stderr; a DIR whose run is not in the store is an
error unless --allow-missing, which reports its run.json alone (no attempt history). The page has
the suite table, speedup and speed-of-light bars, each task's trajectory and attempt graph,
memory growth during the run and the resident rules.

An output DIR of `kiln model` (holding model.json) gets its regions table and end-to-end
figures. An output DIR of `kiln ablate` (holding ablation.json) gets a page of its own,
no store needed: per study, the arms' figures with 95% intervals, each arm over
the study's reference (a forest plot) and the evaluations to 95% of the best.

\b
Examples:
  kiln report kiln-runs/r-3f9c0a1b2c3d4e5f          # writes DIR/report.html
  kiln report r-3f9c0a1b2c3d4e5f --out report.html
  kiln report r-3f9c0a1b2c3d4e5f --markdown         # paste into an issue
  kiln report kiln-ablation                         # `kiln ablate`'s DIR too
  kiln report kiln-models/GPT2LMHeadModel --markdown  # `kiln model`'s DIR
"""


def register(app: typer.Typer) -> None:
    app.command("report", help=HELP)(report)


TARGETS = typer.Argument(
    ..., metavar="RUN|DIR", help="Run ids or output DIRs holding run.json, or one holding ablation.json."
)
OUT = typer.Option(
    None, "--out", metavar="FILE.html", help="Where the page goes (default: DIR/report.html, or kiln-report-RUN.html)."
)
MARKDOWN = typer.Option(False, "--markdown", help="Print Markdown to stdout instead of writing HTML.")
ALLOW_MISSING = typer.Option(
    False,
    "--allow-missing",
    help="Report a DIR whose run is not in the store from its run.json alone (no attempt history, graphs or memory).",
)


def report(
    targets: list[str] = TARGETS,
    out: Path = OUT,
    markdown: bool = MARKDOWN,
    store: str = STORE_OPTION,
    allow_missing: bool = ALLOW_MISSING,
) -> None:
    from kernelkiln.model import report as model_report

    models = [model_report.read(Path(t)) for t in targets if Path(t).is_dir()]
    if any(models):
        if len(targets) > 1:
            raise UserError("a `kiln model` DIR is reported on its own: give just that DIR")
        found = next(m for m in models if m is not None)
        if markdown:
            print(model_report.markdown(found), end="")
        else:
            _write(out or Path(targets[0]) / "report.html", model_report.html(found))
        return
    ablations = [read_ablation_json(t) for t in targets]
    if any(ablations):
        if len(targets) > 1:
            raise UserError("an ablation DIR is reported on its own: give just that DIR")
        _report_ablation(*next(found for found in ablations if found is not None), out, markdown)
        return
    dirs = [read_run_json(t) for t in targets]  # one clear line for a DIR without run.json, before the store
    try:
        opened, store_error = open_store(store), ""
    except UserError as exc:
        if not all(dirs):
            raise
        opened, store_error = None, str(exc)
    try:
        data = collect(targets, opened, store_error, allow_missing=allow_missing)
    finally:
        if opened is not None:
            opened.close()
    for run in data.runs:
        where = f"store {shown(run.source)}" if run.source else f"{run.out}/run.json alone (not in the store)"
        print(f"kiln: run {run.run_id}: read from {where}", file=sys.stderr)
    if markdown:
        print(render_markdown(data), end="")
        return
    _write(out or _default_path(targets, dirs, [r.run_id for r in data.runs]), render_html(data))


def _report_ablation(folder: Path, data: dict, out: Path | None, markdown: bool) -> None:
    ablation = parse(folder, data)
    if markdown:
        print(ablation_page.render_markdown(ablation), end="")
    else:
        _write(out or folder / "report.html", ablation_page.render_html(ablation))


def _write(path: Path, page: str) -> None:
    """Writes the page and prints its path."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror}") from None
    print(path)


def _default_path(targets: list[str], dirs: list, run_ids: list[str]) -> Path:
    if len(targets) == 1 and dirs[0] is not None:
        return dirs[0][0] / "report.html"
    more = f"-and-{len(run_ids) - 1}-more" if len(run_ids) > 1 else ""
    return Path(f"kiln-report-{run_ids[0]}{more}.html")
