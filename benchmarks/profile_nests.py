"""Where a generated candidate's time goes: each top-level loop nest timed inside the kernel.

The candidate (the task's generated seed, or --candidate FILE written by `kiln seed` or tuned
by `kiln optimize`) is instrumented: ``omp_get_wtime()`` laps at the boundaries of the nests
`kiln seed` marks with ``/* KIND over [SHAPE] */``, summed over --calls calls on inputs
rotated through twice the last-level cache (cold, as the guard times them). Beside the
nests: the whole call as Python sees it, torch eager on the same inputs, and the workload's
roofline bound (`kiln machine`'s peaks; FLOPs and bytes from the task), so a slow task shows
which nest is slow and how far the whole is from what the machine allows.

The candidate runs in this process, unguarded: profile only code you trust (your own seeds).

    python benchmarks/profile_nests.py kernelkiln/suites/kb_cpu/level1/23_Softmax.py
    python benchmarks/profile_nests.py 80_MLP --candidate best.py --calls 200 --json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from kernelkiln.cli.paths import resolve_task_path
from kernelkiln.errors import UserError
from kernelkiln.lowering import Unsupported, generate
from kernelkiln.platforms import get_platform
from kernelkiln.platforms.host import default_threads, last_level_cache_bytes
from kernelkiln.platforms.sol import achieved, sol_bound_s
from kernelkiln.task import load_task
from kernelkiln.task.model import Task, Workload

_FUNCTION = re.compile(r"^void (kiln_w\d+)\(.*\) \{$")
_BRANCH = re.compile(r"^#\s*(if|ifdef|ifndef|elif|else|endif)\b")
_NEST = re.compile(r"^    /\* (\w+ over \[[^\]]*\]) \*/$")
_PRELUDE = r"""#include <omp.h>
static double kiln_prof_acc[{slots}]; static double kiln_prof_t;
void kiln_prof_read(double* out) {{
    for (int i = 0; i < {slots}; ++i) {{ out[i] = kiln_prof_acc[i]; kiln_prof_acc[i] = 0; }}
}}
#define KILN_LAP(k) do {{ double kiln_now = omp_get_wtime(); kiln_prof_acc[k] += kiln_now - kiln_prof_t; \
kiln_prof_t = kiln_now; }} while (0)
"""


@dataclass(frozen=True)
class Nest:
    function: str
    label: str  # "KIND over [SHAPE]", as the generated code names it


@dataclass
class NestTime:
    label: str
    ms: float  # per call
    share: float  # of the nests' sum


@dataclass
class WorkloadProfile:
    workload: str
    function: str
    calls: int
    eager_ms: float
    candidate_ms: float  # the whole call from Python: argument checks, output allocation, the kernel
    nests_ms: float
    bound: str | None  # the roofline term that bounds the workload ("memory" or "compute")
    bound_ms: float | None  # the roofline time: the least the machine allows
    sol_candidate: float | None  # bound_ms / candidate_ms
    sol_eager: float | None
    nests: list[NestTime]


def instrument(candidate: str) -> tuple[str, list[Nest]]:
    """``candidate`` with a lap at each nest boundary of each kernel function, and the nests in slot order."""
    head, marker, rest = candidate.partition('SOURCE = r"""')
    source, end, tail = rest.partition('"""')
    if not marker or not end:
        raise UserError('the candidate has no SOURCE = r"""...""" block: profile a candidate `kiln seed` wrote')
    nests: list[Nest] = []
    out: list[str] = []
    function: str | None = None
    timing: int | None = None  # the nest whose time runs now, in the text's flow; a lap ends it
    for line in source.split("\n"):
        start = _FUNCTION.match(line)
        nest = _NEST.match(line) if function else None
        ends = function is not None and (line == "}" or _BRANCH.match(line) is not None)
        if (nest or ends) and timing is not None:
            # a column-0 #if/#else/#endif ends the nest before it: the nests of a knob's other form sit in
            # another branch, and the next nest of the branch taken measures from the last lap run
            out.append(f"    KILN_LAP({timing});")
            timing = None
        if nest:
            timing = len(nests)
            nests.append(Nest(str(function), nest.group(1)))
        elif function and re.search(r"\breturn\b", line):
            raise UserError(f"{function} returns early: its nests cannot be timed by laps")
        if function and line == "}":
            function = None
        out.append(line)
        if start:
            function = start.group(1)
            out.append("    kiln_prof_t = omp_get_wtime();")
    if not nests:
        raise UserError("no /* KIND over [SHAPE] */ loop nests found in the candidate's kernel functions")
    body = _PRELUDE.format(slots=len(nests)) + "\n".join(out)
    bound, found, after = tail.partition("native.load(SOURCE, {")
    if not found:
        raise UserError("the candidate does not bind its kernels with native.load(SOURCE, {...})")
    tail = f"{bound}native.load(SOURCE, {{\n    'kiln_prof_read': 'void(double*)',{after}"
    return f"{head}{marker}{body}{end}{tail}", nests


