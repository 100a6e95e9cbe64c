"""The run behind one MCP call: the server's settings narrowed by the call, a Run in a worker
thread, its events turned into progress messages, and its result into an Outcome.

Shared by every call (resolved once, when the server starts): the server's options layer and
the settings it resolves to (the config file parsed, plugins, skills, agents, hooks and commands
scanned, permission rules read), and the pool of HTTP clients and backoffs every call's model
connection is lent from. Per call: the settings the call's fields change, the session, the cost
meter, the tools and the model connection (a Run's own).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agi import engine
from agi.engine.spec import RunSpec, SessionChoice
from agi.errors import AgiError, Cancelled
from agi.frontends.mcp.call import (
    Call,
    Limits,
    Outcome,
    answer_text,
    failure,
)
from agi.frontends.views.terminal import Silent, describe_input
from agi.messages import StepStart, ToolStart
from agi.options.config import NoModel
from agi.options.settings import Settings, model_for
from agi.options.values import Options, overlay, request_layer
from agi.policy.redaction import redact_values, usable
from agi.providers.endpoint import configured_providers, require_configured
from agi.providers.pool import ClientPool

if TYPE_CHECKING:
    from agi.engine.run import Run
    from agi.engine.seams import Event
    from agi.options.values import Layer

SOURCE = "MCP call"


@dataclass
class Base:
    """The server's own options and what they resolve to: the defaults and limits of calls."""

    layer: Layer
    settings: Settings
    limits: Limits
    pool: ClientPool = field(default_factory=ClientPool)  # connections and backoff of all calls
    configured: set[str] = field(default_factory=set)  # the providers a call's model may use
    missing: AgiError | None = None  # no model configured: what every call answers

    @classmethod
    def load(cls, layer: Layer) -> Base:
        """Resolve the server's options once; a bad option or config fails the start (exit 2),
        except a missing model, which each call reports (docs: mcp-server)."""
        missing: AgiError | None = None
        try:
            settings = Settings.load(layer, anchor=os.getcwd())  # rules where given (security)
        except NoModel as e:
            missing = e
            settings = Settings.load(
                layer, defaults=Options(model="openai:none"), anchor=os.getcwd()
            )
        settings.warnings.extend(settings.check_rules())  # bad rule names: exit 2 now
        for warning in settings.warnings:  # shown once, at start, not with every call
            sys.stderr.write(f"agi: {warning}\n")
        settings.warnings.clear()
        limits = Limits(settings.max_steps, settings.timeout, settings.max_cost)
        configured = configured_providers(layer)
        return cls(layer, settings, limits, configured=configured, missing=missing)

    def warm(self) -> None:
        """What a first call loads, loaded before it comes (on the SDK's import thread, after
        the SDK): the engine's run and one model connection's client, lent to the first call."""
        # lazy: agi.engine.run loads the engine's parts a first call needs
        import agi.engine.run  # noqa: F401

        self.pool.give_back(self.pool.client())

    def for_call(self, call: Call) -> Layer:
        """The call's fields as the last layer, which its run lays over the server's settings
        (docs: configuration); what the call does not give stays as resolved at start, its
        model resolved as `-m` would be with the server's other options, on a provider the
        operator configured (docs: security)."""
        if call.model is not None:
            model = model_for(self.layer, overlay(SOURCE, {"model": "model"}, model=call.model))
            require_configured(model, self.settings.model, self.configured, "model")
        return request_layer(SOURCE, call)


def secrets(run: Run) -> list[str]:
    """The keys a run's outputs must not show: its session's, else its model's."""
    session = getattr(run, "session", None)
    if session is not None:
        return list(session.secrets)
    return usable([run.settings.model.api_key])


class Progress(Silent):
    """The run's view: a progress message per model call and per tool call; warnings go to
    the server's stderr, as the CLI's would."""

    def __init__(self, send: Callable[[str], None]):
        super().__init__(sys.stderr)
        self.send = send

    def handle(self, event: Event) -> None:
        if isinstance(event, StepStart):
            self.send(f"model call {event.step}")
        elif isinstance(event, ToolStart):
            detail = describe_input(event.input)
            self.send(f"{event.call.name}: {detail}" if detail else event.call.name)


class CallRun:
    """One call's run. `run()` in a worker thread; `cancel()` from any thread, at any time."""

    def __init__(
        self, call: Call, base: Base, started: float, progress: Callable[[str], None]
    ) -> None:
        self.call, self.base, self.started = call, base, started
        self.progress = progress
        self.lock = threading.Lock()
        self.cancelled = False
        self.current: Run | None = None

    def send(self, message: str) -> None:
        run = self.current
        self.progress(run.redact(message) if run is not None else message)

    def cancel(self) -> None:
        with self.lock:
            self.cancelled = True
            run = self.current
        if run is not None:
            run.cancel()

    def run(self) -> Outcome:
        """The call's outcome; every failure is an Outcome with agi's one line."""
        run: Run | None = None
        try:
            run = self.start()
            return self.ask(run)
        except AgiError as e:
            return self.failed(e, run)
        except Exception as e:  # a bug must cost one call, not the server
            return self.failed(AgiError(f"internal error: {type(e).__name__}: {e}"), run)
        finally:
            if run is not None:
                try:
                    run.close()  # a transport not in flight keeps its connections open
                except Exception as e:
                    sys.stderr.write(f"agi: closing a call's run: {e}\n")

    def start(self) -> Run:
        spec = RunSpec(
            self.base.settings,
            layer=self.base.for_call(self.call),
            cwd=self.call.cwd,
            view=Progress(self.send),
            session=SessionChoice(path=self.call.session, latest=False),  # not -c's
            started=self.started,
            pool=self.base.pool,
        )
        run = engine.open(spec)
        with self.lock:
            self.current = run
            cancelled = self.cancelled
        if cancelled:
            raise Cancelled()
        return run

    def ask(self, run: Run) -> Outcome:
        result = run.ask(self.call.prompt)
        if result.exit_code not in (0, 1):  # the judge gave no verdict (exit 5)
            return Outcome(run.redact(f"agi: {result.error or 'failed'}"), result)
        schema = run.settings.schema is not None
        # value by value: structuredContent's answer and the text made from it (docs: security)
        result = dataclasses.replace(result, answer=redact_values(result.answer, secrets(run)))
        text = run.redact(answer_text(result.answer, schema))
        if result.verdict is not None:
            reason = run.redact(str(result.verdict.get("reason", "")))
            verdict = {"success": bool(result.verdict.get("success")), "reason": reason}
            result = dataclasses.replace(result, verdict=verdict)
        return Outcome(text, result)

    def failed(self, error: AgiError, run: Run | None) -> Outcome:
        before = run.result(error) if run is not None else error.result
        out = failure(error, before)
        if run is not None:
            out.text = run.redact(out.text)
        return out
