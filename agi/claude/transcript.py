"""`transcript.jsonl`: the session in Claude Code's transcript line format, for hook scripts.

Hooks get its path as `transcript_path` and read it the way they read Claude Code's own
(`grep '"role":"assistant"' | tail -1 | jq '.message.content[]'`), so each line is compact JSON
with no spaces after `:` and `,`. One line per line of messages.jsonl, appended before a hook
runs and only for what is new; nothing is written in a run without hooks. messages.jsonl stays
the session's record; this file is derived from it.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

from agi.messages import COMPACTION
from agi.sessions.files import read_lines
from agi.sessions.session import Session, append_line

NAME = "transcript.jsonl"


def path_of(session: Session) -> Path:
    return session.path / NAME


def _now() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _arguments(text: Any) -> Any:
    try:
        value = json.loads(text or "{}")
    except (TypeError, ValueError):
        return {"_raw": text}
    return value if isinstance(value, dict) else {"_raw": text}


def blocks(message: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """(line type, content blocks) of one OpenAI-format message."""
    role = message.get("role")
    if role == "assistant":
        content: list[dict[str, Any]] = []
        thinking = message.get("reasoning_content")
        if isinstance(thinking, str) and thinking:
            content.append({"type": "thinking", "thinking": thinking})
        if _text(message.get("content")):
            content.append({"type": "text", "text": _text(message.get("content"))})
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            tool_use = {"type": "tool_use", "id": call.get("id", ""), "name": function.get("name")}
            tool_use["input"] = _arguments(function.get("arguments"))
            content.append(tool_use)
        return "assistant", content
    if role == "tool":
        result = {"type": "tool_result", "tool_use_id": message.get("tool_call_id", "")}
        result["content"] = _text(message.get("content"))
        if result["content"].startswith("Error"):
            result["is_error"] = True
        return "user", [result]
    return "user", [{"type": "text", "text": _text(message.get("content"))}]


class Transcript:
    """Keeps transcript.jsonl up to date with a session's messages, appending only new lines."""

    def __init__(self, session: Session, cwd: str | None = None, file: Path | None = None):
        self.session, self.cwd = session, cwd or os.getcwd()
        self.file = path_of(session) if file is None else file  # `file`: the SDKs' place
        self.written = -1  # messages already in the file; -1: not counted yet
        self.size = -1  # the file's size when last written or counted
        self.parent: str | None = None  # the uuid of the last line

    def _count(self) -> None:
        """Read how far the file goes (once, or after another process appended to it)."""
        try:  # before reading: a line appended meanwhile makes the next update count again
            size = self.file.stat().st_size
        except FileNotFoundError:
            size = 0
        count, last = 0, None
        for line in read_lines(self.file):  # a stream: never the whole file (section 20)
            if line is None or line.strip():
                count, last = count + 1, line
        self.written, self.size, self.parent = count, size, None
        if last:
            try:
                self.parent = json.loads(last).get("uuid")
            except (ValueError, AttributeError):
                self.parent = None

    def update(self) -> Path:
        """Append the lines for messages not yet in the file; returns its path."""
        try:
            size = self.file.stat().st_size
        except FileNotFoundError:
            size = 0
        if self.written < 0 or size != self.size:
            self._count()
        new = self.session.messages[self.written :]
        if not new:
            return self.file
        out = []
        for message in new:
            kind, content = blocks(message)
            line: dict[str, Any] = {"parentUuid": self.parent, "isSidechain": False}
            line.update(userType="external", cwd=self.cwd, sessionId=self.session.path.name)
            line.update(type=kind, message={"role": kind, "content": content})
            if COMPACTION in message:
                line["isCompactSummary"] = True
            self.parent = str(uuid.uuid4())
            line.update(uuid=self.parent, timestamp=_now())
            out.append(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
        text = self.session.redact("".join(out))
        append_line(self.file, text)
        self.written += len(new)
        self.size = size + len(text.encode("utf-8", "surrogatepass"))
        return self.file
