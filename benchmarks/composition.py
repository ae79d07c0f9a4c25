"""Where a spliced model compiled with a configuration spends its time: inside the kernels' ops, and the rest.

    python benchmarks/composition.py OUT [--model gpt2] [--scale tiny] [--compile strongest] [--calls 400] [--json]

``OUT`` is a folder ``kiln model`` (or ``benchmarks/models.py --out``) saved kernels in, for the
model ``--model`` builds as ``benchmarks/models.py`` does. The saved kernels are loaded into the
model, the spliced model is compiled with ``--compile`` (kernelkiln's custom ops left whole), and
``--calls`` calls are timed with a clock around each kernel op (``splice.Place``): the time inside
the ops and the rest of the graph, per call. Beside it, one interleaved run (``model.verify``) times
eager, the model compiled with the same configuration and the compiled spliced model. Where the
regions' own figures (the report's ``vs fastest``) promise more than the model gives, this says
whether the kernels cost more inside the model or the rest of the graph costs more than Inductor's
whole graph. One thread.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from models import build

from kernelkiln.model import compilers, splice, verify
from kernelkiln.model.load import load_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--model", default="gpt2")
    parser.add_argument("--scale", default="tiny")
    parser.add_argument("--compile", default="strongest", choices=sorted(compilers.COMPILERS))
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    name, _, layers = args.model.partition(":")
    model, draw = build(name, int(layers or 2), args.scale)
    example = draw()
    spliced = load_model(args.out, model)
    if not isinstance(spliced, torch.nn.Module) or not hasattr(spliced, "graphs"):
        raise SystemExit(f"composition.py: {args.out} holds kernels for a dynamo capture: not measured here")
    inner = compilers.compile_at(spliced, example, args.compile, spliced=True)
    plain = compilers.compile_at(model, example, args.compile)
    if inner.run is None or plain.run is None:
        raise SystemExit(f"composition.py: a compile failed: {inner.error or plain.error}")
    inside, ops = [0.0], [0]
    call = splice.Place.__call__

    def clocked(
        self: splice.Place, inputs: Sequence[torch.Tensor], state: Sequence[torch.Tensor]
    ) -> list[torch.Tensor]:
        start = time.perf_counter()
        out = call(self, inputs, state)
        inside[0] += time.perf_counter() - start
        ops[0] += 1
        return out

    with torch.no_grad():
        for _ in range(50):
            inner.run()
        splice.Place.__call__ = clocked  # type: ignore[method-assign]
        try:
            start = time.perf_counter()
            for _ in range(args.calls):
                inner.run()
            total = (time.perf_counter() - start) / args.calls
        finally:
            splice.Place.__call__ = call  # type: ignore[method-assign]
    timing = verify.time_arms({"eager": lambda: model(*example), "compiled": plain.run, "spliced compiled": inner.run})
    row = {
        "model": args.model,
        "scale": args.scale,
        "compile": args.compile,
        "ops_per_call": ops[0] / args.calls,
        "spliced_compiled_ms": total * 1e3,
        "inside_ops_ms": inside[0] / args.calls * 1e3,
        "rest_ms": (total - inside[0] / args.calls) * 1e3,
        "interleaved_ms": {k: v * 1e3 for k, v in timing.seconds.items()},
        "blind": timing.blind,
    }
    if args.json:
        print(json.dumps(row, indent=2))
        return
    print(
        f"{args.model} ({args.scale}), compiled with {args.compile}, one thread: {row['spliced_compiled_ms']:.3f} ms "
        f"a call, {row['inside_ops_ms']:.3f} ms inside {row['ops_per_call']:.0f} kernel ops, "
        f"{row['rest_ms']:.3f} ms the rest"
    )
    print("interleaved: " + ", ".join(f"{k} {v:.3f} ms" for k, v in row["interleaved_ms"].items()))


if __name__ == "__main__":
    main()
