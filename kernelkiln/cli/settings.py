"""A command's effective configuration: the pydantic defaults, then a TOML file, then the flags given.

The file is TOML because Python reads it with the standard library (``tomllib``, no new
dependency), it is typed (numbers stay numbers, ``true`` stays a bool), it takes
comments, and anyone who has written a pyproject.toml knows it. Its tables are the
nodes of ``OptimizeConfig``'s tree::

    budget = 60                # evaluations per task
    [guard]
    threads = 4
    [memory.retrieval]
    pool_size = 40

A flag the user gave overrides the file; a flag left out does not (the commands' options
default to None, so every default lives in its pydantic field). A ``guard.threads`` above
this machine's cores but one is said on stderr: the guard times at that many. ``--set-config
PATH=VALUE`` sets any field by its dotted path. Unknown keys and bad values are one line
naming the file (or the flag) and the dotted field: a UserError, exit code 2.
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import NoneType, UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from kernelkiln.agents.config import KINDS, POLICIES, LLMPolicyConfig
from kernelkiln.errors import UserError
from kernelkiln.llm.window import probe_context_window
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.migration import policy_layer, settled
from kernelkiln.platforms.host import fit_threads

Source = Literal["default", "file", "flag", "endpoint"]
# Every flag that sets a configuration field, and that field: one meaning per flag in every command, and
# every such option a field a TOML file can set too (commands pass {flag: value}; tests check the map).
FIELD_OF: dict[str, str] = {
    "--policy": "policy.kind",
    "--agents": "agents",
    "--budget": "budget",  # evaluations per task, in every command
    "--model": "policy.llm.model",
    "--base-url": "policy.llm.base_url",
    "--provider": "policy.llm.provider",
    "--api-key-env": "policy.llm.api_key_env",
    "--context-window": "policy.llm.context_window",
    "--context": "context.mode",
    "--reply-protocol": "policy.llm.reply_protocol",
    "--max-tokens": "max_tokens",
    "--max-wall": "max_wall_s",
    "--store": "store.url",
    "--threads": "guard.threads",
    "--platform": "platform",
    "--cluster": "cluster.address",
    "--lock-clocks": "guard.lock_clocks_mhz",
    "--confirm-budget": "confirm_time_budget_s",
    "--time-budget": "guard.time_budget_s",
    "--isolation": "guard.isolation",
    "--record": "policy.record",
    "--replay": "policy.session",
    "--start": "start_file",
    "--from-scratch": "policy.start_from_candidate",
    "--memory-readonly": "memory.readonly",
}
Flags = dict[str, Any]  # flag as typed (a key of FIELD_OF) -> its value (None: not given)


@dataclass(frozen=True)
class Settings:
    """The validated tree and, for each dotted field not at its default, where its value came from."""

    config: OptimizeConfig
    sources: dict[str, Source] = field(default_factory=dict)
    file: Path | None = None

    def source(self, dotted: str) -> Source:
        """Where the value of ``dotted`` came from."""
        return self.sources.get(dotted, "default")


def load_settings(
    file: Path | None, flags: Flags, sets: Sequence[str] = (), defaults: dict[str, Any] | None = None
) -> Settings:
    """The tree from ``defaults`` (a command's own, as dotted paths), then ``file``, then the ``flags`` given."""
    layers: list[tuple[Source, dict[str, Any]]] = [("default", _tree(dict(defaults or {})))]
    if file is not None:
        layers.append(("file", _read(file)))
    given = {FIELD_OF[flag]: value for flag, value in flags.items() if value is not None}
    given.update(_parse_set(item) for item in sets)
    layers.append(("flag", _tree(given)))
    merged: dict[str, Any] = {}
    sources: dict[str, Source] = {}
    flat: set[str] = set()  # policy fields a layer gave by an earlier version's flat key
    for source, layer in layers:
        layer, moved = policy_layer(layer)  # a file may use them: policy = "llm", search, [llm], record
        merged, flat = _merged(merged, layer), flat | moved
        if source != "default":
            sources.update((path, source) for path in _leaves(layer))
    try:
        merged = settled(merged, flat)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    sources = {path: source for path, source in sources.items() if _present(merged, path)}
    try:
        config = OptimizeConfig.model_validate(merged)
    except ValidationError as exc:
        raise UserError(_one_line(exc, file, flags, sources)) from None
    _say_fitted_threads(config)
    return Settings(config, sources, file)


def _say_fitted_threads(config: OptimizeConfig) -> None:
    """One line on stderr when ``guard.threads`` asks for more than this machine's guard times at.

    The value stays as given (``kiln config show`` shows it); the guard, the seeds and
    ``kiln model`` bring it down (``fit_threads``). On a Ray cluster each device's guard
    fits the threads to its own cores, so nothing is said here.
    """
    if config.guard.threads is not None and config.cluster.address == "local":
        _, why = fit_threads(config.guard.threads)
        if why:
            print(f"kiln: {why}", file=sys.stderr, flush=True)


def with_endpoint_window(settings: Settings, say: Callable[[str], None] | None = None) -> Settings:
    """``settings`` with the llm policy's context window read from its endpoint, unless the user set it.

    One probe with a short timeout; it never fails: when the endpoint does not say, the
    default stands. ``say`` (default: stderr) hears which window is used.
    """
    policy = settings.config.policy
    if not isinstance(policy, LLMPolicyConfig):
        return settings
    llm = policy.llm
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    source = settings.source("policy.llm.context_window")
    if source != "default":
        where = "--context-window" if source == "flag" else f"{settings.file}" if source == "file" else source
        say(f"kiln: context window {llm.context_window} tokens (set by {where})")
        return settings
    if not llm.base_url:
        say(f"kiln: context window {llm.context_window} tokens (the default for a hosted {llm.provider} model)")
        return settings
    window = probe_context_window(llm)
    if window is None:
        say(f"kiln: context window {llm.context_window} tokens (the default: {llm.base_url} does not say)")
        return settings
    say(f"kiln: context window {window.tokens} tokens ({window.source})")
    probed = policy.model_copy(update={"llm": llm.model_copy(update={"context_window": window.tokens})})
    config = settings.config.model_copy(update={"policy": probed})
    return Settings(config, {**settings.sources, "policy.llm.context_window": "endpoint"}, settings.file)


def default_of(dotted: str) -> Any:
    """The default of a dotted field: what a run uses when neither a file nor a flag sets it."""
    return _defaults()[dotted]


def default_note(dotted: str) -> str:
    """ "(default: VALUE)" for an option's help, from the field: help text holds no second copy of a default."""
    return f"(default: {default_of(dotted)})"


@lru_cache(maxsize=1)
def _defaults() -> dict[str, Any]:
    defaults = {path: value for path, _, value in walk(OptimizeConfig())}
    for policy in POLICIES:  # every policy's fields, not only the default one's
        for path, _, value in walk(policy, "policy."):
            defaults.setdefault(path, value)
    return defaults


def walk(model: BaseModel | type[BaseModel], prefix: str = "") -> Iterator[tuple[str, FieldInfo, Any]]:
    """Every leaf field of the tree under ``model`` (an instance, or a class for its defaults): path, field, value.

    A node that is None (a policy class's required ``llm``) is walked through its class, its
    values the class's defaults (None where a field has none); a union (``policy``) through
    the member its value is.
    """
    cls = model if isinstance(model, type) else type(model)
    for name, info in cls.model_fields.items():
        path = f"{prefix}{name}"
        if isinstance(model, type):
            value = None if info.is_required() else info.get_default(call_default_factory=True)
        else:
            value = getattr(model, name)
        node = _model_class(info.annotation)
        if isinstance(value, BaseModel):
            yield from walk(value, f"{path}.")
        elif node is not None:
            yield from walk(node, f"{path}.")
        else:
            yield path, info, value


def _model_class(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (through ``X | None``), or None for a plain value."""
    if get_origin(annotation) in (Union, UnionType):
        args = [a for a in get_args(annotation) if a is not NoneType]
        annotation = args[0] if len(args) == 1 else None
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


# -- reading and merging -----------------------------------------------------------------------
def _read(file: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(file.read_text())
    except FileNotFoundError:
        raise UserError(f"{file}: no such configuration file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{file}: cannot read it: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{file}: not valid TOML: {exc}") from None


def _parse_set(item: str) -> tuple[str, Any]:
    path, sep, text = item.partition("=")
    if not sep or not path.strip():
        raise UserError(f"--set-config takes PATH=VALUE (e.g. guard.threads=4), not {item!r}")
    try:
        value = tomllib.loads(f"v = {text.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = text.strip()  # a bare word: llm.model=qwen2.5-coder
    return path.strip(), value


def _tree(dotted: dict[str, Any]) -> dict[str, Any]:
    """{"guard.threads": 4} -> {"guard": {"threads": 4}}."""
    out: dict[str, Any] = {}
    for path, value in dotted.items():
        *parents, leaf = path.split(".")
        node = out
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return out


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _present(tree: dict[str, Any], dotted: str) -> bool:
    node: Any = tree
    for key in dotted.split("."):
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def _leaves(tree: dict[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def _one_line(exc: ValidationError, file: Path | None, flags: Flags, sources: dict[str, Source]) -> str:
    """The first problem, naming where it came from: the flag, else the file, and the dotted field."""
    error = exc.errors()[0]
    loc = list(error["loc"])
    if loc[:1] == ["policy"] and len(loc) > 1 and loc[1] in KINDS:
        del loc[1]  # the union's tag: policy.llm.model, not policy.llm.llm.model
    dotted = ".".join(str(p) for p in loc)
    message = "unknown field" if error["type"] == "extra_forbidden" else error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden" and len(error["loc"]) == 3 and error["loc"][0] == "policy":
        message = _not_read(*error["loc"][1:])
    if not dotted:
        return message
    given = [p for p in sources if dotted == p or dotted.startswith(p + ".") or p.startswith(dotted + ".")]
    origin = sources.get(given[0]) if given else None
    if origin == "flag":
        flag = next((name for name in flags if FIELD_OF[name] in given), f"--set-config {given[0]}")
        return f"bad option {flag}: {message}"
    if origin == "file" and file is not None:
        return f"{file}: {dotted}: {message}"
    return f"bad configuration {dotted}: {message}"


def _not_read(kind: Any, name: Any) -> str:
    """A field the ``kind`` policy does not read: which policies do."""
    readers = [c.model_fields["kind"].default for c in POLICIES if name in c.model_fields]
    add = " or ".join(f"--policy {r}" for r in readers)
    return f"the {kind} policy does not read {name}" + (f": add {add}" if add else "")
