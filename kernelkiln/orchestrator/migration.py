"""Configurations written by earlier versions: stored runs' ``Run.config``, TOML files, ``--set-config`` paths.

Keys that moved are moved to their one home (or dropped), and the flat policy keys of before
each policy had a config of its own (``policy = "llm"``, ``search``, ``[llm]``, ``record``,
``replay``…) go under ``policy`` by their new names.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

from kernelkiln.agents.config import DEFAULT_POLICY, POLICIES

# Keys of runs stored before every field had one home: old key -> where it lives now (None: gone).
_MOVED = {
    ("experiences",): ("context", "max_experiences"),
    ("knowledge",): ("context", "max_knowledge"),
    ("graph_attempts",): ("context", "max_graph_attempts"),
    ("memory", "value", "turn_budget"): None,
    ("memory", "retrieval", "limit"): None,
}
# The policy's keys of runs and files from before each policy had a config of its own: flat key -> its name there.
_POLICY_KEYS = {
    "search": "search",
    "seed": "seed",
    "tool_calls": "tool_calls",
    "reasks": "reasks",
    "llm": "llm",
    "record": "record",
    "replay": "session",
    "start_from_seed": "start_from_candidate",
}
# Flat keys a policy that does not read them refused when set (the others it ignored, and they are dropped).
_REFUSED = {
    "record": "--record saves the model's exchanges: the tuner calls no model (use --policy llm)",
    "replay": "--replay DIR is read by the replay policy: add --policy replay",
    "start_from_seed": "--no-seed: the tuner searches a seed candidate's knobs and needs one (use --policy llm)",
}


def migrated(data: dict[str, Any]) -> dict[str, Any]:
    """``data``, a run's stored configuration, with the keys of earlier versions in their one home.

    Raises ValueError, in the words the user knows, where an earlier version refused the combination.
    """
    layer, flat = policy_layer(_moved(data))
    return settled(layer, flat)


def policy_layer(data: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """One layer of settings (a file, flags) with the policy's flat keys of earlier versions in its table.

    ``policy = "llm"`` becomes ``[policy] kind = "llm"``, ``search``, ``[llm]``, ``record``… move
    under ``policy`` by their new names; returned beside it: the names moved, which ``settled``
    drops (or refuses) where the policy does not read them, as earlier versions ignored them.
    """
    flat = {key: data[key] for key in _POLICY_KEYS if key in data}
    policy = data.get("policy")
    if (not flat and not isinstance(policy, str)) or not isinstance(policy, (str, dict, type(None))):
        return data, set()  # nothing of an earlier version's, or no policy at all: the validation says so
    out = {k: v for k, v in data.items() if k not in flat}
    table: dict[str, Any] = {"kind": policy} if isinstance(policy, str) else dict(policy or {})
    for key, value in flat.items():
        name = _POLICY_KEYS[key]
        table[name] = _merged(table[name], value) if isinstance(table.get(name), dict) else value
    return {**out, "policy": table}, {_POLICY_KEYS[key] for key in flat}


def settled(data: dict[str, Any], flat: set[str]) -> dict[str, Any]:
    """``data`` without the ``flat`` names its policy does not read; ValueError where they were refused.

    ``flat``: the policy fields ``policy_layer`` moved from an earlier version's keys (the others stay,
    for the validation to name if the policy does not read them).
    """
    table = data.get("policy")
    if not isinstance(table, dict):
        return data
    table = {"kind": DEFAULT_POLICY.model_fields["kind"].default, **table}  # as a config that names no policy
    policy = _policy_class(table["kind"])
    for key, name in _POLICY_KEYS.items():
        if name not in flat or name not in table or (policy is not None and name in policy.model_fields):
            continue
        value = table.pop(name)
        refused = (value is False) if key == "start_from_seed" else bool(value)
        if policy is not None and key in _REFUSED and refused:
            raise ValueError(_REFUSED[key])
    return {**data, "policy": table}


def _policy_class(kind: Any) -> type[BaseModel] | None:
    # None: an unknown kind, the union's to refuse, naming the kinds it knows.
    return next((c for c in POLICIES if c.model_fields["kind"].default == kind), None)


def _merged(base: dict[str, Any], over: Any) -> Any:
    if not isinstance(over, dict):
        return over
    return {**base, **{k: _merged(base[k], v) if isinstance(base.get(k), dict) else v for k, v in over.items()}}


def _moved(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with the keys of earlier versions moved to their one home (or dropped)."""
    out = copy.deepcopy(data)
    for old, new in _MOVED.items():
        *parents, leaf = old
        node: Any = out
        for key in parents:
            node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, dict) or leaf not in node:
            continue
        value = node.pop(leaf)
        if new is not None:  # both capped what was shown: the smaller one was in effect
            section, name = new
            table = out.setdefault(section, {})
            table[name] = min(value, table.get(name, value))
    return out
