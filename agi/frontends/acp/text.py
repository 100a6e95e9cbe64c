"""What `agi --acp` reads and lists: a prompt's content blocks as one prompt, agi's sessions
as `session/list` gives them, and the session a sessionId names."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from agi.attachments import TYPES, Attachment, Prompt, from_base64
from agi.errors import UsageError
from agi.sessions.session import iter_sessions, read_meta

RESOURCE_LIMIT = 256 * 1024  # bytes of a linked file put into the prompt


def prompt_text(blocks: list[Any], limit: int | None = None) -> str:
    """`text`, `resource_link` and embedded `resource` blocks as one prompt: text as it is,
    files as context blocks (like stdin); `image` blocks and blob resources of an image or a
    PDF as the prompt's attachments (an `agi.attachments.Prompt`, docs: attachments); other
    kinds are named, not sent. A file agi cannot send (or over `limit` bytes, attach_limit) is
    a UsageError, before anything is."""
    words: list[str] = []
    context: list[str] = []
    files: list[Attachment] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            words.append(block.text)
        elif kind == "image":
            name = getattr(block, "uri", None) or f"image {len(files) + 1}"
            files.append(from_base64(name, block.data, getattr(block, "mime_type", None), limit))
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            uri = getattr(resource, "uri", "")
            blob, declared = getattr(resource, "blob", None), getattr(resource, "mime_type", None)
            if text is not None:
                context.append(_context_block(uri, text))
            elif isinstance(blob, str) and declared in TYPES:
                named = uri or f"file {len(files) + 1}"
                files.append(from_base64(named, blob, declared, limit))
            else:
                context.append(f'<file uri="{uri}">(binary content not shown)</file>')
        elif kind == "resource_link":
            context.append(_linked(block.uri, getattr(block, "name", "")))
        elif kind is not None:
            words.append(f"[{kind} attachment not supported]")
    prompt = "\n".join(w for w in words if w).strip()
    if context:
        prompt = "\n\n".join([prompt, *context]) if prompt else "\n\n".join(context)
    return Prompt.of(prompt, tuple(files)) if files else prompt


def _context_block(uri: str, text: str) -> str:
    return f'<file uri="{uri}">\n{text.rstrip()}\n</file>'


def _linked(uri: str, name: str) -> str:
    """A linked local file's text (up to RESOURCE_LIMIT), else the link alone."""
    from urllib.parse import unquote, urlparse

    parsed = urlparse(uri)
    path = unquote(parsed.path) if parsed.scheme in ("file", "") else None
    if path and os.path.isfile(path):
        try:
            with open(path, "rb") as f:
                data = f.read(RESOURCE_LIMIT + 1)
            if b"\0" not in data[:8192]:
                text = data[:RESOURCE_LIMIT].decode("utf-8", "replace")
                cut = "\n(… cut)" if len(data) > RESOURCE_LIMIT else ""
                return _context_block(uri, text + cut)
        except OSError:
            pass
    return f'<file uri="{uri}" name="{name}">(not read)</file>'


def session_info(path: Path, meta: dict[str, Any]) -> dict[str, Any]:
    info: dict[str, Any] = {"sessionId": str(path), "cwd": str(meta.get("cwd") or "/")}
    title = " ".join(str(meta.get("first_prompt") or "").split())
    if title:
        info["title"] = title if len(title) <= 80 else title[:79] + "…"
    updated = meta.get("updated")
    if isinstance(updated, str) and updated:
        info["updatedAt"] = _iso(updated)
    return info


def _iso(stamp: str) -> str:
    """meta.json's `2026-12-01T15:46:00+0000` as RFC 3339 (`+00:00`)."""
    if len(stamp) > 5 and stamp[-5] in "+-" and stamp[-4:].isdigit():
        return stamp[:-2] + ":" + stamp[-2:]
    return stamp


def list_sessions(home: Path, cwd: str | None) -> list[dict[str, Any]]:
    """agi's sessions, newest first; with `cwd`, those begun in that directory."""
    out = []
    for path in iter_sessions(home):
        meta = read_meta(path)
        if not meta.get("cwd"):
            meta["cwd"] = first_cwd(path)
        if cwd is not None and os.path.realpath(str(meta.get("cwd") or "")) != os.path.realpath(
            cwd
        ):
            continue
        if meta.get("parent"):
            continue  # a subagent's session
        out.append(session_info(path, meta))
    return out


def first_cwd(path: Path) -> str | None:
    """The working directory of the session's first run (its trace's first `run` record)."""
    import json

    try:
        with open(path / "trace.jsonl", encoding="utf-8", errors="replace") as f:
            for _, line in zip(range(50), f, strict=False):
                record = json.loads(line)
                if isinstance(record, dict) and record.get("type") == "run":
                    return str(record.get("cwd") or "") or None
    except (OSError, ValueError):
        return None
    return None


def known_session(given: str) -> Path:
    """The session a sessionId names: an absolute path holding an agi session."""
    path = Path(given)
    if not path.is_absolute() or not os.path.lexists(path / "meta.json"):
        raise UsageError(f"unknown session {given!r}: not an agi session directory")
    return path


def log(verbose: bool, text: str) -> None:
    if verbose:
        sys.stderr.write(f"agi: {text}\n")
        sys.stderr.flush()
