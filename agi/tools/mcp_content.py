"""What the model reads of an MCP result: content blocks as text, binary data described."""

from __future__ import annotations

import json
from typing import Any


def dump(model: Any) -> dict[str, Any]:
    """An SDK object as its JSON wire form (camelCase in mcp 1 and 2 alike)."""
    return dict(model.model_dump(mode="json", by_alias=True, exclude_none=True))


def size(b64: Any) -> str:
    """The size of base64 data, decoded."""
    text = str(b64 or "")
    return f"{len(text) * 3 // 4 - text[-2:].count('=')} bytes"


def describe_block(block: dict[str, Any]) -> str:
    """One content block as text; images, audio and resources are described, not dropped."""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("image", "audio"):
        return f"[{kind}: {block.get('mimeType', 'unknown type')}, {size(block.get('data'))}]"
    if kind == "resource_link":
        about = " ".join(str(block[k]) for k in ("name", "mimeType", "description") if block.get(k))
        return f"[resource link: {block.get('uri')}{' ' + about if about else ''}]"
    if kind == "resource":
        res = block.get("resource") or {}
        head = f"[resource {res.get('uri')}{', ' + res['mimeType'] if res.get('mimeType') else ''}"
        if "text" in res:
            return f"{head}]\n{res['text']}"
        return f"{head}: {size(res.get('blob'))}]"
    return f"[{kind} content]"


def result_text(result: dict[str, Any]) -> str:
    """The model's view of a CallToolResult: its blocks, and structured content if not shown."""
    parts = [describe_block(b) for b in result.get("content") or [] if isinstance(b, dict)]
    text = "\n".join(p for p in parts if p)
    structured = result.get("structuredContent")
    if structured is not None:
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        if structured not in (value, {"result": value}):  # FastMCP wraps plain values in this
            text += ("\n" if text else "") + json.dumps(structured, ensure_ascii=False)
    return text or "(no output)"
