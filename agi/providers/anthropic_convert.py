"""Anthropic's Messages API, the request side: an OpenAI-format conversation (as sessions keep it)
as content blocks (system, tool_use/tool_result, merged turns, images, thinking blocks sent back),
and OpenAI-format tools and tool_choice as the Messages API takes them. `agi.providers.anthropic`
builds the request body from these."""

from __future__ import annotations

import json
import re
from typing import Any

from agi.messages import THINKING_BLOCKS

THINKING = ("thinking", "redacted_thinking")


def text_blocks(content: Any) -> list[dict[str, Any]]:
    """Content as blocks: text (never empty: the API rejects blank text) and images."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content.strip() else []
    blocks: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in ("text", "input_text") and str(part.get("text") or "").strip():
            blocks.append({"type": "text", "text": str(part["text"])})
        elif kind == "image_url":
            url = part.get("image_url")
            url = url.get("url") if isinstance(url, dict) else url
            if isinstance(url, str) and url:
                blocks.append({"type": "image", "source": image_source(url)})
        elif kind == "file":  # a PDF as a data URL (docs: attachments): a document block
            file = part.get("file")
            data = file.get("file_data") if isinstance(file, dict) else None
            if isinstance(data, str) and data.startswith("data:"):
                blocks.append({"type": "document", "source": image_source(data)})
        elif kind in ("image", "document"):  # already a Messages API block
            blocks.append(dict(part))
    return blocks


def image_source(url: str) -> dict[str, Any]:
    match = re.match(r"data:([^;,]+);base64,(.*)", url, re.S)
    if match:
        return {"type": "base64", "media_type": match.group(1), "data": match.group(2)}
    return {"type": "url", "url": url}


def tool_id(value: Any) -> str:
    """An id the API accepts (`[a-zA-Z0-9_-]+`): other providers' ids may hold `.` or `:`.
    tool_use and tool_result go through the same function, so they still match."""
    return re.sub(r"[^a-zA-Z0-9_-]", "_", str(value or "")) or "toolu_unnamed"


def tool_input(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments) if isinstance(arguments, str) and arguments.strip() else {}
    except (ValueError, RecursionError):  # not JSON, or nested too deep
        return {}
    return value if isinstance(value, dict) else {}


def assistant_blocks(msg: dict[str, Any]) -> list[dict[str, Any]]:
    """Thinking first (on tool-use turns, unchanged, as the API requires), text, tool calls."""
    calls = [c for c in msg.get("tool_calls") or [] if isinstance(c, dict)]
    blocks: list[dict[str, Any]] = []
    if calls:
        kept = msg.get(THINKING_BLOCKS) or []
        blocks += [dict(b) for b in kept if isinstance(b, dict) and b.get("type") in THINKING]
    blocks += [b for b in text_blocks(msg.get("content")) if b["type"] == "text"]
    for call in calls:
        fn = call.get("function") or {}
        blocks.append(
            {
                "type": "tool_use",
                "id": tool_id(call.get("id")),
                "name": str(fn.get("name") or ""),
                "input": tool_input(fn.get("arguments")),
            }
        )
    return blocks


def tool_result_block(msg: dict[str, Any]) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id(msg.get("tool_call_id"))}
    content = msg.get("content")
    if isinstance(content, str):
        if content:
            block["content"] = content
    elif text_blocks(content):
        block["content"] = text_blocks(content)
    return block


Blocks = list[dict[str, Any]]
# id(stored message) -> (the message, its role, its blocks): a transport converts each message
# of a tool loop once, not at every step (the entry keeps the message alive, so its id is its own)
Memo = dict[int, tuple[dict[str, Any], str, Blocks]]


def convert(msg: dict[str, Any]) -> tuple[str, Blocks]:
    """One stored message as (role, blocks); role "system" for the system prompt's."""
    role = msg.get("role")
    if role in ("system", "developer"):
        return "system", [b for b in text_blocks(msg.get("content")) if b["type"] == "text"]
    if role == "tool":
        return "user", [tool_result_block(msg)]
    if role == "assistant":
        return "assistant", assistant_blocks(msg)
    return "user", text_blocks(msg.get("content"))


def to_messages(messages: list[dict[str, Any]], memo: Memo | None = None) -> tuple[Blocks, Blocks]:
    """(system blocks, turns): system messages go to `system`; tool results become tool_result
    blocks in a user turn; consecutive same-role messages merge, so the results of one turn's
    calls share one user message. With `memo` (kept by the caller between requests), messages
    converted before are not converted again; it is left holding this conversation's only.
    Blocks are shared with the memo: what changes them (cache breakpoints) replaces them."""
    system: Blocks = []
    turns: Blocks = []
    seen: Memo = {}
    for msg in messages:
        if memo is None:
            role, blocks = convert(msg)
        else:
            key = id(msg)
            hit = memo.get(key)
            if hit is None or hit[0] is not msg:
                hit = (msg, *convert(msg))
            seen[key] = hit
            role, blocks = hit[1], hit[2]
        if role == "system":
            system += blocks
        elif not blocks:
            continue
        elif turns and turns[-1]["role"] == role:
            turns[-1]["content"] += blocks
        else:
            turns.append({"role": role, "content": list(blocks)})
    if memo is not None:
        memo.clear()
        memo.update(seen)
    return system, turns


def to_tool(spec: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI `tools` entry as `{name, description, input_schema}`."""
    fn = spec.get("function") if spec.get("type") == "function" else spec
    fn = fn if isinstance(fn, dict) else {}
    schema = fn.get("parameters") or fn.get("input_schema") or {"type": "object", "properties": {}}
    name, description = fn.get("name") or "", fn.get("description") or ""
    return {"name": name, "description": description, "input_schema": schema}


def to_tool_choice(choice: Any, parallel: Any = None) -> dict[str, Any] | None:
    """OpenAI's tool_choice ("auto", "required", "none", {"function": {"name"}}) or Anthropic's."""
    result: dict[str, Any] | None = None
    if choice in ("auto", "none"):
        result = {"type": choice}
    elif choice in ("required", "any"):
        result = {"type": "any"}
    elif isinstance(choice, dict) and choice.get("type") == "function":
        result = {"type": "tool", "name": (choice.get("function") or {}).get("name") or ""}
    elif isinstance(choice, dict) and choice.get("type") in ("auto", "any", "tool", "none"):
        result = dict(choice)
    if parallel is False and (result or {}).get("type") != "none":
        result = {**(result or {"type": "auto"}), "disable_parallel_tool_use": True}
    return result
