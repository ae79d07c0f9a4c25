"""The policy each agent gets from the run's configuration."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from kernelkiln.agents.tuner import Tuner
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.policies import RunPolicies


def test_the_tuner_searches_with_tpe_unless_the_config_asks_for_the_enumerate_search():
    default = RunPolicies(OptimizeConfig()).make("a0", "t")
    chosen = RunPolicies(OptimizeConfig(search="enumerate")).make("a0", "t")
    assert isinstance(default, Tuner) and default.search == "tpe"
    assert isinstance(chosen, Tuner) and chosen.search == "enumerate"


def test_an_unknown_search_is_refused():
    with pytest.raises(ValidationError, match="search"):
        OptimizeConfig(search="grid")
