"""One run: a session, the agent's turns in it, and the ghost exchanges; what every front end
drives. It writes nothing to stdout: the front end shows the `Result` (agi.frontends.cli.main prints
it; ACP, the MCP server and batch jobs send it).

A run is used from one thread; several runs may go on at once in one process, each with its own
session, meter and connections. `cancel()` may be called from any thread."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agi import __version__
from agi.engine.assemble import Context, assemble, deadline_for, prepare_tools, subagent_model
from agi.errors import SchemaFailed, UsageError
from agi.messages import drain
from agi.options.settings import Settings

if TYPE_CHECKING:
    from agi.engine.loop import Agent
    from agi.providers.usage import Usage
    from agi.sessions.session import Session


def make_view(settings: Settings, interactive: bool) -> Any:
    """The terminal view when a person watches stderr (or -v), else silence."""
    from agi.frontends.views.terminal import Silent, Terminal

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


@dataclass
class Result:
    """What a prompt came to: the answer (JSON under --schema), the exit code it earns (0, 1
    when judged failed, 5 when the judge gave no verdict), the verdict, the session, the model
    calls of the agent loop, and the run's usage so far (subagents and ghosts included)."""

    answer: Any
    exit: int
    verdict: dict[str, Any] | None
    session: Path | None
    steps: int
    usage: Usage
    error: str | None = None  # why the exit is not 0 or 1 (a judge that gave no verdict)


