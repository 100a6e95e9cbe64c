"""Decoding provider responses, whatever the protocol: SSE framing, inline <think> tags, and the
state every stream decoder shares (text, reasoning, tool calls, usage, the final Reply).

Pure functions and small state machines with no I/O, so every recorded provider stream can be
replayed through them. Each wire protocol's own decoder is a StreamAssembler in its module
(`agi.providers.chat`, `agi.providers.anthropic`, `agi.providers.ollama`);
each protocol object (`agi.providers.wire.Wire`) frames the response into chunks for it and
`agi.providers.transport.Exchange` does the HTTP part.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from collections.abc import Generator, Iterable, Iterator
from typing import Any

from agi.errors import ProviderError
from agi.messages import ReasoningDelta, Reply, TextDelta, ToolCall, Usage
from agi.policy.decoding import SurrogateJoin, clean

SSE_LINE_LIMIT = 16 << 20  # bytes in one line of a stream (docs: security)


def _bounded(size: int) -> None:
    if size > SSE_LINE_LIMIT:
        raise ProviderError(
            f"the provider sent a stream line over {SSE_LINE_LIMIT >> 20} MB; "
            "the response was abandoned"
        )


def sse_lines(chunks: Iterable[bytes]) -> Generator[str, None, None]:
    """Split a byte stream into lines at LF (CRLF), as SSE does.

    httpx's iter_lines also splits at U+2028 and other Unicode breaks, which JSON may carry raw.
    """
    partial: list[bytes] = []  # the line being received, in pieces: each byte is split once
    size = 0
    for chunk in chunks:  # one chunk a decompressor made huge: its lines one at a time
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            piece = chunk[start:end]
            start = end + 1
            _bounded(size + len(piece))
            line = b"".join([*partial, piece]) if partial else piece
            partial, size = [], 0
            yield line.rstrip(b"\r").decode("utf-8", "replace")
        rest = chunk[start:]
        if rest:
            partial.append(rest)
            size += len(rest)
            _bounded(size)
    if partial:
        yield b"".join(partial).rstrip(b"\r").decode("utf-8", "replace")


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


def parse_json(text: str) -> Any:
    """One chunk (an SSE event's data, an NDJSON line, a whole body) as JSON."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:  # RecursionError: nested too deep to decode
        raise ProviderError(f"malformed response from the provider: {text[:200]!r}") from e


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


def as_text(value: Any) -> str:
    """A field that must be a string, from a stream: a number (or any other JSON value) is
    kept as its JSON text, so a tool call named 5 is an error result (no such tool), never a
    traceback (docs: security)."""
    if isinstance(value, str):
        return value
    return "" if value is None else json.dumps(value)


class CallBuilder:
    def __init__(self, id: Any, name: Any):
        self.id, self.name, self.arguments = as_text(id), as_text(name), ""
        self.problem = wrong_type("id", id) or wrong_type("name", name)


def wrong_type(field: str, value: Any) -> str:
    """What is wrong with a tool call's field that must be a string ("" when nothing is)."""
    if value is None or isinstance(value, str):
        return ""
    return f"the tool call's {field} is {json.dumps(value)[:40]}, not a string: it was not run"


class StreamAssembler(ABC):
    """What every protocol's decoder shares: chunks (streamed deltas or one whole response) in,
    text and reasoning events out, and at the end the Reply. A protocol's decoder implements
    `decode` (one chunk); `feed` keeps the chunk for the trace first."""

    PROTOCOL = "a model's stream"

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.reasoning_field = ""
        self.calls: list[CallBuilder] = []
        self.by_index: dict[Any, CallBuilder] = {}
        self.usage: Usage | None = None
        self.provider_cost: float | None = None  # a cost the response headers reported
        self.finish_reason: str | None = None
        self.think = ThinkSplitter()
        self.chunks: list[Any] = []
        self.thinking_blocks: list[dict[str, Any]] = []  # Anthropic's, kept to be sent back
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
        return self.decode(chunk, event)

    @abstractmethod
    def decode(self, chunk: dict[str, Any], event: str) -> list[TextDelta | ReasoningDelta]:
        """One chunk of the protocol's stream (`event`: its SSE event name, if any); each
        protocol's decoder (agi.providers.chat, anthropic, ollama) implements it."""

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
        index = index if isinstance(index, (int, str)) and not isinstance(index, bool) else pos
        call_id = as_text(tc.get("id"))
        fn = tc.get("function")
        fn = fn if isinstance(fn, dict) else {}
        name = as_text(fn.get("name"))
        call = self.by_index.get(index)
        if call is None or (call_id and call.id and call_id != call.id):
            call = CallBuilder(tc.get("id"), fn.get("name"))
            self.calls.append(call)
            self.by_index[index] = call
        else:  # id and name are set once, never concatenated
            call.id = call.id or call_id
            call.name = call.name or name
            raw = tc.get("id"), fn.get("name")
            call.problem = call.problem or wrong_type("id", raw[0]) or wrong_type("name", raw[1])
        args = fn.get("arguments")
        if isinstance(args, str):
            call.arguments += args
        elif args is not None:  # an object as such; a number or list: an error result
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

    def recognised(self, chunk: dict[str, Any]) -> bool:
        """Whether `chunk` is one of the protocol's (a stream with none of them is another
        protocol's, or no model's: an error, never an empty reply asked again and again)."""
        return True

    def check_protocol(self) -> None:
        """A response none of whose chunks is the protocol's: a ProviderError, not retried
        (called at the end, and before an unfinished stream would be asked for again)."""
        dicts = [c for c in self.chunks if isinstance(c, dict)]
        if dicts and not any(self.recognised(c) for c in dicts):
            raise ProviderError(
                f"the response is not {self.PROTOCOL}: {json.dumps(dicts[0])[:120]} (is the "
                "base URL this provider's endpoint?)"
            )

    def finish(self) -> Reply:
        self.check_protocol()
        self.flush()
        usage = self.usage
        if self.provider_cost is not None:  # the body's own figure, if any, wins
            usage = usage or Usage(calls=1)
            usage.cost = self.provider_cost if usage.cost is None else usage.cost
        calls = [
            ToolCall(
                clean(c.id) or f"call_{os.urandom(12).hex()}",
                clean(c.name),
                clean(c.arguments),
                c.problem,
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
