"""The generated candidate: a standalone file with the C source, its KNOBS and a ModelNew.

ModelNew builds the reference's own ``Model`` first, from the same arguments and the
same seeded random state, so its parameters and buffers are the reference's; forward
passes them and the inputs to the C function generated for the inputs' shapes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelkiln.lowering.gemm import gemm_vocabulary
from kernelkiln.lowering.graph import Unsupported
from kernelkiln.lowering.reference_copy import IMPORTS, reference_code
from kernelkiln.task.model import Task

# One vocabulary for every generated kernel: siblings share names and values, so a setting
# learned on one task (``set ACC=4``) applies to the next.
FLAG_SETS = [
    ["-O3", "-march=native", "-ffast-math"],
    ["-O3", "-march=native"],
    ["-O2", "-march=native"],
    ["-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math"],
]
_GEMM_OPTIONS, _GEMM_DEFAULTS = gemm_vocabulary()  # register tiles follow the CPU's vector registers
VOCABULARY: dict[str, list[Any]] = {
    "ACC": [1, 2, 4, 8],
    "UNROLL": [1, 2, 4, 8],
    "VEC": [0, 4, 8, 16],
    "TILE": [64, 256, 1024, 4096],
    "ROWCACHE": [0, 1],
    "VMATH": [0, 1],
    **_GEMM_OPTIONS,
    "CONV": ["gemm", "direct", "blocked"],  # blocked: only where the kernel has that form (lowering.conv_blocked)
    "PREPACK": [0, 1],  # a product's B of parameters packed once (lowering.packing.emit_prepack), or per call
    "STREAM": [0, 1],  # an elementwise output written with non-temporal stores (lowering.stream)
}
# VEC's default: the CPU's (platforms.host.simd_floats). ROWCACHE's: faster on 7 of the 12 kb-cpu tasks that
# declare it (softmax's kind by 10-20%; GroupNorm and residual LayerNorm, keeping only x - mean, slower by 15-20%).
# VMATH's: 1 at 16 float lanes, else 0 (render; lowering.vmath).
DEFAULTS = {
    "ACC": 1,
    "UNROLL": 1,
    "VEC": 0,
    "TILE": 256,
    "ROWCACHE": 1,
    "VMATH": 1,
    **_GEMM_DEFAULTS,
    "CONV": "gemm",
    "PREPACK": 1,
    "STREAM": 0,  # 1 where every streamed loop is cheap and its output fits in the cache (lowering.stream)
}
_DTYPES = {
    "float": "torch.float32",
    "double": "torch.float64",
    "int64_t": "torch.int64",
    "int32_t": "torch.int32",
    "uint8_t": "torch.bool",
}


@dataclass(frozen=True)
class Entry:
    """One workload's function: its name, C signature and what the candidate passes it."""

    name: str
    signature: str
    input_shapes: tuple[Any, ...]  # forward's inputs (a tensor's shape, a number's value): the dispatch key
    params: tuple[str, ...]  # parameter and buffer names, in the function's order
    param_shapes: tuple[tuple[int, ...], ...]  # as traced: ModelNew refuses a Model built otherwise
    outputs: tuple[tuple[tuple[int, ...], str], ...]  # (shape, C type)
    temps: tuple[tuple[int, str], ...]  # scratch buffers: (elements, C type)
    single: bool
    prepacked: bool = False  # it packs a product's constant operand once: its stamp follows the parameters
    draws: tuple[tuple[str, tuple[int, ...], str], ...] = ()  # (torch function, shape, dtype) forward draws


def thread_options(cap: int) -> list[int]:
    options = [t for t in (1, 2, 4, 8, 16, 32, 64, 128) if t <= cap]
    return options + ([cap] if cap not in options else [])


def _draws(entries: list[Entry]) -> tuple[str, str]:
    """The table of what forward draws at random and the line drawing it; empty where nothing is drawn."""
    if not any(e.draws for e in entries):
        return "", ""
    rows = ",\n".join(
        f"    {e.input_shapes!r}: ({''.join(f'(torch.{o}, {s!r}, torch.{dtype}), ' for o, s, dtype in e.draws)})"
        for e in entries
    )
    table = (
        "# input shapes -> what the reference draws at random in forward, in its order, from torch's global generator\n"
        f"DRAWS = {{\n{rows},\n}}\n"
    )
    return table, "\n        tensors += [draw(shape, dtype=dtype) for draw, shape, dtype in DRAWS[key]]"


