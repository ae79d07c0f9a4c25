"""The model's context window as its endpoint reports it (vLLM, Ollama): probed once per run.

vLLM answers ``GET {base_url}/models`` with ``data[i].max_model_len``. Ollama's
OpenAI-compatible ``/v1/models`` leaves it out, but its native ``POST {root}/api/show``
returns ``model_info`` with a key ending in ``.context_length``, and ``parameters`` with
``num_ctx`` when the model file sets the window the server actually runs it with (that
one wins: Ollama cuts prompts at ``num_ctx``, not at what the model was trained for).
Any failure (no such route, a refused connection, a timeout, an odd body) is None: the
caller keeps its default, and the run goes on.
"""

from __future__ import annotations

import json
import re
import urllib.request
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


def probe_context_window(config: LLMConfig, timeout_s: float = PROBE_TIMEOUT_S) -> Window | None:
    """The window ``config.model`` has at ``config.base_url``, if the endpoint says; None otherwise.

    Only OpenAI-compatible endpoints with a base URL are asked (hosted APIs do not report it).
    """
    if config.provider != "openai" or not config.base_url or urlsplit(config.base_url).scheme not in ("http", "https"):
        return None
    base = config.base_url.rstrip("/")
    try:
        headers = {"Authorization": f"Bearer {resolve_api_key(config)}"}
    except LLMError:
        headers = {}
    models = _json(f"{base}/models", None, headers, timeout_s)
    for entry in models.get("data", []) if isinstance(models, dict) else []:
        if isinstance(entry, dict) and entry.get("id") == config.model and _positive(entry.get("max_model_len")):
            return Window(int(entry["max_model_len"]), f"max_model_len at {base}/models")
    root = base.removesuffix("/v1")
    shown = _json(f"{root}/api/show", {"model": config.model}, headers, timeout_s)
    if not isinstance(shown, dict):
        return None
    if isinstance(shown.get("parameters"), str) and (match := _NUM_CTX.search(shown["parameters"])):
        return Window(int(match.group(1)), f"num_ctx at {root}/api/show")
    info = shown.get("model_info")
    for key, value in info.items() if isinstance(info, dict) else ():
        if key.endswith(".context_length") and _positive(value):
            return Window(int(value), f"{key} at {root}/api/show")
    return None


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _json(url: str, body: dict[str, Any] | None, headers: dict[str, str], timeout_s: float) -> Any:
    """The JSON answer to a GET (or a POST of ``body``), or None on any failure."""
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
    except (OSError, ValueError, HTTPException):  # URLError and timeouts are OSErrors
        return None
