"""From a session's worker thread to the editor: notifications (in order, never waited for),
requests that block the worker until answered or dropped (a cancel, a client gone), the
editor's files, and the view that turns a run's events into `session/update`s."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import stat
import sys
import threading
from typing import TYPE_CHECKING, Any

from agi.errors import ToolError
from agi.frontends.acp import tools as acp_tools
from agi.frontends.views.terminal import Silent
from agi.messages import Notice, ReasoningDelta, TextDelta, ToolEnd, ToolStart, UsageEvent
from agi.policy.environment import in_use
from agi.policy.redaction import redact_values

if TYPE_CHECKING:
    from agi.engine.seams import Event


def _quiet_task(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


class Dropped(Exception):
    """A request to the editor that was dropped before it was answered."""


class Bridge:
    def __init__(self, loop: asyncio.AbstractEventLoop, conn: Any, session_id: str):
        self.loop, self.conn, self.session_id = loop, conn, session_id
        self.pending: set[concurrent.futures.Future[Any]] = set()
        self.lock = threading.Lock()
        self.closed = False
        self.queued: list[dict[str, Any]] = []  # updates waiting for the loop
        self.waking = False  # the loop has been asked to send them

    def notify(self, update: dict[str, Any]) -> None:
        """Queue a `session/update`; one wake-up of the loop sends all that queued meanwhile,
        in order (and before any request made after them)."""
        update = redact_values(update, in_use())  # value by value (docs: security)
        with self.lock:
            if self.closed:
                return
            self.queued.append(update)
            if self.waking:
                return
            self.waking = True
            if self.loop is None:  # a session opened before the library serves: attach sends
                return
        try:
            self.loop.call_soon_threadsafe(self._send_queued)
        except RuntimeError:  # the loop has ended: the client is gone
            pass

    def attach(self, loop: asyncio.AbstractEventLoop, conn: Any) -> None:
        """The loop and connection of a session opened before the library served (on the
        loop): what was queued meanwhile is sent."""
        with self.lock:
            self.loop, self.conn = loop, conn
            if not self.queued:
                return
        loop.call_soon(self._send_queued)

    def _send_queued(self) -> None:
        with self.lock:
            updates, self.queued, self.waking = self.queued, [], False
        # the updates are built in the protocol's own JSON (the tests validate every one
        # against the v1 schema), so they go out as they are: building the library's models
        # for each one only to dump them again cost a third of a tool step
        raw = self.conn._conn  # the library's JSON-RPC connection (acp < 0.13, pinned)
        for update in updates:
            params = {"sessionId": self.session_id, "update": update}
            call = raw.send_notification("session/update", params)
            asyncio.ensure_future(call).add_done_callback(_quiet_task)

    def call(self, coroutine: Any) -> Any:
        """Run a request on the loop and wait for its answer; Dropped when it is dropped."""
        with self.lock:
            if self.closed:
                coroutine.close()
                raise Dropped()
            try:
                future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
            except RuntimeError:  # the loop has ended: the client is gone
                coroutine.close()
                raise Dropped() from None
            self.pending.add(future)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise Dropped() from None
        finally:
            with self.lock:
                self.pending.discard(future)

    def drop(self, close: bool = False) -> None:
        """Drop every request waiting for an answer (from any thread)."""
        with self.lock:
            self.closed = self.closed or close
            pending = list(self.pending)
        for future in pending:
            future.cancel()


class EditorFiles:
    """The editor's files (agi.tools.editor.Files): `fs/read_text_file`, `fs/write_text_file`."""

    def __init__(self, bridge: Bridge, reads: bool, writes: bool):
        self.bridge, self.reads, self.writes = bridge, reads, writes

    def read(self, path: str) -> str:
        try:
            call = self.bridge.conn.read_text_file(session_id=self.bridge.session_id, path=path)
            return str(self.bridge.call(call).content)
        except Dropped:
            raise ToolError(f"cannot read {path}: the editor did not answer (cancelled)") from None
        except Exception as e:  # the client's error, in its words
            raise ToolError(f"cannot read {path} in the editor: {_said(e)}") from e

    def write(self, path: str, text: str) -> None:
        try:
            call = self.bridge.conn.write_text_file(
                session_id=self.bridge.session_id, path=path, content=text
            )
            self.bridge.call(call)
        except Dropped:
            raise ToolError(f"cannot write {path}: the editor did not answer (cancelled)") from None
        except Exception as e:
            raise ToolError(f"cannot write {path} in the editor: {_said(e)}") from e

    def current(self, path: str) -> str | None:
        """A file's text before a Write or Edit (for its diff); None when there is none;
        ValueError (no diff) for anything but a regular file of at most DIFF_LIMIT bytes."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO: at once
        except FileNotFoundError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > acp_tools.DIFF_LIMIT:
                raise ValueError(f"{path}: no diff (not a regular file, or a large one)")
            if self.reads:
                return self.read(path)
            data = os.read(fd, acp_tools.DIFF_LIMIT + 1)
            if len(data) > acp_tools.DIFF_LIMIT:
                raise ValueError(f"{path}: no diff (a large file)")
            return data.decode("utf-8", "replace")
        finally:
            os.close(fd)


def _said(error: Exception) -> str:
    message = getattr(error, "message", None) or str(error) or type(error).__name__
    data = getattr(error, "data", None)
    return f"{message} ({data})" if isinstance(data, str | dict) and data else str(message)


class EditorView(Silent):
    """A run's events as `session/update` notifications."""

    def __init__(self, session: Any):
        super().__init__()
        self.session = session

    def warn(self, text: str) -> None:
        if self.session.verbose:
            sys.stderr.write(f"agi: {text}\n")
            sys.stderr.flush()

    def child(self, event: Event) -> None:
        """A subagent's event: its tool calls are shown (with their diffs), its text is not
        (the Task's result carries it)."""
        if isinstance(event, ToolStart | ToolEnd):
            self.handle(event)

    def handle(self, event: Event) -> None:
        notify = self.session.bridge.notify
        if isinstance(event, TextDelta):
            notify(_chunk("agent_message_chunk", event.text))
        elif isinstance(event, ReasoningDelta):
            notify(_chunk("agent_thought_chunk", event.text))
        elif isinstance(event, ToolStart):
            self.session.announce(event.call.id, event.call.name, event.input)
        elif isinstance(event, ToolEnd):
            edit = self.session.edits.get(event.call.id)
            failed = event.is_error or self.session.cancelled.is_set()  # killed by a cancel
            notify(acp_tools.end(event.call.id, event.result, failed, edit))
            self.session.ended(event.call.id)
        elif isinstance(event, UsageEvent):
            update = self.session.usage_update(event.usage)
            if update is not None:
                notify(update)
        elif isinstance(event, Notice):
            notify(_chunk("agent_thought_chunk", f"\n[agi: {event.text}]\n"))


def _chunk(kind: str, text: str) -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
