"""The model report: written and read back; one from another version refused in one line."""

from __future__ import annotations

import json

import pytest

from kernelkiln.errors import UserError
from kernelkiln.model.report import EndToEnd, ModelReport, RegionRow, markdown, read


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
