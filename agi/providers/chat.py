"""OpenAI-compatible chat completions, the wire protocol most providers speak: the endpoint, the
request body, the stream decoder, the error map and the requests resent at once after a refusal,
gathered in `ChatCompletions`, the protocol object (`agi.providers.wire.Wire`) an exchange
(`agi.providers.transport.Exchange`) speaks when given no other. `read_events` reads the server-sent
events the Messages API and fill-in-the-middle completions stream too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from agi.errors import ProviderError
from agi.messages import ReasoningDelta, Reply, TextDelta, wire_message
from agi.providers.endpoint import bearer, headers
from agi.providers.errors import error_status, provider_error
from agi.providers.stream import StreamAssembler, as_text, iter_sse, parse_json
from agi.providers.usage import parse_usage

if TYPE_CHECKING:
    from agi.options.config import ModelConfig
    from agi.providers.wire import Event, Received

OPTIONAL = ("stream_options", "stop", "prompt_cache_key")  # some servers reject; dropped then
LIMITS = ("max_tokens", "max_completion_tokens")  # the reply's length, by either name
TAKES_TIER = ("openai",)  # providers that take `service_tier` (OpenAI's processing tiers)


def url(config: ModelConfig) -> str:
    return config.base_url.rstrip("/") + "/chat/completions"


def request_headers(config: ModelConfig) -> dict[str, str]:
    return headers(bearer(config.api_key), **{"X-Title": "agi"})


def prompt_cache_key(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """OpenAI's cache routing key for requests sharing a prefix: a short hash of the system
    prompt and the tool specs, the same for every job of a batch and every turn (docs: volume)."""
    import hashlib

    system = [m.get("content") for m in messages if m.get("role") in ("system", "developer")]
    text = json.dumps([system[:1], tools], sort_keys=True, ensure_ascii=False, default=str)
    return "agi-" + hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]


def sends_cache_key(config: ModelConfig) -> bool:
    return config.provider in TAKES_TIER and getattr(config, "cache_key", True)


def request_body(
    config: ModelConfig, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **extra: Any
) -> dict[str, Any]:
    """The streaming request: the messages as the wire carries them, the tools, the config's
    params and the call's extras (which win), and the config's `max_tokens` unless a limit is
    already given."""
    body: dict[str, Any] = {
        "model": config.model,
        "messages": [wire_message(m) for m in messages],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if tools:
        body["tools"] = tools
    if sends_cache_key(config):
        body["prompt_cache_key"] = prompt_cache_key(messages, tools)
    if config.service_tier and config.provider in TAKES_TIER:  # docs: responses
        body["service_tier"] = config.service_tier
    body.update(config.params)
    body.update(extra)
    if config.max_tokens and not any(k in body for k in LIMITS):
        body["max_tokens"] = config.max_tokens
    return body


def amended(body: dict[str, Any], error: ProviderError) -> dict[str, Any] | None:
    """The request to send at once instead of one that failed this way, or None."""
    dropped = next((k for k in OPTIONAL if k in body and k in str(error)), None)
    if error.status in (400, 422) and dropped:  # a server that rejects an optional parameter
        return {k: v for k, v in body.items() if k != dropped}
    if error.status == 400 and "max_tokens" in body and "max_completion_tokens" in str(error):
        # OpenAI's reasoning models take the limit only as max_completion_tokens
        limit = body["max_tokens"]
        return {k: v for k, v in body.items() if k != "max_tokens"} | {
            "max_completion_tokens": limit
        }
    if error.empty and body.get("stream"):
        # llama-cpp-python fails a streamed request (one too long, say) after its 200, with an
        # empty stream; asked without streaming, it answers with the error that says why
        return {k: v for k, v in body.items() if k != "stream_options"} | {"stream": False}
    return None


class ChatCompletions:
    """`POST {base}/chat/completions` with a bearer key, streamed as server-sent events."""

    conversation = "messages"

    def __init__(self, config: ModelConfig):
        self.config = config

    @property
    def url(self) -> str:
        return url(self.config)

    def headers(self) -> dict[str, str]:
        return request_headers(self.config)

    def body(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **extra: Any
    ) -> dict[str, Any]:
        return request_body(self.config, messages, tools, **extra)

    def decoder(self) -> StreamAssembler:
        return ChatAssembler()

    def read(self, response: Received, decoder: StreamAssembler) -> Iterator[Event]:
        return read_events(response, decoder)

    def error(self, status: int, body: Any) -> ProviderError:
        return provider_error(status, body)

    def amend(self, body: dict[str, Any], error: ProviderError) -> dict[str, Any] | None:
        return amended(body, error)

    def reply(self, reply: Reply, body: dict[str, Any]) -> Reply:
        return reply


def read_events(response: Received, decoder: StreamAssembler) -> Iterator[Event]:
    """Server-sent events up to `[DONE]` (or the end of a stream that gave its finish reason),
    or one whole completion from a server that ignores stream=true."""
    if "json" in response.content_type:
        yield from decoder.feed(parse_json(response.text()))
        return
    for event, data in iter_sse(response.lines()):
        if data.strip() == "[DONE]":
            return
        yield from decoder.feed(parse_json(data), event)
    if decoder.finish_reason is None:  # [DONE] may be missing, but not both
        decoder.check_protocol()
        raise ProviderError(
            "the stream ended early (the connection closed before a finish_reason or [DONE])",
            retryable=True,
            empty=not decoder.chunks,
        )


class ChatAssembler(StreamAssembler):
    """Chat completion chunks (`choices[].delta`), or one whole completion (`choices[].message`)
    from a server that ignored stream=true; an `error` in a chunk ends the stream."""

    PROTOCOL = "a chat completions stream (no chunk has `choices`)"

    def recognised(self, chunk: dict[str, Any]) -> bool:
        return "choices" in chunk or "error" in chunk

    def decode(self, chunk: dict[str, Any], event: str) -> list[TextDelta | ReasoningDelta]:
        out: list[TextDelta | ReasoningDelta] = []
        usage = parse_usage(chunk.get("usage"), chunk.get("timings"))
        if usage:
            self.usage = usage
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):  # no retry and no nudge can make this a reply
            raise ProviderError(f"malformed response: 'choices' is not a list: {str(chunk)[:200]}")
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) not in (0, None):
                continue
            delta = choice.get("delta") or choice.get("message") or {}
            out += self._delta(delta if isinstance(delta, dict) else {})
            if choice.get("finish_reason"):
                self.finish_reason = as_text(choice["finish_reason"])
        err = chunk.get("error")
        if err or event == "error":
            raise provider_error(error_status(err, None), chunk)
        return out

    def _delta(self, delta: dict[str, Any]) -> list[TextDelta | ReasoningDelta]:
        out: list[TextDelta | ReasoningDelta] = []
        for field in ("reasoning_content", "reasoning"):
            value = delta.get(field)
            if isinstance(value, str) and value:
                self.reasoning_field = self.reasoning_field or field
                out.append(self._add_reasoning(value))
        content = delta.get("content")
        if isinstance(content, str) and content:
            out += self._emit(*self.think.feed(content))
        calls = delta.get("tool_calls")
        for pos, tc in enumerate(calls if isinstance(calls, list) else []):  # a list, or nothing
            if isinstance(tc, dict):
                self._tool_delta(pos, tc)
        return out
