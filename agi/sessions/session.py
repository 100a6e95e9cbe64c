"""A session directory: append-only messages.jsonl, meta.json, trace.jsonl, and its lock.

Lines are written with one `os.write` on an O_APPEND descriptor, so a signal can only land
between whole lines; a process killed mid-write leaves at most one torn line, which loading
skips with a warning. Files are opened as agi.sessions.files says: never through a link.

What the model sees is `view()`: the last complete compaction record and every line after it
(docs: long-sessions). A record is written in one `os.write` with the copies of the turns it
keeps, and carries a digest of each copy line: Linux may still cut a large write short (a
SIGKILL is checked between pages; a full disk), and a record whose copies are not all there,
byte for byte, is left out of the view with the copies that did arrive, so the previous view
stands, even after later lines are appended.

What reaches a file is valid UTF-8 (agi.policy.decoding.clean), and what is read back is checked
line by line: a line of the wrong shape is skipped (or its bad field dropped) with a warning.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agi.attachments import valid_name
from agi.checkpoints.rewinds import rewound_view
from agi.errors import TimeLimit, UsageError
from agi.messages import COMPACTION, Usage
from agi.policy.decoding import clean
from agi.policy.redaction import REDACTED, redact, redact_chunks, usable
from agi.sessions.files import (
    SESSION_FILES,
    append_line,
    check_directory,
    ends_open,
    make_private_dir,
    open_file,
    read_bytes,
    read_lines,
    refused,
    replace_file,
)
from agi.sessions.finite import finite_meta
from agi.sessions.index import (
    SessionIndex,
    index_held,
    iter_sessions,
    new_session_id,
    session_size,
)

__all__ = [
    "REDACTED",
    "MemorySession",
    "Session",
    "SessionIndex",
    "append_line",
    "index_held",
    "iter_sessions",
    "make_private_dir",
    "new_session_id",
    "session_size",
]
FILES = (*SESSION_FILES, "transcript.jsonl")
ROLES = ("system", "user", "assistant", "tool")
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def line_digest(line: bytes) -> str:
    """Fingerprint of one line as written (without its newline), for a record's copies."""
    import hashlib  # only where a compaction record is: not at every start

    return hashlib.sha256(line).hexdigest()[:12]


def read_meta(path: Path, warnings: list[str] | None = None) -> dict[str, Any]:
    """A session's meta.json as an object; anything else (damaged, a list, a number) is empty,
    with a warning."""
    try:
        raw = read_bytes(path / "meta.json", limit=16 << 20)  # larger: damaged, not read
    except UsageError as e:
        if warnings is not None:
            warnings.append(str(e))
        return {}
    if raw is None:
        return {}
    try:
        meta = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        meta = None
    if not isinstance(meta, dict):
        if warnings is not None:
            warnings.append(f"{path / 'meta.json'} is damaged (not a JSON object); rewriting it")
        return {}
    return finite_meta(meta, path / "meta.json", warnings)


def parse_line(line: bytes) -> Any:
    """A stored JSON line, its text clean: no lone surrogate, not even from a `\\ud83d` escape."""
    text = line.decode("utf-8", "replace")
    value = json.loads(text)
    if SURROGATE_ESCAPE.search(text):
        value = json.loads(clean(json.dumps(value, ensure_ascii=False)))
    return value


def checked_message(message: Any) -> tuple[dict[str, Any] | None, str]:
    """A stored line as a message, its bad fields dropped: (message or None, what was wrong)."""
    if not isinstance(message, dict) or message.get("role") not in ROLES:
        return None, "not a message"
    content = message.get("content")
    if content is not None and not isinstance(content, (str, list)):
        return None, "its content is not text"
    calls = message.get("tool_calls")
    if calls is None:
        return message, ""
    good = [c for c in calls if _valid_call(c)] if isinstance(calls, list) else []
    if isinstance(calls, list) and len(good) == len(calls):
        return message, ""
    fixed = {k: v for k, v in message.items() if k != "tool_calls"}
    if good:
        fixed["tool_calls"] = good
    return fixed, "dropped malformed tool calls"


