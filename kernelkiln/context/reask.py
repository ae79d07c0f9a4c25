"""The message that asks a model again after a reply that could not be used."""

from __future__ import annotations

from collections.abc import Sequence

from kernelkiln.context.prompts import render
from kernelkiln.store.records import SUMMARY_CHARS


def reask(problems: Sequence[str], experience_ids: Sequence[str], protocol: str = "tools") -> str:
    """The ``reask`` template: what was wrong, and the adoption records still owed for ``experience_ids``.

    ``protocol`` "text" restates the text reply format instead of the submit_candidate call.
    """
    return render(
        "reask",
        problems=list(problems),
        experience_ids=list(experience_ids),
        summary_chars=SUMMARY_CHARS,
        protocol=protocol,
    )
