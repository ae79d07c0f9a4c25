"""Whole models through `kiln model`'s pipeline: spliced against eager and torch.compile, side by side.

    python benchmarks/models.py [--json] [--models gpt2,llama,bert,vit,resnet50] [--scale tiny|base]
                                [--model-budget N] [--threads 1] [--seqs 1,32] [--store URL] [--out DIR]
                                [--compile default,strongest]

Each model is built from its Hugging Face ``transformers`` config with random weights (nothing is
downloaded): GPT-2, a Llama-style decoder, BERT, ViT and ResNet-50 (its own ``ResNetModel``).
``name:L`` sets the layer count of a transformer (``gpt2:12``); the default is 2. ``--scale
base`` keeps each config's own widths (GPT-2 small's 768 and 50257-token vocabulary, ViT-base at
224x224, ResNet-50 at 224x224), batch 1 and sequence 128; ``--scale tiny`` shrinks every width
so the whole list runs in minutes (CI's size). The models run in the order given over one store,
so a later model reads what earlier ones taught: each row says how many of its regions memory
had an exact match for (``reused``), and, for the tasks an earlier model of the run also had (the
same task file, as memory's exact key reads it), the evaluations this model spent on them against
those the earlier one spent (``shared evals``: ``shared_evaluations`` / ``first_evaluations``).

Reported per model: regions (distinct tasks), spliced, evaluations, the end-to-end check, eager,
each ``--compile`` configuration's (``kernelkiln/model/compilers.py``: ``default`` is
``torch.compile(model)``, ``strongest`` adds freezing, max_autotune and cpp_wrapper) and the spliced
model's milliseconds timed in one interleaved run at ``--threads``, which configuration ran fastest,
and the spliced model's speedup over eager and over each (median of per-round ratios), at the last
declared shape; the spliced model's forms (``forms_ms``: its kernels called directly, ``eager``, and the model
compiled with each configuration, the kernels' custom ops left whole), the form
it runs in (``form``), its ratio over the fastest baseline (``vs_fastest``: eager or a
configuration) and what the run handed back (``handed_back``: the spliced model, or, where no
kernel was kept, the model as its fastest baseline runs it); each region's kernel against its
region run eagerly and compiled (``regions_vs_fastest``, ``kernelkiln/model/against.py``); and
``shapes``: each declared shape's check and ratios (``--seqs 1,32`` declares sequence lengths for
the token models; every task then serves them all). Where kernels were kept, a
freshly built model is loaded from ``OUT/model/`` (``kernelkiln.load_model``): the seconds it
took, and the loaded model and ``torch.compile`` with ``kernelkiln.backend(OUT)`` against the
spliced one in a second interleaved run (``loaded``, ``backend``: median per-round ratio, 10-90%
of the rounds; 1.0 when they give back the same speed; ``backend_regions``: regions replaced
per compiled graph).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from provenance import provenance

from kernelkiln.memory.memory import Memory
from kernelkiln.memory.signature import exact_code
from kernelkiln.model import verify
from kernelkiln.model.backend import backend
from kernelkiln.model.compilers import COMPILERS, names
from kernelkiln.model.load import load_model
from kernelkiln.model.pipeline import model_config, optimize_model
from kernelkiln.model.shapes import declare
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.speedup import fmt_x
from kernelkiln.store import open_store

SEQUENCE = {"base": 128, "tiny": 32}
IMAGE = {"base": 224, "tiny": 64}


def build(name: str, layers: int, scale: str) -> tuple[torch.nn.Module, Any]:
    """The model and a function drawing its inputs."""
    import transformers as tf

    torch.manual_seed(0)
    tiny = scale == "tiny"
    width = dict(hidden_size=128, num_attention_heads=2, intermediate_size=512) if tiny else {}
    seq, side = SEQUENCE[scale], IMAGE[scale]
    if name == "gpt2":
        cfg = tf.GPT2Config(
            n_layer=layers, use_cache=False, **(dict(n_embd=128, n_head=2, vocab_size=1000) if tiny else {})
        )
        return tf.GPT2LMHeadModel(cfg).eval(), lambda seq=seq: (torch.randint(0, cfg.vocab_size, (1, seq)),)
    if name == "llama":
        dims = dict(
            hidden_size=128, num_attention_heads=4, num_key_value_heads=2, intermediate_size=256, vocab_size=1000
        )
        if not tiny:
            dims = dict(
                hidden_size=768, num_attention_heads=12, num_key_value_heads=4, intermediate_size=2048, vocab_size=32000
            )
        cfg = tf.LlamaConfig(num_hidden_layers=layers, use_cache=False, **dims)
        return tf.LlamaForCausalLM(cfg).eval(), lambda seq=seq: (torch.randint(0, cfg.vocab_size, (1, seq)),)
    if name == "bert":
        cfg = tf.BertConfig(num_hidden_layers=layers, **width, **(dict(vocab_size=1000) if tiny else {}))
        bert = tf.BertModel(cfg, add_pooling_layer=False).eval()
        return bert, lambda seq=seq: (torch.randint(0, cfg.vocab_size, (1, seq)),)
    if name == "vit":
        cfg = tf.ViTConfig(num_hidden_layers=layers, image_size=side, **width)
        return tf.ViTModel(cfg, add_pooling_layer=False).eval(), lambda: (torch.randn(1, 3, side, side),)
    if name == "resnet50":
        cfg = (
            tf.ResNetConfig()
            if not tiny
            else tf.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1])
        )
        return tf.ResNetModel(cfg).eval(), lambda: (torch.randn(1, 3, side, side),)
    raise SystemExit(f"models.py: unknown model {name!r} (gpt2, llama, bert, vit, resnet50)")


def _evaluations(folder: Path, report: Any) -> dict[str, int]:
    """Evaluations per task, keyed by the task's code."""
    return {exact_code((folder / r.task).read_text()): r.evaluations for r in report.regions if r.evaluations}


