"""One configuration tree from a TOML file: loading, precedence, errors, `kiln config show`, store, window."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from kernelkiln.agents.config import LLMPolicyConfig, ReplayConfig, TunerConfig
from kernelkiln.cli import optimize as optimize_cli
from kernelkiln.cli import stores as stores_cli
from kernelkiln.cli.settings import load_settings
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.results import RunResult
from kernelkiln.orchestrator.run import Optimizer
from kernelkiln.testing.cli import command_app, kiln
from kernelkiln.testing.llm import LoopbackServer
from kernelkiln.testing.tasks import TASKS

TINY = str(TASKS / "tiny_softmax.py")
KILN_TOML = """\
# a comment, as TOML allows
budget = 60
agents = 2
[guard]
threads = 2
[memory.retrieval]
pool_size = 40
[context]
max_experiences = 3
[store]
busy_timeout_s = 7.5
"""


@pytest.fixture
def toml(tmp_path):
    def write(text: str = KILN_TOML) -> Path:
        path = tmp_path / "kiln.toml"
        path.write_text(text)
        return path

    return write


def model_fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every leaf field of the tree, walked from the pydantic models themselves."""
    out = []
    for name, info in model.model_fields.items():
        nested = [
            a
            for a in (getattr(info.annotation, "__args__", None) or (info.annotation,))
            if isinstance(a, type) and issubclass(a, BaseModel)
        ]
        out += model_fields(nested[0], f"{prefix}{name}.") if nested else [f"{prefix}{name}"]
    return out


def test_a_file_loads_the_whole_tree(toml):
    settings = load_settings(toml(), {})
    c = settings.config
    assert (c.budget, c.agents, c.guard.threads, c.memory.retrieval.pool_size) == (60, 2, 2, 40)
    assert (c.context.max_experiences, c.store.busy_timeout_s) == (3, 7.5)
    assert c.guard.time_budget_s == 8.0  # a partial [guard] keeps the search's timing budget
    assert c.memory.value.turn_budget == 60  # memory's stages follow the run's budget
    assert settings.source("guard.threads") == "file" and settings.source("seed") == "default"


def test_flags_given_override_the_file_and_flags_left_out_do_not(toml):
    settings = load_settings(
        toml(),
        {"--budget": 7, "--agents": None, "--threads": None},
        ["memory.retrieval.pool_size=9"],
    )
    c = settings.config
    assert (c.budget, c.agents, c.guard.threads, c.memory.retrieval.pool_size) == (7, 2, 2, 9)
    assert [settings.source(p) for p in ("budget", "agents", "memory.retrieval.pool_size")] == ["flag", "file", "flag"]


def test_a_commands_own_default_sits_below_the_file(toml):
    assert load_settings(None, {}, defaults={"budget": 20}).config.budget == 20
    assert load_settings(toml(), {}, defaults={"budget": 20}).config.budget == 60


def _captured(monkeypatch):
    """Run `kiln optimize` in-process up to the optimizer: the config it starts and the store config it opens."""
    seen = {}
    real_open = stores_cli.open_store

    def open_store(url=None, config=None, **kw):
        seen["store"] = config
        return real_open(url, config, **kw)

    def start(self, specs, config, out_dir=None):
        seen["config"] = config
        return RunResult(run_id="r-test", status="done", tasks={})

    monkeypatch.setattr(stores_cli, "open_store", open_store)
    monkeypatch.setattr(Optimizer, "start", start)
    return seen


def test_optimize_runs_the_files_settings_under_the_flags_given(toml, tmp_path, monkeypatch):
    seen = _captured(monkeypatch)
    store = f"sqlite:///{tmp_path / 'kiln.db'}"
    app = command_app(optimize_cli.register)
    done = CliRunner().invoke(
        app, ["optimize", TINY, "--config", str(toml()), "--store", store, "--budget", "5", "--json"]
    )
    assert done.exit_code == 0, done.output
    c = seen["config"]
    assert (c.budget, c.agents, c.policy.kind, c.guard.threads, c.confirm_time_budget_s) == (5, 2, "tuner", 2, 20.0)
    assert seen["store"].url == store and seen["store"].busy_timeout_s == 7.5  # StoreConfig reaches open_store


