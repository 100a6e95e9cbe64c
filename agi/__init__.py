"""agi: a lightweight LLM agent that behaves like a UNIX tool, and a Python library.

    import agi
    result = agi.run("Which Linux distribution is this machine running?", model="ollama:qwen3")
    print(result.answer, result.usage.cost)

Importing the package costs what `agi --version` does: each public name is imported on first
use (from agi.api; the guide is docs/python.md). The engine's door is `agi.engine.open`, the
command line `agi.frontends.cli.main`.
"""

from agi.version import __version__

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
    "__version__",
    "arun",
    "astream",
    "run",
    "stream",
]

TYPE_CHECKING = False  # not typing's: `import agi` stays as cheap as `agi --version`
if TYPE_CHECKING:
    from agi.api import (
        AskRequest,
        AssistantTextEvent,
        Budget,
        Cancelled,
        Error,
        Event,
        HookStopped,
        LimitReached,
        NoticeEvent,
        ProviderError,
        ReasoningEvent,
        Result,
        ResultEvent,
        SchemaError,
        Session,
        StepEvent,
        TextEvent,
        ToolEndEvent,
        ToolStartEvent,
        UsageError,
        UsageEvent,
        arun,
        astream,
        run,
        stream,
    )


def __getattr__(name: str) -> object:
    """A public name, imported on first use (PEP 562)."""
    if name not in __all__:
        raise AttributeError(f"module 'agi' has no attribute {name!r}")
    # lazy: agi.api imports this module
    from agi import api

    value = getattr(api, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
