"""One invocation: the session, the agent's turns, the ghost exchanges, the output."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from agi import __version__
from agi.config import ModelConfig
from agi.errors import AgiError, LimitReached, ProviderError, TimeLimit, UsageError
from agi.settings import Settings


class Run:
    """A session and the turns taken in it; owns the cleanup."""

    def __init__(self, settings: Settings, started: float, interactive: bool = False):
        self.settings, self.started = settings, started
        self.interactive = interactive
        self.deadline = started + settings.timeout if settings.timeout else None
        self.session: Any = None
        self.agent: Any = None
        self.transport: Any = None
        self.output = settings.output
        self.view = self.make_view()
        for warning in settings.warnings:
            self.view.warn(warning)
        if settings.sandbox.enabled:
            self.view.sandbox(settings.sandbox.label())
        self.lifecycle: Any = None
        self.verdict: dict[str, Any] | None = None
        self.children: list[Any] = []  # subagents' transports, cancelled at exit
        self.ended = False
        for tool in settings.tools:
            if tool.name == "Task":
                tool.spawn = self.spawn_subagent

    def make_view(self) -> Any:
        from agi.render import Silent, Terminal

        tty = sys.stderr.isatty()
        if self.settings.quiet or not (tty or self.settings.verbose):
            return Silent()
        return Terminal(color=tty, spinner=tty and not self.interactive)

    def arm_timeout(self) -> None:
        """A backstop: the transport and the tools honour the deadline themselves."""
        timeout = self.settings.timeout
        if not timeout:
            return

        def expire(signum: int, frame: Any) -> None:
            raise TimeLimit(timeout)

        signal.signal(signal.SIGALRM, expire)
        signal.setitimer(
            signal.ITIMER_REAL, max(0.1, self.started + timeout - time.monotonic()) + 1
        )

    def session_source(self) -> str:
        """SessionStart's `source`: a new conversation, or one taken up again."""
        messages = self.session.messages_file
        return "resume" if messages.exists() and messages.stat().st_size else "startup"

    def open_session(self, path: Path | None, cont: bool) -> None:
        from agi.session import Session, SessionIndex

        index = SessionIndex(self.settings.home)
        if cont:
            path = index.latest()
            if path is None:
                raise UsageError("no session to continue: none has been used yet")
        path = path or index.default_path()
        key = self.settings.model.api_key
        self.session = Session.open(path, secrets=[key] if key else [])
        index.record(self.session.path)

    def start_agent(self) -> None:
        from agi.agent import Agent
        from agi.tools import Toolbox, ToolContext
        from agi.transport import Transport

        s = self.settings
        self.transport = Transport(
            s.model, trace=self.session.trace, deadline=self.deadline, timeout=s.timeout
        )
        ctx = ToolContext(deadline=self.deadline, sandbox=s.sandbox)
        toolbox = Toolbox(s.tools, ctx, self.lifecycle)
        self.agent = Agent(
            self.chat(self.transport), toolbox, self.session, s.system, s.max_steps, self.lifecycle
        )

    def chat(self, transport: Any) -> Any:
        """The transport the loop talks through: with --react, the text protocol around it."""
        if not self.settings.react:
            return transport
        import re

        from agi.react import ReactTransport

        # o-series and GPT-5 reject `stop`; the adapter cuts at Observation: itself anyway
        rejects_stop = re.match(r"(o\d|gpt-5)", self.settings.model.model) is not None
        return ReactTransport(transport, send_stop=not rejects_stop)

    def start_hooks(self, source: str) -> str:
        """SessionStart: context for the first prompt; exported variables for the tools."""
        if not self.settings.hooks:
            return ""
        from agi.lifecycle import Lifecycle

        self.lifecycle = Lifecycle(self.settings.hooks, self.session, self.view.warn)
        context = self.lifecycle.session_start(source, self.settings.model.label)
        if self.lifecycle.env:
            env = {**os.environ, **self.lifecycle.env}
            for tool in self.settings.tools:
                if tool.name in ("Bash", "Terminal"):
                    tool.env = env
        return context

    def end_hooks(self, reason: str) -> None:
        if self.lifecycle is not None and not self.ended:
            self.ended = True
            self.lifecycle.session_end(reason)

    def spawn_subagent(self, agent: Any, prompt: str, description: str, depth: int) -> str:
        """Run a subagent to its answer in its own session under this one's `subagents/`."""
        from agi.agent import Agent
        from agi.lifecycle import Lifecycle
        from agi.session import Session
        from agi.subagents import MAX_DEPTH, Task, subagent_dir
        from agi.tools import Toolbox, ToolContext, ToolError
        from agi.transport import Transport

        s = self.settings
        tools = [t for t in s.tools if t.name != "Task"]
        if agent.tools is not None:
            tools = [t for t in tools if t.name in agent.tools]
        if depth < MAX_DEPTH and (agent.tools is None or "Task" in agent.tools):
            tools.append(Task(s.agents, self.spawn_subagent, depth))
        model = s.model
        if agent.model and ":" in agent.model:  # Claude's aliases (sonnet, haiku) mean: inherit
            provider, _, name = agent.model.partition(":")
            model = ModelConfig(
                provider,
                name,
                s.model.base_url,
                s.model.api_key,
                s.model.params,
                s.model.idle_timeout,
            )
        session = Session.open(subagent_dir(self.session.path, agent.name), self.session.secrets)
        session.write_meta(
            model=model.label,
            parent=str(self.session.path),
            agent=agent.name,
            description=description,
        )
        transport = Transport(model, trace=session.trace, deadline=self.deadline, timeout=s.timeout)
        self.children.append(transport)
        lifecycle = None
        if s.hooks:
            lifecycle = Lifecycle(s.hooks, session, self.view.warn, "SubagentStop", agent.name)
            lifecycle.env = self.lifecycle.env if self.lifecycle else {}
        child = Agent(
            self.chat(transport),
            Toolbox(tools, ToolContext(deadline=self.deadline, sandbox=s.sandbox), lifecycle),
            session,
            agent.system or s.system,
            s.max_steps,
            lifecycle,
        )
        events = child.run(prompt)
        try:
            while True:
                next(events)
        except StopIteration as done:
            return str(done.value.text)
        except (ProviderError, LimitReached) as e:
            raise ToolError(f"the subagent failed: {e}") from e
        finally:
            session.write_meta()
            transport.close()

    def turn(self, prompt: str) -> Any:
        """One prompt in, one reply out, under the session's lock; events go to the views."""
        session = self.session
        session.lock(self.deadline, self.settings.timeout)
        try:
            for warning in session.warnings:
                self.view.warn(warning)
            session.warnings.clear()
            s = self.settings
            session.trace(
                {
                    "type": "run",
                    "agi": __version__,
                    "model": s.model.label,
                    "base_url": s.model.base_url,
                    "cwd": os.getcwd(),
                    "pid": os.getpid(),
                    "system": s.system,
                    "tools": [t.name for t in s.tools],
                    "sandbox": s.sandbox.record(),
                }
            )
            if not session.meta_file.exists():
                session.write_meta(model=s.model.label)
            if self.agent is None:
                self.start_agent()
            events = self.agent.run(prompt)
            while True:
                try:
                    event = next(events)
                except StopIteration as done:
                    reply = done.value
                    break
                self.dispatch(event)
            session.write_meta(model=s.model.label)
            return reply
        except BaseException as e:  # keep what the turn produced, under the lock
            if self.agent is not None:
                self.agent.salvage()
            code = getattr(e, "exit_code", 130 if isinstance(e, KeyboardInterrupt) else 1)
            session.trace({"type": "error", "exit_code": code, "error": str(e) or type(e).__name__})
            session.write_meta()
            raise
        finally:
            session.unlock()

    def one_shot(self, prompt: str, path: Path | None, cont: bool) -> int:
        self.arm_timeout()
        self.open_session(path, cont)
        context = self.start_hooks(self.session_source())
        reply = self.turn(f"{prompt}\n\n{context}" if context else prompt)
        s = self.settings
        answer: Any = reply.text
        verdict = None
        if s.schema is not None or s.judge is not None:
            from agi.schema import JUDGE_SCHEMA, judge_instruction, schema_instruction

            if s.schema is not None:
                answer = self.ghost(s.schema, schema_instruction(s.schema))
            if s.judge is not None:
                verdict = self.ghost(JUDGE_SCHEMA, judge_instruction(s.judge or None))
                self.session.trace({"type": "judgement", **verdict})
        self.view.finish(
            str(self.session.path),
            self.agent.usage,
            time.monotonic() - self.started,
            self.agent.steps,
        )
        code = 0 if verdict is None or verdict["success"] else 1
        if verdict is not None:
            self.view.judgement(verdict["success"], verdict["reason"])
        self.verdict = verdict
        self.write_result(answer, code)
        if code:
            sys.stderr.write(f"agi: judged failed: {verdict and verdict['reason']}\n")
        return code

    def ghost(self, schema: dict[str, Any], instruction: str) -> Any:
        """Ask for JSON on a copy of the conversation (nothing of it reaches the session)."""
        from agi.messages import StepStart, UsageEvent
        from agi.schema import ghost_json

        self.dispatch(StepStart(self.agent.steps + 1))
        events = ghost_json(self.transport, self.agent.messages(), schema, instruction)
        while True:
            try:
                event = next(events)
            except StopIteration as done:
                return done.value
            if isinstance(event, UsageEvent):
                self.agent.usage.add(event.usage)
                self.agent.steps += 1
            self.dispatch(event)

    def dispatch(self, event: Any) -> None:
        """Send an event to the views; in a REPL the answer streams to stdout as it comes."""
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
        self.emit_event(event)

    def start_turn_clock(self) -> None:
        """In a REPL, --timeout limits each turn."""
        if self.settings.timeout:
            self.started = time.monotonic()
            self.deadline = self.started + self.settings.timeout
            if self.agent is not None:
                self.transport.deadline = self.deadline
                self.agent.toolbox.ctx.deadline = self.deadline

    def cancel_tools(self) -> None:
        if "agi.tools.shell" in sys.modules:
            from agi.tools.shell import kill_running

            kill_running()

    def emit_event(self, event: Any) -> None:
        if self.output == "jsonl":
            from agi.output import event_line

            sys.stdout.write(event_line(event))
            sys.stdout.flush()

    def write_result(self, answer: Any, exit_code: int, error: str | None = None) -> None:
        if self.output in ("json", "jsonl"):
            from agi.output import result_line

            sys.stdout.write(result_line(self, answer, exit_code, error))
        elif answer is not None and self.settings.schema is not None:
            import json

            sys.stdout.write(json.dumps(answer, ensure_ascii=False, separators=(",", ":")) + "\n")
        elif answer is not None:
            sys.stdout.write(f"{answer}\n")
        sys.stdout.flush()

    def after_failure(self, error: AgiError) -> None:
        """Report the failure in machine-readable output too."""
        if self.output != "text":
            self.write_result(None, error.exit_code, str(error))

    def cleanup(self) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for transport in self.children:
            transport.cancel()
        try:
            self.end_hooks("other")
        except AgiError as e:
            self.view.warn(str(e))
        if "agi.tools.shell" in sys.modules:
            from agi.tools.shell import kill_all

            kill_all()
        if "agi.tools.terminal" in sys.modules:
            from agi.tools.terminal import close_all

            close_all()
        if "agi.mcp" in sys.modules:
            from agi.mcp import close_all as close_mcp

            close_mcp()
        if self.transport is not None:
            self.transport.close()
        if self.session is not None:
            self.session.unlock()
