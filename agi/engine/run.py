"""One run: a session, the agent's turns in it, and the ghost exchanges; what every front end
drives. `agi.engine.open(spec)` builds it from a `RunSpec` (agi.engine.spec): the checks, the
tools, the session and the agent, all there; a front end then only calls its verbs (`ask`,
`turn`, `compact`, `cancel`, `interrupt`, `resume`, `set_mode`, `result`, `end_hooks`, `close`)
and consumes events through its view. It writes nothing to stdout (the front end shows the
`RunResult`). A run is used from one thread; several runs may go on at once in one process,
each with its own session, meter and connections; `cancel()` may be called from any thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agi.attachments import check_model
from agi.engine.assemble import assemble, deadline_for, prepare_tools
from agi.engine.opening import context_for, make_view, open_session, own_meter
from agi.engine.result import RunResult
from agi.engine.run_parts import carry, ghost_answer, interruption, kept, require_prices, run_record
from agi.errors import Cancelled, SchemaFailed, TimeLimit
from agi.messages import Reply, StepStart, UsageEvent, drain, user
from agi.options.settings import Settings
from agi.policy.environment import withhold
from agi.policy.redaction import HeldText, redact, usable
from agi.providers.endpoint import require_key

if TYPE_CHECKING:
    from agi.engine.loop import Agent
    from agi.engine.seams import Event, View
    from agi.engine.spec import RunSpec
    from agi.sessions.session import Session


class Run:
    """A session and the turns taken in it, opened from a RunSpec by agi.engine.open."""

    def __init__(self, spec: RunSpec):
        """The checks (prices, key, tools: usage errors before any session is touched), then
        the session and the agent; an error after the checks carries the run's `result` so
        far, and what the run had started is ended before it is raised."""
        settings = spec.settings if spec.layer is None else spec.settings.over(spec.layer)
        self.spec, self.settings = spec, settings
        self.interactive = interactive = spec.interactive
        self.started = time.monotonic() if spec.started is None else spec.started
        self.view: View = spec.view if spec.view is not None else make_view(settings, interactive)
        for warning in settings.warnings:
            self.view.warn(warning)
        if settings.sandbox.enabled:
            self.view.sandbox(settings.sandbox.label())
        meter = spec.meter
        self.meter = meter if meter is not None else own_meter(settings, spec.budget, spec.layer)
        require_prices(self.meter, settings)  # exit 2 before a session
        require_key(settings.model)  # so is a missing API key, named by its variable
        self.metered = spec.saved  # the meter's calls already added to the session's meta.json
        self.ctx = context_for(spec, settings, self.started, self.view.warn, self.meter)
        withhold(settings.model.api_key)  # before any child starts (--describe, MCP servers)
        prepare_tools(settings, self.ctx, spec.mcp)  # --describe, MCP lists: usage errors first
        if spec.files is not None:  # Read, Write and Edit through an editor
            # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
            from agi.tools.editor import through_editor

            self.ctx.tools = through_editor(list(self.ctx.tools or []), spec.files)
        self.built_for: Settings | None = None  # the settings the agent was assembled from
        self.verdict: dict[str, Any] | None = None
        self.answered: RunResult | None = None  # the last ask()'s
        self.ended = False
        self.stopped = False  # cancel() was called
        self.interrupted = spec.interrupted or threading.Event()  # this turn is cancelled
        self.idle = threading.Event()  # no turn is being taken
        self.idle.set()
        self.described: dict[str, Any] = dict(spec.record)  # added to the run record
        self.streamed = HeldText(lambda: self.session.secrets)
        try:
            self.session: Session = open_session(settings, spec.session)
            if spec.session.held is None:  # its model recorded at once: a failed run is listed
                with self.locked():
                    if not self.session.meta.get("model"):
                        self.session.write_meta(model=settings.model.label)
            self.agent: Agent = self.assemble(settings)
            self.context = self.session_start() if spec.session_start else ""
            self.attachments = settings.attachments  # with the first prompt (docs: attachments)
        except BaseException as e:
            self.abandon(e)
            raise

    def abandon(self, error: BaseException) -> None:
        """Opening failed after the checks: the error learns what the run had done, and what
        it started (hooks, tools) is ended."""
        carry(error, self.result(error))
        try:
            self.end_hooks("other")
        except Exception as e:
            self.view.warn(self.redact(str(e)))
        finally:
            self.close()

    # the session and its agent

    def assemble(self, settings: Settings) -> Agent:
        """The agent for the next turn, built from that turn's settings (the run's own, or a
        command's or a REPL's changes to them): nothing of a built agent is patched."""
        if settings is self.built_for:
            return self.agent
        if settings is not self.settings:
            require_prices(self.meter, settings)
        self.agent, self.built_for = assemble(settings, self.session, self.ctx), settings
        return self.agent

    def session_start(self) -> str:
        """SessionStart's hooks (source `resume` when the session holds a conversation); the
        context they give goes with the first prompt."""
        if self.agent.lifecycle is None:
            return ""
        messages = self.session.messages_file
        source = "resume" if messages.exists() and messages.stat().st_size else "startup"
        return str(self.agent.lifecycle.session_start(source, self.settings.model.label))

    def end_hooks(self, reason: str) -> None:
        """SessionEnd's hooks, once (the run's end, a REPL's Ctrl-D)."""
        agent = getattr(self, "agent", None)  # None: the run failed before it had one
        if agent is not None and agent.lifecycle is not None and not self.ended:
            self.ended = True
            agent.lifecycle.session_end(reason)

    @contextmanager
    def locked(self) -> Iterator[Session]:
        """The session under its lock (waiting within the run's deadline); on the way out,
        whatever happened, the model calls since the last save are added to meta.json. A
        session the front end holds is its to lock and to save."""
        session = self.session
        if self.spec.session.held is not None:
            yield session
            return
        self.lock(session)
        try:
            yield session
        finally:
            try:
                usage, self.metered = self.meter.since(self.metered)
                session.add_usage(usage)
                session.write_meta()
            finally:
                session.unlock()

    def lock(self, session: Session) -> None:
        """Wait for the session's lock (`agi -s` in a shell may hold it) within the deadline, in
        short slices, so that a cancel or an interrupt ends the wait (Cancelled)."""
        deadline = self.ctx.deadline
        while True:
            if self.stopped or self.interrupted.is_set():
                raise Cancelled()
            now = time.monotonic()
            until = now + LOCK_SLICE if deadline is None else min(deadline, now + LOCK_SLICE)
            try:
                session.lock(until, self.settings.timeout)
                return
            except TimeLimit:
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    # turns

    def ask(self, prompt: str) -> RunResult:
        """One prompt as a one-shot run takes it: a `/command` expanded, SessionStart's context,
        the turn, then the --schema and --exit-code exchanges. An error carries the `result`
        of the run so far."""
        try:
            prompt, settings = self.expand(prompt)
            with self.locked():
                if self.in_one_call(settings):
                    self.answered = self.answer_in_one_call(self.with_context(prompt), settings)
                    return self.answered
                reply = self.held_turn(self.with_context(prompt), settings)
                self.answered = self.finish(reply.text, settings)
            return self.answered
        except BaseException as e:
            carry(e, self.result(e))
            raise

    def turn(
        self, prompt: str, settings: Settings | None = None, builtins: tuple[str, ...] = ()
    ) -> Reply:
        """One prompt of a conversation (the REPL's lines): the turn clock restarted when a
        person takes turns, a `/command` expanded (or one of `builtins`), SessionStart's context
        with the first; `settings` are this turn's (the REPL's /sys), else the run's."""
        try:
            if self.interactive:
                self.start_turn_clock()
            given = getattr(prompt, "attachments", ())  # an editor's files (docs: attachments)
            check_model(given, self.settings.model)
            self.attachments += given
            prompt, settings = self.expand(prompt, builtins, settings)
            with self.locked():
                reply = self.held_turn(self.with_context(prompt), settings)
            self.context = ""
            return reply
        except BaseException as e:
            carry(e, self.result(e))
            raise

    def with_context(self, prompt: str) -> str:
        return f"{prompt}\n\n{self.context}" if self.context else prompt

    def expand(
        self, prompt: str, builtins: tuple[str, ...] = (), base: Settings | None = None
    ) -> tuple[str, Settings]:
        """A `/NAME args` prompt: the command's text, its shell steps run now (traced, judged
        like Bash calls), and the settings its turn runs with; any other prompt as it is."""
        base = base or self.settings
        if not prompt.startswith("/"):  # the common case, without loading the commands' code
            return prompt, base
        # lazy: only a run with hooks, rules or commands loads it (docs: development)
        from agi.claude.extensions import command_settings, command_text

        found = command_settings(prompt, base, builtins)
        if found is None:
            return prompt, base
        expansion, settings = found
        with self.locked() as session:
            text = command_text(expansion, settings, self.ctx, session.trace)
        return text, settings

    def held_turn(self, prompt: str, settings: Settings | None = None) -> Reply:
        """One prompt in, one reply out, while the caller holds the session's lock."""
        session = self.session
        agent = self.assemble(settings or self.settings)
        for warning in dict.fromkeys(session.warnings):  # each once, however often it was read
            self.view.warn(warning)
        session.warnings.clear()
        session.trace(run_record(self.ctx.cwd, self.described, agent, settings or self.settings))
        self.idle.clear()
        attachments, self.attachments = self.attachments, ()
        try:
            reply = drain(agent.run(prompt, attachments), self.dispatch)
        except BaseException as e:  # keep what the turn produced
            agent.salvage(interruption(e))
            code = getattr(e, "exit_code", 130 if isinstance(e, KeyboardInterrupt) else 1)
            session.trace({"type": "error", "exit_code": code, "error": str(e) or type(e).__name__})
            raise
        finally:
            self.idle.set()
            self.streamed.release(self.view.handle)
        return reply

    def in_one_call(self, settings: Settings) -> bool:
        """Whether --schema is answered in one model call (docs: volume): the run keeps no
        conversation, offers no tools, speaks the native protocol and has no hooks (which
        would see the turn the agent loop takes)."""
        if settings.schema is None or not self.session.ephemeral or settings.react:
            return False
        agent = self.assemble(settings)
        return not agent.toolbox.specs and agent.lifecycle is None

    def answer_in_one_call(self, prompt: str, settings: Settings) -> RunResult:
        """The prompt sent with the schema (agi.structured.single); the valid JSON is the
        answer, then --exit-code's exchange as after any turn."""
        agent, session = self.assemble(settings), self.session
        session.append(user(prompt))

        def handle(event: Event) -> None:
            if isinstance(event, UsageEvent):
                agent.usage.add(event.usage)
            elif isinstance(event, StepStart):
                agent.steps = event.step
            self.dispatch(event)

        # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
        from agi.providers.capabilities import Formats

        formats = Formats.of(agent.wire, settings.state)
        # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
        from agi.structured.single import one_call_json

        asked = one_call_json(agent.wire, agent.messages(), settings.schema or {}, formats)
        self.idle.clear()
        try:
            answer, reply, _ = drain(asked, handle)
        finally:
            self.idle.set()
        session.append(reply.to_message())
        return self.finish(reply.text, replace(settings, schema=None), answer)

    def finish(self, text: str, settings: Settings, answer: Any = None) -> RunResult:
        """The answer after the turn: JSON under --schema, and the verdict under --exit-code
        (a judge that gives no verdict leaves the answer standing, with exit 5)."""
        session, agent = self.session, self.agent
        answer = text if answer is None else answer
        verdict, error, code = None, None, 0
        if settings.schema is not None:
            # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
            from agi.structured.schema import schema_instruction

            answer = self.ghost(settings.schema, schema_instruction(settings.schema))
        if settings.judge is not None:
            # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
            from agi.structured.schema import JUDGE_SCHEMA, judge_instruction

            try:
                verdict = self.ghost(JUDGE_SCHEMA, judge_instruction(settings.judge or None))
                session.trace({"type": "judgement", **verdict})
                code = 0 if verdict["success"] else 1
            except SchemaFailed as e:
                error, code = f"the answer could not be judged: {e}", SchemaFailed.exit_code
                session.trace({"type": "judgement", "error": str(e)})
        self.verdict = verdict
        usage = self.meter.total
        return RunResult(answer, code, kept(session), agent.steps, usage, error, verdict)

    def compact(self, focus: str) -> str | None:
        """A manual compaction under the session's lock (`--compact`, the REPL's /compact);
        the summary, or None when there was nothing to compact."""
        if self.interactive:
            self.start_turn_clock()  # --timeout limits each turn, and a compaction is one
        with self.locked():
            done = drain(self.agent.compactor.run("manual", focus), self.view.handle)
        return None if done is None else str(done.summary)

    def result(self, error: BaseException | None = None, answer: Any = None) -> RunResult:
        """What the run reports: the last answer's result; `answer`'s (a --compact summary);
        or, given the error that ended it, a failed run's, with its session, its steps and
        the usage so far."""
        if error is None and answer is None and self.answered is not None:
            return self.answered
        session = getattr(self, "session", None)
        agent = getattr(self, "agent", None)
        done = RunResult(
            answer,
            0,
            None if session is None else kept(session),
            0 if agent is None else agent.steps,
            self.meter.total,
            verdict=self.verdict,
        )
        return done if error is None else RunResult.failed(error, done)

    def ghost(self, schema: dict[str, Any], instruction: str) -> Any:
        """Ask for JSON on a copy of the conversation (nothing of it reaches the session); a
        request refused for its length compacts the session and is sent once more."""
        return ghost_answer(self.agent, self.dispatch, self.settings.state, schema, instruction)

    # events, for the views

    def dispatch(self, event: Event) -> None:
        """Send an event to the view, streamed text with the API key taken out even when a
        delta ends inside it (agi.policy.redaction.HeldText). Once the run is cancelled the
        turn ends here: a tool call announced to the front end that cancelled is not begun."""
        self.streamed.feed(event, self.view.handle)
        if self.stopped:
            raise Cancelled()

    # limits and the end

    def start_turn_clock(self) -> None:
        """In a REPL or an editor, --timeout limits each turn."""
        if self.settings.timeout:
            self.started = time.monotonic()
            self.ctx.set_deadline(deadline_for(self.settings, self.started))
            self.agent.toolbox.ctx.deadline = self.ctx.deadline

    def set_mode(self, mode: str) -> None:
        """The permission mode from now on (an editor's session/set_mode): this agent's guard
        and every agent assembled later."""
        self.ctx.mode = mode
        self.agent.toolbox.guard.set_mode(mode)

    def interrupt(self) -> None:
        """Stop the turn in progress (from any thread: an editor's cancel): the model request
        closed, commands killed, a wait for the session's lock ended, until `resume()`."""
        self.interrupted.set()
        self.ctx.cancel()
        self.cancel_tools()

    def resume(self) -> None:
        """The next turn may send requests after an interrupted one (a flag the front end gave
        in the spec is its own to clear)."""
        if self.spec.interrupted is None:
            self.interrupted.clear()
        self.ctx.resume()

    def cancel(self) -> None:
        """Stop the run (from any thread): the model request closed, commands killed, and
        whatever comes next raises Cancelled. A command that was starting as the cancel came
        is ended too: until the turn is over its tools are interrupted again, every 50 ms."""
        self.stopped = True
        self.ctx.cancel()
        self.cancel_tools()
        if not self.idle.is_set():
            threading.Thread(target=self.keep_cancelling, name="agi-cancel", daemon=True).start()

    def keep_cancelling(self) -> None:
        while not self.idle.wait(0.05):
            self.ctx.cancel()
            self.cancel_tools()

    def cancel_tools(self) -> None:
        agent = getattr(self, "agent", None)
        if agent is not None:
            agent.toolbox.interrupt()

    def close(self) -> None:
        """Cut the connections, end every process the tools and hooks started; then, under
        config keep_sessions, the old sessions are pruned (once a day)."""
        self.ctx.cancel()
        agent = getattr(self, "agent", None)
        if agent is not None:
            agent.close()
        self.prune_old()

    def prune_old(self) -> None:
        """`keep_sessions`: remove sessions unused for that long, at most once a day; never
        from an ephemeral run, which writes nothing (docs: volume)."""
        age = self.settings.keep_sessions
        if age is None or self.settings.ephemeral:
            return
        try:
            # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
            from agi.sessions.prune import prune_on_schedule

            prune_on_schedule(self.settings.home, age)
        except OSError as e:
            self.view.warn(f"keep_sessions: {e.strerror or e}")

    def redact(self, text: str) -> str:
        """`text` without the API key (for stdout and stderr, like the session's files)."""
        session = getattr(self, "session", None)
        if session is not None:
            return str(session.redact(text))
        return redact(text, usable([self.settings.model.api_key]))


LOCK_SLICE = 0.2  # seconds of waiting for the session's lock between looks at a cancel
