"""Machine-readable output: `--output jsonl` event lines and the final result object."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from agi.messages import ToolEnd, ToolStart


def event_dict(event: Any) -> dict[str, Any]:
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


def event_line(event: Any) -> str:
    return json.dumps(event_dict(event), ensure_ascii=False) + "\n"


@dataclass
class Outcome:
    """What the result object reports of a run, finished or failed."""

    answer: Any
    exit_code: int
    session: str | None
    steps: int
    usage: Any  # agi.providers.usage.Usage
    verdict: dict[str, Any] | None = None
    error: str | None = None


def result_line(outcome: Outcome, jsonl: bool) -> str:
    """The final object; `usage` is the whole run's (subagents and ghost exchanges included),
    `steps` counts the agent loop's model calls."""
    body: dict[str, Any] = {
        "answer": outcome.answer,
        "session": outcome.session,
        "exit_code": outcome.exit_code,
        "steps": outcome.steps,
        "usage": outcome.usage.to_dict(),
    }
    if outcome.verdict is not None:
        body["judgement"] = outcome.verdict
    if outcome.error:
        body["error"] = outcome.error
    if jsonl:
        body = {"type": "result", **body}
    return json.dumps(body, ensure_ascii=False) + "\n"
