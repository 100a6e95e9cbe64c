"""Machine-readable output: `--output jsonl` event lines and the final result object."""

from __future__ import annotations

import dataclasses
import json
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


def result_line(
    run: Any, answer: Any, exit_code: int, error: str | None, result: Any = None
) -> str:
    """The final object; `usage` is the whole run's (subagents and ghost exchanges included),
    `steps` counts the agent loop's model calls."""
    agent, usage = run.agent, run.meter.total
    body: dict[str, Any] = {
        "answer": answer,
        "session": str(run.session.path) if run.session is not None else None,
        "exit_code": exit_code,
        "steps": agent.steps if agent is not None else 0,
        "usage": usage.to_dict(),
    }
    if run.verdict is not None:
        body["judgement"] = run.verdict
    if error:
        body["error"] = error
    if run.settings.output == "jsonl":
        body = {"type": "result", **body}
    return json.dumps(body, ensure_ascii=False) + "\n"
