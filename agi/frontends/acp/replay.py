"""session/load: the conversation on disk told again as `session/update`s, as it happened."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agi.frontends.acp import tools as acp_tools
from agi.messages import COMPACTION, ToolCall


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _chunk(kind: str, text: str) -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


def replay(session: Any, cwd: str) -> Iterator[dict[str, Any]]:
    """user_message_chunk, agent_message_chunk (and thoughts), tool_call, tool_call_update."""
    session.load()
    names: dict[str, str] = {}
    for message in session.messages:
        role = message.get("role")
        if COMPACTION in message:
            yield _chunk("agent_thought_chunk", "[agi: the conversation was compacted]")
            continue
        text = _text(message.get("content"))
        if role == "user" and text:
            yield _chunk("user_message_chunk", text)
        elif role == "assistant":
            thought = message.get("reasoning_content") or message.get("reasoning")
            if isinstance(thought, str) and thought:
                yield _chunk("agent_thought_chunk", thought)
            if text:
                yield _chunk("agent_message_chunk", text)
            for raw in message.get("tool_calls") or []:
                call = ToolCall.from_dict(raw)
                names[call.id] = call.name
                try:
                    input = call.parse_arguments()
                except ValueError:
                    input = {"_raw": call.arguments}
                yield acp_tools.start(call.id, call.name, input, cwd, None)
        elif role == "tool":
            call_id = str(message.get("tool_call_id") or "")
            if call_id in names:
                failed = text.startswith("Error:")
                yield acp_tools.end(call_id, text, failed, None)
