"""One invocation: the session, the agent's turns, the ghost exchanges, the output."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agi import __version__
from agi.assemble import Context, assemble, deadline_for, prepare_tools, subagent_model
from agi.errors import AgiError, ProviderError, UsageError
from agi.messages import drain
from agi.settings import Settings

if TYPE_CHECKING:
    from agi.agent import Agent
    from agi.sessions.session import Session


def make_view(settings: Settings, interactive: bool) -> Any:
    """The terminal view when a person watches stderr (or -v), else silence."""
    from agi.frontends.render import Silent, Terminal

    tty = sys.stderr.isatty()
    if settings.quiet or not (tty or settings.verbose):
        return Silent()
    return Terminal(color=tty, spinner=tty and not interactive)


def open_session(settings: Settings, path: Path | None, cont: bool) -> Session:
    """The session named, the last one used (`-c`), or a new one; recorded in the index."""
    from agi.sessions.session import Session, SessionIndex

    index = SessionIndex(settings.home)
    if cont:
        path = index.latest()
        if path is None:
            raise UsageError("no session to continue: none has been used yet")
    key = settings.model.api_key
    session = Session.open(path or index.default_path(), secrets=[key] if key else [])
    index.record(session.path)
    return session


def interruption(error: BaseException) -> str:
    """What a tool call cut short by `error` is told, as its result."""
    from agi.errors import Interrupted, LimitReached

    if isinstance(error, KeyboardInterrupt):
        return "interrupted by the user"
    if isinstance(error, Interrupted):
        return str(error)  # interrupted by SIGTERM, cancelled
    if isinstance(error, LimitReached):
        return f"interrupted: {error}"
    return f"interrupted: the run failed ({error or type(error).__name__})"


class Run:
    """A session and the turns taken in it: what the CLI and the REPL drive."""

    def __init__(self, settings: Settings, started: float, interactive: bool = False):
        self.settings, self.started, self.interactive = settings, started, interactive
        self.output = settings.output
        self.view = make_view(settings, interactive)
        for warning in settings.warnings:
            self.view.warn(warning)
        if settings.sandbox.enabled:
            self.view.sandbox(settings.sandbox.label())
        from agi.providers.cost import Meter

        self.meter = Meter(settings.prices, settings.max_cost)  # subagents and ghosts included
        self.meter.require(settings.model.label, settings.model.model)  # exit 2 before a session
        for agent in settings.agents:  # subagent files that name a model of their own, too
            model = subagent_model(settings, agent)
            if model is not None:
                self.meter.require(model.label, model.model)
        self.metered = 0  # the meter's calls already added to the session's meta.json
        self.ctx = Context(
            deadline=deadline_for(settings, started), warn=self.view.warn, meter=self.meter
        )
        prepare_tools(settings, self.ctx)  # --describe, MCP lists: usage errors come first
        self.session: Session | None = None
        self.agent: Agent | None = None
        self.verdict: dict[str, Any] | None = None
        self.ended = False
        self._held: dict[type, Any] = {}  # streamed text held back while it may begin a key

    def open(self, path: Path | None, cont: bool) -> None:
        """Open the session and assemble its agent."""
        self.session = open_session(self.settings, path, cont)
        self.agent = assemble(self.settings, self.session, self.ctx)

    def start(self, path: Path | None, cont: bool) -> str:
        """Open the session and assemble the agent; SessionStart's context for the first prompt."""
        self.open(path, cont)
        assert self.session is not None and self.agent is not None
        messages = self.session.messages_file
        source = "resume" if messages.exists() and messages.stat().st_size else "startup"
        lifecycle = self.agent.lifecycle
        if lifecycle is None:
            return ""
        return lifecycle.session_start(source, self.settings.model.label)

    def end_hooks(self, reason: str) -> None:
        if self.agent is not None and self.agent.lifecycle is not None and not self.ended:
            self.ended = True
            self.agent.lifecycle.session_end(reason)

    def turn(self, prompt: str) -> Any:
        """One prompt in, one reply out, under the session's lock; events go to the views."""
        session, agent, s = self.session, self.agent, self.settings
        assert session is not None and agent is not None, "Run.start() comes first"
        session.lock(self.ctx.deadline, s.timeout)
        try:
            for warning in session.warnings:
                self.view.warn(warning)
            session.warnings.clear()
            session.trace(self.run_record())
            if not session.meta_file.exists():
                session.write_meta(model=s.model.label)
            reply = drain(agent.run(prompt), self.dispatch)
            self.release()
            self.save_usage()
            session.write_meta(model=s.model.label)
            return reply
        except BaseException as e:  # keep what the turn produced, under the lock
            agent.salvage(interruption(e))
            code = getattr(e, "exit_code", 130 if isinstance(e, KeyboardInterrupt) else 1)
            session.trace({"type": "error", "exit_code": code, "error": str(e) or type(e).__name__})
            self.save_usage()
            session.write_meta()
            raise
        finally:
            session.unlock()

    def save_usage(self) -> None:
        """Add the model calls made since the last save to the session's usage (meta.json)."""
        usage, self.metered = self.meter.since(self.metered)
        if self.session is not None:
            self.session.add_usage(usage)

    def compact(self, focus: str, path: Path | None, cont: bool) -> int:
        """`agi --compact [FOCUS]`: compact the session now and print the summary."""
        if path is not None and not (path / "messages.jsonl").is_file():
            raise UsageError(f"nothing to compact: {path} holds no agi conversation")
        self.open(path, cont)
        summary = self.compact_now(focus)
        if summary is None:
            raise UsageError("nothing to compact: the session holds no conversation")
        self.write_result(summary, 0)
        return 0

    def compact_now(self, focus: str) -> str | None:
        """A manual compaction under the session's lock (also the REPL's /compact)."""
        session, agent = self.session, self.agent
        assert session is not None and agent is not None and agent.compactor is not None
        session.lock(self.ctx.deadline, self.settings.timeout)
        try:
            done = drain(agent.compactor.run("manual", focus), self.view.handle)
            self.save_usage()
            session.write_meta(model=self.settings.model.label)
        finally:
            session.unlock()
        return None if done is None else done.summary

    def run_record(self) -> dict[str, Any]:
        s = self.settings
        return {
            "type": "run",
            "agi": __version__,
            "model": s.model.label,
            "base_url": s.model.base_url,
            "cwd": os.getcwd(),
            "pid": os.getpid(),
            "system": s.system,
            "tools": list(self.agent.toolbox.tools) if self.agent is not None else [],
            "sandbox": s.sandbox.record(),
        }

    def one_shot(self, prompt: str, path: Path | None, cont: bool) -> int:
        context = self.start(path, cont)
        reply = self.turn(f"{prompt}\n\n{context}" if context else prompt)
        s = self.settings
        answer: Any = reply.text
        verdict = None
        if s.schema is not None or s.judge is not None:
            from agi.structured.schema import JUDGE_SCHEMA, judge_instruction, schema_instruction

            if s.schema is not None:
                answer = self.ghost(s.schema, schema_instruction(s.schema))
            if s.judge is not None:
                verdict = self.ghost(JUDGE_SCHEMA, judge_instruction(s.judge or None))
                self.trace({"type": "judgement", **verdict})
            assert self.session is not None  # the ghost exchanges' usage, under the lock
            self.session.lock(self.ctx.deadline, s.timeout)
            try:
                self.save_usage()
                self.session.write_meta()
            finally:
                self.session.unlock()
        agent = self.agent
        assert agent is not None
        self.view.finish(
            str(agent.session.path), self.meter.total, time.monotonic() - self.started, agent.steps
        )
        code = 0 if verdict is None or verdict["success"] else 1
        if verdict is not None:
            self.view.judgement(verdict["success"], verdict["reason"])
        self.verdict = verdict
        self.write_result(answer, code)
        return code

    def trace(self, record: dict[str, Any]) -> None:
        if self.session is not None:
            self.session.trace(record)

    def ghost(self, schema: dict[str, Any], instruction: str) -> Any:
        """Ask for JSON on a copy of the conversation (nothing of it reaches the session)."""
        from agi.messages import StepStart, UsageEvent
        from agi.providers.capabilities import Formats
        from agi.structured.schema import ghost_json

        agent = self.agent
        assert agent is not None

        def handle(event: Any) -> None:
            if isinstance(event, UsageEvent):
                agent.usage.add(event.usage)
                agent.steps += 1
            self.dispatch(event)

        self.dispatch(StepStart(agent.steps + 1))
        formats = Formats.of(agent.wire, self.settings.home)  # what earlier runs learnt
        try:
            asked = ghost_json(agent.wire, agent.messages(), schema, instruction, formats=formats)
            return drain(asked, handle)
        except ProviderError as e:
            self.compact_after(e)  # refused for its length: compact, then ask once more
        asked = ghost_json(agent.wire, agent.messages(), schema, instruction, formats=formats)
        assert agent.compactor is not None
        try:
            answer = drain(asked, handle)
        except ProviderError as again:
            raise agent.compactor.still_too_long(again) from again
        agent.compactor.sent_again()
        return answer

    def compact_after(self, error: ProviderError) -> None:
        """A ghost exchange refused for its length: compact the session (under its lock)."""
        agent, session = self.agent, self.session
        assert agent is not None and session is not None
        if agent.compactor is None:
            raise error
        session.lock(self.ctx.deadline, self.settings.timeout)
        try:
            drain(agent.compactor.refused(error), self.view.handle)
            self.save_usage()
            session.write_meta()
        finally:
            session.unlock()

    def dispatch(self, event: Any) -> None:
        """Send an event to the views, streamed text with the API key taken out even when a
        delta ends inside it (the end that might begin it waits for the next delta)."""
        from agi.messages import ReasoningDelta, TextDelta

        if isinstance(event, (TextDelta, ReasoningDelta)):
            text = self.held(type(event)).feed(event.text)
            if text:
                self.show(type(event)(text))
            return
        self.release()
        self.show(event)

    def release(self) -> None:
        """Show the streamed text held back so far (the stream it belonged to has moved on)."""
        from agi.messages import ReasoningDelta, TextDelta

        for kind in (TextDelta, ReasoningDelta):
            rest = self.held(kind).flush()
            if rest:
                self.show(kind(rest))

    def held(self, kind: type) -> Any:
        """The holder of one kind of streamed text (answer, reasoning)."""
        from agi.redaction import Held

        if kind not in self._held:
            secrets = self.session.secrets if self.session is not None else []
            self._held[kind] = Held(list(secrets))
        return self._held[kind]

    def show(self, event: Any) -> None:
        """In a REPL the answer streams to stdout as it comes; else to the views."""
        if self.interactive:
            from agi.messages import AssistantText, TextDelta

            if isinstance(event, TextDelta):
                sys.stdout.write(event.text)
                sys.stdout.flush()
                return
            if isinstance(event, AssistantText):
                sys.stdout.write("\n")
                return
        self.view.handle(event)
        if self.output == "jsonl":
            from agi.frontends.output import event_line

            sys.stdout.write(self.redact(event_line(event)))
            sys.stdout.flush()

    def start_turn_clock(self) -> None:
        """In a REPL, --timeout limits each turn."""
        if self.settings.timeout:
            self.started = time.monotonic()
            self.ctx.set_deadline(deadline_for(self.settings, self.started))
            if self.agent is not None:
                self.agent.toolbox.ctx.deadline = self.ctx.deadline

    def cancel_tools(self) -> None:
        if self.agent is not None:
            self.agent.toolbox.interrupt()

    def write_result(self, answer: Any, exit_code: int, error: str | None = None) -> None:
        if self.output in ("json", "jsonl"):
            from agi.frontends.output import result_line

            sys.stdout.write(self.redact(result_line(self, answer, exit_code, error)))
        elif answer is not None and self.settings.schema is not None:
            import json

            text = json.dumps(answer, ensure_ascii=False, separators=(",", ":"))
            sys.stdout.write(self.redact(text) + "\n")
        elif answer is not None:
            sys.stdout.write(self.redact(f"{answer}\n"))
        sys.stdout.flush()

    def after_failure(self, error: AgiError) -> None:
        """Report the failure in machine-readable output too."""
        if self.output != "text":
            self.write_result(None, error.exit_code, str(error))

    def cleanup(self) -> None:
        """On every exit path: connections cut, SessionEnd hooks, what the tools started ended."""
        self.ctx.cancel()
        try:
            self.end_hooks("other")
        except AgiError as e:
            self.view.warn(self.redact(str(e)))
        finally:
            self.close()

    def close(self) -> None:
        """Cut the connections, end every process the tools (and their hooks) started, release
        the session."""
        self.ctx.cancel()
        try:
            if self.agent is not None:
                self.agent.close()
            if "agi.claude.hooks" in sys.modules:  # hooks of calls still waiting in other threads
                sys.modules["agi.claude.hooks"].end_running()
        finally:
            if self.session is not None:
                self.session.unlock()

    def redact(self, text: str) -> str:
        """`text` without the API key (for stdout and stderr, like the session's files)."""
        from agi.redaction import redact, usable

        if self.session is not None:
            return self.session.redact(text)
        return redact(text, usable([self.settings.model.api_key]))
