"""Decoding provider responses: SSE framing, chunk assembly, inline <think> tags, errors.

Pure functions and small state machines with no I/O, so every recorded provider stream can be
replayed through them. `agi.providers.transport` does the HTTP part.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from typing import Any

from agi.decoding import SurrogateJoin, clean
from agi.errors import ProviderError
from agi.messages import ReasoningDelta, Reply, TextDelta, ToolCall, Usage
from agi.providers.errors import RETRYABLE_STATUS, error_message, error_status, provider_error
from agi.providers.usage import messages_usage, parse_usage


def iter_sse(lines: Iterable[str]) -> Iterator[tuple[str, str]]:
    """Yield (event, data) for each SSE event; `:` comment lines are keep-alives and skipped.

    A final event without its trailing blank line is still delivered.
    """
    event, data = "", list[str]()
    for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                yield event or "message", "\n".join(data)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
    if data:
        yield event or "message", "\n".join(data)


class ThinkSplitter:
    """Separates a leading inline `<think>…</think>` block (Qwen3, R1 served raw) from text."""

    OPEN, CLOSE = "<think>", "</think>"

    def __init__(self) -> None:
        self.state = "start"  # start -> think -> after -> text, or start -> text
        self.buf = ""

    def feed(self, s: str) -> tuple[str, str]:
        """Return (text, reasoning) that can be released now."""
        self.buf += s
        text = reasoning = ""
        if self.state == "start":
            head = self.buf.lstrip()
            if head.startswith(self.OPEN):
                self.state, self.buf = "think", head[len(self.OPEN) :]
            elif self.OPEN.startswith(head):
                return "", ""  # could still become <think>
            else:
                self.state = "text"
        if self.state == "think":
            end = self.buf.find(self.CLOSE)
            if end >= 0:
                reasoning, self.buf = self.buf[:end], self.buf[end + len(self.CLOSE) :]
                self.state = "after"
            else:
                keep = len(self.CLOSE) - 1
                reasoning, self.buf = (
                    self.buf[:-keep] if len(self.buf) > keep else "",
                    self.buf[-keep:],
                )
                return "", reasoning
        if self.state == "after":  # whitespace after </think> may come in its own chunks
            self.buf = self.buf.lstrip()
            if self.buf:
                self.state = "text"
        if self.state == "text":
            text, self.buf = self.buf, ""
        return text, reasoning

    def flush(self) -> tuple[str, str]:
        rest, self.buf = self.buf, ""
        return (rest, "") if self.state != "think" else ("", rest)


class _CallBuilder:
    def __init__(self, id: str, name: str):
        self.id, self.name, self.arguments = id, name, ""


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


ANTHROPIC_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
# the Messages API's error types and the HTTP status each stands for (an `error` event has none)
ANTHROPIC_ERRORS = {
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
    status = status or (ANTHROPIC_ERRORS.get(kind) if isinstance(kind, str) else None)
    status = status or error_status(err, None)  # a gateway's own shape, with a `code`
    prefix = f"HTTP {status}: " if status and not where else ""
    return ProviderError(prefix + message + where, status, retryable=status in RETRYABLE_STATUS)


class StreamAssembler:
    """Turns chunks (streamed deltas or one whole completion) into events and a final Reply."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.reasoning_field = ""
        self.calls: list[_CallBuilder] = []
        self.by_index: dict[Any, _CallBuilder] = {}
        self.usage: Usage | None = None
        self.usage_fields: dict[str, Any] = {}  # Anthropic's, merged across events
        self.provider_cost: float | None = None  # a cost the response headers reported
        self.finish_reason: str | None = None
        self.think = ThinkSplitter()
        self.chunks: list[Any] = []
        self.thinking_blocks: list[dict[str, Any]] = []  # Anthropic's, kept to be sent back
        self.blocks: dict[Any, dict[str, Any]] = {}  # the open thinking blocks by index
        self.seeded: set[Any] = set()  # tool_use blocks whose input came whole at their start
        self.text_gap = False  # a new text block after earlier text: a paragraph break
        # an escape pair (\ud83d \ude00) may be split across chunks: joined before release
        self.text_join, self.reasoning_join = SurrogateJoin(), SurrogateJoin()

    @property
    def delivered(self) -> bool:
        """True once content reached the user: such a stream must not be retried."""
        return bool(self.text or self.reasoning or self.calls)

    def feed(self, chunk: Any, event: str = "message") -> list[TextDelta | ReasoningDelta]:
        self.chunks.append(chunk)
        if not isinstance(chunk, dict):
            raise ProviderError(f"malformed response chunk: {json.dumps(chunk)[:200]}")
        if str(chunk.get("type", "")).startswith(("message_", "content_block_")) or chunk.get(
            "type"
        ) in ("ping", "error", "message"):
            out = self._anthropic(chunk)
        else:
            out = self._openai(chunk)
        err = chunk.get("error")
        if err or event == "error":
            raise provider_error(error_status(err, None), chunk)
        return out

    def _openai(self, chunk: dict[str, Any]) -> list[TextDelta | ReasoningDelta]:
        out: list[TextDelta | ReasoningDelta] = []
        usage = parse_usage(chunk.get("usage"), chunk.get("timings"))
        if usage:
            self.usage = usage
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) not in (0, None):
                continue
            delta = choice.get("delta") or choice.get("message") or {}
            for field in ("reasoning_content", "reasoning"):
                value = delta.get(field)
                if isinstance(value, str) and value:
                    self.reasoning_field = self.reasoning_field or field
                    out.append(self._add_reasoning(value))
            content = delta.get("content")
            if isinstance(content, str) and content:
                text, reasoning = self.think.feed(content)
                out += self._emit(text, reasoning)
            for pos, tc in enumerate(delta.get("tool_calls") or []):
                if isinstance(tc, dict):
                    self._tool_delta(pos, tc)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return out

    def _anthropic(self, chunk: dict[str, Any]) -> list[TextDelta | ReasoningDelta]:
        """Messages API events: message_start, content_block_start|delta|stop, message_delta,
        message_stop, ping, error; or a whole non-streamed `message`."""
        kind, index = chunk.get("type"), chunk.get("index")
        out: list[TextDelta | ReasoningDelta] = []
        if kind == "message_start":
            self._anthropic_usage((chunk.get("message") or {}).get("usage"), reset=True)
        elif kind == "content_block_start":
            out = self._block_start(index, _table(chunk.get("content_block")))
        elif kind == "content_block_delta":
            out = self._block_delta(index, _table(chunk.get("delta")))
        elif kind == "content_block_stop":
            self.blocks.pop(index, None)
        elif kind in ("message_delta", "message"):
            if kind == "message":  # a server that ignored stream=true: the whole message at once
                self._anthropic_usage(chunk.get("usage"), reset=True)
                for pos, block in enumerate(chunk.get("content") or []):
                    out += self._block_start(("m", pos), _table(block))
            reason = _table(chunk.get("delta") if kind == "message_delta" else chunk).get(
                "stop_reason"
            )
            if reason:
                self.finish_reason = ANTHROPIC_FINISH.get(reason, reason)
            if kind == "message_delta":
                self._anthropic_usage(chunk.get("usage"))
        elif kind == "error":
            raise anthropic_error(chunk, where=" (an error event in the stream)")
        return out

    def _block_start(self, index: Any, block: dict[str, Any]) -> list[TextDelta | ReasoningDelta]:
        kind = block.get("type")
        if kind == "tool_use":  # server tools (server_tool_use, web search, ...) are not ours
            call = _CallBuilder(block.get("id") or "", block.get("name") or "")
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

    def _anthropic_usage(self, fields: Any, reset: bool = False) -> None:
        """message_start reports the input and message_delta the counts so far (cumulative):
        later fields replace earlier ones."""
        if reset:
            self.usage_fields = {}
        if isinstance(fields, dict):
            self.usage_fields.update({k: v for k, v in fields.items() if v is not None})
        if self.usage_fields:
            self.usage = messages_usage(self.usage_fields)

    def _emit(self, text: str, reasoning: str) -> list[TextDelta | ReasoningDelta]:
        out: list[TextDelta | ReasoningDelta] = []
        if reasoning:
            self.reasoning_field = self.reasoning_field or "reasoning"
            out.append(self._add_reasoning(reasoning))
        text = self.text_join.feed(text) if text else ""
        if text:
            self.text.append(text)
            out.append(TextDelta(text))
        return out

    def _add_reasoning(self, s: str) -> ReasoningDelta:
        s = self.reasoning_join.feed(s)
        self.reasoning.append(s)
        return ReasoningDelta(s)

    def _tool_delta(self, pos: int, tc: dict[str, Any]) -> None:
        index = tc.get("index")
        index = pos if index is None else index
        call_id = tc.get("id") or ""
        fn = tc.get("function") or {}
        name = fn.get("name") or ""
        call = self.by_index.get(index)
        if call is None or (call_id and call.id and call_id != call.id):
            call = _CallBuilder(call_id, name)
            self.calls.append(call)
            self.by_index[index] = call
        else:  # id and name are set once, never concatenated
            call.id = call.id or call_id
            call.name = call.name or name
        args = fn.get("arguments")
        if isinstance(args, str):
            call.arguments += args
        elif isinstance(args, dict):
            call.arguments += json.dumps(args)

    def flush(self) -> list[TextDelta | ReasoningDelta]:
        """Release text held back while looking for a `</think>` (or the second half of an
        escape pair) split across chunks."""
        out = self._emit(*self.think.flush())
        for held, kept, event in (
            (self.reasoning_join, self.reasoning, ReasoningDelta),
            (self.text_join, self.text, TextDelta),
        ):
            rest = held.flush()
            if rest:
                kept.append(rest)
                out.append(event(rest))
        return out

    def finish(self) -> Reply:
        self.flush()
        usage = self.usage
        if self.provider_cost is not None:  # the body's own figure, if any, wins
            usage = usage or Usage(calls=1)
            usage.cost = self.provider_cost if usage.cost is None else usage.cost
        calls = [
            ToolCall(
                clean(c.id) or f"call_{os.urandom(12).hex()}", clean(c.name), clean(c.arguments)
            )
            for c in self.calls
            if c.name
        ]
        return Reply(
            text="".join(self.text).strip(),
            reasoning="".join(self.reasoning).strip(),
            reasoning_field=self.reasoning_field or "reasoning_content",
            tool_calls=calls,
            usage=usage,
            finish_reason=self.finish_reason,
            thinking_blocks=self.thinking_blocks,
        )
