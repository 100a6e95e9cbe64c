"""The Protocols of every collaborator of a run, in one place (as mini-swe-agent declares its
seams): what the loop, the toolbox and the door need of the model stream, a tool, the view,
the hooks, the permission guard, the compactor, the checkpoints, the meter, the permission
question and the files. Concrete classes need not inherit; agi.engine.absent holds the null
objects for the parts a run may lack."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from agi.messages import (
    AssistantText,
    Notice,
    ReasoningDelta,
    StepStart,
    TextDelta,
    ToolEnd,
    ToolStart,
    UsageEvent,
)
from agi.tools.protocol import Tool

if TYPE_CHECKING:
    from agi.context.summarize import Compaction
    from agi.messages import Reply, ToolCall, Usage
    from agi.policy.asking import AskRequest

__all__ = [
    "Ask",
    "ContextCompactor",
    "Event",
    "Files",
    "HookEvents",
    "ModelStream",
    "PermissionGuard",
    "StreamEvent",
    "Tool",
    "TurnCheckpoints",
    "UsageMeter",
    "View",
]

T = TypeVar("T")

StreamEvent = TextDelta | ReasoningDelta | Notice  # what a model stream yields as a reply comes
Event = StreamEvent | StepStart | UsageEvent | AssistantText | ToolStart | ToolEnd  # a run's


class ModelStream(Protocol):
    """The model as the loop sees it (agi.providers.transport's exchange, or the ReAct adapter
    around one): one streamed reply per call, a deadline, a cancel from any thread."""

    deadline: float | None  # time.monotonic() value

    def stream(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        mark: dict[str, Any] | None = None,
        **extra: Any,
    ) -> Generator[StreamEvent, None, Reply]: ...
    def cancel(self) -> None: ...
    def close(self) -> None: ...


class View(Protocol):
    """Where a run's events and warnings go (agi.frontends.views.terminal: Silent, Terminal);
    the command line also shows the verdict and the closing line through it."""

    def handle(self, event: Event) -> None: ...
    def warn(self, text: str) -> None: ...
    def sandbox(self, label: str) -> None: ...
    def judgement(self, success: bool, reason: str) -> None: ...
    def finish(self, session: str, usage: Usage, seconds: float, steps: int) -> None: ...
    def close(self) -> None: ...


class Ask(Protocol):
    """The front end's permission question (agi.policy.asking): one of its ANSWERS, or None
    when no one can be asked."""

    def __call__(self, request: AskRequest) -> str | None: ...


class Files(Protocol):
    """Where Read, Write and Edit read and write when not the disk: an editor's buffers
    (`fs/read_text_file` for ACP); `reads`/`writes` say which of them go through it."""

    reads: bool
    writes: bool

    def read(self, path: str) -> str: ...
    def write(self, path: str, text: str) -> None: ...


class HookEvents(Protocol):
    """Where hook events fire in a run (agi.claude.hooks.lifecycle.Lifecycle; NoHooks when
    none are configured): each returns what the run goes on with."""

    def prompt(self, prompt: str) -> str: ...
    def stop(self, answer: str) -> str | None: ...
    def woken(self) -> str | None: ...
    def before_tool(
        self, call: ToolCall, input: dict[str, Any]
    ) -> tuple[dict[str, Any], str | None, list[str], bool | str]: ...
    def after_tool(
        self,
        call: ToolCall,
        input: dict[str, Any],
        result: str,
        is_error: bool,
        response: dict[str, Any] | None,
    ) -> list[str]: ...
    def session_start(self, source: str, model: str) -> str: ...
    def session_end(self, reason: str) -> None: ...
    def pre_compact(self, trigger: str, focus: str) -> None: ...
    def permission_request(
        self, request: AskRequest
    ) -> tuple[str | None, str, dict[str, Any] | None]: ...
    def notification(self, message: str, kind: str) -> None: ...
    def close(self) -> None: ...


class PermissionGuard(Protocol):
    """The permission check at the toolbox (agi.policy.guard.Guard; NoGuard when nothing could
    be decided): a denial text, or None to run the call."""

    @property
    def mode(self) -> str: ...
    def offers(self, name: str) -> bool: ...
    def check(
        self,
        call_id: str,
        name: str,
        input: dict[str, Any],
        cwd: str,
        names: set[str] | None = None,
        approved: bool | str = False,
        *,
        tool: Tool | None = None,
    ) -> str | None: ...
    def set_mode(self, mode: str) -> None: ...
    def update(self, entries: list[dict[str, Any]], source: str) -> list[str]: ...
    def hiding(self, cwd: str) -> Callable[[str], bool] | None: ...  # Glob's and Grep's


class ContextCompactor(Protocol):
    """What keeps each request within the model's window (agi.context.compaction.Compactor;
    NoCompaction in a bare agent)."""

    @property
    def usage(self) -> Usage: ...  # its own summary requests'
    def before(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> Generator[Notice, None, bool]: ...
    def observe(self, prompt_tokens: int) -> None: ...
    def resend_once(
        self,
        send: Callable[[], Generator[Any, None, T]],
        may: Callable[[], bool] = ...,
    ) -> Generator[Any, None, T]: ...
    def run(
        self, trigger: str, focus: str = "", window: int | None = None
    ) -> Generator[Notice, None, Compaction | None]: ...


class TurnCheckpoints(Protocol):
    """A run's checkpoints (agi.checkpoints.snapshots.Checkpoints; NoCheckpoints without
    them): a turn begun and ended, and the state before each tool call that may change files."""

    def begin(self, prompt: str) -> None: ...
    def before_tool(self, name: str, input: dict[str, Any], cwd: str) -> None: ...
    def end(self) -> None: ...


class UsageMeter(Protocol):
    """Every model call's usage and cost, and the --max-cost budget (agi.providers.cost.Meter,
    and the shared budgets built on it)."""

    @property
    def total(self) -> Usage: ...
    @property
    def by_model(self) -> dict[str, Usage]: ...
    def require(self, label: str, model: str) -> None: ...
    def check(self, label: str, model: str, caller: object = None) -> None: ...
    def record(
        self, label: str, model: str, usage: Usage | None, caller: object = None
    ) -> Usage: ...
    def release(self, caller: object = None) -> None: ...
    def failed(self, label: str, model: str, caller: object = None) -> None: ...
    def since(self, mark: int) -> tuple[Usage, int]: ...
