"""The model report: written and read back; one from another version refused in one line."""

from __future__ import annotations

import json

import pytest

from kernelkiln.errors import UserError
from kernelkiln.model.report import EndToEnd, ModelReport, RegionRow, agreement, amdahl, markdown, read


def report() -> ModelReport:
    row = RegionRow(task="tasks/r.py", ops=["addmm"], places=2, share=0.5, reference_ms=0.2, status="spliced")
    ends = [
        EndToEnd(shape="seq=1", correct=True, trials=5, wide=2, max_abs_error=1e-6),
        EndToEnd(shape="seq=8", correct=True, trials=3, max_abs_error=1e-6, kept=False, dropped="slower"),
    ]
    return ModelReport(
        model="M", inputs=["int64[1, 1]"], threads=1, budget=3, regions=[row], left=[], shapes=["seq=1", "seq=8"],
        end_to_end=ends, saved="model",
    )  # fmt: skip


def test_a_report_reads_back_as_written_with_a_section_per_declared_shape(tmp_path):
    written = report()
    written.write(tmp_path)
    assert read(tmp_path) == written
    text = markdown(written)
    assert "## End to end at seq=1" in text and "## End to end at seq=8" in text
    assert "3 fresh input draws and 2 wider ones" in text and "runs in torch here (slower)" in text
    assert "## Saved" in text


def test_a_report_from_another_version_is_refused_in_one_line(tmp_path):
    old = report().model_dump(mode="json")
    old["end_to_end"] = old["end_to_end"][0]  # the first slice wrote one object, not a list
    (tmp_path / "model.json").write_text(json.dumps(old))
    with pytest.raises(UserError, match="rerun `kiln model`") as refused:
        read(tmp_path)
    assert "\n" not in str(refused.value)


def _row(share: float, speedup: float | None, status: str = "spliced") -> RegionRow:
    return RegionRow(
        task="tasks/r.py", ops=["addmm"], places=1, share=share, reference_ms=0.1, speedup=speedup, status=status
    )


def test_the_regions_predict_the_model_by_amdahls_law_over_their_shares():
    # half the time 2x faster, a quarter 4x faster, the rest untouched: 1 / (0.25 + 0.25 + 0.0625)
    assert amdahl([_row(0.5, 2.0), _row(0.25, 4.0)]) == pytest.approx(1 / 0.5625)
    assert amdahl([_row(0.5, 2.0), _row(0.3, 9.0, status="slower")]) == pytest.approx(1 / 0.75)
    assert amdahl([_row(0.5, None, status="failed")]) is None


def test_an_end_to_end_figure_confirms_the_prediction_only_inside_its_rounds_interval():
    at = dict(shape="", correct=True, trials=3, max_abs_error=0.0, vs_eager=1.3, vs_eager_interval=(1.2, 1.4))
    assert "confirmed" in agreement(EndToEnd(**at, predicted=1.33)) and "NOT" not in agreement(
        EndToEnd(**at, predicted=1.33)
    )
    assert "NOT confirmed" in agreement(EndToEnd(**at, predicted=27.8))
    assert agreement(EndToEnd(**at)) == ""
