"""STREAM: an elementwise output no loop reads again is written with non-temporal stores, and stays right."""

from __future__ import annotations

import pytest

from kernelkiln.lowering import generate
from kernelkiln.testing.lowering import mismatch, with_knobs, write_task


@pytest.mark.parametrize("tile", [64, 256, 4096])
def test_streamed_outputs_match_the_reference_at_every_tile_and_an_unaligned_length(tmp_path, tile):
    # 3 x 1001 elements per output: blocks end off a vector, and the second output starts off a cache line
    task = write_task(
        tmp_path,
        "task",
        "return torch.relu(x) * 2, torch.clamp(x, -0.5, 0.5) + 1",
        {"B": 3, "N": 1001},
        "[torch.randn(B, N)]",
    )
    source = generate(task).source
    assert "'STREAM': [0, 1]" in source and "STREAM = 1" in source  # cheap loops, outputs within the cache
    assert source.count("kiln_stream(out") == 2
    assert mismatch(task, with_knobs(source, STREAM=1, TILE=tile)) is None


def test_an_output_a_later_loop_reads_is_not_streamed(tmp_path):
    # y is an output and the sum reads it back: written past the cache it would be read from memory
    task = write_task(
        tmp_path,
        "task",
        "y = torch.relu(x) + 1\nreturn y, y.sum(dim=0)",
        {"B": 64, "N": 300},
        "[torch.randn(B, N)]",
    )
    source = generate(task).source
    assert "kiln_stream(" not in source.split('SOURCE = r"""')[1].split("static inline void kiln_stream")[-1]
    assert mismatch(task, with_knobs(source, STREAM=1)) is None


def test_the_seed_starts_without_streaming_where_a_streamed_loop_calls_exp(tmp_path):
    task = write_task(tmp_path, "task", "torch.sigmoid(x) + 1", {"B": 4, "N": 300}, "[torch.randn(B, N)]")
    source = generate(task).source
    assert "kiln_stream(out" in source and "STREAM = 0" in source
    assert mismatch(task, with_knobs(source, STREAM=1)) is None
