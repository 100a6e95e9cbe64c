"""agi as a Python library: the names `agi/__init__.py` gives on first use (docs/python.md).

A thin layer over the engine's door (agi.engine.open), as the command line is: each run is
opened from a spec built from the keyword arguments, and only its verbs and events are used."""

from agi.api.budget import Budget
from agi.api.events import (
    AssistantTextEvent,
    Event,
    NoticeEvent,
    ReasoningEvent,
    ResultEvent,
    StepEvent,
    TextEvent,
    ToolEndEvent,
    ToolStartEvent,
    UsageEvent,
)
from agi.api.runs import arun, astream, run, stream
from agi.api.session import Session
from agi.engine.result import RunResult as Result
from agi.errors import AgiError as Error
from agi.errors import Cancelled, HookStopped, LimitReached, ProviderError, SchemaError, UsageError
from agi.policy.asking import AskRequest

__all__ = [
    "AskRequest",
    "AssistantTextEvent",
    "Budget",
    "Cancelled",
    "Error",
    "Event",
    "HookStopped",
    "LimitReached",
    "NoticeEvent",
    "ProviderError",
    "ReasoningEvent",
    "Result",
    "ResultEvent",
    "SchemaError",
    "Session",
    "StepEvent",
    "TextEvent",
    "ToolEndEvent",
    "ToolStartEvent",
    "UsageError",
    "UsageEvent",
    "arun",
    "astream",
    "run",
    "stream",
]
