"""How an elementwise walk reads interleaved parts: a transposed convolution's phases are one load through a
pointer each residue of the walk chooses once, and what a residue fixes is computed before the walk."""

from __future__ import annotations

import re

import pytest

from kernelkiln.lowering import generate
from kernelkiln.lowering.body import invariant
from kernelkiln.testing.lowering import layer_task, mismatch, with_knobs

EPILOGUE = "torch.sigmoid(self.c(x)) * 2 + 1"
INTERLEAVED = {
    # 8 phases, 3-d, the output size even: every residue walk has as many positions
    "transposed_3d_stride_2": ("nn.ConvTranspose3d(6, 5, 3, stride=2, padding=1, output_padding=1)", "(2, 6, 3, 4, 5)"),
    # stride 3 in the walked dim, its last residue one position short (the output is sliced to 3·7 - 2)
    "transposed_1d_stride_3": ("nn.ConvTranspose1d(4, 6, 3, stride=3, padding=1)", "(2, 4, 7)"),
    # rows wider than a TILE of 64: a walk starts inside a row, at a residue other than 0
    "transposed_2d_wide_rows": ("nn.ConvTranspose2d(3, 4, 4, stride=2, padding=1)", "(1, 3, 2, 45)"),
}


def _epilogue_nest(source: str) -> str:
    """The generated C of the elementwise nest that writes the output (the last ``row`` nest)."""
    return source[source.rindex("/* row over") :]


@pytest.mark.parametrize("stream", [0, 1])
@pytest.mark.parametrize(("layer", "shape"), INTERLEAVED.values(), ids=INTERLEAVED.keys())
def test_the_phases_of_a_transposed_convolution_are_read_through_one_pointer_per_residue(
    tmp_path, layer, shape, stream
):
    task = layer_task(tmp_path, layer, shape, EPILOGUE)
    source = generate(task).source
    nest = _epilogue_nest(source)
    assert "for (int64_t kiln_r = 0;" in nest
    assert "else if" not in nest  # no branch per position among the phases
    for tile in (64, 256):
        assert mismatch(task, with_knobs(source, STREAM=stream, TILE=tile)) is None


def test_the_pointer_a_residue_chooses_is_computed_before_its_walk(tmp_path):
    task = layer_task(tmp_path, *INTERLEAVED["transposed_3d_stride_2"], EPILOGUE)
    nest = _epilogue_nest(generate(task).source)
    # each copy of the nest (streamed stores or not): the residue's loop, then the walk up to the next copy
    copies = re.findall(r"for \(int64_t kiln_r = 0;(.*?)(for \(int64_t kiln_j.*?)#", nest, re.S)
    assert len(copies) == 2
    for before, walk in copies:
        # GCC computes a pointer chosen inside an omp simd loop per lane, and gathers through it
        assert re.search(r"const float\* v\d+ = .*\? tmp", before)
        assert not re.search(r"const float\* v\d+ = ", walk)


def test_a_concatenation_along_a_walked_dim_keeps_a_branch_per_part(tmp_path):
    # the parts are read at offsets that differ by part: no one pointer serves them all
    task = layer_task(tmp_path, "nn.Identity()", "(2, 3, 8)", "torch.cat([torch.relu(x), x * 2], 2) + 1")
    source = generate(task).source
    assert re.search(r"if \(i2 < 8\) \{", source) and "kiln_r" not in source
    assert mismatch(task, source) is None


def test_a_stack_of_stored_parts_in_a_softmax_row_is_read_through_a_chosen_pointer(tmp_path):
    # three products interleaved along the row a softmax reduces: the choice is made per element
    forward = "torch.stack([self.c(x), self.c(x * 2), self.c(x - 1)], 2).flatten(1).softmax(-1)"
    task = layer_task(tmp_path, "nn.Linear(16, 24, bias=False)", "(5, 16)", forward)
    source = generate(task).source
    assert re.search(r"const float\* v\d+ = \(\(i1\)%3\) < 1 \? tmp0 : \(\(i1\)%3\) < 2 \? tmp1 : tmp2;", source)
    assert mismatch(task, source) is None


def test_statements_that_read_nothing_the_walk_changes_move_before_it():
    lines = [
        "const float v1 = in0[(i1)];",
        "const float v2 = in1[(i1)*8 + (i4)];",
        "const float v3 = (v1 * 2.0f);",
        "const float v4 = (v2 + v3);",
        "float v5;",
        "if (i2 < 3) {",
        "    const float v6 = in2[(i2)];",
        "    v5 = v6;",
        "}",
        "const float v7 = (v5 + v1);",
    ]
    fixed, rest = invariant(lines, {"i4", "kiln_j"})
    assert fixed == [lines[0], lines[2]]
    assert rest == [lines[1], *lines[3:]]  # v5 is assigned in a branch: what reads it stays in the walk