def _valid_call(call: Any) -> bool:
    fn = call.get("function") if isinstance(call, dict) else None
    return (
        isinstance(fn, dict)
        and isinstance(call.get("id", ""), str)
        and isinstance(fn.get("name"), str)
        and isinstance(fn.get("arguments", ""), str)
    )


class Session:
    """One conversation on disk. Open it, lock it, then append."""

    ephemeral = False  # a MemorySession's conversation is in this process alone

    def __init__(self, path: Path, secrets: list[str] | None = None):
        self.path = path
        self.secrets = usable(list(secrets or []))
        self.messages: list[dict[str, Any]] = []  # every line, as stored
        self.view_start = 0  # index in messages of the compaction record the view starts at
        self.hidden: set[int] = set()  # indices of unfinished compactions' lines (not in view)
        self.visible: list[int] | None = None  # the view's indices, when rewinds were recorded
        self.meta: dict[str, Any] = {}
        self.warnings: list[str] = []
        self._lock_fd: int | None = None
        self._marked = False

    @property
    def messages_file(self) -> Path:
        return self.path / "messages.jsonl"

    @property
    def trace_file(self) -> Path:
        return self.path / "trace.jsonl"

    @property
    def meta_file(self) -> Path:
        return self.path / "meta.json"

    @classmethod
    def open(cls, path: Path, secrets: list[str] | None = None) -> Session:
        """Create or continue a session at `path`; refuse a non-empty directory of other files."""
        path = path.expanduser()
        warnings = check_directory(path, FILES)  # a link, a file, no access: exit 2 now
        try:  # a lone lock file is a concurrent run creating this session right now
            others = path.is_dir() and any(
                p.name != "lock" and not p.name.startswith(".meta.") for p in path.iterdir()
            )
        except OSError as e:
            raise refused(path, e.strerror or str(e)) from e
        if others and not os.path.lexists(path / "meta.json"):
            raise UsageError(
                f"{path} is not an agi session (no meta.json) and is not empty; refusing to use it"
            )
        make_private_dir(path)
        session = cls(path, secrets)
        session.warnings += warnings
        return session

    def lock(self, deadline: float | None = None, timeout: float | None = None) -> None:
        """Hold the session for this process; wait for another run, within the deadline."""
        fd = open_file(self.path / "lock", os.O_RDWR, create=True)
        if deadline is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        os.close(fd)
                        raise TimeLimit(timeout or 0) from None
                    time.sleep(0.02)
        self._lock_fd = fd
        self.load(repair=True)

    @contextmanager
    def locked(self, deadline: float | None = None, timeout: float | None = None) -> Iterator[Any]:
        """The session held for this process while the block runs (see `lock`)."""
        self.lock(deadline, timeout)
        try:
            yield self
        finally:
            self.unlock()

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing releases the flock
            self._lock_fd = None

    def load(self, repair: bool = False) -> None:
        """Read meta.json and messages.jsonl; unparsable (torn) lines are skipped with a warning.

        With `repair` (only under the lock), a torn last line is ended so the next one stands alone.
        """
        self.meta = read_meta(self.path, self.warnings)
        self.messages, self.view_start, self.hidden, self.visible = [], 0, set(), None
        at: list[int] = []  # the line index of each message
        printed: list[str] = []  # and the fingerprint of its line
        for number, line in enumerate(read_lines(self.messages_file), 1):  # a stream
            if line is None:
                self.warnings.append(f"{self.messages_file}: skipped line {number}: too long")
                continue
            if not line.strip():
                continue
            try:  # bytes that are not UTF-8 (another program's) become U+FFFD, not a crash
                message, wrong = checked_message(parse_line(line))
            except ValueError:
                message, wrong = None, ""
            if message is None:
                why = f" ({wrong})" if wrong else ""
                self.warnings.append(f"{self.messages_file}: skipped a damaged line {number}{why}")
                continue
            if wrong:
                self.warnings.append(f"{self.messages_file}, line {number}: {wrong}")
            at.append(number - 1)
            printed.append(line_digest(line))
            self.messages.append(message)
        self._find_view(printed, at)
        self.visible = rewound_view(self.messages, self.hidden)  # section 18
        if repair and ends_open(self.messages_file):
            append_line(self.messages_file, "\n")

    def redact(self, text: str) -> str:
        return redact(text, self.secrets)

    def _line(self, record: dict[str, Any]) -> str:
        """One stored line: valid UTF-8 (surrogates cleaned), keys redacted."""
        return clean(self.redact(json.dumps(record, ensure_ascii=False, default=str))) + "\n"

    def append(self, message: dict[str, Any]) -> None:
        line = self._line(message)
        self.mark()
        self.messages.append(json.loads(line))
        if self.visible is not None:
            self.visible.append(len(self.messages) - 1)
        append_line(self.messages_file, line)

    def attach(self, name: str, data: bytes) -> None:
        """Keep an attached file as `name` (`attachments/SHA256.EXT`), once (docs: attachments)."""
        if valid_name(name) and not os.path.lexists(self.path / name):
            self.mark()
            check_directory(self.path)  # its attachments/ is no link
            make_private_dir(self.path / "attachments")
            replace_file(self.path / name, data)

    def attachment(self, name: str) -> bytes | None:
        """An attached file's bytes, or None when the session no longer holds it."""
        try:
            return read_bytes(self.path / name) if valid_name(name) else None
        except (OSError, UsageError):
            return None

    def view(self) -> list[dict[str, Any]]:
        """What the model sees: the last complete compaction record and every line after it
        (with rewind records: as agi.checkpoints.rewinds says)."""
        if self.visible is not None:
            return [self.messages[i] for i in self.visible]
        if not self.hidden:
            return self.messages[self.view_start :]
        start, hidden = self.view_start, self.hidden
        return [m for i, m in enumerate(self.messages) if i >= start and i not in hidden]

    def append_compaction(
        self, record: dict[str, Any], kept: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """Append a compaction record and copies of the messages it keeps, in one write; the view
        starts at the record from now on. Returns the record as stored."""
        copies = [self._line(m) for m in kept]
        info = {**(record.get(COMPACTION) or {}), "kept": len(copies)}
        info["digests"] = [line_digest(c[:-1].encode("utf-8")) for c in copies]
        head = self._line({**record, COMPACTION: info})
        self.mark()
        append_line(self.messages_file, head + "".join(copies))
        self.view_start, self.visible = len(self.messages), None
        self.messages += [json.loads(line) for line in (head, *copies)]
        return self.messages[self.view_start]

    def _find_view(self, printed: list[str], at: list[int]) -> None:
        """Set view_start to the last complete record; hide unfinished ones and their copies.
        A record without digests (written by hand, or by another tool) is taken as it is."""
        for index, message in enumerate(self.messages):
            info = message.get(COMPACTION)
            if not isinstance(info, dict):
                continue
            digests = info.get("digests")
            if not isinstance(digests, list):
                self.view_start = index
                continue
            copies = 0  # the copies that follow, line after line, unchanged
            for n, digest in enumerate(digests, 1):
                line = at[index] + n
                if index + n >= len(at) or at[index + n] != line:
                    break
                if printed[index + n] != digest:  # the fingerprint of the line it is on
                    break
                copies = n
            if copies == len(digests):
                self.view_start = index
            else:
                self.hidden.update(range(index, index + copies + 1))
                where = f"{self.messages_file}, line {at[index] + 1}"
                self.warnings.append(f"{where}: left out an unfinished compaction")

    def trace(self, record: dict[str, Any]) -> None:
        if self.secrets and isinstance(record.get("chunks"), list):  # a key streamed in pieces
            record = {**record, "chunks": redact_chunks(record["chunks"], self.secrets)}
        self.mark()
        append_line(self.trace_file, self._line({"time": round(time.time(), 3), **record}))

    def mark(self) -> None:
        """meta.json before any other file: another process must never find this directory
        holding agi's files without the mark, or it would refuse it as not a session."""
        if not self._marked:
            if not os.path.lexists(self.meta_file):
                self.write_meta()
            self._marked = True

    def write_meta(self, **updates: Any) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        meta = {"agi_session": 1, "id": self.path.name, "created": now, **self.meta, **updates}
        meta["updated"] = now
        meta["messages"] = len(self.messages)
        if "first_prompt" not in meta:
            first = next((m for m in self.messages if m.get("role") == "user"), None)
            if first:
                meta["first_prompt"] = prompt_text(first.get("content"))[:200]
        self.meta = meta
        text = clean(self.redact(json.dumps(meta, indent=1, ensure_ascii=False, default=str)))
        replace_file(self.meta_file, (text + "\n").encode("utf-8"))

    def add_usage(self, usage: Usage) -> None:
        """Add model calls to the session's running total, `usage` in meta.json (the same keys
        as `--output json`); the next write_meta() stores it. Call it holding the lock."""
        if not usage.empty:
            self.meta["usage"] = (Usage.from_dict(self.meta.get("usage")) + usage).to_dict()

    def pending_tool_calls(self) -> list[dict[str, Any]]:
        """Tool calls of the last assistant message that never got a result (a killed run)."""
        messages = self.view()
        for i in range(len(messages) - 1, -1, -1):
            message = messages[i]
            if message.get("role") == "assistant":
                answered = {
                    m.get("tool_call_id") for m in messages[i + 1 :] if m.get("role") == "tool"
                }
                return [c for c in message.get("tool_calls") or [] if c.get("id") not in answered]
            if message.get("role") == "user":
                return []
        return []


class MemorySession(Session):
    """A conversation kept in this process alone (docs: volume): an ephemeral run's. Nothing
    reaches a disk: no messages.jsonl, meta.json, trace.jsonl or lock. Its `path` lies under
    /dev/null, so that anything that tried to write beside it would fail instead of leaving a
    file; `ephemeral` tells the run to report no session."""

    ephemeral = True

    def __init__(self, secrets: list[str] | None = None):
        super().__init__(Path(os.devnull) / new_session_id(), secrets)
        self._marked = True
        self.files: dict[str, bytes] = {}  # attached files (docs: attachments)

    def lock(self, deadline: float | None = None, timeout: float | None = None) -> None:
        pass  # no other process can see it

    def unlock(self) -> None:
        pass

    def load(self, repair: bool = False) -> None:
        pass  # what it holds is what this process appended

    def append(self, message: dict[str, Any]) -> None:
        self.messages.append(json.loads(self._line(message)))
        if self.visible is not None:
            self.visible.append(len(self.messages) - 1)

    def append_compaction(
        self, record: dict[str, Any], kept: list[dict[str, Any]]
    ) -> dict[str, Any]:
        info = {**(record.get(COMPACTION) or {}), "kept": len(kept)}
        self.view_start, self.visible = len(self.messages), None
        lines = [self._line({**record, COMPACTION: info}), *(self._line(m) for m in kept)]
        self.messages += [json.loads(line) for line in lines]
        return self.messages[self.view_start]

    def trace(self, record: dict[str, Any]) -> None:
        pass  # a trace is a file of the session's, and there is none

    def attach(self, name: str, data: bytes) -> None:
        self.files[name] = data  # kept in this process alone, like the conversation

    def attachment(self, name: str) -> bytes | None:
        return self.files.get(name)

    def write_meta(self, **updates: Any) -> None:
        self.meta = {**self.meta, **updates, "messages": len(self.messages)}


def prompt_text(content: object) -> str:
    """A user message's text: its text parts when it has parts (attachments are not text)."""
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "\n".join(p for p in parts if isinstance(p, str))
    return str(content)
