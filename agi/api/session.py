"""`agi.Session`: a conversation kept in a session directory, each `ask` one run in it (as
`agi -s DIR PROMPT` is); runs asking the same session, in threads or processes, take turns
(the session's lock)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from agi.api.options import resolve
from agi.api.runs import AsyncStream, Job, Stream, quiet_view, threaded
from agi.engine.result import RunResult
from agi.errors import UsageError
from agi.options.config import agi_home
from agi.sessions.fork import fork
from agi.sessions.session import SessionIndex


class Session:
    """A conversation: `Session(path=None, **options)` continues the session at `path` (made
    when first asked), or starts a new one under AGI_HOME at the first `ask`; `options` are
    `agi.run`'s, for every turn (a turn's own keyword arguments win)."""

    def __init__(self, path: str | os.PathLike[str] | None = None, **options: Any):
        if "session" in options:
            raise TypeError("agi.Session takes its directory as `path`, not `session=`")
        self._path = None if path is None else Path(os.fspath(path)).expanduser()
        self.options = options
        self._lock = threading.Lock()

    @property
    def path(self) -> Path | None:
        """The session's directory (None until a new session's first `ask`)."""
        return self._path

    def _call(self, prompt: str, per_turn: dict[str, Any], source: str) -> Any:
        with self._lock:  # two threads starting a new session share the one directory
            if self._path is None:
                self._path = SessionIndex(agi_home()).default_path()
        return resolve(prompt, {**self.options, **per_turn, "session": self._path}, source)

    def ask(self, prompt: str, **per_turn: Any) -> RunResult:
        """One turn: the prompt to its `agi.Result`, as `agi.run` (errors raise)."""
        call = self._call(prompt, per_turn, "agi.Session.ask()")
        return Job(call).execute(quiet_view(call))

    def stream(self, prompt: str, **per_turn: Any) -> Stream:
        """One turn's typed events, as `agi.stream` (a `with` block; leaving it cancels)."""
        return Stream(self._call(prompt, per_turn, "agi.Session.stream()"))

    def astream(self, prompt: str, **per_turn: Any) -> AsyncStream:
        """One turn's typed events for asyncio, as `agi.astream`."""
        return AsyncStream(self._call(prompt, per_turn, "agi.Session.astream()"))

    async def aask(self, prompt: str, **per_turn: Any) -> RunResult:
        """`ask` for asyncio: cancelling the awaiting task cancels the turn."""
        call = self._call(prompt, per_turn, "agi.Session.aask()")
        job = Job(call)
        return await threaded(job, lambda: job.execute(quiet_view(call)))  # type: ignore[no-any-return]

    def fork(self, path: str | os.PathLike[str] | None = None) -> Session:
        """A copy of the conversation so far, at `path` (None: a new directory under
        AGI_HOME), with the same options; this session is only read."""
        if self._path is None or not (self._path / "meta.json").exists():
            raise UsageError("agi.Session.fork(): nothing to fork: the session has no turn yet")
        target = SessionIndex(agi_home()).default_path() if path is None else Path(path)
        fork(self._path, target)
        return Session(target, **self.options)

    def __repr__(self) -> str:
        return f"agi.Session({str(self._path) if self._path else None!r})"
