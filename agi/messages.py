"""Message, tool-call and usage types, and the events the agent loop yields.

Conversations are stored and sent as plain OpenAI-format dicts; these classes build them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str = ""  # raw JSON text, as the model wrote it

    def parse_arguments(self) -> dict[str, Any]:
        """The arguments as an object; empty text means `{}`. Raises ValueError when invalid."""
        text = self.arguments.strip()
        if not text:
            return {}
        value = json.loads(text)
        if not isinstance(value, dict):
            raise ValueError(f"expected a JSON object, got {type(value).__name__}")
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


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost: float | None = None

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.total_tokens += other.total_tokens
        if other.cost is not None:
            self.cost = (self.cost or 0.0) + other.cost

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }
        if self.cost is not None:
            d["cost"] = self.cost
        return d


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

    def to_message(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            msg["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.reasoning:
            msg[self.reasoning_field] = self.reasoning
        return msg


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def tool_result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


REASONING_FIELDS = ("reasoning_content", "reasoning")


def wire_message(msg: dict[str, Any]) -> dict[str, Any]:
    """The message as sent to a provider: reasoning goes back only on tool-call turns.

    DeepSeek's thinking mode requires `reasoning_content` on assistant messages with tool_calls
    and older reasoners reject it elsewhere; vLLM and Ollama accept `reasoning` the same way.
    """
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
