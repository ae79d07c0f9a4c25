"""ROWCACHE: a row group keeps the values its passes share instead of computing them in every pass."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess

import pytest

from kernelkiln.lowering import generate
from kernelkiln.task import knobs as K
from kernelkiln.testing.lowering import mismatch, write_task

R2 = "[torch.randn(B, N)]"
SMALL = {"B": 37, "N": 203}
PARALLEL = {"B": 37, "N": 1013}  # just over 32768 elements: the row loop runs on OpenMP threads
AFFINE = "with torch.no_grad():\n    {m}.weight.normal_()\n    {m}.bias.normal_()"


def _function(source: str, rowcache: int) -> str:
    """The candidate's first C function as the compiler sees it with ROWCACHE=``rowcache`` (and ACC=1)."""
    tree = ast.parse(source)
    c_source = next(
        ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "SOURCE"
    )
    compiler = shutil.which("gcc") or shutil.which("cc")
    assert compiler, "no C compiler"
    out = subprocess.run(
        [compiler, "-E", "-P", "-x", "c", f"-DROWCACHE={rowcache}", "-DACC=1", "-"],
        input=c_source,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out[out.index("void kiln_w0(") :]


def test_rowcache_is_declared_only_where_a_row_group_s_passes_share_a_value(tmp_path):
    softmax = generate(write_task(tmp_path, "softmax", "torch.softmax(x, dim=1)", SMALL, R2))
    layer_norm = generate(
        write_task(
            tmp_path, "layer_norm", "self.ln(x)", SMALL, R2, init="[N]", args="n", init_body="self.ln = nn.LayerNorm(n)"
        )
    )
    relu = generate(write_task(tmp_path, "relu", "torch.relu(x)", SMALL, R2))
    row_sum = generate(write_task(tmp_path, "row_sum", "torch.sum(x, dim=1)", SMALL, R2))
    # x / rms(x): its two passes read x and share no computed value
    rms = generate(
        write_task(tmp_path, "rms", "x / torch.sqrt(torch.mean(x * x, dim=1, keepdim=True) + 1e-5)", SMALL, R2)
    )
    assert "ROWCACHE" in softmax.knobs and "ROWCACHE" in layer_norm.knobs
    for g in (relu, row_sum, rms):
        assert "ROWCACHE" not in g.knobs
        assert "ROWCACHE" not in g.source
    declared = {k.name: k for k in K.read_knobs(softmax.source)}
    assert declared["ROWCACHE"].options == (0, 1)


CASES = [
    pytest.param(dict(forward="torch.softmax(x, dim=-1)", sizes=SMALL, inputs=R2), id="softmax"),
    pytest.param(dict(forward="torch.softmax(x, dim=-1)", sizes=PARALLEL, inputs=R2), id="parallel_softmax"),
    pytest.param(dict(forward="torch.log_softmax(x, dim=-1)", sizes=PARALLEL, inputs=R2), id="log_softmax"),
    pytest.param(
        dict(
            forward="F.gelu(self.ln(x)) * 1.5",
            sizes=PARALLEL,
            inputs=R2,
            init="[N]",
            args="n",
            init_body="self.ln = nn.LayerNorm(n)\n" + AFFINE.format(m="self.ln"),
        ),
        id="layer_norm_gelu",
    ),
    pytest.param(
        dict(
            forward="self.gn(x)",
            sizes={"B": 3, "C": 12, "H": 9, "W": 11},
            inputs="[torch.randn(B, C, H, W)]",
            init="[4, C]",
            args="g, c",
            init_body="self.gn = nn.GroupNorm(g, c)\n" + AFFINE.format(m="self.gn"),
        ),
        id="group_norm",
    ),
    pytest.param(
        dict(
            forward="return torch.softmax(x + y, dim=1), torch.log_softmax(x + y, dim=1)",
            sizes=SMALL,
            inputs="[torch.randn(B, N), torch.randn(B, N)]",
            signature="x, y",
        ),
        id="two_outputs",
    ),
]


@pytest.mark.parametrize("spec", CASES)
def test_both_rowcache_values_give_the_reference_s_outputs(tmp_path, spec):
    task = write_task(tmp_path, "task", **spec)
    source = generate(task).source
    assert "ROWCACHE" in {k.name for k in K.read_knobs(source)}
    for value in (0, 1):
        for acc in (1, 4):
            assert mismatch(task, K.apply(source, {"ROWCACHE": value, "ACC": acc}), seeds=(1,)) is None, (
                f"ROWCACHE={value} ACC={acc}"
            )


def test_with_rowcache_softmax_computes_exp_once_per_element(tmp_path):
    source = generate(write_task(tmp_path, "softmax", "torch.softmax(x, dim=1)", PARALLEL, R2)).source
    kept, computed = _function(source, 1), _function(source, 0)
    assert len(re.findall(r"\bkiln_expf\(", computed)) == 2  # the sum pass and the write each compute it
    assert len(re.findall(r"\bkiln_expf\(", kept)) == 1  # the sum pass keeps it; the write reads it back
    assert "#pragma omp for" in kept and "#pragma omp parallel for" in computed


def test_layer_norm_s_variance_pass_and_write_share_the_deviation_they_trace_separately(tmp_path):
    # the variance's x - mean and the normalization's x - mean are different graph nodes
    task = write_task(
        tmp_path, "layer_norm", "self.ln(x)", SMALL, R2, init="[N]", args="n", init_body="self.ln = nn.LayerNorm(n)"
    )
    source = generate(task).source
    assert len(re.findall(r"- r0\)", _function(source, 0))) == 2
    assert len(re.findall(r"- r0\)", _function(source, 1))) == 1


def test_a_kept_value_lives_in_an_output_row_of_its_type_else_in_a_scratch_row(tmp_path):
    softmax = _function(generate(write_task(tmp_path, "softmax", "torch.softmax(x, dim=1)", PARALLEL, R2)).source, 1)
    # exp(x - max) is stored in the output row by the sum pass, read and scaled there by the write
    assert "kiln_scratch(" not in softmax
    assert len(re.findall(r"out0\[[^]]*\] = ", softmax)) == 2
    # a boolean output cannot hold a float: the value stays in a scratch row of the thread
    task = write_task(tmp_path, "mask", "torch.softmax(x, dim=1) > 0.001", PARALLEL, R2)
    source = generate(task).source
    assert "kiln_scratch(" in _function(source, 1)
    assert mismatch(task, source, seeds=(1,)) is None
