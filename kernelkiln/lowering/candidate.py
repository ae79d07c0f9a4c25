"""The generated candidate: a standalone file with the C source, its KNOBS and a ModelNew.

ModelNew builds the reference's own ``Model`` first, from the same arguments and the
same seeded random state, so its parameters and buffers are the reference's; forward
passes them and the inputs to the C function generated for the inputs' shapes.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from kernelkiln.lowering.gemm import gemm_vocabulary
from kernelkiln.lowering.graph import Unsupported
from kernelkiln.task.model import Task
from kernelkiln.task.sizes import bound_names

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
_DROP = {"get_inputs", "get_init_inputs", "KILN"}
# The candidate's own imports, at its top (kernelkiln's last).
IMPORTS = ("import torch", "import torch.nn as nn", "from kernelkiln import native")


@dataclass(frozen=True)
class Entry:
    """One workload's function: its name, C signature and what the candidate passes it."""

    name: str
    signature: str
    input_shapes: tuple[Any, ...]  # forward's inputs (a tensor's shape, a number's value): the dispatch key
    params: tuple[str, ...]  # parameter and buffer names, in the function's order
    param_shapes: tuple[tuple[int, ...], ...]  # as traced: ModelNew refuses a Model built otherwise
    outputs: tuple[tuple[tuple[int, ...], str], ...]  # (shape, C type)
    temps: tuple[tuple[int, int, str], ...]  # (position, numel, C type)
    single: bool
    prepacked: bool = False  # it packs a product's constant operand once: its stamp follows the parameters
    draws: tuple[tuple[str, tuple[int, ...], str], ...] = ()  # (torch function, shape, dtype) forward draws


def thread_options(cap: int) -> list[int]:
    options = [t for t in (1, 2, 4, 8, 16, 32, 64, 128) if t <= cap]
    return options + ([cap] if cap not in options else [])


def reference_code(task: Task) -> tuple[list[str], str]:
    """The task file's imports the candidate's own ``IMPORTS`` lack, and its Model (and helpers) for their
    ``__init__`` and the methods it calls: every other method, forward included, is left out.

    The candidate must not call the reference's ops (the gate refuses that); it needs
    the classes only to create the same parameters the same way. Each import appears once
    in the candidate, and each ``--set`` size once, at the value set.
    """
    tree = ast.parse(task.source)
    numpy = _numpy_aliases(tree)
    if numpy:  # the gate refuses numpy in a candidate: its scalar math, spelled with math's, is all a Model may use
        tree = ast.fix_missing_locations(_NumpyAsMath(numpy).visit(tree))
        left = sorted(
            {ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute) and ast.unparse(n.value) in numpy}
            or {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in numpy}
        )
        if left:
            raise Unsupported(f"the reference's numpy ({', '.join(left)}), which a candidate may not import")
    imported = set(IMPORTS)
    imports: list[str] = ["import math"] if numpy and not _imports_math(tree) else []
    keep: list[tuple[str, bool]] = []  # (code, whether it is a class or function: blank lines around it)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in _DROP:
            continue
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in _DROP for t in node.targets):
            continue
        if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the module docstring
        if isinstance(node, ast.Import) and numpy and all(alias.name == "numpy" for alias in node.names):
            continue
        if isinstance(node, ast.Import) and _abc_only(node, tree):  # the gate allows collections.abc alone
            node = ast.Import([ast.alias("collections.abc")])
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            fresh = _fresh_imports(node, imported)
            if fresh is not None:
                # a node ast.parse made always has its source segment
                segment = ast.get_source_segment(task.source, node) if fresh is node else None
                imports.append(segment if segment is not None else ast.unparse(fresh))
            continue
        if isinstance(node, ast.ClassDef):
            needed = _construction_methods(node)
            body = [
                _NoLambdaAttributes().visit(n) if isinstance(n, ast.FunctionDef) else n
                for n in node.body
                if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) or n.name in needed
            ]
            node = ast.ClassDef(  # type: ignore[call-arg]  # type_params: Python 3.12's field, kept where present
                node.name,
                node.bases,
                node.keywords,
                body or [ast.Pass()],
                node.decorator_list,
                type_params=getattr(node, "type_params", []),
            )
            keep.append((ast.unparse(ast.fix_missing_locations(node)), True))
            continue
        # rewritten (numpy as math): the tree, not the task's text, says what it is
        code = (None if numpy else ast.get_source_segment(task.source, node, padded=False)) or ast.unparse(node)
        compound = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        # --set values, re-assigned where the task's own module re-assigns them (task.sizes.with_sets), so
        # derived sizes after them follow; an assignment of set names alone is replaced by the values set.
        names = bound_names(node)
        sets = [f"{n} = {task.overrides[n]!r}" for n in dict.fromkeys(names) if n in task.overrides]
        if not (names and len(sets) == len(set(names)) and _pure(node)):
            keep.append((code, compound))
        keep += [(line, False) for line in sets]
    if not any(isinstance(n, ast.ClassDef) and n.name == "Model" for n in tree.body):
        raise Unsupported("the reference's Model is not a class defined in the task file")
    out = keep[0][0] if keep else ""
    for (_, before), (code, compound) in pairwise(keep):
        out += ("\n\n\n" if before or compound else "\n") + code
    used = {n.id for n in ast.walk(ast.parse(out)) if isinstance(n, ast.Name)}
    return [i for i in imports if not _unused_elsewhere(i, used)], out


