"""Before a run's first evaluation: the endpoint answers, takes the key, and serves the model by that name.

One request through the provider's SDK, no retries. An OpenAI-compatible endpoint lists its
models at ``GET /models``; the configured name must be one of them (Ollama's ``name`` also
matches its ``name:latest``). Anthropic's API resolves a name or an alias at ``GET
/v1/models/{name}``; on a 404 its list (``GET /v1/models``) names the ones it has. An endpoint
that answers the listing with another error (404 or 405: it lists nothing; 5xx: still loading)
is not held to a name, and the chat calls say what is wrong. Refused or unreachable: an
LLMError; 401 or 403: an LLMError naming the key's variable; a name it does not list: an
LLMError naming the ones it has.
"""

from __future__ import annotations

from typing import Any

from kernelkiln.llm.client import LLMError, resolve_api_key
from kernelkiln.llm.config import LLMConfig
from kernelkiln.llm.retry import classify_sdk_error

PREFLIGHT_TIMEOUT_S = 30.0
SHOWN_MODELS = 10


def check_endpoint(config: LLMConfig, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> str | None:
    """LLMError when the endpoint cannot serve ``config.model`` (see the module's docstring); else None, or a
    line to say when the check could not be made (the endpoint took longer than ``timeout_s`` to list)."""
    key = resolve_api_key(config)
    timeout_s = min(timeout_s, config.timeout_s)
    sdk: Any
    if config.provider == "anthropic":
        import anthropic as sdk
    else:
        import openai as sdk
    factory = sdk.Anthropic if config.provider == "anthropic" else sdk.OpenAI
    client = factory(base_url=config.base_url, api_key=key, timeout=timeout_s, max_retries=0)
    endpoint = str(client.base_url).rstrip("/")
    try:
        if config.provider == "anthropic" and _resolves(client, sdk, config.model):
            return None
        names = _listed(client)
    except Exception as exc:
        if isinstance(exc, sdk.APITimeoutError):
            return f"kiln: llm endpoint {endpoint} did not list its models in {timeout_s:g} s: the name is unchecked"
        failure = classify_sdk_error(exc, sdk, timeout_s, (key,))
        if failure is None:
            raise
        if isinstance(exc, sdk.APIConnectionError):
            raise LLMError(f"llm endpoint {endpoint} does not answer: {failure.what}") from None
        if failure.status in (401, 403):
            raise LLMError(f"llm endpoint {endpoint} refused the key in ${config.key_env}: {failure.what}") from None
        return None  # it answered, and lists no models: the first chat call is the check
    if not names or config.model in names or f"{config.model}:latest" in names:
        return None
    more = len(names) - SHOWN_MODELS
    shown = ", ".join(names[:SHOWN_MODELS]) + (f" and {more} more" if more > 0 else "")
    raise LLMError(
        f"llm endpoint {endpoint} serves no model named {config.model!r}; it has {shown}: give one with --model"
    )


def _resolves(client: Any, sdk: Any, model: str) -> bool:
    """Whether Anthropic's API knows ``model`` (a name or an alias); False on a 404."""
    try:
        client.models.retrieve(model)
    except sdk.NotFoundError:
        return False
    return True


def _listed(client: Any) -> list[str]:
    """The model ids the endpoint lists (its first page); empty when the body has no list of them."""
    entries = getattr(client.models.list(), "data", None)
    return [str(i) for m in entries if (i := getattr(m, "id", None))] if isinstance(entries, list) else []
