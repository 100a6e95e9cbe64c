"""Ollama's native chat API (`POST /api/chat`), with the context sized to each request.

Ollama runs a model with a context of `num_ctx` tokens (4096 by default below 24 GiB of VRAM)
and cuts a longer prompt silently, dropping the oldest messages; its OpenAI-compatible endpoint
cannot change `num_ctx` (Ollama's own docs say so). An agent's first request is already ~1,500
tokens (system prompt and tool specs), so a few tool results fill 4096. The native endpoint
takes `options.num_ctx` and `truncate: false` (an error instead of a silent cut, which the
compactor then handles), so the `ollama` provider speaks it: `num_ctx` grows in powers of two
as the conversation does (each change reloads the model, so it moves seldom, never shrinks in a
run, and starts from the size already loaded), capped by the model's window as compaction
sees it (`agi.context.windows.window_for`: the config, the built-in table, a Modelfile's
`num_ctx`, else the model's maximum from `POST /api/show`). The config's `max_tokens` is sent as
`options.num_predict`. This module holds the protocol whole: endpoint, body, decoder, errors,
in `OllamaChat`, the protocol object an exchange (`agi.providers.transport.Exchange`) speaks.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from agi.context.estimate import estimate
from agi.context.windows import window_for
from agi.errors import ProviderError
from agi.messages import Reply, wire_message
from agi.providers import chat
from agi.providers.endpoint import root
from agi.providers.errors import provider_error
from agi.providers.stream import StreamAssembler, parse_json
from agi.providers.usage import parse_usage

if TYPE_CHECKING:
    from pathlib import Path

    from agi.options.config import ModelConfig
    from agi.providers.wire import Event, Received

DEFAULT_CONTEXT = 4096  # Ollama's default num_ctx below 24 GiB of VRAM (docs/context-length)
SMALLEST_STEP = 8192
MARGIN = 1.25  # the byte-count estimate may undercount code and JSON by this much
OUTPUT_RESERVE = 2048  # tokens left for the reply when no max_tokens is set
# Modelfile parameters that go into `options` (docs/modelfile: valid parameters)
OPTIONS = {
    "num_ctx", "num_predict", "temperature", "top_k", "top_p", "min_p", "seed", "stop",
    "repeat_penalty", "repeat_last_n", "presence_penalty", "frequency_penalty", "num_keep",
    "typical_p", "mirostat", "mirostat_eta", "mirostat_tau", "num_gpu", "num_thread", "num_batch",
}  # fmt: skip
TOP_LEVEL = {"think", "keep_alive", "format", "truncate", "shift", "logprobs", "top_logprobs"}


def ollama_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI-format messages as /api/chat takes them: string content with `images`, tool call
    arguments as objects, `thinking` for reasoning, `tool_name` on tool results."""
    names: dict[str, str] = {}
    out = []
    for message in messages:
        m = wire_message(message)
        sent: dict[str, Any] = {"role": m.get("role", "user")}
        sent["content"], images = _content(m.get("content"))
        if images:
            sent["images"] = images
        for key in ("reasoning_content", "reasoning"):
            if isinstance(m.get(key), str) and m[key]:
                sent["thinking"] = m[key]
        if m.get("tool_calls"):
            sent["tool_calls"] = [_call(c, names) for c in m["tool_calls"]]
        if m.get("role") == "tool":
            call_id = str(m.get("tool_call_id") or "")
            sent["tool_call_id"] = call_id
            if call_id in names:
                sent["tool_name"] = names[call_id]
        out.append(sent)
    return out


def _content(content: Any) -> tuple[str, list[str]]:
    """Text and base64 images of an OpenAI message's content (a string or a list of parts)."""
    if not isinstance(content, list):
        return ("" if content is None else str(content)), []
    texts, images = [], []
    for part in content:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        url = (part.get("image_url") or {}).get("url", "") if part.get("image_url") else ""
        if isinstance(url, str) and url.startswith("data:") and "," in url:
            images.append(url.split(",", 1)[1])
    return "\n".join(texts), images


def _call(call: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    fn = call.get("function") or {}
    names[str(call.get("id") or "")] = str(fn.get("name") or "")
    try:
        arguments = json.loads(fn.get("arguments") or "{}")
    except (ValueError, RecursionError):  # not JSON, or nested too deep
        arguments = {}
    arguments = arguments if isinstance(arguments, dict) else {}
    return {
        "id": call.get("id") or "",
        "function": {"name": fn.get("name"), "arguments": arguments},
    }


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class OllamaAssembler(StreamAssembler):
    """/api/chat's objects, one a line: `message` deltas (content, thinking, whole tool calls),
    then `done: true` with `done_reason` and the counts."""

    PROTOCOL = "an Ollama /api/chat stream (no object has `message` or `done`)"

    def recognised(self, chunk: dict[str, Any]) -> bool:
        return "message" in chunk or "done" in chunk or "error" in chunk

    def decode(self, chunk: dict[str, Any], event: str) -> list[Any]:
        if chunk.get("error"):
            raise provider_error(None, chunk)
        message = _dict(chunk.get("message"))
        out: list[Any] = []
        if isinstance(message.get("thinking"), str) and message["thinking"]:
            self.reasoning_field = "reasoning"
            out.append(self._add_reasoning(message["thinking"]))
        if isinstance(message.get("content"), str) and message["content"]:
            out += self._emit(*self.think.feed(message["content"]))
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:  # each one whole, in one object
            call = _dict(call)
            fn = _dict(call.get("function"))
            args = fn.get("arguments")
            args = args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False)
            function = {"name": fn.get("name") or "", "arguments": args}
            self._tool_delta(len(self.calls), {"id": call.get("id") or "", "function": function})
        if chunk.get("done"):
            reason = chunk.get("done_reason") or "stop"
            self.finish_reason = "tool_calls" if self.calls else reason
            counts = {"prompt_tokens": chunk.get("prompt_eval_count") or 0}
            counts["completion_tokens"] = chunk.get("eval_count") or 0
            self.usage = parse_usage(counts)
        return out


