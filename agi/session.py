"""A session directory: append-only messages.jsonl, meta.json, trace.jsonl, and its lock.

Lines are written with one `os.write` on an O_APPEND descriptor, so a signal can only land
between whole lines; a process killed mid-write leaves at most one torn line, which loading
skips with a warning.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agi.errors import TimeLimit, UsageError

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


def new_session_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + os.urandom(3).hex()


class Session:
    """One conversation on disk. Open it, lock it, then append."""

    def __init__(self, path: Path, secrets: list[str] | None = None):
        self.path = path
        self.secrets = [s for s in (secrets or []) if s and len(s) >= 4]
        self.messages: list[dict[str, Any]] = []
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
        self.messages = []
        try:
            raw = self.messages_file.read_bytes()
        except FileNotFoundError:
            return
        for number, line in enumerate(raw.split(b"\n"), 1):
            if not line.strip():
                continue
            try:
                message = json.loads(line)
                if not isinstance(message, dict) or "role" not in message:
                    raise ValueError("not a message")
            except ValueError:
                self.warnings.append(f"{self.messages_file}: skipped a damaged line {number}")
                continue
            self.messages.append(message)
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

    def pending_tool_calls(self) -> list[dict[str, Any]]:
        """Tool calls of the last assistant message that never got a result (a killed run)."""
        for i in range(len(self.messages) - 1, -1, -1):
            message = self.messages[i]
            if message.get("role") == "assistant":
                answered = {
                    m.get("tool_call_id") for m in self.messages[i + 1 :] if m.get("role") == "tool"
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