def run(
    spec: str,
    scale: str,
    budget: int | None,
    threads: int,
    memory: Memory,
    out: Path,
    seqs: list[int],
    earlier: dict[str, int],
    compilers: tuple[str, ...],
) -> dict[str, Any]:
    """One model through the pipeline; ``earlier`` (task code → evaluations of the models before) grows by its tasks."""
    name, _, layers = spec.partition(":")
    model, draw = build(name, int(layers or 2), scale)
    sizes = {"seq": seqs} if seqs and name in ("gpt2", "llama", "bert") else {}
    defaults = model_config()  # kiln model's: budget per task and wall time
    config = OptimizeConfig.model_validate(
        {"budget": defaults.budget, "max_wall_s": defaults.max_wall_s, "guard": {"threads": threads}}
    )
    start = time.monotonic()
    result = optimize_model(
        model, declare(draw, sizes), out / spec.replace(":", "-"), memory, config, model_budget=budget, name=spec,
        compilers=compilers, say=lambda line: print(f"[{spec}] {line}", file=sys.stderr),
    )  # fmt: skip
    report = result.report
    spent = _evaluations(out / spec.replace(":", "-"), report)
    shared = {code: n for code, n in spent.items() if code in earlier}
    shared_row = {
        "shared_tasks": len(shared),
        "shared_evaluations": sum(shared.values()),
        "first_evaluations": sum(earlier[code] for code in shared),
    }
    for code, n in spent.items():
        earlier.setdefault(code, n)
    e = report.end_to_end[-1]  # the last declared shape: the one the example is without --seqs
    loaded: dict[str, Any] = {"load_s": None, "loaded": None, "loaded_interval": None, "backend": None}
    if report.saved:
        started = time.monotonic()
        fresh = load_model(out / spec.replace(":", "-"), build(name, int(layers or 2), scale)[0])
        loaded["load_s"] = round(time.monotonic() - started, 2)
        example = draw(**{k: v[-1] for k, v in sizes.items()})
        under = backend(out / spec.replace(":", "-"))
        compiled = torch.compile(build(name, int(layers or 2), scale)[0], backend=under, dynamic=False)
        timing = verify.time_arms(
            {
                "spliced": lambda: result.model(*example),
                "loaded": lambda: fresh(*example),
                "backend": lambda: compiled(*example),
            }
        )
        for arm in ("loaded", "backend"):
            loaded[arm] = timing.speedup[arm]
            loaded[f"{arm}_interval"] = timing.interval[arm]
        loaded["backend_regions"] = under.found
    return {
        "model": spec,
        "regions": len(report.regions),
        "spliced": sum(r.status == "spliced" for r in report.regions),
        "reused": sum(r.memory == "reused" for r in report.regions),
        "evaluations": sum(r.evaluations for r in report.regions),
        **shared_row,
        "correct": e.correct,
        "max_abs_error": e.max_abs_error,
        "eager_ms": e.eager_ms,
        "compile_ms": e.compile_ms,
        "spliced_ms": e.spliced_ms,
        "vs_eager": e.vs_eager,
        "vs_eager_interval": e.vs_eager_interval,
        "vs_compile": e.vs_compile,
        "fastest_compile": e.fastest_compile,
        "vs_fastest_compile": e.vs_compile.get(e.fastest_compile),
        "form": e.form,
        "forms_ms": e.forms_ms,
        "spliced_compile_error": e.spliced_compile_error,
        "fastest": e.fastest,
        "vs_fastest": e.vs_fastest,
        "vs_fastest_interval": e.vs_fastest_interval,
        "handed_back": report.handed_back,
        "regions_vs_fastest": [
            {
                "task": r.task,
                "share": r.share,
                "vs_eager": r.speedup,
                "fastest": r.fastest,
                "vs_fastest": r.vs_fastest,
                "status": r.status,
            }
            for r in report.regions
        ],
        "compile_error": e.compile_error,
        "shapes": [
            {"shape": x.shape, "correct": x.correct, "kept": x.kept, "vs_eager": x.vs_eager, "vs_compile": x.vs_compile}
            for x in report.end_to_end
        ],
        "wall_s": round(time.monotonic() - start, 1),
        **loaded,
        "report": str(out / spec.replace(":", "-") / "model.md"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="gpt2,llama,bert,vit,resnet50")
    parser.add_argument("--scale", choices=sorted(SEQUENCE), default="tiny")
    parser.add_argument("--model-budget", type=int, default=None, help="evaluations per model (default: 15 per task)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--seqs", default="", help="declared sequence lengths for the token models (1,32: a task serves both)"
    )
    parser.add_argument("--store", default=None, help="memory's store URL (default: a new SQLite file)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--compile", default="default,strongest", help="torch.compile configurations timed beside")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="kiln-models-"))
    out.mkdir(parents=True, exist_ok=True)
    memory = Memory(open_store(args.store or f"sqlite:///{out / 'store.db'}"))
    seqs = [int(x) for x in args.seqs.split(",") if x]
    earlier: dict[str, int] = {}
    rows = [
        run(spec, args.scale, args.model_budget, args.threads, memory, out, seqs, earlier, names(args.compile))
        for spec in args.models.split(",")
    ]
    if args.json:
        print(
            json.dumps(
                {"provenance": provenance(), "scale": args.scale, "threads": args.threads, "models": rows}, indent=2
            )
        )
        return
    print(f"scale {args.scale}, {args.threads} thread(s); reports under {out}")
    print(f"{'model':<12} {'tasks':>5} {'spliced':>7} {'reused':>6} {'evals':>5} {'check':>7} "
          f"{'eager ms':>9} {'default ms':>10} {'strongest':>10} {'spliced ms':>10} {'vs eager':>8} "
          f"{'vs fastest compile':>24} {'handed back':<28} "
          f"{'load s':>6} {'loaded':>7} {'backend':>7} {'shared evals':>12}")  # fmt: skip
    for r in rows:
        default, strongest = (f"{r['compile_ms'][n]:.2f}" if n in r["compile_ms"] else "—" for n in COMPILERS)
        fastest = f"{fmt_x(r['vs_fastest_compile'])} ({r['fastest_compile']})" if r["fastest_compile"] else "—"
        shared = f"{r['shared_evaluations']}/{r['first_evaluations']}" if r["shared_tasks"] else "—"
        print(
            f"{r['model']:<12} {r['regions']:>5} {r['spliced']:>7} {r['reused']:>6} {r['evaluations']:>5} "
            f"{'correct' if r['correct'] else 'WRONG':>7} {r['eager_ms']:>9.2f} {default:>10} {strongest:>10} "
            f"{r['spliced_ms']:>10.2f} {fmt_x(r['vs_eager']):>8} {fastest:>24} {r['handed_back']:<28} "
            f"{r['load_s'] if r['load_s'] is not None else '—':>6} {fmt_x(r['loaded']):>7} {fmt_x(r['backend']):>7} "
            f"{shared:>12}"
        )


if __name__ == "__main__":
    main()
