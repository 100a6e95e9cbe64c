"""Message, tool-call and usage types, and the events the agent loop yields.

Conversations are stored and sent as plain OpenAI-format dicts; these classes build them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str = ""  # raw JSON text, as the model wrote it
    problem: str = ""  # a field of the wrong JSON type in the stream: the call is an error result

    def parse_arguments(self) -> dict[str, Any]:
        """The arguments as an object; empty text means `{}`. Raises ValueError when invalid."""
        text = self.arguments.strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except RecursionError:  # `[[[[…` a hundred thousand deep
            raise ValueError(f"nested deeper than {MAX_NESTING} levels") from None
        if not isinstance(value, dict):
            raise ValueError(f"expected a JSON object, got {type(value).__name__}")
        _check_value(value)
        return value

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments or "{}"},
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToolCall:
        fn = d.get("function") or {}
        return cls(d.get("id") or "", fn.get("name") or "", fn.get("arguments") or "")


USAGE_FIELDS = ("input", "output", "cached", "cache_write", "reasoning")


@dataclass
class Usage:
    """Tokens and cost of one model call, or the sum of several; the same for every provider.

    `input` counts every input token of the call (the full prompt, cached ones included);
    `cached` is the part read from a cache and `cache_write` the part written to one;
    `reasoning` is the part of `output` spent thinking. `cost` is in USD, None when unknown:
    a sum is unknown as soon as one of its calls is (never a known part passed off as the whole).
    `calls` counts the model calls summed here (0: an empty total); it is not part of to_dict().
    """

    input: int = 0
    output: int = 0
    cached: int = 0
    cache_write: int = 0
    reasoning: int = 0
    cost: float | None = None
    calls: int = 0

    @property
    def empty(self) -> bool:
        return not self.calls and self.cost is None and not any(self.tokens())

    def tokens(self) -> tuple[int, ...]:
        return tuple(getattr(self, name) for name in USAGE_FIELDS)

    def add(self, other: Usage) -> None:
        if other.empty:
            return
        if self.empty:
            self.cost = other.cost
        elif self.cost is not None and other.cost is not None:
            self.cost += other.cost
        else:
            self.cost = None
        for name in USAGE_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.calls += max(other.calls, 1)

    def __add__(self, other: Usage) -> Usage:
        total = Usage()
        total.add(self)
        total.add(other)
        return total

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {name: getattr(self, name) for name in USAGE_FIELDS}
        cost = 0.0 if self.empty else self.cost  # no call made: nothing spent
        d["cost"] = None if cost is None else round(cost, 10)
        return d

    @classmethod
    def from_dict(cls, d: Any) -> Usage:
        """A usage object as to_dict() wrote it (meta.json); anything else is an empty total."""
        if not isinstance(d, dict):
            return cls()
        counts = {name: _count(d.get(name)) for name in USAGE_FIELDS}
        cost = d.get("cost")
        usage = cls(**counts, cost=float(cost) if cost is not None and _number(cost) else None)
        unknown = "cost" in d and cost is None  # to_dict() writes 0.0 for an empty total
        usage.calls = 1 if unknown or usage.cost or any(counts.values()) else 0
        return usage


def _number(value: Any) -> bool:
    """A count or a cost: a finite number, not negative (1e999 reads as infinity)."""
    if isinstance(value, float):
        return value >= 0 and math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 63


def _count(value: Any) -> int:
    return int(value) if _number(value) else 0


@dataclass
class Reply:
    """One assistant turn as the provider produced it."""

    text: str = ""
    reasoning: str = ""
    reasoning_field: str = "reasoning_content"  # the wire field the reasoning came in
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage | None = None
    finish_reason: str | None = None
    nudge: str | None = None  # not an answer: the harness replies this and the loop goes on
    # Anthropic's thinking blocks with their signatures, as they came: sent back on tool turns
    thinking_blocks: list[dict[str, Any]] = field(default_factory=list)
    # the Responses API's reasoning items (encrypted), with the model that made them and where
    # they stood among the reply's output: sent back in place to that model (docs: responses)
    reasoning_items: dict[str, Any] | None = None

    def to_message(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            msg["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.reasoning:
            msg[self.reasoning_field] = self.reasoning
        if self.thinking_blocks:
            msg[THINKING_BLOCKS] = self.thinking_blocks
        if self.reasoning_items:
            msg[REASONING_ITEMS] = self.reasoning_items
        return msg


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def tool_result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


REASONING_FIELDS = ("reasoning_content", "reasoning")
THINKING_BLOCKS = "thinking_blocks"  # beside an assistant message; only Anthropic takes them back
REASONING_ITEMS = "reasoning_items"  # beside an assistant message; only the Responses API's
PROVIDER_ONLY = (THINKING_BLOCKS, REASONING_ITEMS)  # what one protocol alone takes back
COMPACTION = "compaction"  # a compaction record's bookkeeping (agi.sessions.session); never sent


def wire_message(msg: dict[str, Any]) -> dict[str, Any]:
    """The message as sent to a provider: reasoning goes back only on tool-call turns.

    DeepSeek's thinking mode requires `reasoning_content` on assistant messages with tool_calls
    and older reasoners reject it elsewhere; vLLM and Ollama accept `reasoning` the same way.
    """
    if THINKING_BLOCKS in msg or REASONING_ITEMS in msg:
        # signed for the Messages API or encrypted for the Responses API: no use elsewhere
        msg = {k: v for k, v in msg.items() if k not in PROVIDER_ONLY}
    if COMPACTION in msg:  # the model sees the record as the user message it is
        msg = {k: v for k, v in msg.items() if k != COMPACTION}
    if msg.get("role") != "assistant" or msg.get("tool_calls"):
        return msg
    if not any(k in msg for k in REASONING_FIELDS):
        return msg  # nothing to drop: no copy (every request re-sends the whole conversation)
    return {k: v for k, v in msg.items() if k not in REASONING_FIELDS}


# Events yielded by the agent loop; renderers and JSON output consume them.


@dataclass
class TextDelta:
    text: str
    type: str = "text"


@dataclass
class ReasoningDelta:
    text: str
    type: str = "reasoning"


@dataclass
class StepStart:
    step: int
    type: str = "step"


@dataclass
class AssistantText:
    """Text of a finished reply that also called tools (intermediate, not the answer)."""

    text: str
    type: str = "assistant_text"


@dataclass
class ToolStart:
    call: ToolCall
    input: dict[str, Any]
    type: str = "tool_start"


@dataclass
class ToolEnd:
    call: ToolCall
    result: str
    is_error: bool
    seconds: float
    type: str = "tool_end"


@dataclass
class Notice:
    """A warning worth one line on stderr (a retry, a repaired session)."""

    text: str
    type: str = "notice"


@dataclass
class UsageEvent:
    usage: Usage
    type: str = "usage"


class Returning:
    """A generator to iterate with a `for` loop (which may break) keeping what it returns."""

    def __init__(self, events: Generator[Any, None, Any]):
        self.events, self.value = events, None

    def __iter__(self) -> Generator[Any, None, Any]:
        self.value = yield from self.events
        return self.value


def watch(
    events: Generator[Any, None, Any], see: Callable[[Any], None]
) -> Generator[Any, None, Any]:
    """Re-yield a generator's events, each shown to `see` first; return the generator's value."""
    run = Returning(events)
    for event in run:
        see(event)
        yield event
    return run.value


def drain(events: Generator[Any, None, Any], handle: Callable[[Any], None] | None = None) -> Any:
    """Run an event generator to its return value, handing each event to `handle`."""
    run = Returning(events)
    for event in run:
        if handle is not None:
            handle(event)
    return run.value


SURROGATE = re.compile("[\ud800-\udfff]")


MAX_NESTING = 100  # levels of arrays and objects in a tool call's arguments


def _check_value(value: Any) -> None:
    """ValueError when a JSON value holds a lone surrogate (`"\\ud800"` decodes to one) or
    nests deeper than MAX_NESTING (what takes it apart later recurses); walked without
    recursion."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if SURROGATE.search(item) is not None:
                raise ValueError(
                    "a string holds a lone surrogate (\\ud800-\\udfff), not Unicode text"
                )
        elif isinstance(item, (dict, list)):
            if depth >= MAX_NESTING:
                raise ValueError(f"nested deeper than {MAX_NESTING} levels")
            pairs = item.items() if isinstance(item, dict) else ((None, v) for v in item)
            for k, v in pairs:
                stack += [(k, depth), (v, depth + 1)]
