"""One ACP session: an ordinary agi session directory (its absolute path is the sessionId), the
run that serves it, and its turns, each on a worker thread of its own."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from agi.claude.commands import first_word
from agi.errors import AgiError, Cancelled, StepLimit
from agi.frontends.acp import tools as acp_tools
from agi.frontends.acp.bridge import Bridge, EditorFiles, EditorView
from agi.frontends.acp.permissions import SessionRules
from agi.messages import Usage
from agi.policy.environment import in_use
from agi.policy.redaction import redact_values


class Failed(Exception):
    """A turn that failed as agi reports it: one line, and the exit code it would have had."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


class EditorSession:
    def __init__(
        self, server: Any, path: Path, cwd: str, mcp: list[Any], loaded: bool, carried: Any = None
    ):
        self.server, self.path, self.cwd, self.mcp = server, path, cwd, mcp
        self.id = str(path)
        self.loaded = loaded  # session/load: SessionStart says "resume"
        self.verbose = server.verbose
        self.mode = server.mode
        self.model: str | None = None  # set_config_option: provider:model
        self.rules = SessionRules(path)
        self.bridge = Bridge(server.loop, server.conn, self.id)
        caps = server.fs
        self.files = EditorFiles(self.bridge, caps[0], caps[1])
        self.label = ""  # the model's provider:model
        self.learned: list[Any] = []  # the session's rules; "always" answers are added
        self.worker: threading.Thread | None = None
        self.run: Any = None
        self.carried: Any = carried  # the run of the session this one replaces (session/load)
        self.stale = True  # the model changed: a new run before the next turn
        self.busy = False
        self.cancelled = threading.Event()
        self.edits: dict[str, Any] = {}  # call id -> the diff of a Write or Edit
        self.inputs: dict[str, tuple[str, dict[str, Any]]] = {}  # call id -> (tool, input)
        self.announced: dict[str, dict[str, Any]] = {}  # calls told of and not yet ended
        self.rejected: set[str] = set()  # calls the person said no to
        self.prior_cost = 0.0  # what the session cost before this process served it
        self.started_hooks = False

    def directories(self) -> list[str]:
        return [self.cwd]

    # --- the run ---------------------------------------------------------------------------

    def build(self) -> None:
        """A run for the session with its current model and mode (on a worker thread)."""
        old = self.run or self.carried
        if self.run is not None:
            self.run.close()
            self.run = None
        settings = self.server.settings_for(self.model, self.cwd)
        self.learned = self.rules.rules()  # the run's spec gives them; "always" answers join
        self.label = settings.model.label
        # one meter while this process serves the session: --max-cost is the session's budget,
        # which a change of model or a session/load does not reset
        meter = old.meter if old is not None else None
        saved = old.metered if old is not None else 0
        run = self.server.make_run(settings, EditorView(self), self, meter, saved)
        self.started_hooks = True  # SessionStart: when the session's first run opened
        session = run.session
        with run.locked():
            session.write_meta(model=self.label, cwd=self.cwd, acp=True)
        self.run, self.stale = run, False
        self.prior_cost = (Usage.from_dict(session.meta.get("usage")).cost or 0.0) - (
            run.meter.total.cost or 0.0
        )

    def set_mode(self, mode: str) -> None:
        self.mode = mode
        if self.run is not None:
            self.run.set_mode(mode)

    def set_model(self, model: str) -> None:
        self.model, self.stale = model, True

    # --- a turn ----------------------------------------------------------------------------

    async def prompt(self, text: str) -> str:
        """Run one turn on a worker thread; its stop reason, or Failed."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[str] = loop.create_future()

        def work() -> None:
            try:
                outcome: Any = self.turn(text)
            except BaseException as e:  # handed to the loop, raised there
                outcome = e
            try:
                loop.call_soon_threadsafe(_settle, done, outcome)
            except RuntimeError:  # the loop is gone: the client went away mid-turn
                pass

        self.busy = True
        self.cancelled.clear()
        try:
            self.worker = threading.Thread(target=work, name=f"acp {self.path.name}", daemon=True)
            self.worker.start()
            return await done
        finally:
            self.busy = False

    def turn(self, text: str) -> str:
        try:
            if self.stale or self.run is None:
                self.build()
            run = self.run
            run.resume()  # a cancelled turn's transports serve again
            if self.cancelled.is_set():  # cancelled while the run was being built
                return "cancelled"
            return self._turn(run, text)
        except Cancelled:
            return "cancelled"
        except StepLimit:
            return "cancelled" if self.cancelled.is_set() else "max_turn_requests"
        except AgiError as e:
            if self.cancelled.is_set():
                return "cancelled"
            message = self.run.redact(str(e)) if self.run is not None else str(e)
            raise Failed(message, e.exit_code) from e
        finally:
            self.close_calls()

    def _turn(self, run: Any, text: str) -> str:
        """The prompt as the run's turn (its clock, a `/command`, SessionStart's context), or
        the `/compact` it names."""
        if first_word(text) == "compact":
            summary = run.compact(text.strip()[len("/compact") :].strip())
            message = summary or "nothing to compact: the session holds no conversation"
            self.bridge.notify(_chunk("agent_message_chunk", message))
            return "end_turn"
        reply = run.turn(text)
        if self.cancelled.is_set():
            return "cancelled"
        return "max_tokens" if reply.finish_reason == "length" else "end_turn"

    def cancel(self) -> None:
        """Stop the turn: the model request closed, commands killed, questions dropped."""
        if not self.busy:
            return
        self.cancelled.set()
        self.bridge.drop()
        run = self.run
        if run is not None:
            run.interrupt()

    def close(self) -> None:
        """The client went away: stop everything this session runs."""
        self.cancelled.set()
        self.bridge.drop(close=True)
        run = self.run
        if run is not None:
            run.interrupt()

    def finish(self) -> None:
        if self.run is not None:
            try:
                self.run.end_hooks("other")
            except AgiError:
                pass
            self.run.close()

    # --- what the editor is told -------------------------------------------------------------

    def announce(self, call_id: str, name: str, input: dict[str, Any]) -> dict[str, Any]:
        """The `tool_call` of a call (once): title, kind, locations, raw input, the preview of
        a Write or Edit. Nothing is read for it yet: the diff comes once it is allowed."""
        known = self.announced.get(call_id)
        if known is None:
            self.inputs[call_id] = (name, input)
            edit = acp_tools.preview(name, input, self.cwd)  # docs: acp
            if edit is not None:
                self.edits[call_id] = edit
            known = acp_tools.start(call_id, name, input, self.cwd, edit)
            known = redact_values(known, in_use())  # also the permission request's tool call
            self.announced[call_id] = known
            self.bridge.notify(known)
        return {k: v for k, v in known.items() if k != "sessionUpdate"}

    def ended(self, call_id: str) -> None:
        self.announced.pop(call_id, None)
        self.edits.pop(call_id, None)
        self.inputs.pop(call_id, None)

    def close_calls(self) -> None:
        """At the end of a turn, the calls announced and never ended (a subagent's, which
        asked): they ran inside the subagent, whose result the model has."""
        for call_id in list(self.announced):
            failed = self.cancelled.is_set() or call_id in self.rejected
            update = {"sessionUpdate": "tool_call_update", "toolCallId": call_id}
            self.bridge.notify({**update, "status": "failed" if failed else "completed"})
        self.announced.clear()
        self.edits.clear()
        self.inputs.clear()
        self.rejected.clear()

    def started(self, call_id: str) -> None:
        """The call passed the checks: in progress, with the diff of a Write or Edit, read
        now (a regular file, up to a bound) and not before."""
        if call_id in self.announced:
            update: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": call_id}
            name, input = self.inputs.get(call_id, ("", {}))
            edit = acp_tools.diff(name, input, self.cwd, self.files.current)
            if edit is not None:
                edit = self.edits[call_id] = redact_values(edit, in_use())
                update["content"] = [edit]
            self.bridge.notify({**update, "status": "in_progress"})

    def usage_update(self, usage: Any) -> dict[str, Any] | None:
        """The `usage_update` of a model call; None while the model's context window is
        unknown (no `context_window`, none listed): the protocol requires `size`, and 0 reads
        as a full window."""
        run = self.run
        window = getattr(run.agent.compactor, "known", None) if run and run.agent else None
        if not window:
            return None
        update: dict[str, Any] = {
            "sessionUpdate": "usage_update",
            "used": max(0, int(usage.input + usage.output)),
            "size": int(window),
        }
        total = run.meter.total.cost if run is not None else None
        if total is not None:
            update["cost"] = {"amount": round(self.prior_cost + total, 10), "currency": "USD"}
        return update


def _chunk(kind: str, text: str) -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


def _settle(future: asyncio.Future[Any], outcome: Any) -> None:
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
