"""A session directory: append-only messages.jsonl, meta.json, trace.jsonl, and its lock.

Lines are written with one `os.write` on an O_APPEND descriptor, so a signal can only land
between whole lines; a process killed mid-write leaves at most one torn line, which loading
skips with a warning.

What the model sees is `view()`: the last complete compaction record and every line after it
(CONTRACT section 10). A record is written in one `os.write` with the copies of the turns it
keeps, and carries a digest of each copy line: Linux may still cut a large write short (a
SIGKILL is checked between pages; a full disk), and a record whose copies are not all there,
byte for byte, is left out of the view with the copies that did arrive, so the previous view
stands, even after later lines are appended.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agi.errors import TimeLimit, UsageError
from agi.messages import COMPACTION, Usage

REDACTED = "[REDACTED]"


def make_private_dir(path: Path) -> None:
    """Create path, and any missing parents of it, as 0700 directories (path itself too)."""
    missing, parent = [], path
    while not parent.exists() and parent.parent != parent:
        missing.append(parent)
        parent = parent.parent
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
        os.chmod(directory, 0o700)
    os.chmod(path, 0o700)


def append_line(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        data = line.encode("utf-8", "surrogatepass")
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def line_digest(line: bytes) -> str:
    """Fingerprint of one line as written (without its newline), for a record's copies."""
    return hashlib.sha256(line).hexdigest()[:12]


def new_session_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + os.urandom(3).hex()


class Session:
    """One conversation on disk. Open it, lock it, then append."""

    def __init__(self, path: Path, secrets: list[str] | None = None):
        self.path = path
        self.secrets = [s for s in (secrets or []) if s and len(s) >= 4]
        self.messages: list[dict[str, Any]] = []  # every line, as stored
        self.view_start = 0  # index in messages of the compaction record the view starts at
        self.hidden: set[int] = set()  # indices of unfinished compactions' lines (not in view)
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
        if path.exists() and not path.is_dir():
            raise UsageError(f"session {path} is not a directory")
        # a lone lock file is a concurrent run creating this session right now
        others = path.is_dir() and any(
            p.name != "lock" and not p.name.startswith(".meta.") for p in path.iterdir()
        )
        if others and not (path / "meta.json").exists():
            raise UsageError(
                f"{path} is not an agi session (no meta.json) and is not empty; refusing to use it"
            )
        make_private_dir(path)
        return cls(path, secrets)

    def lock(self, deadline: float | None = None, timeout: float | None = None) -> None:
        """Hold the session for this process; wait for another run, within the deadline."""
        fd = os.open(self.path / "lock", os.O_RDWR | os.O_CREAT, 0o600)
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

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing releases the flock
            self._lock_fd = None

    def load(self, repair: bool = False) -> None:
        """Read meta.json and messages.jsonl; unparsable (torn) lines are skipped with a warning.

        With `repair` (only under the lock), a torn last line is ended so the next one stands alone.
        """
        try:
            self.meta = json.loads(self.meta_file.read_text())
        except (FileNotFoundError, ValueError):
            self.meta = {}
        self.messages, self.view_start, self.hidden = [], 0, set()
        try:
            raw = self.messages_file.read_bytes()
        except FileNotFoundError:
            return
        lines = raw.split(b"\n")
        at: list[int] = []  # the line index of each message
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                message = json.loads(line)
                if not isinstance(message, dict) or "role" not in message:
                    raise ValueError("not a message")
            except ValueError:
                self.warnings.append(f"{self.messages_file}: skipped a damaged line {number}")
                continue
            at.append(number - 1)
            self.messages.append(message)
        self._find_view(lines, at)
        if repair and raw and not raw.endswith(b"\n"):
            append_line(self.messages_file, "\n")

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return text

    def _line(self, record: dict[str, Any]) -> str:
        return self.redact(json.dumps(record, ensure_ascii=False, default=str)) + "\n"

    def append(self, message: dict[str, Any]) -> None:
        line = self._line(message)
        self.mark()
        self.messages.append(json.loads(line))
        append_line(self.messages_file, line)

    def view(self) -> list[dict[str, Any]]:
        """What the model sees: the last complete compaction record and every line after it."""
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
        info["digests"] = [line_digest(c[:-1].encode("utf-8", "surrogatepass")) for c in copies]
        head = self._line({**record, COMPACTION: info})
        self.mark()
        append_line(self.messages_file, head + "".join(copies))
        self.view_start = len(self.messages)
        self.messages += [json.loads(line) for line in (head, *copies)]
        return self.messages[self.view_start]

    def _find_view(self, lines: list[bytes], at: list[int]) -> None:
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
                if line_digest(lines[line]) != digest:
                    break
                copies = n
            if copies == len(digests):
                self.view_start = index
            else:
                self.hidden.update(range(index, index + copies + 1))
                where = f"{self.messages_file}, line {at[index] + 1}"
                self.warnings.append(f"{where}: left out an unfinished compaction")

    def trace(self, record: dict[str, Any]) -> None:
        self.mark()
        append_line(self.trace_file, self._line({"time": round(time.time(), 3), **record}))

    def mark(self) -> None:
        """meta.json before any other file: another process must never find this directory
        holding agi's files without the mark, or it would refuse it as not a session."""
        if not self._marked:
            if not self.meta_file.exists():
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
                meta["first_prompt"] = str(first.get("content"))[:200]
        self.meta = meta
        tmp = self.path / f".meta.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.redact(json.dumps(meta, indent=1, ensure_ascii=False)) + "\n")
        os.replace(tmp, self.meta_file)

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


class SessionIndex:
    """`$AGI_HOME/index.jsonl`: one line per run, so `--continue` finds the latest session."""

    def __init__(self, home: Path):
        self.home = home
        self.file = home / "index.jsonl"

    def default_path(self) -> Path:
        return self.home / "sessions" / new_session_id()

    def record(self, path: Path) -> None:
        make_private_dir(self.home)
        append_line(
            self.file, json.dumps({"path": str(path.resolve()), "time": time.time()}) + "\n"
        )

    def latest(self) -> Path | None:
        return next(iter_sessions(self.home), None)


def session_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file())


def iter_sessions(home: Path) -> Iterator[Path]:
    """Sessions in the index that still exist, most recently used first, each once."""
    try:
        lines = (home / "index.jsonl").read_text().splitlines()
    except FileNotFoundError:
        return
    seen: set[str] = set()
    for line in reversed(lines):
        try:
            path = json.loads(line)["path"]
        except (ValueError, KeyError, TypeError):
            continue
        if path not in seen:
            seen.add(path)
            if (Path(path) / "meta.json").exists():
                yield Path(path)


def fork(source: Path, target: Path) -> None:
    """Copy a session into a new directory; the source is only read."""
    import shutil

    source = source.expanduser()
    if not (source / "meta.json").exists():
        raise UsageError(f"cannot fork {source}: not an agi session (no meta.json)")
    if target.exists() and any(target.iterdir()):
        raise UsageError(f"cannot fork into {target}: it exists and is not empty")
    make_private_dir(target)
    for name in ("messages.jsonl", "trace.jsonl"):
        if (source / name).exists():
            shutil.copyfile(source / name, target / name)
            os.chmod(target / name, 0o600)
    meta = json.loads((source / "meta.json").read_text())
    meta.update(id=target.name, forked_from=str(source.resolve()))
    fd = os.open(target / "meta.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
