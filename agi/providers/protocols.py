"""Which wire protocol a provider speaks, and the transport that speaks it: one exchange
(`agi.providers.transport.Exchange`, the HTTP part) with that protocol's object (agi.providers.
wire.Wire), built from the model's config alone: a session is not needed (its `trace` is one
callable among the options), so Neovim's suggestions and any other front end build transports
the same way as a run does. A new protocol is one more object here, the exchange unchanged."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agi.providers.chat import ChatCompletions, url
from agi.providers.endpoint import root
from agi.providers.transport import Exchange

if TYPE_CHECKING:
    from agi.options.config import ModelConfig
    from agi.providers.cost import Meter
    from agi.providers.transport import Transport
    from agi.providers.wire import Pool, Wire


# a model the `openai` provider speaks to over the Responses API: the gpt-5 family, the o-series
RESPONSES_MODELS = re.compile(r"^(gpt-5|o\d)")


def wants_responses(model: str) -> bool:
    """Whether the `openai` provider's model takes tools with reasoning only over the
    Responses API: the gpt-5 family and the o-series (`o1`, `o3`, `o4-mini`, …)."""
    return bool(RESPONSES_MODELS.match(model.lower().rpartition("/")[2]))


def protocol(provider: str) -> str:
    """`messages` (Anthropic's Messages API), `ollama` (its native /api/chat, num_ctx sized to
    each request) or `chat` (OpenAI-compatible chat completions, every other provider)."""
    return {"anthropic": "messages", "ollama": "ollama"}.get(provider, "chat")


def protocol_of(model: ModelConfig) -> str:
    """The protocol a model is spoken to in: `api = "responses"|"chat"` where set (docs:
    responses), else OpenAI's Responses API for the `openai` provider's gpt-5 family and
    o-series, else the provider's (`protocol`)."""
    api = getattr(model, "api", None)
    if api in ("responses", "chat"):
        return api
    if model.provider == "openai" and wants_responses(model.model):
        return "responses"
    return protocol(model.provider)


NAMES = {
    "messages": "Anthropic Messages API",
    "ollama": "Ollama native chat API",
    "chat": "OpenAI-compatible chat completions",
    "responses": "OpenAI Responses API",
}


def describe(model: ModelConfig) -> tuple[str, str]:
    """The protocol's name and the URL each request goes to (for `:checkhealth agi`)."""
    kind = protocol_of(model)
    if kind == "responses":
        # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
        from agi.providers import responses

        return NAMES[kind], responses.url(model)
    if kind == "messages":
        # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
        from agi.providers.anthropic import messages_url

        return NAMES[kind], messages_url(model.base_url)
    if kind == "ollama":
        return NAMES[kind], root(model.base_url) + "/api/chat"
    return NAMES[kind], url(model)


def transport_for(
    model: ModelConfig,
    trace: Callable[[dict[str, Any]], None] | None = None,
    *,
    deadline: float | None = None,
    timeout: float | None = None,
    meter: Meter | None = None,
    home: Path | None = None,
    windows: dict[str, Any] | None = None,
    pool: Pool | None = None,
) -> Transport:
    """A transport for `model`'s protocol. `trace` receives every request and response record
    (a session's trace, or nothing); `home` and `windows` (the config's context windows) let
    Ollama size its context; `pool` lends the HTTP client and keeps one backoff per endpoint
    for the runs that share it. A provider that needs a key and has none: ConfigError (exit 2)."""
    return Exchange(
        model,
        trace,
        deadline,
        timeout,
        meter,
        pool,
        protocol=wire_for(model, home=home, windows=windows),
    )


def wire_for(
    model: ModelConfig, home: Path | None = None, windows: dict[str, Any] | None = None
) -> Wire:
    """The protocol object for `model` (see `protocol_of`)."""
    kind = protocol_of(model)
    if kind == "responses":
        # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
        from agi.providers.responses import Responses

        return Responses(model)
    if kind == "messages":
        # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
        from agi.providers.anthropic import AnthropicMessages

        return AnthropicMessages(model)
    if kind == "ollama":
        # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
        from agi.providers.ollama import OllamaChat

        return OllamaChat(model, home=home, windows=windows)
    return ChatCompletions(model)
