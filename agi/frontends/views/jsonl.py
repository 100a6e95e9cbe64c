"""Machine-readable output: `--output jsonl` event lines and the final result object."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from agi.messages import ToolEnd, ToolStart

if TYPE_CHECKING:
    from agi.engine.result import RunResult
    from agi.engine.seams import Event


def event_dict(event: Event) -> dict[str, Any]:
    """A stable JSON shape for each event type (documented in the README)."""
    if isinstance(event, ToolStart):
        return {
            "type": event.type,
            "id": event.call.id,
            "name": event.call.name,
            "input": event.input,
        }
    if isinstance(event, ToolEnd):
        return {
            "type": event.type,
            "id": event.call.id,
            "name": event.call.name,
            "result": event.result,
            "is_error": event.is_error,
            "seconds": round(event.seconds, 3),
        }
    data = {}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        if hasattr(value, "to_dict"):  # ToolCall, Usage
            value = value.to_dict()
        data[f.name] = value
    return {"type": data.pop("type"), **data}


def event_line(event: Event) -> str:
    return json.dumps(event_dict(event), ensure_ascii=False) + "\n"


def result_line(result: RunResult, jsonl: bool) -> str:
    """The final object (RunResult.to_json); `usage` is the whole run's (subagents and ghost
    exchanges included), `steps` counts the agent loop's model calls; under jsonl it is the
    `result` event."""
    body = result.to_json()
    if jsonl:
        body = {"type": "result", **body}
    return json.dumps(body, ensure_ascii=False) + "\n"
