"""A replay runs with the settings its recording ran with, where they shape the prompts.

The recorded run's configuration is in its session header (``session.json``'s ``config``).
Before anything is evaluated, the replaying run's settings that shape what an agent is
shown (where it starts from, how many agents and so which lenses, the platform, the turn's
tool calls and re-asks, the context settings) are compared with it, and the first
difference is one line naming the setting and both values: a replay with other prompts
would diverge later, or worse, answer different prompts with the recorded replies. The
model's settings (reply protocol, window, reply cap) need no check: a replay uses the
recording's own.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from kernelkiln.agents.config import LLMPolicyConfig, ReplayConfig
from kernelkiln.errors import UserError
from kernelkiln.llm.session import HEADER, read_header
from kernelkiln.orchestrator.config import OptimizeConfig


def check_replay(config: OptimizeConfig, note: Callable[[str], None]) -> None:
    """UserError when ``config`` replays a recording made with other prompt-shaping settings.

    A recording whose header keeps no settings (made before headers kept them) is not
    compared, and ``note`` says so.
    """
    if not isinstance(config.policy, ReplayConfig):
        return
    directory = Path(config.policy.session)
    header = read_header(directory)
    if not header.config:
        note(f"kiln: {directory} does not record its run's settings: only its prompts are compared")
        return
    try:
        recorded = OptimizeConfig.stored(header.config)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        raise UserError(f"{directory / HEADER}: its run settings cannot be read ({where}: {error['msg']})") from None
    was, now = prompt_settings(recorded), prompt_settings(config)
    for name, value in now.items():
        if was.get(name) != value:
            raise UserError(
                f"--replay {directory} was recorded with {name} {was.get(name, 'unset')}, this run has {value}: "
                "its prompts would differ; replay with the recorded setting"
            )


def prompt_settings(config: OptimizeConfig) -> dict[str, str]:
    """The settings that shape an llm agent's prompts, by the name a user sets them with, as shown."""
    policy = config.policy
    if policy.from_scratch():
        start = "none (--from-scratch)"
    elif config.start_file:
        start = "a file (--start FILE)"
    else:
        start = "the task's own"
    shaped = {"starting candidate": start, "agents (one lens each)": str(config.agents), "platform": config.platform}
    if isinstance(policy, LLMPolicyConfig | ReplayConfig):
        shaped["policy.tool_calls"] = str(policy.tool_calls)
        shaped["policy.reasks"] = str(policy.reasks)
    shaped.update({f"context.{name}": str(value) for name, value in config.context.model_dump().items()})
    return shaped