# The modules a copied reference may keep importing whether or not its kept code uses them (the gate allows them).
_OWN = frozenset({"torch", "math", "typing", "functools", "itertools", "collections", "numbers", "__future__"})


def _unused_elsewhere(statement: str, used: set[str]) -> bool:
    """Whether ``statement`` imports from outside ``_OWN`` only names the kept code never reads (48_Mamba2's
    ``from einops import rearrange``, which only its forward uses)."""
    node = ast.parse(statement).body[0]
    assert isinstance(node, (ast.Import, ast.ImportFrom))
    modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    bound = {(a.asname or a.name).split(".")[0] for a in node.names}
    return all(m.split(".")[0] not in _OWN for m in modules) and not (bound & used)


# numpy's scalar math with the same name in math (np.log2(8) in SwinV2's Model): the gate allows math, not numpy
_NUMPY_AS_MATH = frozenset({"log2", "log", "log10", "exp", "sqrt", "pi", "e", "inf", "floor", "ceil", "sin", "cos"})


def _numpy_aliases(tree: ast.Module) -> set[str]:
    """The names ``import numpy [as np]`` binds at the task file's top level."""
    return {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name == "numpy"
    }


def _abc_only(node: ast.Import, tree: ast.Module) -> bool:
    """``import collections`` where every use is ``collections.abc.X`` (Swin's ``to_2tuple``): as
    ``import collections.abc`` it binds the same name and passes the gate."""
    if [(a.name, a.asname) for a in node.names] != [("collections", None)]:
        return False
    uses = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)]
    return all(n.attr == "abc" for n in uses if n.value.id == "collections")  # type: ignore[attr-defined]


def _imports_math(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.Import) and any(a.name == "math" and not a.asname for a in n.names) for n in tree.body)


class _NumpyAsMath(ast.NodeTransformer):
    """``np.log2`` as ``math.log2`` where math has the same function or constant; any other use is left (and
    refused: ``reference_code``)."""

    def __init__(self, aliases: set[str]) -> None:
        self.aliases = aliases

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        if isinstance(node.value, ast.Name) and node.value.id in self.aliases and node.attr in _NUMPY_AS_MATH:
            return ast.copy_location(ast.Attribute(ast.Name("math", ast.Load()), node.attr, node.ctx), node)
        return self.generic_visit(node)  # type: ignore[return-value]


class _NoLambdaAttributes(ast.NodeTransformer):
    """``self.mlpf = lambda x: m.c_proj(m.act(m.c_fc(x)))`` (minGPT's block) left out of a copied ``__init__``:
    it holds no parameter, and its body calls the reference's modules, which the gate refuses in a candidate."""

    def visit_Assign(self, node: ast.Assign) -> ast.stmt | None:
        attributes = all(isinstance(t, ast.Attribute) for t in node.targets)
        return None if attributes and isinstance(node.value, ast.Lambda) else node


def _construction_methods(node: ast.ClassDef) -> set[str]:
    """``__init__`` and the methods it calls through ``self`` (or the class), transitively: ResNet's
    ``_make_layer``, EfficientNet's ``_make_mbconv_block``. ``forward`` is never one of them."""
    methods = {n.name: n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    needed: set[str] = set()
    todo = ["__init__"] if "__init__" in methods else []
    while todo:
        name = todo.pop()
        needed.add(name)
        for n in ast.walk(methods[name]):
            if (
                isinstance(n, ast.Attribute)
                and isinstance(n.value, ast.Name)
                and n.value.id in ("self", "cls", node.name)
                and n.attr in methods
                and n.attr not in needed
                and n.attr != "forward"
            ):
                todo.append(n.attr)
    return needed


def _fresh_imports(node: ast.Import | ast.ImportFrom, imported: set[str]) -> ast.stmt | None:
    """``node`` less the names ``imported`` already holds (the rest added to it): ``node`` itself when it
    repeats none, None when it repeats them all."""
    fresh = []
    for alias in node.names:
        one = ast.unparse(_importing(node, [alias]))
        if one not in imported:
            imported.add(one)
            fresh.append(alias)
    if len(fresh) == len(node.names):
        return node
    return _importing(node, fresh) if fresh else None


def _importing(node: ast.Import | ast.ImportFrom, names: list[ast.alias]) -> ast.stmt:
    if isinstance(node, ast.Import):
        return ast.Import(names)
    return ast.ImportFrom(node.module, names, node.level)


def _pure(node: ast.stmt) -> bool:
    """Whether leaving ``node`` out loses nothing but the values it assigns: it calls nothing."""
    return not any(
        isinstance(n, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)) for n in ast.walk(node)
    )


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
        f"({', '.join(f'({n}, {_DTYPES[t]})' for _, n, t in e.temps)}{',' if e.temps else ''}), {e.single!r}, "
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
