"""VMATH: the inline float exp, expm1, tanh and erf hold their documented error bounds and vectorize."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from kernelkiln.lowering import generate
from kernelkiln.lowering.vmath import VMATH_HEADER
from kernelkiln.task import knobs as K
from kernelkiln.testing.lowering import mismatch, write_task

COMPILER = shutil.which("gcc") or shutil.which("cc")
pytestmark = pytest.mark.skipif(COMPILER is None, reason="no C compiler")

# (function, double reference, low, high, "rel" or "abs", bound): the bounds lowering/vmath.py documents
SWEEPS = [
    ("kiln_expf", "exp", -80.0, 88.0, "rel", 2e-7),
    ("kiln_expf", "exp", -1.0, 1.0, "rel", 2e-7),
    ("kiln_expm1f", "expm1", -20.0, 20.0, "rel", 2e-7),
    ("kiln_expm1f", "expm1", -1e-3, 1e-3, "rel", 2e-7),
    ("kiln_tanhf", "tanh", -10.0, 10.0, "rel", 3e-7),
    ("kiln_tanhf", "tanh", -1e-3, 1e-3, "rel", 3e-7),
    ("kiln_erff", "erf", -6.0, 6.0, "abs", 5e-7),
    ("kiln_erff", "erf", -1.0, 1.0, "rel", 3e-7),
    ("kiln_erff", "erf", -1e-3, 1e-3, "rel", 3e-7),
]
SPECIAL = [
    ("kiln_expf(-100.0f)", 0.0),
    ("kiln_expf(100.0f)", float("inf")),
    ("kiln_expf(0.0f)", 1.0),
    ("kiln_expm1f(-30.0f)", -1.0),
    ("kiln_expm1f(0.0f)", 0.0),
    ("kiln_tanhf(20.0f)", 1.0),
    ("kiln_tanhf(-20.0f)", -1.0),
    ("kiln_erff(-10.0f)", -1.0),
    ("kiln_erff(0.0f)", 0.0),
    ("kiln_erff(4.0f)", 1.0),
    ("kiln_erff(50.0f)", 1.0),
]


def _run(tmp_path, main: str, *flags: str) -> str:
    source = tmp_path / "probe.c"
    source.write_text("#include <math.h>\n#include <stdint.h>\n#include <stdio.h>\n" + VMATH_HEADER + main)
    binary = tmp_path / "probe"
    subprocess.run([COMPILER, "-O2", *flags, str(source), "-o", str(binary), "-lm"], check=True, capture_output=True)
    return subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout


def test_each_function_stays_within_its_documented_error_over_a_dense_sweep(tmp_path):
    loops = "\n".join(
        f"""{{ double worst = 0; for (long k = 0; k <= 2000000; ++k) {{
            float x = (float)({lo} + ({hi} - {lo}) * (double)k / 2000000.0);
            double want = {ref}((double)x), err = fabs((double){fn}(x) - want);
            if ({kind!r} == 'r' && fabs(want) > 1e-30) err /= fabs(want);
            if (err > worst) worst = err; }}
          printf("%.3e\\n", worst); }}"""
        for fn, ref, lo, hi, kind, _ in [(f, r, lo, hi, k[0], b) for f, r, lo, hi, k, b in SWEEPS]
    )
    worst = [float(v) for v in _run(tmp_path, f"int main(void) {{\n{loops}\nreturn 0; }}\n").split()]
    for (fn, _, lo, hi, kind, bound), found in zip(SWEEPS, worst, strict=True):
        assert found <= bound, f"{fn} on [{lo}, {hi}]: {kind} error {found:.3e} > {bound:.0e}"


def test_limits_saturate_as_the_library_functions_do(tmp_path):
    prints = "\n".join(f'printf("%.9g\\n", (double){expr});' for expr, _ in SPECIAL)
    found = [float(v) for v in _run(tmp_path, f"int main(void) {{\n{prints}\nreturn 0; }}\n").split()]
    assert found == [want for _, want in SPECIAL]


def test_vmath_zero_is_the_c_library(tmp_path):
    main = 'int main(void) { printf("%d\\n", kiln_erff(0.3f) == erff(0.3f) && kiln_tanhf(0.3f) == tanhf(0.3f)); }\n'
    assert _run(tmp_path, main, "-DVMATH=0").strip() == "1"


def test_a_simd_loop_inlines_the_functions_instead_of_calling_the_library(tmp_path):
    source = tmp_path / "loop.c"
    source.write_text(
        "#include <math.h>\n#include <stdint.h>\n"
        + VMATH_HEADER
        + "void f(const float* restrict x, float* restrict y, int n) {\n"
        "    #pragma omp simd\n"
        "    for (int i = 0; i < n; ++i) y[i] = kiln_erff(x[i]) + kiln_expm1f(x[i]) + kiln_tanhf(x[i]);\n}\n"
    )
    assembly = subprocess.run(
        [COMPILER, "-O3", "-fopenmp-simd", "-S", "-o", "-", str(source)], check=True, capture_output=True, text=True
    ).stdout
    assert "call" not in assembly


def test_generated_gelu_declares_vmath_and_both_values_give_the_reference_s_outputs(tmp_path):
    task = write_task(
        tmp_path, "gelu", "torch.nn.functional.gelu(x) + torch.tanh(x)", {"B": 37, "N": 1013}, "[torch.randn(B, N)]"
    )
    source = generate(task).source
    assert "kiln_erff(" in source and "kiln_tanhf(" in source
    assert "VMATH" in {k.name for k in K.read_knobs(source)}
    for value in (0, 1):
        assert mismatch(task, K.apply(source, {"VMATH": value}), seeds=(1,)) is None, f"VMATH={value}"
    relu = generate(write_task(tmp_path, "relu", "torch.relu(x)", {"B": 37, "N": 1013}, "[torch.randn(B, N)]"))
    assert "VMATH" not in relu.source
