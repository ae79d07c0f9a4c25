"""``OUT/model/`` and ``load_model``: saved kernels run again in a fresh model, only on the CPU they were built for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import kernelkiln
from kernelkiln.errors import UserError
from kernelkiln.model import artifact
from kernelkiln.testing.models import TinyLM, tiny_lm, tokens

from .conftest import save_generated


def save(lm, out: Path, origin: str = "generated") -> Path:
    return save_generated(lm, out, origin)


def edit(folder: Path, change) -> None:
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


def agrees(spliced, model) -> bool:
    ids = tokens()
    with torch.no_grad():
        return torch.allclose(spliced(*ids), model(*ids), atol=1e-4, rtol=1e-4)


@pytest.fixture
def saved(lm_saved) -> Path:
    return lm_saved


def test_the_folder_holds_each_kernel_its_binaries_sources_and_the_machine(saved, lm):
    manifest = artifact.read(saved)
    assert {k.key for k in manifest.kernels} == set(lm.tasks)
    assert manifest.machine == artifact.Machine.here()
    for kernel in manifest.kernels:
        assert (saved / "model" / kernel.file).read_text().count("class ModelNew") == 1
        assert kernel.libraries and all((saved / "model" / lib.file).is_file() for lib in kernel.libraries)
        assert all((saved / "model" / lib.source).is_file() for lib in kernel.libraries)


def test_a_fresh_model_loads_the_kernels_and_agrees_with_eager(saved):
    fresh = tiny_lm(seed=3)  # other weights than the run's: the kernels read the model's own
    spliced = kernelkiln.load_model(saved, fresh)
    assert spliced.model is fresh and spliced.graph is not None
    assert agrees(spliced, fresh)


def test_a_process_without_a_compiler_runs_the_saved_binaries(saved, tmp_path):
    # An empty native cache and no compiler: a kernel that had to be built would fail to load.
    script = (
        "import torch, kernelkiln\n"
        "from kernelkiln.testing.models import tiny_lm, tokens\n"
        f"m = tiny_lm(); s = kernelkiln.load_model({str(saved)!r}, m); x = tokens()\n"
        "print(bool(torch.allclose(s(*x), m(*x), atol=1e-4)))\n"
    )
    env = {**os.environ, "KILN_CACHE_DIR": str(tmp_path / "empty-cache"), "KILN_CC": "/nonexistent/cc"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "True"
    assert not (tmp_path / "empty-cache").exists() or not list((tmp_path / "empty-cache").glob("*.so"))


def test_kernels_built_for_another_cpu_are_refused_in_one_line_unless_rebuilt(lm, tmp_path):
    folder = save(lm, tmp_path)
    edit(folder, lambda m: m["machine"].update(cpu="x86_64|model name=Another CPU|flags=sse2", vector=["sse4_2"]))
    with pytest.raises(UserError, match=r"built for Another CPU \(sse4_2\).*rebuild=True") as refused:
        kernelkiln.load_model(tmp_path, tiny_lm())
    assert "\n" not in str(refused.value)
    model = tiny_lm()
    assert agrees(kernelkiln.load_model(tmp_path, model, rebuild=True), model)


def test_a_binary_changed_since_it_was_saved_is_refused(lm, tmp_path):
    folder = save(lm, tmp_path)
    binary = folder / artifact.read(tmp_path).kernels[0].libraries[0].file
    binary.write_bytes(binary.read_bytes() + b"\0")
    with pytest.raises(UserError, match="changed since it was saved"):
        kernelkiln.load_model(tmp_path, tiny_lm())


def test_kernels_a_model_wrote_run_only_when_the_user_says_so(lm, tmp_path):
    save(lm, tmp_path, origin="model-written")
    with pytest.raises(UserError, match="splice_model_kernels=True"):
        kernelkiln.load_model(tmp_path, tiny_lm())
    model = tiny_lm()
    assert agrees(kernelkiln.load_model(tmp_path, model, splice_model_kernels=True), model)


def test_another_model_is_refused_naming_the_region_it_lacks(saved):
    torch.manual_seed(0)
    with pytest.raises(UserError, match=r"is not the model .* occurs 1 time"):
        kernelkiln.load_model(saved, TinyLM(blocks=1).eval())


def test_a_folder_without_a_saved_model_says_why(tmp_path):
    with pytest.raises(UserError, match=r"holds no saved model .* is it a `kiln model` output folder"):
        kernelkiln.load_model(tmp_path, tiny_lm())
    (tmp_path / "model.json").write_text("{}")
    with pytest.raises(UserError, match=r"model\.md says why no kernel was kept"):
        kernelkiln.load_model(tmp_path, tiny_lm())


def test_saving_again_replaces_the_folder_whole_and_discard_removes_it(lm, tmp_path):
    folder = save(lm, tmp_path)
    (folder / "stale.txt").write_text("from an earlier run")
    save(lm, tmp_path)
    assert not (folder / "stale.txt").exists() and (folder / "manifest.json").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
    artifact.discard(tmp_path)
    assert not folder.exists()


@pytest.mark.slow  # torch.compile of the tiny model: a few seconds
def test_the_saved_form_is_compiled_again_on_load_and_an_unknown_form_is_refused(lm, tmp_path):
    folder = save(lm, tmp_path)
    edit(folder, lambda m: m.update(form="default"))
    fresh = tiny_lm(seed=3)
    loaded = kernelkiln.load_model(tmp_path, fresh)
    assert isinstance(loaded, torch._dynamo.eval_frame.OptimizedModule)  # compiled, the kernels' ops inside
    assert agrees(loaded, fresh)
    edit(folder, lambda m: m.update(form="fastest"))
    with pytest.raises(UserError, match=r"manifest \(form: Value error, unknown form 'fastest'"):
        kernelkiln.load_model(tmp_path, tiny_lm())