def test_the_probed_context_window_is_the_one_the_run_budgets_prompts_with(tmp_path, monkeypatch):
    seen = _captured(monkeypatch)
    routes = {"GET /v1/models": {"data": [{"id": "qwen", "max_model_len": 32768}]}}
    app = command_app(optimize_cli.register)
    with LoopbackServer([], routes) as server:
        args = [
            "optimize",
            TINY,
            "--policy",
            "llm",
            "--model",
            "qwen",
            "--base-url",
            server.base_url,
            "--store",
            f"sqlite:///{tmp_path / 'kiln.db'}",
            "--json",
        ]
        done = CliRunner().invoke(app, args)
        assert done.exit_code == 0, done.output
        assert seen["config"].policy.llm.context_window == 32768  # LLMPolicy builds every prompt for this window
        assert len(server.requests) == 2  # the model's name checked, the window probed once
        done = CliRunner().invoke(app, [*args, "--context-window", "4096"])
        assert seen["config"].policy.llm.context_window == 4096 and len(server.requests) == 3  # set: not probed


@pytest.mark.parametrize(
    "command", [["config", "show"], ["optimize", TINY], ["bench", "examples"], ["ablate", "examples"]]
)
def test_an_unknown_key_is_one_line_naming_the_file_and_field_exit_2(toml, command):
    path = toml("budget = 3\n[guard]\ntyme_budget_s = 2\n")
    done = kiln(*command, "--config", str(path))
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [f"kiln: error: {path}: guard.tyme_budget_s: unknown field"]


def test_bad_values_and_bad_toml_are_one_line(toml):
    for text, words in (
        ("budget = 'many'\n", "budget: Input should be a valid integer"),
        ("budget = \n", "not valid TOML"),
        (
            "[policy]\nkind = 'llm'\n[policy.llm]\nbase_url = 'http://127.0.0.1:9/v1'\n",
            "policy.llm.model: Field required",
        ),
        ("[policy]\nsearch = 'grid'\n", "policy.search: Input should be 'tpe', 'enumerate' or 'random'"),
        ("policy = 'llm'\nsearch = 'random'\n", "the llm policy needs a model: --model NAME"),
        (
            "[policy]\nkind = 'llm'\nsearch = 'random'\n[policy.llm]\nmodel = 'm'\n",
            "the llm policy does not read search",
        ),
    ):
        done = kiln("config", "show", "--config", str(toml(text)))
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert words in done.stderr
    done = kiln("config", "show", "--set-config", "agents=99")
    assert done.returncode == 2 and "bad option --set-config agents" in done.stderr


def test_config_show_lists_every_field_once_with_its_source(toml):
    done = kiln("config", "show", "--config", str(toml()), "--set-config", "policy.seed=3")
    assert done.returncode == 0, done.stderr
    printed = re.findall(r"^(\S+) = .*\((default|file|flag|endpoint)\)$", done.stdout, re.MULTILINE)
    fields = [f for f, _ in printed]
    assert len(fields) == len(set(fields)) and set(fields) == set(model_fields(OptimizeConfig))
    sources = dict(printed)
    assert (sources["budget"], sources["store.busy_timeout_s"], sources["policy.seed"], sources["r_draft"]) == (
        "file",
        "file",
        "flag",
        "default",
    )
    assert "Evaluations per task" in done.stdout  # descriptions


