"""Guard settings and helpers for fast tests."""

from __future__ import annotations

from kernelkiln.guard import GuardConfig


def fast_config(**overrides: object) -> GuardConfig:
    """A guard that checks fully but times briefly: for tests, not for figures."""
    settings: dict[str, object] = dict(
        threads=1,
        min_rounds=3,
        max_rounds=4,
        time_budget_s=1.0,
        batch_target_s=0.0005,
        warmup_reps=1,
        call_timeout_s=3.0,
        build_timeout_s=60.0,
        idle_probe_s=0.1,
        max_input_sets=4,
    )
    settings.update(overrides)
    return GuardConfig(**settings)
