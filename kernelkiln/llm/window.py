"""The model's context window as its endpoint reports it: probed once per run.

Each server says it at its own route, asked in this order (the first that answers wins):

- vLLM and SGLang: ``GET {base_url}/models``, ``data[i].max_model_len`` for the model's id;
- llama.cpp's ``llama-server``: ``GET {root}/props``, ``default_generation_settings.n_ctx`` (the
  window of one slot, which is what a request gets), else a top-level ``n_ctx``;
- LM Studio: ``GET {root}/api/v0/models``, the model's ``loaded_context_length`` (the window it
  was loaded with), else its ``max_context_length``;
- TGI: ``GET {root}/info``, ``max_total_tokens`` (prompt and reply together);
- Ollama: ``POST {root}/api/show`` returns ``parameters`` with ``num_ctx`` when the model file
  sets the window the server runs it with (that one wins: Ollama cuts prompts at ``num_ctx``),
  else ``model_info`` with a key ending in ``.context_length``.

SGLang's ``/get_model_info`` does not report the window, and llama-cpp-python's server reports it
nowhere: there the first refusal for length teaches it (``fit``). Any failure (no such route, a
refused connection, a timeout, an odd body) is None: the caller keeps its default and the run
goes on; a connection that fails ends the probe (no other route of that server will answer).
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from http.client import HTTPException
from typing import Any
from urllib.parse import urlsplit

from kernelkiln.llm.client import LLMError, resolve_api_key
from kernelkiln.llm.config import LLMConfig

PROBE_TIMEOUT_S = 2.0
_MAX_BODY = 4 << 20
_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Window:
    """A context window the endpoint reported, and where it said so."""

    tokens: int
    source: str


class _Gone(Exception):
    """The endpoint did not answer at all: no other route will."""


Ask = Callable[[str, dict[str, Any] | None], Any]


def probe_context_window(config: LLMConfig, timeout_s: float = PROBE_TIMEOUT_S) -> Window | None:
    """The window ``config.model`` has at ``config.base_url``, if the endpoint says; None otherwise.

    Only OpenAI-compatible endpoints with a base URL are asked (hosted APIs do not report it).
    """
    if config.provider != "openai" or not config.base_url or urlsplit(config.base_url).scheme not in ("http", "https"):
        return None
    base = config.base_url.rstrip("/")
    root = base.removesuffix("/v1")
    try:
        headers = {"Authorization": f"Bearer {resolve_api_key(config)}"}
    except LLMError:
        headers = {}

    def ask(url: str, body: dict[str, Any] | None) -> Any:
        return _json(url, body, headers, timeout_s)

    probes = (_vllm, _llama_server, _lm_studio, _tgi, _ollama)
    try:
        return next((w for probe in probes if (w := probe(ask, base, root, config.model)) is not None), None)
    except _Gone:
        return None


def _vllm(ask: Ask, base: str, root: str, model: str) -> Window | None:
    for entry in _entries(ask(f"{base}/models", None)):
        if entry.get("id") == model and _positive(entry.get("max_model_len")):
            return Window(int(entry["max_model_len"]), f"max_model_len at {base}/models")
    return None


def _llama_server(ask: Ask, base: str, root: str, model: str) -> Window | None:
    props = ask(f"{root}/props", None)
    if not isinstance(props, dict):
        return None
    slot = props.get("default_generation_settings")
    if isinstance(slot, dict) and _positive(slot.get("n_ctx")):
        return Window(int(slot["n_ctx"]), f"default_generation_settings.n_ctx at {root}/props")
    if _positive(props.get("n_ctx")):
        return Window(int(props["n_ctx"]), f"n_ctx at {root}/props")
    return None


def _lm_studio(ask: Ask, base: str, root: str, model: str) -> Window | None:
    for entry in _entries(ask(f"{root}/api/v0/models", None)):
        if entry.get("id") != model:
            continue
        for key in ("loaded_context_length", "max_context_length"):
            if _positive(entry.get(key)):
                return Window(int(entry[key]), f"{key} at {root}/api/v0/models")
    return None


def _tgi(ask: Ask, base: str, root: str, model: str) -> Window | None:
    info = ask(f"{root}/info", None)
    if isinstance(info, dict) and _positive(info.get("max_total_tokens")):
        return Window(int(info["max_total_tokens"]), f"max_total_tokens at {root}/info")
    return None


def _ollama(ask: Ask, base: str, root: str, model: str) -> Window | None:
    shown = ask(f"{root}/api/show", {"model": model})
    if not isinstance(shown, dict):
        return None
    if isinstance(shown.get("parameters"), str) and (match := _NUM_CTX.search(shown["parameters"])):
        return Window(int(match.group(1)), f"num_ctx at {root}/api/show")
    info = shown.get("model_info")
    for key, value in info.items() if isinstance(info, dict) else ():
        if key.endswith(".context_length") and _positive(value):
            return Window(int(value), f"{key} at {root}/api/show")
    return None


def _entries(listing: Any) -> list[dict[str, Any]]:
    data = listing.get("data") if isinstance(listing, dict) else None
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _json(url: str, body: dict[str, Any] | None, headers: dict[str, str], timeout_s: float) -> Any:
    """The JSON answer to a GET (or a POST of ``body``); None when it is not one; _Gone when nothing answered."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url,
        data=data,
        headers={**headers, "Content-Type": "application/json"},
        method="GET" if data is None else "POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return json.loads(response.read(_MAX_BODY))
    except urllib.error.HTTPError:  # the server answered, with an error status: this route is not its
        return None
    except (ValueError, HTTPException):
        return None
    except OSError:  # refused, unreachable, timed out
        raise _Gone from None