def render(
    task: Task,
    c_source: str,
    entries: list[Entry],
    knobs: list[str],
    threads: int,
    summary: str,
    vector: int,
    starts: dict[str, Any] | None = None,
) -> str:
    """The candidate's Python source; ``vector`` is VEC's starting value (the CPU's float lanes), ``starts``
    knob values this kernel starts from instead of the defaults."""
    if '"""' in c_source:
        raise Unsupported("generated C contains a triple quote")
    values = {"THREADS": threads, **{k: DEFAULTS[k] for k in knobs}, "FLAGS": FLAG_SETS[0]}
    values.update({k: v for k, v in (starts or {}).items() if k in values})
    if "VEC" in values:
        values["VEC"] = vector
    if "VMATH" in values:  # lowering.vmath: it pays at 16 lanes; at 8, libmvec's AVX2 functions were faster
        values["VMATH"] = int(vector >= 16)
    options: dict[str, list[Any]] = {
        "THREADS": thread_options(threads),
        **{k: list(VOCABULARY[k]) for k in knobs},
        "FLAGS": list(FLAG_SETS),
    }
    if "CONV" in options and "CONV_blocked" not in c_source:  # an option no code reads: the same binary again
        options["CONV"] = [form for form in options["CONV"] if form != "blocked"]
    assignments = "\n".join(f"{name} = {value!r}" for name, value in values.items())
    declared = ",\n".join(f"    {name!r}: {opts!r}" for name, opts in options.items())
    # a word-valued knob is a macro of its own (CONV="direct": -DCONV_direct), a number a value
    defines = "".join(f', f"-D{k}_{{{k}}}"' if isinstance(DEFAULTS[k], str) else f', f"-D{k}={{{k}}}"' for k in knobs)
    functions = ",\n".join(f"    {e.name!r}: {e.signature!r}" for e in entries)
    table = ",\n".join(
        f"    {e.input_shapes!r}: ({e.name!r}, {e.params!r}, {e.param_shapes!r}, "
        f"({', '.join(f'({s!r}, {_DTYPES[t]})' for s, t in e.outputs)},), "
        f"({', '.join(f'({n}, {_DTYPES[t]})' for n, t in e.temps)}{',' if e.temps else ''}), {e.single!r}, "
        f"{e.prepacked!r})"
        for e in entries
    )
    imports, reference = reference_code(task)
    draws, drawn = _draws(entries)
    header = "\n".join([*IMPORTS[:-1], *imports, IMPORTS[-1]])  # the reference's after torch, before kernelkiln
    return f'''"""Generated by `kiln lower` from {task.name}'s reference: {summary}.

One C function per workload shape (every size a constant), OpenMP threads across rows.
Knobs (module-level constants a tuner may rewrite): THREADS (capped at the guard's
threads), {", ".join([*knobs, "FLAGS"])}; the same names and values in every generated kernel.
"""

{header}

# -- the reference, unchanged: ModelNew builds it for its parameters --------------------
{reference}

# -- the generated kernels ------------------------------------------------------------
SOURCE = r"""
{c_source}"""

{assignments}
KNOBS = {{
{declared},
}}

lib = native.load(SOURCE, {{
{functions},
}}, flags=[*FLAGS, "-fopenmp"{defines}])

FUNCTIONS = {{{", ".join(f"{e.name!r}: lib.{e.name}" for e in entries)}}}
# input shapes -> (function, parameters, their shapes, outputs (shape, dtype), scratch (elements, dtype), one output,
# whether it packs parameters once: then its stamp changes with their version counters and per instance)
WORKLOADS = {{
{table},
}}
{draws}

class ModelNew(nn.Module):
    instances = 0  # numbers each prepared workload: a packing made for another instance's weights is never read

    def __init__(self, *args, **kwargs):
        super().__init__()
        self.reference = Model(*args, **kwargs)  # the same parameters: built first, from the same seed
        self.ready = {{}}

    def prepare(self, key):
        if key not in WORKLOADS:
            raise ValueError(f"this candidate was generated for input shapes {{list(WORKLOADS)}}, not {{key}}")
        name, params, shapes, outputs, temps, single, prepacked = WORKLOADS[key]
        state = dict(self.reference.named_parameters())
        state.update(self.reference.named_buffers())
        fixed = [state[p].detach().contiguous() for p in params]
        for p, t, shape in zip(params, fixed, shapes):
            if tuple(t.shape) != shape:  # the kernel's sizes are constants: never read past a tensor
                raise ValueError(f"parameter {{p}} has shape {{tuple(t.shape)}}; the kernel was generated "
                                 f"for {{shape}}")
        scratch = [torch.empty(n, dtype=dtype) for n, dtype in temps]
        ModelNew.instances += 1
        token = ModelNew.instances << 40 if prepacked else 0
        watched = [state[p] for p in params] if prepacked else []
        self.ready[key] = (FUNCTIONS[name], fixed, outputs, scratch, single, token, watched)

    def forward(self, *inputs):
        key = tuple(tuple(x.shape) if isinstance(x, torch.Tensor) else x for x in inputs)
        if key not in self.ready:
            self.prepare(key)
        function, fixed, outputs, scratch, single, token, watched = self.ready[key]
        stamp = token + sum(t._version for t in watched)  # an in-place write to a parameter bumps its version
        outs = [torch.empty(*shape, dtype=dtype) if shape else torch.empty((), dtype=dtype) for shape, dtype in outputs]
        tensors = [x.contiguous() for x in inputs if isinstance(x, torch.Tensor)]{drawn}
        function(*fixed, *tensors, *outs, *scratch, stamp, min(THREADS, torch.get_num_threads()))
        return outs[0] if single else tuple(outs)
'''
