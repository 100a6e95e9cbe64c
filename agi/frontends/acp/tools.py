"""How agi's tool calls look to an editor: ACP's kind, title, locations, and the diff of a Write
or Edit (computed once the call is allowed, before it runs: nothing is read for a call the
checks may still refuse; only regular files up to DIFF_LIMIT bytes; docs: acp)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

KINDS = {
    "Read": "read",
    "Write": "edit",
    "Edit": "edit",
    "Bash": "execute",
    "Terminal": "execute",
    "Grep": "search",
    "Glob": "search",
    "WebFetch": "fetch",
    "WebSearch": "fetch",
    "Task": "think",
    "calculate": "think",
}
EDITS = ("Write", "Edit")
RESULT_LIMIT = 64_000  # characters of a result shown in the editor (the model gets all of it)
DIFF_LIMIT = 1 << 20  # bytes of a file read for a diff; a larger file is shown without one


def kind(name: str) -> str:
    return KINDS.get(name, "other")


def absolute(path: str, cwd: str) -> str:
    return os.path.abspath(os.path.join(cwd, os.path.expanduser(path)))


def title(name: str, input: dict[str, Any], cwd: str) -> str:
    """`Read /abs/path`, `Bash: ls -la`, `Task: description`, or the tool's name."""
    path = input.get("file_path")
    if isinstance(path, str) and path:
        return f"{name} {absolute(path, cwd)}"
    for key in ("command", "description", "skill", "expression", "pattern", "url"):
        value = input.get(key)
        if isinstance(value, str) and value.strip():
            text = " ".join(value.split())
            return f"{name}: {text if len(text) <= 100 else text[:99] + '…'}"
    return name


def locations(name: str, input: dict[str, Any], cwd: str) -> list[dict[str, Any]]:
    path = input.get("file_path") or (input.get("path") if name in ("Grep", "Glob") else None)
    if not isinstance(path, str) or not path:
        return []
    where: dict[str, Any] = {"path": absolute(path, cwd)}
    line = input.get("offset")
    if name == "Read" and isinstance(line, int) and not isinstance(line, bool) and line > 0:
        where["line"] = line
    return [where]


def diff(
    name: str, input: dict[str, Any], cwd: str, read: Callable[[str], str | None]
) -> dict[str, Any] | None:
    """`{path, oldText, newText}` of a Write or Edit as it would apply now (`read` gives a
    file's text, None when there is none); None when the call would not change a file."""
    path = input.get("file_path")
    if name not in EDITS or not isinstance(path, str) or not path:
        return None
    path = absolute(path, cwd)
    try:
        old = read(path)
    except Exception:  # unreadable: the call itself will say why
        return None
    if name == "Write":
        new = input.get("content")
        return None if not isinstance(new, str) else _diff(path, old, new)
    before, after = input.get("old_string"), input.get("new_string")
    if old is None or not isinstance(before, str) or not isinstance(after, str) or not before:
        return None
    if before not in old:
        return None
    count = -1 if input.get("replace_all") else 1
    return _diff(path, old, old.replace(before, after, count))


def preview(name: str, input: dict[str, Any], cwd: str) -> dict[str, Any] | None:
    """What a Write or Edit shows before it is allowed, from its input alone (nothing is read
    for it): an Edit's replacement, a Write that creates a file; None otherwise (a Write over
    an existing file: its diff comes once the call is allowed)."""
    path = input.get("file_path")
    if name not in EDITS or not isinstance(path, str) or not path:
        return None
    path = absolute(path, cwd)
    if name == "Write":
        new = input.get("content")
        return (
            _diff(path, None, new) if isinstance(new, str) and not os.path.lexists(path) else None
        )
    before, after = input.get("old_string"), input.get("new_string")
    if not isinstance(before, str) or not isinstance(after, str) or not before:
        return None
    return _diff(path, before, after)


def _diff(path: str, old: str | None, new: str) -> dict[str, Any]:
    d: dict[str, Any] = {"type": "diff", "path": path, "newText": new}
    if old is not None:
        d["oldText"] = old
    return d


def text_content(text: str) -> dict[str, Any]:
    if len(text) > RESULT_LIMIT:
        text = text[:RESULT_LIMIT] + f"\n… ({len(text) - RESULT_LIMIT} more characters)"
    return {"type": "content", "content": {"type": "text", "text": text}}


def start(call_id: str, name: str, input: dict[str, Any], cwd: str, edit: Any) -> dict[str, Any]:
    """The `tool_call` update announcing a call (pending: it may still ask)."""
    update: dict[str, Any] = {
        "sessionUpdate": "tool_call",
        "toolCallId": call_id,
        "title": title(name, input, cwd),
        "kind": kind(name),
        "status": "pending",
        "rawInput": input,
    }
    where = locations(name, input, cwd)
    if where:
        update["locations"] = where
    if edit is not None:
        update["content"] = [edit]
    return update


def end(call_id: str, result: str, failed: bool, edit: Any) -> dict[str, Any]:
    """The `tool_call_update` that closes a call: its status, the diff, the result text."""
    content = [edit] if edit is not None and not failed else []
    content.append(text_content(result))
    return {
        "sessionUpdate": "tool_call_update",
        "toolCallId": call_id,
        "status": "failed" if failed else "completed",
        "content": content,
    }
