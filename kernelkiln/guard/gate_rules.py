"""What the gate allows and refuses: imports, names, attributes, and Triton's API (``gate.py`` applies them)."""

from __future__ import annotations

import collections.abc

ALLOWED_IMPORTS = frozenset(
    {
        "torch",
        "torch.nn",
        "torch.nn.functional",
        "math",
        "typing",
        "functools",
        "itertools",
        "numbers",
        "__future__",
        "kernelkiln.native",
    }
)
# collections.abc: its abstract base classes only (Swin's to_2tuple checks for an Iterable); the module
# itself also holds what it imported (collections.abc.sys), so no other name of it is reachable
ABC_MODULE = "collections.abc"
ABC_NAMES = frozenset(collections.abc.__all__)
ALLOWED_FROM = {"kernelkiln": {"native"}, "torch": {"nn", "Tensor"}, ABC_MODULE: ABC_NAMES}
# Triton: kernels and their language only. The rest of triton (runtime, compiler, testing,
# tools, backends, autotune, knobs) compiles, caches, benchmarks or spawns processes.
TRITON_MODULES = frozenset(
    {
        "triton",
        "triton.language",
        "triton.language.math",
        "triton.language.extra",
        "triton.language.extra.libdevice",
        "triton.language.extra.cuda",
        "triton.language.extra.cuda.libdevice",
    }
)
TRITON_API = frozenset({"jit", "cdiv", "next_power_of_2"})
# Names in the allowed triton modules that are modules themselves (core.builtins, core.knobs, ...) or helpers.
TRITON_HIDDEN = frozenset(
    {
        "core",
        "semantic",
        "standard",
        "random",
        "target_info",
        "builtins",
        "inspect",
        "ir",
        "knobs",
        "typing",
        "numbers",
        "warnings",
        "tl",
        "driver",
        "List",
        "T",
        "wraps",
    }
)
_TRITON_PACKAGES = frozenset({"triton.language.extra", "triton.language.extra.cuda"})  # only their modules
# Attributes of a jitted kernel (or of the interpreter's values) that reach its compiler, caches, raw
# function, module globals (get_capture_scope) or numpy buffers: kernels are only launched.
TRITON_INTERNALS = frozenset(
    {
        "cache",
        "compile",
        "device_caches",
        "run",
        "warmup",
        "preload",
        "src",
        "raw_src",
        "fn",
        "rewrite",
        "rewriter",
        "rewritten_fn",
        "pre_run_hooks",
        "add_pre_run_hook",
        "asm",
        "launch",
        "kernel_cache",
        "kernel",
        "parse",
        "get_capture_scope",
        "used_global_vals",
        "create_binder",
        "launch_metadata",
        "handle",
    }
)
# On any object: numpy arrays (x.numpy(), values under Triton's interpreter) write files and reach ctypes.
BANNED_ATTRS = frozenset({"tofile", "ctypes"})
BANNED_NAMES = frozenset(
    {
        "eval",
        "exec",
        "compile",
        "open",
        "__import__",
        "globals",
        "locals",
        "vars",
        "getattr",
        "setattr",
        "delattr",
        "breakpoint",
        "input",
        "memoryview",
        "type",
        "print",
        "exit",
        "quit",
        "help",
        "object",
    }
)
# torch namespaces that load code, touch files, spawn processes or change how torch dispatches.
BANNED_TORCH_ATTRS = frozenset(
    {
        "load",
        "save",
        "hub",
        "ops",
        "classes",
        "library",
        "utils",
        "compile",
        "jit",
        "cpp_extension",
        "from_file",
        "multiprocessing",
        "distributed",
        "overrides",
        "package",
        "testing",
        "profiler",
        "export",
        "fx",
        "set_default_tensor_type",
        "set_default_dtype",
        "set_default_device",
        "use_deterministic_algorithms",
    }
)
# Device APIs refused where no device runs candidates: on the cpu platform they can only fail or mislead.
DEVICE_TORCH_ATTRS = frozenset({"cuda", "accelerator", "Stream", "Event"})
NATIVE_API = frozenset({"load"})
# torch's C++ extension builder: load_inline only (kernelkiln builds its sources in the sandbox);
# load, BuildExtension and the rest name files or run setuptools.
CPP_EXTENSION = "torch.utils.cpp_extension"
CPP_EXTENSION_API = frozenset({"load_inline"})
# KernelBench's other candidate forms: the toolchain each needs, by a module it imports
# ("module") or a marker in its source strings ("text"). kernelkiln builds none of them; the
# gate says so in one line.
FOREIGN_TOOLCHAINS = (
    ("module", "cutlass", "a CuTe DSL candidate: it needs CUDA and NVIDIA's CUTLASS Python DSL (nvidia-cutlass-dsl)"),
    ("module", "tilelang", "a TileLang candidate: it needs CUDA and TileLang"),
    ("module", "cuda.tile", "a cuTile candidate: it needs CUDA and cuda-tile"),
    ("module", "tlx", "a Triton TLX candidate: it needs a GPU and Triton's TLX extensions"),
    ("text", "kittens.cuh", "a ThunderKittens candidate: it needs CUDA and the ThunderKittens headers"),
    ("text", "hipcc", "a HIP candidate: it needs ROCm's hipcc and an AMD GPU"),
    ("text", "hip/hip_runtime.h", "a HIP candidate: it needs ROCm's hipcc and an AMD GPU"),
)


def triton_refusal(path: str) -> str | None:
    """Why the dotted name ``path`` (triton.language.exp, triton.runtime, ...) is refused, or None."""
    parts = path.split(".")
    module, i = parts[0], 1
    while i < len(parts) and f"{module}.{parts[i]}" in TRITON_MODULES:
        module, i = f"{module}.{parts[i]}", i + 1
    if module not in TRITON_MODULES:
        return f"{path} is not available to candidates"
    if i == len(parts):
        return None
    leaf = parts[i]
    if module == "triton":
        ok = leaf in TRITON_API
    else:
        ok = module not in _TRITON_PACKAGES and not leaf.startswith("_") and leaf not in TRITON_HIDDEN
    if not ok:
        return (
            f"{module}.{leaf} is not available to candidates "
            "(Triton kernels may use triton.jit, triton.cdiv, triton.next_power_of_2 and triton.language)"
        )
    internal = next((p for p in parts[i + 1 :] if p in TRITON_INTERNALS), None)
    if internal is not None:
        return f"{module}.{leaf}.{internal} is not allowed (launch Triton kernels as kernel[grid](...))"
    return None
