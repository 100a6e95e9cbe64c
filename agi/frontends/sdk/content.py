"""An SDK user message's content as agi's prompt (docs: claude-agent-sdk, attachments): `text`
blocks as its text; `image` and `document` blocks whose source is base64 (PNG, JPEG, GIF, WebP;
PDF) as the prompt's attachments, so each request carries the file; a document of plain text
(`"source": {"type": "text"}`) as a context block. A source agi cannot send (a URL, a Files API
id, nested content) or a file of another type is a UsageError naming the block, before anything
is sent."""

from __future__ import annotations

from typing import Any

from agi.attachments import Attachment, Prompt, from_base64
from agi.errors import UsageError

FILES = ("image", "document")


def prompt_of(message: dict[str, Any], limit: int | None = None) -> str:
    """The prompt of a `user` message's `message` (a str, or a Prompt with attachments, each
    at most `limit` bytes: attach_limit)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    words: list[str] = []
    files: list[Attachment] = []
    for number, block in enumerate(content or [], 1):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            words.append(str(block.get("text", "")))
        elif kind in FILES:
            found = block_file(block, number, limit)
            if isinstance(found, str):
                words.append(found)
            else:
                files.append(found)
    text = "\n".join(words)
    return Prompt.of(text, tuple(files)) if files else text


def block_file(block: dict[str, Any], number: int, limit: int | None) -> Attachment | str:
    """An image or document block's file, or a plain-text document's context block."""
    kind = str(block.get("type"))
    source = block.get("source")
    source = source if isinstance(source, dict) else {}
    how = source.get("type")
    title = block.get("title")
    name = str(title) if isinstance(title, str) and title else f"{kind} {number}"
    where = f"the user message's {kind} block {number}"
    if how == "base64" and isinstance(source.get("data"), str):
        declared = source.get("media_type")
        try:
            return from_base64(
                name, source["data"], declared if isinstance(declared, str) else None, limit
            )
        except UsageError as e:
            raise UsageError(f"{where}: {e}") from None
    if kind == "document" and how == "text" and isinstance(source.get("data"), str):
        return f'<document title="{name}">\n{source["data"].rstrip()}\n</document>'
    what = {"url": "a URL", "file": "a Files API id", "content": "nested content"}.get(
        str(how), f"a {how!r} source" if how else "no source"
    )
    raise UsageError(
        f"{where} has {what}: agi sends files given as base64 data only "
        "(an image: PNG, JPEG, GIF, WebP; a document: a PDF or plain text)"
    )


def replayed(message: dict[str, Any], uid: str, session_id: str) -> dict[str, Any]:
    """A user message as --replay-user-messages echoes it, with the uuid that names it (to
    `rewind_files`, say)."""
    return {"type": "user", "message": message.get("message") or {}, "parent_tool_use_id": None,
            "session_id": session_id, "uuid": uid, "isReplay": True}  # fmt: skip
