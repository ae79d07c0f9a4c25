"""A submit_candidate call read in two parts: the candidate (code and summary), whose faults are re-asked, and
its adoption records, which are bookkeeping: a shown experience they do not account for is *not stated*.

SAGE's credit learns only from what the model stated; a model that never states adoption still
optimizes (its candidates are evaluated), and the share not stated is counted in run.json.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kernelkiln.agents.reply import WHY_CHARS
from kernelkiln.llm import ToolCall
from kernelkiln.policy.turn import Choice
from kernelkiln.store.records import SUMMARY_CHARS

RECORD_SHAPE = '{"adopted": [ids], "not_adopted": [{"id": ..., "why": ...}]}'


def candidate_problems(submit: ToolCall) -> list[str]:
    """What keeps a submit_candidate call from being evaluated (empty when its code and summary are there)."""
    args = submit.arguments
    if submit.malformed:
        return ["the submit_candidate arguments were not a JSON object"]
    problems = []
    code = args.get("code")
    if not isinstance(code, str) or "ModelNew" not in code:
        problems.append("`code` must be the complete Python file defining ModelNew")
    if not isinstance(args.get("summary"), str) or not args["summary"].strip():
        problems.append(f"`summary` is missing: name the strategy in at most {SUMMARY_CHARS} characters")
    return problems


def submitted_records(arguments: dict[str, Any], shown: Sequence[str]) -> tuple[tuple[Choice, ...], list[str]]:
    """The Choices a submit call's ``adoptions`` state for ``shown`` ids (each stated once), in shown order,
    and what the list lacks."""
    adoptions = arguments.get("adoptions")
    if not shown:
        return (), []
    if not isinstance(adoptions, list):
        return (), ["`adoptions` must be a list of {experience_id, adopted: true|false, why}"]
    valid = [
        a
        for a in adoptions
        if isinstance(a, dict) and isinstance(a.get("experience_id"), str) and isinstance(a.get("adopted"), bool)
    ]
    counts: dict[str, int] = {}
    for a in valid:
        counts[a["experience_id"]] = counts.get(a["experience_id"], 0) + 1
    by_id = {a["experience_id"]: a for a in valid if counts[a["experience_id"]] == 1}
    problems = []
    if len(valid) < len(adoptions):
        problems.append("`adoptions` entries must be {experience_id, adopted: true|false, why}")
    missing = [i for i in shown if i not in by_id]
    if missing:
        problems.append(f"no adoption record for {', '.join(missing)}")
    choices = tuple(
        Choice(i, bool(by_id[i]["adopted"]), " ".join(str(by_id[i].get("why", "")).split())[:WHY_CHARS])
        for i in shown
        if i in by_id
    )
    return choices, problems


def merged(first: tuple[Choice, ...], later: tuple[Choice, ...], shown: Sequence[str]) -> tuple[Choice, ...]:
    """``first``'s records with ``later``'s for the ids ``first`` did not state, in shown order."""
    by_id = {c.experience_id: c for c in later} | {c.experience_id: c for c in first}
    return tuple(by_id[i] for i in shown if i in by_id)


def records_request(ids: Sequence[str]) -> str:
    """The one re-ask a candidate's incomplete adoption record gets: the record alone."""
    return (
        "Your candidate is taken and will be evaluated. Its adoption record does not account for "
        f"{', '.join(ids)}. Reply with only a ```json block, {RECORD_SHAPE}, naming each of these ids once."
    )