class OllamaChat:
    """The `ollama` provider's protocol object (agi.providers.wire.Wire): /api/chat, its
    answer as newline-delimited JSON, with `num_ctx` sized so the request fits."""

    conversation = "messages"

    def __init__(
        self,
        config: ModelConfig,
        home: Path | None = None,
        windows: dict[str, Any] | None = None,
    ):
        self.config = config
        self.home, self.windows = home, windows
        self.num_ctx: int | None = None  # what this run has asked for; never lowered
        self.loaded: int | None = None  # the context the server has the model loaded with
        self.cap: int | None = None  # the model's window
        self.probed = False

    @property
    def url(self) -> str:
        return root(self.config.base_url) + "/api/chat"

    def headers(self) -> dict[str, str]:
        return chat.request_headers(self.config)

    def body(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **extra: Any
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.config.model, "messages": ollama_messages(messages)}
        body |= {"stream": True, "truncate": False}  # an error, never a silent cut
        if tools:
            body["tools"] = tools
        options: dict[str, Any] = {}
        params = {**self.config.params, **extra}
        options.update(params.pop("options", None) or {})
        if "max_tokens" in params or "max_completion_tokens" in params:
            limit = params.pop("max_tokens", None) or params.pop("max_completion_tokens", None)
            options["num_predict"] = limit
        elif self.config.max_tokens and "num_predict" not in options:
            options["num_predict"] = self.config.max_tokens  # the config's, as for every provider
        response_format = params.pop("response_format", None)
        if isinstance(response_format, dict):
            body["format"] = _format(response_format)
        for key, value in params.items():
            if key in OPTIONS:
                options[key] = value
            elif key in TOP_LEVEL:
                body[key] = value
        if "num_ctx" not in options:
            reply = int(options.get("num_predict") or self.config.max_tokens or OUTPUT_RESERVE)
            size = self.context_for(int(estimate(messages, tools) * MARGIN) + reply)
            options |= {"num_ctx": size} if size else {}
        if options:
            body["options"] = options
        return body

    def context_for(self, needed: int) -> int | None:
        """The num_ctx to send for a request of `needed` tokens (prompt and reply); None: the
        server's default, while nothing larger was needed and no other size is loaded."""
        if not self.probed:
            self.probed = True
            self.loaded = loaded_context(self.config.base_url, self.config.model)
        current = self.num_ctx or self.loaded
        if needed <= (current or DEFAULT_CONTEXT):
            return current  # the size loaded (no reload), or the server's default
        cap = self.window()
        size = SMALLEST_STEP
        while size < needed:
            size *= 2
        size = min(size, cap) if cap else size
        self.num_ctx = max(size, current or 0)
        return self.num_ctx

    def window(self) -> int | None:
        if self.cap is None:
            c = self.config
            self.cap = window_for(
                c.label, c.model, self.windows, self.home, c.base_url, ollama=True
            )
        return self.cap

    def decoder(self) -> StreamAssembler:
        return OllamaAssembler()

    def read(self, response: Received, decoder: StreamAssembler) -> Iterator[Event]:
        """Newline-delimited JSON (or one object when the server does not stream)."""
        for line in response.lines():
            if line.strip():
                yield from decoder.feed(parse_json(line))
        if decoder.finish_reason is None:
            decoder.check_protocol()
            raise ProviderError(
                "the stream ended early (the connection closed before `done`)", retryable=True
            )

    def error(self, status: int, body: Any) -> ProviderError:
        return provider_error(status, body)

    def amend(self, body: dict[str, Any], error: ProviderError) -> dict[str, Any] | None:
        return chat.amended(body, error)

    def reply(self, reply: Reply, body: dict[str, Any]) -> Reply:
        return reply


def _format(response_format: dict[str, Any]) -> Any:
    """An OpenAI `response_format` as /api/chat's `format`: the schema, or "json"."""
    schema = (response_format.get("json_schema") or {}).get("schema") or response_format.get(
        "schema"
    )
    if isinstance(schema, dict):
        return schema
    return "json" if response_format.get("type") != "text" else None


def loaded_context(base_url: str, model: str, timeout: float = 2.0) -> int | None:
    """The context the server has `model` loaded with (`GET /api/ps`), None if not loaded or
    unknown. Never raises."""
    import httpx

    try:
        resp = httpx.get(root(base_url) + "/api/ps", timeout=timeout)
        entries = resp.json().get("models") or [] if resp.status_code == 200 else []
    except Exception:  # an old server, a proxy that hides it: unknown
        return None
    names = (model, f"{model}:latest")
    for entry in entries:
        if isinstance(entry, dict) and (entry.get("name") in names or entry.get("model") in names):
            size = entry.get("context_length")
            return size if isinstance(size, int) and size > 0 else None
    return None