def _load(text: str, name: str) -> object:
    with tempfile.NamedTemporaryFile("w", suffix=".py", prefix=f"{name}_", delete=False) as handle:
        handle.write(text)
    spec = importlib.util.spec_from_file_location(f"kiln_profiled_{name}", handle.name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _input_sets(task: Task, workload: Workload) -> list[list[object]]:
    """Enough input sets to span twice the last-level cache (at most 64), so each call reads cold inputs."""
    first = task.make_inputs(workload, seed=0)
    size = sum(x.numel() * x.element_size() for x in first if isinstance(x, torch.Tensor)) or 1
    count = max(2, min(64, -(-2 * last_level_cache_bytes() // size)))
    return [first, *(task.make_inputs(workload, seed=s) for s in range(1, count))]


def _time(model: torch.nn.Module, sets: list[list[object]], calls: int, warmed: Callable[[], object]) -> float:
    """Mean seconds per call over ``calls`` calls cycling through ``sets``, after one warm-up pass (then ``warmed``)."""
    with torch.no_grad():
        for inputs in sets:
            model(*inputs)
        warmed()
        start = time.perf_counter()
        for k in range(calls):
            model(*sets[k % len(sets)])
        return (time.perf_counter() - start) / calls


def profile(task: Task, candidate: str, calls: int, threads: int) -> list[WorkloadProfile]:
    """Each workload of ``task``: eager, the whole candidate call and its nests, per call."""
    text, nests = instrument(candidate)
    module = _load(text, task.name)
    peaks = get_platform("cpu").peaks(threads)  # `kiln machine`'s, measured at this many cores
    torch.set_num_threads(threads)
    results = []
    for workload in task.workloads:
        sets = _input_sets(task, workload)
        reference = task.make_model(workload, seed=0)
        candidate_model = task.make_model(workload, seed=0, cls=module.ModelNew)  # type: ignore[attr-defined]
        acc = torch.zeros(len(nests), dtype=torch.float64)
        read = module.lib.kiln_prof_read  # type: ignore[attr-defined]
        eager_s = _time(reference, sets, calls, lambda: None)
        cand_s = _time(candidate_model, sets, calls, partial(read, acc))  # the laps of the timed calls only
        read(acc)
        key = tuple(tuple(x.shape) if isinstance(x, torch.Tensor) else x for x in sets[0])
        function = module.WORKLOADS[key][0]  # type: ignore[attr-defined]
        mine = [(n, float(acc[i]) * 1e3 / calls) for i, n in enumerate(nests) if n.function == function]
        total = sum(ms for _, ms in mine) or 1e-12
        bound_s = sol_bound_s(workload.flops, workload.bytes, peaks)
        term = achieved(workload.flops, workload.bytes, cand_s, peaks)
        results.append(
            WorkloadProfile(
                workload=workload.name,
                function=function,
                calls=calls,
                eager_ms=eager_s * 1e3,
                candidate_ms=cand_s * 1e3,
                nests_ms=total,
                bound=term.bound if term else None,
                bound_ms=bound_s * 1e3 if bound_s else None,
                sol_candidate=bound_s / cand_s if bound_s else None,
                sol_eager=bound_s / eager_s if bound_s else None,
                nests=[NestTime(n.label, ms, ms / total) for n, ms in mine],
            )
        )
    return results


def _print(task: Task, results: list[WorkloadProfile], threads: int) -> None:
    for r in results:
        sol = (
            f"; {r.bound}-bound at {r.bound_ms:.3f} ms: candidate {r.sol_candidate:.0%}, eager {r.sol_eager:.0%} "
            "of the roofline"
            if r.bound_ms
            else "; no roofline (run `kiln machine`, or the task has no FLOPs/bytes)"
        )
        print(
            f"{task.name} [{r.workload}] at {threads} thread(s), {r.calls} calls: eager {r.eager_ms:.3f} ms, "
            f"candidate {r.candidate_ms:.3f} ms ({r.eager_ms / r.candidate_ms:.2f}x), nests {r.nests_ms:.3f} ms{sol}"
        )
        for n in r.nests:
            if n.ms > 0:
                print(f"  {n.ms:9.3f} ms {n.share:6.1%}  {n.label}")
            else:  # compiled out: another setting of a knob (CONV=direct) takes this form
                print(f"  {'-':>9}            {n.label} (another knob setting's form)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", help="a task file or a bundled task name")
    parser.add_argument("--candidate", type=Path, help="a candidate `kiln seed` wrote (default: generate the seed)")
    parser.add_argument("--calls", type=int, default=100, metavar="N", help="timed calls per workload (default 100)")
    parser.add_argument(
        "--threads", type=int, default=None, metavar="T", help="threads for both (default: the guard's)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    threads = args.threads or default_threads()
    try:
        if args.calls < 1:
            raise UserError(f"--calls must be at least 1, not {args.calls}")
        task = load_task(resolve_task_path(args.task))
        if args.candidate:
            candidate = args.candidate.read_text()
        else:
            candidate = generate(task, threads=threads).source
        results = profile(task, candidate, args.calls, threads)
    except (UserError, Unsupported, OSError) as exc:
        print(f"profile_nests: {exc}", file=sys.stderr)
        sys.exit(2)
    if args.json:
        print(json.dumps({"task": task.name, "threads": threads, "workloads": [asdict(r) for r in results]}))
    else:
        _print(task, results, threads)


if __name__ == "__main__":
    main()
