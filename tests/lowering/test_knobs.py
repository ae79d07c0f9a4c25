"""Generated candidates' KNOBS: one vocabulary across tasks, and every setting still a correct kernel."""

from __future__ import annotations

import pytest

from kernelkiln.lowering import generate
from kernelkiln.native import BuildError
from kernelkiln.task import knobs as K
from kernelkiln.testing.lowering import mismatch, write_task

S2 = {"B": 37, "N": 203}
R2 = "[torch.randn(B, N)]"


def _declared(source: str) -> dict[str, K.Knob]:
    return {k.name: k for k in K.read_knobs(source)}


def test_a_sum_task_and_a_softmax_task_share_knob_names_and_options(tmp_path):
    total = generate(write_task(tmp_path, "row_sum", "torch.sum(x, dim=1)", S2, R2))
    softmax = generate(write_task(tmp_path, "softmax", "torch.softmax(x, dim=1)", S2, R2))
    a, b = _declared(total.source), _declared(softmax.source)
    assert list(a) == list(total.knobs) and list(b) == list(softmax.knobs)
    assert {"THREADS", "ACC", "UNROLL", "VEC", "FLAGS"} <= set(a) & set(b)
    for name in set(a) & set(b):
        assert a[name].options == b[name].options, name
        assert K.same(a[name].value, b[name].value), name
    for source in (total.source, softmax.source):  # an experience's `set ACC=4` applies to both
        assert _declared(K.apply(source, {"ACC": 4}))["ACC"].value == 4


def test_knobs_are_declared_for_the_kernels_the_candidate_has(tmp_path):
    elementwise = generate(write_task(tmp_path, "relu", "torch.relu(x)", S2, R2))
    column = generate(write_task(tmp_path, "column_sum", "torch.sum(x, dim=0)", S2, R2))
    pool = generate(
        write_task(tmp_path, "pool", "F.max_pool1d(x, 3)", {"B": 3, "C": 5, "L": 31}, "[torch.randn(B, C, L)]")
    )
    assert elementwise.knobs == ("THREADS", "UNROLL", "VEC", "TILE", "STREAM", "FLAGS")  # no reduction: no ACC
    assert column.kinds == ("column",) and "ACC" not in column.knobs and "TILE" in column.knobs
    assert pool.kinds == ("window",) and pool.knobs == ("THREADS", "FLAGS")  # its loops read no UNROLL or VEC
    for g in (elementwise, column, pool):
        assert tuple(_declared(g.source)) == g.knobs


def test_a_knob_the_emitted_code_never_reads_is_not_declared(tmp_path):
    # A row group runs its reductions per row with ACC accumulators and takes no TILE; a plain product is all
    # micro-kernel: no UNROLL or VEC loop. Declaring them would make the search time the same binary again.
    softmax = generate(write_task(tmp_path, "softmax", "torch.softmax(x, dim=1)", S2, R2))
    matmul = generate(
        write_task(
            tmp_path,
            "mm",
            "torch.matmul(a, b)",
            {"M": 64, "K": 48, "N": 80},
            "[torch.randn(M, K), torch.randn(K, N)]",
            signature="a, b",
        )
    )
    assert "TILE" not in softmax.knobs and "ACC" in softmax.knobs
    assert matmul.knobs == ("THREADS", "MR", "NR", "MC", "KC", "NC", "FLAGS")


# All just over the size where loops fork threads (32768 elements), with odd sizes: THREADS
# and TILE change the parallel loops' split, and every loop has a tail.
TASKS = {
    "reduction": {
        "forward": "torch.softmax(x, dim=-1).sum(dim=1)",
        "sizes": {"B": 5, "C": 37, "L": 203},
        "inputs": "[torch.randn(B, C, L)]",
    },  # row reductions (ACC) and a column reduction (TILE)
    "softmax": {
        "forward": "torch.softmax(x, dim=-1) * 2",
        "sizes": {"B": 5, "C": 37, "L": 203},
        "inputs": "[torch.randn(B, C, L)]",
    },  # a row group whose passes share exp(x - max) (ROWCACHE)
    "elementwise": {
        "forward": "torch.clamp(torch.tanh(x * self.scale + self.bias), min=-0.5, max=0.75)",
        "sizes": {"B": 2, "C": 5, "H": 67, "W": 53},
        "inputs": "[torch.randn(B, C, H, W)]",
        "init": "[C]",
        "args": "c",
        "init_body": "self.scale = nn.Parameter(torch.randn(1) + 1.0)\nself.bias = nn.Parameter(torch.randn(c, 1, 1))",
    },
}
SWEEP = [("reduction", k) for k in ("ACC", "UNROLL", "VEC", "TILE", "FLAGS", "THREADS")]
SWEEP += [("elementwise", k) for k in ("UNROLL", "VEC", "TILE", "FLAGS", "THREADS")]
SWEEP += [("softmax", k) for k in ("ROWCACHE", "ACC")]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    directory = tmp_path_factory.mktemp("knob_tasks")
    out = {}
    for name, spec in TASKS.items():
        task = write_task(directory, name, **spec)
        out[name] = (task, generate(task, threads=4))  # THREADS options 1, 2, 4
    return out


def test_the_sweep_tasks_have_the_kernels_it_means_to_exercise(generated):
    assert set(generated["reduction"][1].kinds) == {"row", "column"}
    assert "ACC" not in generated["elementwise"][1].knobs
    assert "ROWCACHE" in generated["softmax"][1].knobs
    assert _declared(generated["reduction"][1].source)["THREADS"].options == (1, 2, 4)


@pytest.mark.parametrize(("which", "name"), SWEEP, ids=[f"{w}-{n}" for w, n in SWEEP])
def test_every_option_of_a_knob_still_gives_a_correct_kernel(generated, which, name):
    task, g = generated[which]
    knob = _declared(g.source)[name]
    assert len(knob.options) > 1
    failures = []
    for option in knob.options:
        source = K.apply(g.source, {name: option})
        assert _declared(source)[name].value == option
        try:
            why = mismatch(task, source, seeds=(1,))
        except BuildError as exc:  # a setting that does not compile: name it
            why = f"does not build: {str(exc).splitlines()[0] if str(exc) else ''}"
        if why:
            failures.append(f"{name}={K.show(option)}: {why}")
    assert not failures
