"""`$AGI_HOME/index.jsonl`: the sessions agi ran, one line per run (docs: sessions), and its lock.

`--continue` takes the latest session still there that a person's run used (a batch job's, an MCP
call's, an ACP or HTTP session's line says `"latest": false`: listed, never continued by `-c`);
`--prune` rewrites the index under LOCK_EX while every run appends under LOCK_SH (docs: volume).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agi.errors import UsageError
from agi.sessions.files import append_line, make_private_dir, open_file, read_lines


def new_session_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + os.urandom(6).hex()  # many per second


class SessionIndex:
    """`$AGI_HOME/index.jsonl`: one line per run, so `--continue` finds the latest session."""

    def __init__(self, home: Path):
        self.home = home
        self.file = home / "index.jsonl"

    def default_path(self) -> Path:
        return self.home / "sessions" / new_session_id()

    def record(self, path: Path, latest: bool = True) -> None:
        """ASCII JSON: a path that is not UTF-8 is kept as escapes and found again as it was.
        `latest=False`: a run no person started here (batch, MCP, ACP, HTTP): `-c` skips it."""
        make_private_dir(self.home)
        entry: dict[str, object] = {"path": str(path.resolve()), "time": time.time()}
        if not latest:
            entry["latest"] = False
        line = json.dumps(entry) + "\n"
        with index_held(self.file, fcntl.LOCK_SH):  # not while --prune rewrites it
            append_line(self.file, line)

    def latest(self) -> Path | None:
        """The session `-c` continues: the last one a command-line or interactive run used."""
        return next(iter_sessions(self.home, continuable=True), None)


@contextmanager
def index_held(file: Path, how: int) -> Iterator[int]:
    """The index file locked (LOCK_SH to append a line, LOCK_EX to rewrite it: docs: volume),
    the lock held on the file the path names when it is granted (one rewritten meanwhile is
    locked again); yields the descriptor."""
    while True:
        fd = open_file(file, os.O_RDWR, create=True)
        try:
            fcntl.flock(fd, how)
            if os.fstat(fd).st_ino == os.lstat(file).st_ino:
                break
        except FileNotFoundError:
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    try:
        yield fd
    finally:
        os.close(fd)


def session_size(path: Path) -> int:
    total = 0
    try:
        for entry in os.scandir(path):
            if entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
    except OSError:
        pass
    return total


def iter_sessions(home: Path, continuable: bool = False) -> Iterator[Path]:
    """Sessions in the index that still exist, most recently used first, each once;
    `continuable`: only by the runs `-c` may continue after (lines without `"latest": false`)."""
    try:
        lines = [line for line in read_lines(home / "index.jsonl") if line is not None]
    except UsageError:
        return
    seen: set[str] = set()
    for line in reversed(lines):
        try:
            entry = json.loads(line)
            path = entry["path"]
        except (ValueError, KeyError, TypeError):
            continue
        if continuable and entry.get("latest") is False:
            continue
        if isinstance(path, str) and path not in seen:
            seen.add(path)
            if os.path.lexists(Path(path) / "meta.json"):
                yield Path(path)
