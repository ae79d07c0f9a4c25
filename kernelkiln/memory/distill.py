"""Distillation: the reusable lessons an optimizer run leaves in memory.

Two kinds, both experiences with value Q that later tasks retrieve:
- a win: an attempt that became the new best, with what changed from its parent
  (``set NAME=value`` conditions when it was a knob move, else its summary and journal);
- a task's best configuration, when the run stops working on the task.

Ids are derived from what the lesson says (platform, op family, settings), so the
same knob lesson learned again on another task is the same experience: its Q,
adoptions and distinct tasks accumulate instead of spawning duplicates. A free-text
lesson (an llm agent's summary) is keyed by its task too: equal words on different
tasks rarely mean the same change.
"""

from __future__ import annotations

import hashlib
import json

from kernelkiln.store.records import Attempt, Experience
from kernelkiln.task import knobs as K

_JOURNAL_CHARS = 600


def _stable_id(*parts: object) -> str:
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()
    return f"e-{digest[:16]}"


def win(attempt: Attempt, parent: Attempt | None, op_family: str | None, platform: str) -> Experience | None:
    """The lesson of a new best derived from a parent, or None (not a KEEP, or a root)."""
    if attempt.verdict != "KEEP" or not attempt.speedup or attempt.parent_id is None:
        return None  # a root (the seed) changed nothing: there is no lesson in it
    family = op_family or "unknown"
    gain = ""
    if parent is not None and parent.speedup:
        gain = f" {attempt.speedup / parent.speedup:.2f}x faster than its parent,"
    changed = attempt.case.changed
    if changed:
        before = (parent.case.knobs or {}) if parent is not None else {}
        was = K.describe({n: before[n] for n in changed if n in before})
        text = (
            f"{family} on {platform}: setting {K.describe(changed)}"
            f"{f' (was {was})' if was else ''} made {attempt.task_id}{gain} "
            f"{attempt.speedup:.2f}x the reference."
        )
        conditions = [K.condition(n, v) for n, v in sorted(changed.items())]
        ident = _stable_id("win", platform, family, conditions)
    else:
        journal = attempt.journal.strip()[:_JOURNAL_CHARS]
        text = (
            f"{family} on {platform}: {attempt.summary} made {attempt.task_id}{gain} "
            f"{attempt.speedup:.2f}x the reference.\n{journal}"
        ).strip()
        conditions = []
        ident = _stable_id("win", platform, family, attempt.task_id, attempt.summary)
    return Experience(
        id=ident,
        text=text,
        summary=K.describe(changed) if changed else attempt.summary,
        platform=platform,
        op_family=family,
        stage="optimization",
        conditions=conditions,
        source_attempt_id=attempt.id,
    )


def best_configuration(best: Attempt, start: Attempt | None, op_family: str | None, platform: str) -> Experience | None:
    """The lesson of a task's final best knob settings, or None when it has none or gained nothing."""
    settings = best.case.knobs
    if not settings or not best.speedup:
        return None
    if start is not None and start.speedup and best.speedup <= start.speedup:
        return None
    family = op_family or "unknown"
    over_start = f", {best.speedup / start.speedup:.2f}x its seed" if start is not None and start.speedup else ""
    text = (
        f"Best configuration for {family} on {platform} (task {best.task_id}): {K.describe(settings)}, "
        f"{best.speedup:.2f}x the reference{over_start}."
    )
    conditions = [K.condition(n, v) for n, v in sorted(settings.items())]
    return Experience(
        id=_stable_id("best", platform, family, conditions),
        text=text,
        summary=f"best configuration: {K.describe(settings)}",
        platform=platform,
        op_family=family,
        stage="optimization",
        conditions=conditions,
        source_attempt_id=best.id,
    )
