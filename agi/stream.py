"""Decoding provider responses: SSE framing, chunk assembly, inline <think> tags, errors.

Pure functions and small state machines with no I/O, so every recorded provider stream can be
replayed through them. `agi.transport` does the HTTP part.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from typing import Any

from agi.errors import ProviderError
from agi.messages import ReasoningDelta, Reply, TextDelta, ToolCall, Usage

RETRYABLE_STATUS = {408, 409, 429} | set(range(500, 600))


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


def error_message(body: Any) -> str:
    """The human part of a provider's error body, whatever shape it has."""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, str):
            return err
        if isinstance(err, dict):
            msg = err.get("message") or err.get("detail") or err.get("type") or ""
            raw = (
                (err.get("metadata") or {}).get("raw")
                if isinstance(err.get("metadata"), dict)
                else None
            )
            if raw and isinstance(raw, str):
                msg = f"{msg}: {raw}" if msg else raw
            return str(msg) if msg else json.dumps(err)[:300]
        if "detail" in body:
            return str(body["detail"])
    return str(body)[:300]


def provider_error(status: int | None, body: Any) -> ProviderError:
    message = error_message(body)
    prefix = f"HTTP {status}: " if status else ""
    return ProviderError(prefix + message, status, retryable=status in RETRYABLE_STATUS)


def _error_status(err: Any, default: int | None) -> int | None:
    if isinstance(err, dict):
        for key in ("status_code", "code", "status"):
            value = err.get(key)
            if isinstance(value, int):
                return value
            if isinstance(value, str) and value.isdigit():
                return int(value)
    return default


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


def parse_usage(u: Any) -> Usage | None:
    if not isinstance(u, dict):
        return None
    prompt = u.get("prompt_tokens", u.get("input_tokens")) or 0
    completion = u.get("completion_tokens", u.get("output_tokens")) or 0
    total = u.get("total_tokens") or prompt + completion
    cost = u.get("cost")
    return Usage(prompt, completion, total, cost if isinstance(cost, (int, float)) else None)


ANTHROPIC_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


class StreamAssembler:
    """Turns chunks (streamed deltas or one whole completion) into events and a final Reply."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.reasoning_field = ""
        self.calls: list[_CallBuilder] = []
        self.by_index: dict[Any, _CallBuilder] = {}
        self.usage: Usage | None = None
        self.finish_reason: str | None = None
        self.think = ThinkSplitter()
        self.chunks: list[Any] = []

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
        ) in ("ping", "error"):
            out = self._anthropic(chunk)
        else:
            out = self._openai(chunk)
        err = chunk.get("error")
        if err or event == "error":
            raise provider_error(_error_status(err, None), chunk)
        return out

    def _openai(self, chunk: dict[str, Any]) -> list[TextDelta | ReasoningDelta]:
        out: list[TextDelta | ReasoningDelta] = []
        usage = parse_usage(chunk.get("usage"))
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
        kind = chunk.get("type")
        if kind == "message_start":
            self.usage = parse_usage((chunk.get("message") or {}).get("usage"))
        elif kind == "content_block_start":
            block = chunk.get("content_block") or {}
            if block.get("type") == "tool_use":
                call = _CallBuilder(block.get("id") or "", block.get("name") or "")
                self.calls.append(call)
                self.by_index[("a", chunk.get("index"))] = call
            elif block.get("text"):
                return self._emit(block["text"], "")
        elif kind == "content_block_delta":
            delta = chunk.get("delta") or {}
            if delta.get("type") == "text_delta":
                return self._emit(delta.get("text", ""), "")
            if delta.get("type") == "thinking_delta":
                return [self._add_reasoning(delta.get("thinking", ""))]
            if delta.get("type") == "input_json_delta":
                block = self.by_index.get(("a", chunk.get("index")))
                if block:
                    block.arguments += delta.get("partial_json", "")
        elif kind == "message_delta":
            reason = (chunk.get("delta") or {}).get("stop_reason")
            if reason:
                self.finish_reason = ANTHROPIC_FINISH.get(reason, reason)
            usage = parse_usage(chunk.get("usage"))
            if usage and self.usage:
                self.usage.completion_tokens = usage.completion_tokens
                self.usage.total_tokens = self.usage.prompt_tokens + usage.completion_tokens
        return []

    def _emit(self, text: str, reasoning: str) -> list[TextDelta | ReasoningDelta]:
        out: list[TextDelta | ReasoningDelta] = []
        if reasoning:
            self.reasoning_field = self.reasoning_field or "reasoning"
            out.append(self._add_reasoning(reasoning))
        if text:
            self.text.append(text)
            out.append(TextDelta(text))
        return out

    def _add_reasoning(self, s: str) -> ReasoningDelta:
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
        """Release text held back while looking for a `</think>` split across chunks."""
        return self._emit(*self.think.flush())

    def finish(self) -> Reply:
        self.flush()
        calls = [
            ToolCall(c.id or f"call_{os.urandom(12).hex()}", c.name, c.arguments)
            for c in self.calls
            if c.name
        ]
        return Reply(
            text="".join(self.text).strip(),
            reasoning="".join(self.reasoning).strip(),
            reasoning_field=self.reasoning_field or "reasoning_content",
            tool_calls=calls,
            usage=self.usage,
            finish_reason=self.finish_reason,
        )
