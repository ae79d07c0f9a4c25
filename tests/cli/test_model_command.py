"""`kiln model` as a user runs it: help, a refusal as one line (and as JSON), a tiny model done end to end."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kernelkiln.cli import model as model_cli
from kernelkiln.errors import UserError
from kernelkiln.testing.cli import command_app, kiln

MODELS = """
import torch

from kernelkiln.testing.models import gpt2_tokens, tiny_gpt2


def gpt2_with_cache():
    return tiny_gpt2(use_cache=True)


def linear_gelu():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.GELU())


def rows():
    return (torch.randn(8, 32),)


def sized_rows(n=8):
    return (torch.randn(n, 32),)


tokens = gpt2_tokens
"""

QUICK = ["--threads", "1", "--time-budget", "0.3", "--confirm-budget", "0.3", "--no-compile"]


@pytest.fixture
def app():
    return command_app(model_cli.register)


@pytest.fixture
def models(tmp_path):
    path = tmp_path / "models.py"
    path.write_text(MODELS)
    return path


def test_help_teaches_the_inputs_and_the_results():
    done = kiln("model", "--help")
    assert done.returncode == 0
    for word in ("--inputs", "FILE:FUNCTION", "--budget", "--json", "model.json", "OUT/model/", "load_model"):
        assert word in done.stdout, word


def test_a_model_torch_export_refuses_prints_a_refused_json_object_and_exits_2(models, tmp_path):
    store = f"sqlite:///{tmp_path / 'kiln.db'}"
    done = kiln(
        "model", f"{models}:gpt2_with_cache", "--inputs", f"{models}:tokens", "--json",
        "--store", store, "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    refused = json.loads(done.stdout)
    assert refused["status"] == "refused" and "use_cache=False" in refused["reason"]
    errors = [line for line in done.stderr.splitlines() if line.startswith("kiln: error:")]
    assert len(errors) == 1 and "use_cache=False" in errors[0]


def test_a_bad_factory_is_refused_as_json_too(app, models):
    done = CliRunner().invoke(app, ["model", f"{models}:nope", "--inputs", f"{models}:rows", "--json"])
    assert isinstance(done.exception, UserError) and done.exception.exit_code == 2  # kiln's main: one line, exit 2
    assert json.loads(done.stdout) == {"status": "refused", "reason": f"MODEL: {models} has no function nope"}


@pytest.mark.parametrize(
    ("shapes", "why"),
    [
        (["--shapes", "n"], "expected NAME=N[,N...]"),
        (["--shapes", "n=0"], "expected NAME=N[,N...]"),
        (["--shapes", "seq=4"], "does not take seq as keyword arguments"),
    ],
)
def test_bad_shapes_are_refused_in_one_line_before_any_work(app, models, tmp_path, shapes, why):
    args = ["model", f"{models}:linear_gelu", "--inputs", f"{models}:sized_rows", *shapes, "--json"]
    done = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "out")])
    assert isinstance(done.exception, UserError) and why in str(done.exception)
    assert "\n" not in str(done.exception) and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_declared_shapes_each_get_a_check_and_a_timing(app, models, tmp_path):
    store = f"sqlite:///{tmp_path / 'kiln.db'}"
    out = tmp_path / "out"
    args = ["model", f"{models}:linear_gelu", "--inputs", f"{models}:sized_rows", "--shapes", "n=4,8", "--budget", "3"]
    done = CliRunner().invoke(app, [*args, "--json", "--store", store, "--out", str(out), *QUICK])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["shapes"] == ["n=4", "n=8"]
    assert [(e["shape"], e["correct"]) for e in report["end_to_end"]] == [("n=4", True), ("n=8", True)]
    (row,) = report["regions"]
    assert "KILN" in (out / row["task"]).read_text()


@pytest.mark.slow
def test_a_tiny_model_is_optimized_spliced_and_checked(app, models, tmp_path):
    store = f"sqlite:///{tmp_path / 'kiln.db'}"
    out = tmp_path / "out"
    args = ["model", f"{models}:linear_gelu", "--inputs", f"{models}:rows", "--budget", "3", "--json"]
    done = CliRunner().invoke(app, [*args, "--store", store, "--out", str(out), *QUICK], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["status"] == "done" and report["out"] == str(out) and report["model"] == "Sequential"
    (row,) = report["regions"]  # one region: the product and its GELU
    assert row["ops"][:2] == ["addmm", "gelu"] and (out / row["task"]).is_file()
    assert [e["correct"] for e in report["end_to_end"]] == [True]
    assert json.loads((out / "model.json").read_text()) == {
        k: v for k, v in report.items() if k not in ("status", "out")
    }


def test_an_unknown_compile_configuration_is_refused_before_any_work_naming_the_known_ones(app, models, tmp_path):
    out = tmp_path / "out"
    done = CliRunner().invoke(
        app, ["model", f"{models}:linear_gelu", "--inputs", f"{models}:rows", "--compile", "default,fastest", "--json",
              "--out", str(out)],
    )  # fmt: skip
    assert isinstance(done.exception, UserError) and done.exception.exit_code == 2
    reason = json.loads(done.stdout)["reason"]
    assert reason == "--compile: unknown torch.compile configuration 'fastest': choose from default, strongest"
    assert not out.exists()


def test_budget_and_max_wall_are_fields_a_file_sets_and_model_budget_is_the_whole_models(
    app, models, tmp_path, monkeypatch
):
    seen: list[tuple] = []

    def optimize_model(model, shapes, out, memory, config, model_budget=None, **_):
        seen.append((config.budget, config.max_wall_s, model_budget))
        raise UserError("captured")

    monkeypatch.setattr("kernelkiln.model.pipeline.optimize_model", optimize_model)
    toml = tmp_path / "kiln.toml"
    toml.write_text("budget = 7\nmax_wall_s = 99\n")
    base = ["model", f"{models}:linear_gelu", "--inputs", f"{models}:rows", "--store", f"sqlite:///{tmp_path / 'k.db'}"]
    for extra in ([], ["--config", str(toml)], ["--config", str(toml), "--budget", "4", "--max-wall", "0"],
                  ["--model-budget", "20"]):  # fmt: skip
        done = CliRunner().invoke(app, [*base, *extra])
        assert isinstance(done.exception, UserError) and str(done.exception) == "captured", done.output
    # kiln model's own defaults (15 per task, 1200 s), then the file's, then the flags' (0: no limit)
    assert seen == [(15, 1200.0, None), (7, 99.0, None), (4, None, None), (15, 1200.0, 20)]