def test_config_show_json_is_a_list_of_field_value_source_description(toml):
    done = kiln("config", "show", "--config", str(toml()), "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert all(set(r) == {"field", "value", "source", "description"} and r["description"] for r in rows)
    assert [r["field"] for r in rows] == model_fields(OptimizeConfig)
    by_field = {r["field"]: r for r in rows}
    assert by_field["guard.threads"] == {**by_field["guard.threads"], "value": 2, "source": "file"}
    assert by_field["policy.kind"]["value"] == "tuner" and by_field["max_tokens"]["value"] is None
    removed = {"experiences", "knowledge", "graph_attempts", "memory.value.turn_budget", "memory.retrieval.limit"}
    removed |= {"search", "seed", "llm.model", "record", "replay", "tool_calls", "reasks", "start_from_seed"}
    assert not removed & set(by_field)  # folded into one home each


def test_guard_platform_follows_the_run_platform():
    with pytest.raises(ValueError, match=r"guard\.platform follows platform"):
        OptimizeConfig(platform="cpu", guard={"platform": "cuda"})
    assert OptimizeConfig(platform="cpu").guard.platform == "cpu"


def test_runs_stored_before_the_fold_still_load():
    old = OptimizeConfig().model_dump(mode="json")
    old.update(experiences=0, knowledge=2, graph_attempts=5)
    old["memory"]["value"]["turn_budget"], old["memory"]["retrieval"]["limit"] = 30, 5
    c = OptimizeConfig.stored(old)
    assert (c.context.max_experiences, c.context.max_knowledge, c.context.max_graph_attempts) == (0, 2, 5)
    assert c.memory.value.turn_budget == c.budget


OLD_LLM_TOML = """\
policy = "llm"
search = "random"              # the tuner's: an llm run ignored it
seed = 2
tool_calls = 1
reasks = 3
start_from_seed = false
record = "session"
[llm]
model = "qwen"
base_url = "http://127.0.0.1:9/v1"
context_window = 4096
"""


def test_a_file_of_an_earlier_version_with_flat_policy_keys_loads_into_the_policys_config(toml):
    settings = load_settings(toml(OLD_LLM_TOML), {})
    policy = settings.config.policy
    assert isinstance(policy, LLMPolicyConfig) and (policy.llm.model, policy.llm.context_window) == ("qwen", 4096)
    assert (policy.tool_calls, policy.reasks, policy.start_from_candidate, policy.record) == (1, 3, False, "session")
    assert settings.source("policy.llm.context_window") == "file" and settings.source("policy.reasks") == "file"
    tuned = load_settings(toml('search = "enumerate"\nseed = 4\n[llm]\nmodel = "unused"\n'), {}).config.policy
    assert tuned == TunerConfig(search="enumerate", seed=4)  # no policy: the tuner, which read no [llm]


def test_flags_override_a_files_policy_whichever_version_wrote_it(toml):
    new = toml('[policy]\nkind = "llm"\nreasks = 5\n[policy.llm]\nmodel = "a"\n')
    flags = {"--model": "b", "--record": "rec"}
    policy = load_settings(new, flags).config.policy
    assert (policy.llm.model, policy.reasks, policy.record) == ("b", 5, "rec")
    old = toml('policy = "llm"\nreasks = 5\n[llm]\nmodel = "a"\n')
    assert load_settings(old, flags).config.policy == policy
    tuner = load_settings(old, {"--policy": "tuner"}).config.policy  # the llm's keys were ignored
    assert tuner == TunerConfig()


def test_the_optimize_flags_build_the_policys_config(tmp_path, monkeypatch):
    seen = _captured(monkeypatch)
    app = command_app(optimize_cli.register)
    store = ["--store", f"sqlite:///{tmp_path / 'kiln.db'}", "--json"]
    with LoopbackServer([]) as server:  # it answers, and lists no models
        llm = ["--policy", "llm", "--model", "m", "--base-url", server.base_url, "--context-window", "2048"]
        done = CliRunner().invoke(
            app, ["optimize", TINY, *llm, "--record", str(tmp_path / "rec"), "--no-seed", *store]
        )  # --from-scratch by its earlier name
    assert done.exit_code == 0, done.output
    policy = seen["config"].policy
    assert isinstance(policy, LLMPolicyConfig) and (policy.llm.model, policy.llm.context_window) == ("m", 2048)
    assert policy.record == str(tmp_path / "rec") and policy.from_scratch()
    done = CliRunner().invoke(app, ["optimize", TINY, "--policy", "replay", "--replay", str(tmp_path), *store])
    assert done.exit_code == 0, done.output
    assert seen["config"].policy == ReplayConfig(session=str(tmp_path))


def test_config_show_prints_the_chosen_policys_fields_only():
    done = kiln("config", "show", "--set-config", "policy.kind=replay", "--set-config", "policy.session=s", "--json")
    assert done.returncode == 0, done.stderr
    fields = {r["field"]: r for r in json.loads(done.stdout) if r["field"].startswith("policy.")}
    assert set(fields) == {f"policy.{name}" for name in ReplayConfig.model_fields}
    assert fields["policy.session"]["value"] == "s" and fields["policy.session"]["source"] == "flag"


def test_threads_beyond_the_cores_but_one_are_kept_as_given_and_said_on_stderr(capsys):
    from kernelkiln.platforms.host import default_threads, usable_cores

    asked = usable_cores() + 1
    settings = load_settings(None, {"--threads": asked})
    assert settings.config.guard.threads == asked  # `kiln config show` shows what was asked
    said = capsys.readouterr().err
    assert f"asked for {asked} threads, timed at {default_threads()}" in said and said.count("\n") == 1


def test_every_flag_that_sets_configuration_names_a_field_a_file_can_set():
    from kernelkiln.cli.settings import FIELD_OF, default_of

    for flag, field in FIELD_OF.items():
        default_of(field)  # a KeyError names a flag whose field is not in the tree
        assert flag.startswith("--"), flag
