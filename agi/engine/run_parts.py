"""The parts of a run (agi.engine.run) that need none of its state: what an interrupted tool
call is told, the session a result names, an error carrying its run's result, the prices
--max-cost needs, the trace's run record, and the ghost exchange that asks for JSON."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agi.engine.assemble import subagent_model
from agi.errors import Interrupted, LimitReached
from agi.messages import StepStart, UsageEvent, drain
from agi.options.settings import Settings
from agi.version import __version__

if TYPE_CHECKING:
    from agi.engine.loop import Agent
    from agi.engine.result import RunResult
    from agi.engine.seams import Event, UsageMeter
    from agi.sessions.session import Session


def interruption(error: BaseException) -> str:
    """What a tool call cut short by `error` is told, as its result."""
    if isinstance(error, KeyboardInterrupt):
        return "interrupted by the user"
    if isinstance(error, Interrupted):
        return str(error)  # interrupted by SIGTERM, cancelled
    if isinstance(error, LimitReached):
        return f"interrupted: {error}"
    return f"interrupted: the run failed ({error or type(error).__name__})"


def kept(session: Session) -> Path | None:
    """The session a run reports: its directory, or None for an ephemeral run's."""
    return None if session.ephemeral else session.path


def carry(error: BaseException, result: RunResult) -> None:
    """Let `error` carry the result of the run it ended (`agi.Error.result`), once."""
    if getattr(error, "result", None) is None:
        try:
            error.result = result  # type: ignore[attr-defined]
        except AttributeError:  # an exception type without a __dict__
            pass


def require_prices(meter: UsageMeter, settings: Settings) -> None:
    """Under --max-cost every model a run may call needs a price: its own, and the subagent
    files' own models."""
    meter.require(settings.model.label, settings.model.model)
    for agent in settings.agents:
        model = subagent_model(settings, agent)
        if model is not None:
            meter.require(model.label, model.model)


def run_record(cwd: str, described: dict[str, Any], agent: Agent, s: Settings) -> dict[str, Any]:
    """The trace's record of a turn's start: what ran, with which model, tools and prompt."""
    return {
        "type": "run",
        "agi": __version__,
        "model": s.model.label,
        "base_url": s.model.base_url,
        "cwd": cwd,
        "pid": os.getpid(),
        "system": agent.system_prompt,
        "tools": list(agent.toolbox.tools),
        "sandbox": s.sandbox.record(),
        **described,
    }


def ghost_answer(
    agent: Agent,
    dispatch: Callable[[Event], None],
    state: Path | None,
    schema: dict[str, Any],
    instruction: str,
) -> Any:
    """Ask for JSON on a copy of the conversation (nothing of it reaches the session); a
    request refused for its length compacts the session and is sent once more."""

    def handle(event: Event) -> None:
        if isinstance(event, UsageEvent):
            agent.usage.add(event.usage)
        dispatch(event)

    dispatch(StepStart(agent.steps + 1))
    # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
    from agi.providers.capabilities import Formats

    formats = Formats.of(agent.wire, state)  # what earlier runs learnt

    # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
    from agi.structured.schema import ghost_json

    def asked() -> Any:
        return ghost_json(agent.wire, agent.messages(), schema, instruction, formats=formats)

    return drain(agent.compactor.resend_once(asked), handle)