class Run:
    """A session and the turns taken in it."""

    def __init__(
        self,
        settings: Settings,
        started: float,
        interactive: bool = False,
        view: Any = None,
        meter: Any = None,
    ):
        self.settings, self.started, self.interactive = settings, started, interactive
        self.view = view if view is not None else make_view(settings, interactive)
        for warning in settings.warnings:
            self.view.warn(warning)
        if settings.sandbox.enabled:
            self.view.sandbox(settings.sandbox.label())
        from agi.providers.cost import Meter

        # every model call of the run, subagents and ghosts included (a batch passes a meter
        # that also keeps the whole batch's budget)
        self.meter = meter if meter is not None else Meter(settings.prices, settings.max_cost)
        require_prices(self.meter, settings)  # exit 2 before a session
        from agi.providers.endpoint import require_key

        require_key(settings.model)  # so is a missing API key, named by its variable
        self.metered = 0  # the meter's calls already added to the session's meta.json
        self.ctx = Context(
            deadline=deadline_for(settings, started), warn=self.view.warn, meter=self.meter
        )
        from agi.policy.environment import withhold

        withhold(settings.model.api_key)  # before any child starts (--describe, MCP servers)
        prepare_tools(settings, self.ctx)  # --describe, MCP lists: usage errors come first
        self.session: Session | None = None
        self.agent: Agent | None = None
        self.built_for: Settings | None = None  # the settings the agent was assembled from
        self.verdict: dict[str, Any] | None = None
        self.ended = False
        self.described: dict[str, Any] = {}  # what the front end adds to the run record
        from agi.policy.redaction import HeldText

        self.streamed = HeldText(lambda: self.session.secrets if self.session is not None else [])

    # the session and its agent

    def open(self, path: Path | None, cont: bool) -> Session:
        """Open the session (its model recorded at once, so a failed run is listed by it)."""
        if self.session is None:
            self.session = open_session(self.settings, path, cont)
            with self.locked():
                if not self.session.meta.get("model"):
                    self.session.write_meta(model=self.settings.model.label)
        return self.session

    def assemble(self, settings: Settings) -> Agent:
        """The agent for the next turn, built from that turn's settings (the run's own, or a
        command's or a REPL's changes to them): nothing of a built agent is patched."""
        assert self.session is not None
        if self.agent is not None and settings is self.built_for:
            return self.agent
        if settings is not self.settings:
            require_prices(self.meter, settings)
        self.agent, self.built_for = assemble(settings, self.session, self.ctx), settings
        return self.agent

    def start(self, path: Path | None, cont: bool) -> str:
        """Open the session and assemble the agent; SessionStart's context for the first prompt."""
        self.open(path, cont)
        agent = self.assemble(self.settings)
        messages = self.session.messages_file if self.session is not None else None
        source = (
            "resume" if messages and messages.exists() and messages.stat().st_size else "startup"
        )
        if agent.lifecycle is None:
            return ""
        return agent.lifecycle.session_start(source, self.settings.model.label)

    def end_hooks(self, reason: str) -> None:
        if self.agent is not None and self.agent.lifecycle is not None and not self.ended:
            self.ended = True
            self.agent.lifecycle.session_end(reason)

    @contextmanager
    def locked(self) -> Iterator[Session]:
        """The session under its lock (waiting within the run's deadline); on the way out,
        whatever happened, the model calls since the last save are added to meta.json."""
        session = self.session
        assert session is not None
        with session.locked(self.ctx.deadline, self.settings.timeout):
            try:
                yield session
            finally:
                usage, self.metered = self.meter.since(self.metered)
                session.add_usage(usage)
                session.write_meta()

    # turns

    def ask(self, prompt: str, path: Path | None = None, cont: bool = False) -> Result:
        """One prompt as a one-shot run takes it: a `/command` expanded, SessionStart's context,
        the turn, then the --schema and --exit-code exchanges."""
        context = self.start(path, cont)
        prompt, settings = self.expand(prompt)
        with self.locked():
            reply = self.turn(f"{prompt}\n\n{context}" if context else prompt, settings)
            return self.finish(reply.text, settings)

    def expand(self, prompt: str, builtins: tuple[str, ...] = ()) -> tuple[str, Settings]:
        """A `/NAME args` prompt: the command's text, its shell steps run now (traced, judged
        like Bash calls), and the settings its turn runs with; any other prompt as it is."""
        if not prompt.startswith("/"):  # the common case, without loading the commands' code
            return prompt, self.settings
        from agi.claude.extensions import command_settings

        found = command_settings(prompt, self.settings, builtins)
        if found is None:
            return prompt, self.settings
        expansion, settings = found
        from agi.claude.extensions import command_text

        assert self.session is not None
        with self.locked() as session:
            text = command_text(expansion, settings, self.ctx, session.trace)
        return text, settings

    def turn(self, prompt: str, settings: Settings | None = None) -> Any:
        """One prompt in, one reply out (the caller holds the session's lock)."""
        session = self.session
        agent = self.assemble(settings or self.settings)
        assert session is not None
        for warning in dict.fromkeys(session.warnings):  # each once, however often it was read
            self.view.warn(warning)
        session.warnings.clear()
        session.trace(run_record(self, agent, settings or self.settings))
        try:
            reply = drain(agent.run(prompt), self.dispatch)
        except BaseException as e:  # keep what the turn produced
            agent.salvage(interruption(e))
            code = getattr(e, "exit_code", 130 if isinstance(e, KeyboardInterrupt) else 1)
            session.trace({"type": "error", "exit_code": code, "error": str(e) or type(e).__name__})
            raise
        finally:
            self.streamed.release(self.view.handle)
        return reply

    def finish(self, text: str, settings: Settings) -> Result:
        """The answer after the turn: JSON under --schema, and the verdict under --exit-code
        (a judge that gives no verdict leaves the answer standing, with exit 5)."""
        session, agent = self.session, self.agent
        assert session is not None and agent is not None
        answer: Any = text
        verdict, error, code = None, None, 0
        if settings.schema is not None:
            from agi.structured.schema import schema_instruction

            answer = self.ghost(settings.schema, schema_instruction(settings.schema))
        if settings.judge is not None:
            from agi.structured.schema import JUDGE_SCHEMA, judge_instruction

            try:
                verdict = self.ghost(JUDGE_SCHEMA, judge_instruction(settings.judge or None))
                session.trace({"type": "judgement", **verdict})
                code = 0 if verdict["success"] else 1
            except SchemaFailed as e:
                error, code = f"the answer could not be judged: {e}", SchemaFailed.exit_code
                session.trace({"type": "judgement", "error": str(e)})
        self.verdict = verdict
        return Result(answer, code, verdict, session.path, agent.steps, self.meter.total, error)

    def compact_now(self, focus: str) -> str | None:
        """A manual compaction under the session's lock (`--compact`, the REPL's /compact)."""
        agent = self.agent
        assert agent is not None and agent.compactor is not None
        with self.locked():
            done = drain(agent.compactor.run("manual", focus), self.view.handle)
        return None if done is None else done.summary

    def ghost(self, schema: dict[str, Any], instruction: str) -> Any:
        """Ask for JSON on a copy of the conversation (nothing of it reaches the session); a
        request refused for its length compacts the session and is sent once more."""
        from agi.messages import StepStart, UsageEvent
        from agi.providers.capabilities import Formats
        from agi.structured.schema import ghost_json

        agent = self.agent
        assert agent is not None

        def handle(event: Any) -> None:
            if isinstance(event, UsageEvent):
                agent.usage.add(event.usage)
            self.dispatch(event)

        self.dispatch(StepStart(agent.steps + 1))
        formats = Formats.of(agent.wire, self.settings.home)  # what earlier runs learnt

        def asked() -> Any:
            return ghost_json(agent.wire, agent.messages(), schema, instruction, formats=formats)

        if agent.compactor is None:
            return drain(asked(), handle)
        return drain(agent.compactor.resend_once(asked), handle)

    # events, for the views

    def dispatch(self, event: Any) -> None:
        """Send an event to the view, streamed text with the API key taken out even when a
        delta ends inside it (agi.policy.redaction.HeldText)."""
        self.streamed.feed(event, self.view.handle)

    # limits and the end

    def start_turn_clock(self) -> None:
        """In a REPL, --timeout limits each turn."""
        if self.settings.timeout:
            self.started = time.monotonic()
            self.ctx.set_deadline(deadline_for(self.settings, self.started))
            if self.agent is not None:
                self.agent.toolbox.ctx.deadline = self.ctx.deadline

    def cancel(self) -> None:
        """Stop the turn (from any thread): the model request closed, commands killed."""
        self.ctx.cancel()
        self.cancel_tools()

    def cancel_tools(self) -> None:
        if self.agent is not None:
            self.agent.toolbox.interrupt()

    def close(self) -> None:
        """Cut the connections, end every process the tools and hooks started."""
        self.ctx.cancel()
        if self.agent is not None:
            self.agent.close()

    def redact(self, text: str) -> str:
        """`text` without the API key (for stdout and stderr, like the session's files)."""
        from agi.policy.redaction import redact, usable

        if self.session is not None:
            return self.session.redact(text)
        return redact(text, usable([self.settings.model.api_key]))


def require_prices(meter: Any, settings: Settings) -> None:
    """Under --max-cost every model a run may call needs a price: its own, and the subagent
    files' own models."""
    meter.require(settings.model.label, settings.model.model)
    for agent in settings.agents:
        model = subagent_model(settings, agent)
        if model is not None:
            meter.require(model.label, model.model)


def run_record(run: Run, agent: Agent, s: Settings) -> dict[str, Any]:
    """The trace's record of a turn's start: what ran, with which model, tools and prompt."""
    return {
        "type": "run",
        "agi": __version__,
        "model": s.model.label,
        "base_url": s.model.base_url,
        "cwd": run.ctx.cwd,
        "pid": os.getpid(),
        "system": agent.system_prompt,
        "tools": list(agent.toolbox.tools),
        "sandbox": s.sandbox.record(),
        **run.described,
    }


def with_system(settings: Settings, files: list[str]) -> Settings:
    """The settings with another system prompt (the REPL's /sys)."""
    from agi.options.settings import system_prompt

    return replace(settings, system=system_prompt(files, "/sys"))
