"""The events of a run as typed objects (`agi.stream`, `agi.astream`): one class per `type` of
the `--output jsonl` lines (docs/python.md, "Events"), each with `to_json()` giving that line's
object, the last of a stream being a `ResultEvent` whose `.result` is the run's `agi.Result`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agi.engine.result import RunResult
from agi.frontends.views.jsonl import event_dict
from agi.messages import Usage
from agi.policy.redaction import map_strings


@dataclass(frozen=True)
class Event:
    """An event of a run; `type` is its `--output jsonl` type."""

    type: ClassVar[str] = ""

    def to_json(self) -> dict[str, Any]:
        """The event as its `--output jsonl` line's object."""
        body = {name: getattr(self, name) for name in self.__dataclass_fields__}
        return {"type": self.type, **body}


@dataclass(frozen=True)
class StepEvent(Event):
    """A model call of the agent loop begins: `step` counts them from 1."""

    type: ClassVar[str] = "step"
    step: int


@dataclass(frozen=True)
class ReasoningEvent(Event):
    """A piece of the model's reasoning, as it streams."""

    type: ClassVar[str] = "reasoning"
    text: str


@dataclass(frozen=True)
class TextEvent(Event):
    """A piece of the model's reply, as it streams."""

    type: ClassVar[str] = "text"
    text: str


@dataclass(frozen=True)
class AssistantTextEvent(Event):
    """The whole text of a reply that also called tools (not the answer)."""

    type: ClassVar[str] = "assistant_text"
    text: str


@dataclass(frozen=True)
class ToolStartEvent(Event):
    """A tool call starts: its `id`, the tool's `name`, its `input`."""

    type: ClassVar[str] = "tool_start"
    id: str
    name: str
    input: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolEndEvent(Event):
    """A tool call ended: its `result` text, whether it `is_error`, how many `seconds` it took."""

    type: ClassVar[str] = "tool_end"
    id: str
    name: str
    result: str
    is_error: bool
    seconds: float


@dataclass(frozen=True)
class UsageEvent(Event):
    """The `usage` of one model call (`input`, `output`, `cached`, `cache_write`, `reasoning`,
    `cost`)."""

    type: ClassVar[str] = "usage"
    usage: Usage

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "usage": self.usage.to_dict()}


@dataclass(frozen=True)
class NoticeEvent(Event):
    """A warning worth a line: a retry, a repaired session."""

    type: ClassVar[str] = "notice"
    text: str


@dataclass(frozen=True)
class ResultEvent(Event):
    """The last event: the run's `result` (an `agi.Result`)."""

    type: ClassVar[str] = "result"
    result: RunResult

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, **self.result.to_json()}


KINDS: dict[str, type[Event]] = {
    kind.type: kind
    for kind in (
        StepEvent,
        ReasoningEvent,
        TextEvent,
        AssistantTextEvent,
        ToolStartEvent,
        ToolEndEvent,
        UsageEvent,
        NoticeEvent,
        ResultEvent,
    )
}


def typed(event: Any, redact: Callable[[str], str]) -> Event | None:
    """The engine's event (agi.messages) as its typed object, the API key taken out of its
    texts; None for one `--output jsonl` does not show."""
    kind = KINDS.get(getattr(event, "type", ""))
    if kind is None:
        return None
    if kind is UsageEvent:
        return UsageEvent(event.usage)
    body = map_strings(event_dict(event), redact)
    body.pop("type")
    return kind(**body)
