"""Anthropic's Messages API, the second wire protocol beside chat completions: the endpoint, the
request body (built from the content blocks `agi.providers.anthropic_convert` makes of an
OpenAI-format conversation; cache breakpoints, max_tokens, thinking), the stream decoder and the
error map, gathered in `AnthropicMessages`, the protocol object (`agi.providers.wire.Wire`) an
exchange speaks for the `anthropic` provider. HTTP, retries, deadlines, the idle limit, cancel
and the trace are the exchange's (`agi.providers.transport.Exchange`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from agi.errors import ProviderError
from agi.messages import ReasoningDelta, Reply, TextDelta
from agi.providers.anthropic_convert import THINKING, Memo, to_messages, to_tool, to_tool_choice
from agi.providers.chat import amended, read_events
from agi.providers.endpoint import headers, root
from agi.providers.errors import RETRYABLE_STATUS, error_message, error_status, provider_error
from agi.providers.stream import CallBuilder, StreamAssembler, as_text
from agi.providers.usage import messages_usage

if TYPE_CHECKING:
    from agi.options.config import ModelConfig
    from agi.providers.wire import Event, Received

API_VERSION = "2023-06-01"
CACHE = {"type": "ephemeral"}
PREFIX_BYTES = 4096  # a prefix this long is about 1,024 tokens: the least Anthropic caches
ANSWER = "answer"  # the tool --schema forces, so the JSON comes as the tool's input
ANSWER_DESCRIPTION = "Give the answer: its input is the JSON asked for."

# a subagent file's `model: sonnet|opus|haiku` under a parent that speaks Anthropic
CLAUDE_MODELS = {"opus": "claude-opus-5", "sonnet": "claude-sonnet-5", "haiku": "claude-haiku-4-5"}

# max_tokens is required; without `max_tokens` in the config, the first prefix that matches
MAX_TOKENS = (
    ("claude-3-5-", 8192),
    ("claude-3-7-", 32000),
    ("claude-3-", 4096),
    ("claude-2", 4096),
    ("claude-instant", 4096),
    ("claude-", 32000),
)
OTHER_MAX_TOKENS = 8192  # a non-Claude model behind a Messages-compatible endpoint

# chat-completions parameters with no Messages API meaning (or one converted below)
OPENAI_ONLY = {
    "stream_options", "response_format", "n", "logprobs", "top_logprobs", "seed",
    "frequency_penalty", "presence_penalty", "logit_bias", "parallel_tool_calls",
    "max_completion_tokens", "max_tokens", "reasoning_effort", "user", "stop", "tool_choice",
}  # fmt: skip


def claude_model(alias: str | None) -> str | None:
    """The current Claude model of a family (`sonnet`, `opus`, `haiku`); None for anything else."""
    return CLAUDE_MODELS.get((alias or "").strip().lower())


def default_max_tokens(model: str) -> int:
    name = model[model.find("claude-") :] if "claude-" in model else ""
    return next((n for prefix, n in MAX_TOKENS if name.startswith(prefix)), OTHER_MAX_TOKENS)


def messages_url(base_url: str) -> str:
    """`{base}/v1/messages`; a base that already ends in /v1 (or names the endpoint) is kept."""
    base = base_url.rstrip("/")
    return base if base.endswith("/v1/messages") else root(base) + "/v1/messages"


def add_cache_breakpoints(body: dict[str, Any]) -> None:
    """cache_control on the last tool, the last system block and the newest message's last
    block (3 of the 4 allowed): the prefix runs share (tools, then system: a batch's) first,
    and each step of a tool loop reads what came before from the cache. Runs sharing that
    prefix write it once (agi.providers.pacing.Warmup, docs: volume)."""
    if body.get("tools"):
        body["tools"][-1] = {**body["tools"][-1], "cache_control": CACHE}
    if body.get("system"):
        body["system"][-1] = {**body["system"][-1], "cache_control": CACHE}
    if body.get("messages"):
        content = body["messages"][-1]["content"]
        for pos in range(len(content) - 1, -1, -1):
            if content[pos].get("type") not in THINKING:  # thinking cannot carry it
                content[pos] = {**content[pos], "cache_control": CACHE}
                break


def thinking_on(params: dict[str, Any]) -> bool:
    thinking = params.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") not in (None, "disabled")


def drop_unmatched_thinking(body: dict[str, Any]) -> None:
    """With thinking on, the assistant turn a tool loop continues must begin with its thinking.
    A turn another provider made has none to give back: that request goes without thinking."""
    turns = body["messages"]
    if not thinking_on(body) or len(turns) < 2 or turns[-2]["role"] != "assistant":
        return
    blocks = turns[-2]["content"]
    if any(b.get("type") == "tool_use" for b in blocks) and blocks[0].get("type") not in THINKING:
        del body["thinking"]


def request_body(
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    params: dict[str, Any] | None = None,
    max_tokens: int | None = None,
    memo: Memo | None = None,
) -> dict[str, Any]:
    """The streaming Messages API request for an OpenAI-format conversation.

    `params` (the config's params and the call's extras) pass through, except chat-completions
    ones: `stop` becomes `stop_sequences`, tool_choice is translated, max_tokens is always set.
    `memo`: see to_messages.
    """
    params = dict(params or {})
    system, turns = to_messages(messages, memo)
    chosen = max_tokens or params.get("max_tokens") or params.get("max_completion_tokens")
    if not chosen:
        chosen = default_max_tokens(model)
        budget = (params.get("thinking") or {}).get("budget_tokens") if thinking_on(params) else 0
        if isinstance(budget, int) and budget >= chosen:
            chosen = budget + OTHER_MAX_TOKENS  # max_tokens must leave room past the thinking
    body: dict[str, Any] = {"model": model, "max_tokens": int(chosen), "messages": turns}
    if system:
        body["system"] = system
    if tools:
        body["tools"] = [to_tool(t) for t in tools]
        choice = to_tool_choice(params.get("tool_choice"), params.get("parallel_tool_calls"))
        if choice:
            body["tool_choice"] = choice
    stop = params.get("stop")
    if stop:
        given = params.get("stop_sequences") or []
        body["stop_sequences"] = [*given, *([stop] if isinstance(stop, str) else stop)]
    body.update({k: v for k, v in params.items() if k not in OPENAI_ONLY and k not in body})
    body["stream"] = True
    drop_unmatched_thinking(body)
    add_cache_breakpoints(body)
    return body


def answer_tool(response_format: Any, thinking: bool) -> dict[str, Any] | None:
    """--schema's structured output as a forced tool whose input is the JSON (an object schema
    only; forcing a tool is not allowed with thinking): None leaves it to the instructions."""
    if thinking or not isinstance(response_format, dict):
        return None
    schema = (response_format.get("json_schema") or {}).get("schema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return None
    fn = {"name": ANSWER, "description": ANSWER_DESCRIPTION, "parameters": schema}
    return {"type": "function", "function": fn}


# ---- the response side: the error map and the stream decoder ----

FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
# the Messages API's error types and the HTTP status each stands for (an `error` event has none)
ERRORS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def anthropic_error(body: Any, status: int | None = None, where: str = "") -> ProviderError:
    """A Messages API error (`{"type": "error", "error": {"type", "message"}}`), named by its
    type; an `error` event mid-stream gets the status its type stands for, so an overload
    before any content is retried like a 529."""
    err = body.get("error") if isinstance(body, dict) else None
    kind = err.get("type") if isinstance(err, dict) else None
    message = error_message(body)
    if isinstance(kind, str) and kind not in message:
        message = f"{kind}: {message}"
    status = status or (ERRORS.get(kind) if isinstance(kind, str) else None)
    status = status or error_status(err, None)  # a gateway's own shape, with a `code`
    prefix = f"HTTP {status}: " if status and not where else ""
    return ProviderError(prefix + message + where, status, retryable=status in RETRYABLE_STATUS)


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class MessagesAssembler(StreamAssembler):
    """Messages API events: message_start, content_block_start|delta|stop, message_delta,
    message_stop, ping, error; or a whole non-streamed `message`."""

    PROTOCOL = "a Messages API stream (no message_start, content_block_delta, ... event)"
    KINDS = {"message_start", "content_block_start", "content_block_delta", "message_delta"}
    KINDS |= {"content_block_stop", "message_stop", "message", "ping", "error"}

    def __init__(self) -> None:
        super().__init__()
        self.usage_fields: dict[str, Any] = {}  # merged across events
        self.blocks: dict[Any, dict[str, Any]] = {}  # the open thinking blocks by index
        self.seeded: set[Any] = set()  # tool_use blocks whose input came whole at their start
        self.text_gap = False  # a new text block after earlier text: a paragraph break

    def recognised(self, chunk: dict[str, Any]) -> bool:
        return chunk.get("type") in self.KINDS

    def decode(self, chunk: dict[str, Any], event: str) -> list[TextDelta | ReasoningDelta]:
        out = self._event(chunk)
        err = chunk.get("error")
        if err or event == "error":
            raise provider_error(error_status(err, None), chunk)
        return out

    def _event(self, chunk: dict[str, Any]) -> list[TextDelta | ReasoningDelta]:
        kind, index = chunk.get("type"), chunk.get("index")
        if index is not None and (not isinstance(index, int) or isinstance(index, bool)):
            raise ProviderError(f"malformed stream event: 'index' is {json.dumps(index)[:50]}")
        out: list[TextDelta | ReasoningDelta] = []
        if kind == "message_start":
            self._usage(_table(chunk.get("message")).get("usage"), reset=True)
        elif kind == "content_block_start":
            out = self._block_start(index, _table(chunk.get("content_block")))
        elif kind == "content_block_delta":
            out = self._block_delta(index, _table(chunk.get("delta")))
        elif kind == "content_block_stop":
            self.blocks.pop(index, None)
        elif kind in ("message_delta", "message"):
            if kind == "message":  # a server that ignored stream=true: the whole message at once
                self._usage(chunk.get("usage"), reset=True)
                content = chunk.get("content")
                for pos, block in enumerate(content if isinstance(content, list) else []):
                    out += self._block_start(("m", pos), _table(block))
            reason = _table(chunk.get("delta") if kind == "message_delta" else chunk).get(
                "stop_reason"
            )
            if reason:
                reason = as_text(reason)
                self.finish_reason = FINISH.get(reason, reason)
            if kind == "message_delta":
                self._usage(chunk.get("usage"))
        elif kind == "error":
            raise anthropic_error(chunk, where=" (an error event in the stream)")
        return out

    def _block_start(self, index: Any, block: dict[str, Any]) -> list[TextDelta | ReasoningDelta]:
        kind = block.get("type")
        if kind == "tool_use":  # server tools (server_tool_use, web search, ...) are not ours
            call = CallBuilder(block.get("id") or "", block.get("name") or "")
            self.calls.append(call)
            self.by_index[("a", index)] = call
            if isinstance(block.get("input"), dict) and block["input"]:
                call.arguments = json.dumps(block["input"], ensure_ascii=False)
                self.seeded.add(index)  # deltas, if any follow, carry the input again
        elif kind in ("thinking", "redacted_thinking"):
            kept = dict(block)  # sent back unchanged on tool-use turns, as the API requires
            self.thinking_blocks.append(kept)
            self.blocks[index] = kept
            if isinstance(block.get("thinking"), str) and block["thinking"]:
                return [self._add_reasoning(block["thinking"])]
        elif kind == "text":
            self.text_gap = bool(self.text)
            if isinstance(block.get("text"), str):
                return self._text(block["text"])
        return []

    def _block_delta(self, index: Any, delta: dict[str, Any]) -> list[TextDelta | ReasoningDelta]:
        kind = delta.get("type")
        if kind == "text_delta":
            return self._text(str(delta.get("text") or ""))
        if kind in ("thinking_delta", "signature_delta"):
            field = kind.partition("_")[0]  # "thinking" or "signature"
            piece = str(delta.get(field) or "")
            block = self.blocks.get(index)
            if block is not None:
                block[field] = str(block.get(field) or "") + piece
            if kind == "thinking_delta" and piece:
                return [self._add_reasoning(piece)]
        elif kind == "input_json_delta":
            call = self.by_index.get(("a", index))
            piece = str(delta.get("partial_json") or "")
            if call is not None and piece:
                if index in self.seeded:
                    self.seeded.discard(index)
                    call.arguments = ""
                call.arguments += piece
        return []

    def _text(self, text: str) -> list[TextDelta | ReasoningDelta]:
        if text and self.text_gap:
            self.text_gap, text = False, "\n\n" + text
        return self._emit(text, "")

    def _usage(self, fields: Any, reset: bool = False) -> None:
        """message_start reports the input and message_delta the counts so far (cumulative):
        later fields replace earlier ones."""
        if reset:
            self.usage_fields = {}
        if isinstance(fields, dict):
            self.usage_fields.update({k: v for k, v in fields.items() if v is not None})
        if self.usage_fields:
            self.usage = messages_usage(self.usage_fields)


class AnthropicMessages:
    """The Messages API as an exchange speaks it (agi.providers.wire.Wire): `POST
    {base}/v1/messages` with x-api-key, streamed as server-sent events; a `response_format`
    (--schema) becomes a forced `answer` tool whose input is returned as the reply's text."""

    conversation = "messages"

    def __init__(self, config: ModelConfig):
        self.config = config
        self.memo: Memo = {}  # each message converted once, from request to request

    @property
    def url(self) -> str:
        return messages_url(self.config.base_url)

    def headers(self) -> dict[str, str]:
        auth = {"x-api-key": self.config.api_key} if self.config.api_key else {}
        return headers(auth, **{"anthropic-version": API_VERSION})

    def body(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **extra: Any
    ) -> dict[str, Any]:
        forced = answer_tool(
            extra.pop("response_format", None), thinking_on({**self.config.params, **extra})
        )
        if forced is not None:
            extra["tool_choice"] = {"type": "tool", "name": ANSWER}
            tools = [*tools, forced]
        params = {**self.config.params, **extra}
        limit = self.config.max_tokens
        return request_body(self.config.model, messages, tools, params, limit, self.memo)

    def shared_prefix(self, body: dict[str, Any]) -> str | None:
        """The key of the request's tools and system prompt when they are long enough to be
        cached (Anthropic caches from about 1,024 tokens), for agi.providers.pacing.Warmup."""
        system = body.get("system")
        if not system:
            return None
        text = json.dumps([body.get("tools") or [], system], sort_keys=True, default=str)
        if len(text) < PREFIX_BYTES:
            return None
        import hashlib

        return self.config.label + " " + hashlib.sha256(text.encode()).hexdigest()[:16]

    def decoder(self) -> StreamAssembler:
        return MessagesAssembler()

    def read(self, response: Received, decoder: StreamAssembler) -> Iterator[Event]:
        return read_events(response, decoder)

    def error(self, status: int, body: Any) -> ProviderError:
        return anthropic_error(body, status)

    def amend(self, body: dict[str, Any], error: ProviderError) -> dict[str, Any] | None:
        return amended(body, error)  # chat's rules: a server's own refusals, whatever the API

    def reply(self, reply: Reply, body: dict[str, Any]) -> Reply:
        forced = any(
            t.get("name") == ANSWER and t.get("description") == ANSWER_DESCRIPTION
            for t in body.get("tools") or []
        )
        answer = next((c for c in reply.tool_calls if c.name == ANSWER), None) if forced else None
        if answer is not None:
            reply.text, reply.tool_calls, reply.finish_reason = answer.arguments, [], "stop"
        return reply
