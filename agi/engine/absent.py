"""Null objects for the parts a run may lack (no hooks, no permission check, no compaction, no
checkpoints), so the loop and the toolbox have no `None` branches: each does what the run does
without the part, and imports, starts and checks nothing (agi.engine.seams for the Protocols)."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, TypeVar

from agi.messages import Usage

if TYPE_CHECKING:
    from agi.context.summarize import Compaction
    from agi.engine.seams import Tool
    from agi.messages import Notice, ToolCall
    from agi.policy.asking import AskRequest

T = TypeVar("T")


class NoHooks:
    """No hooks configured: the prompt as given, the answer final, tool calls as they are."""

    def prompt(self, prompt: str) -> str:
        return prompt

    def stop(self, answer: str) -> str | None:
        return None

    def woken(self) -> str | None:
        return None

    def before_tool(
        self, call: ToolCall, input: dict[str, Any]
    ) -> tuple[dict[str, Any], str | None, list[str], bool | str]:
        return input, None, [], False

    def after_tool(
        self,
        call: ToolCall,
        input: dict[str, Any],
        result: str,
        is_error: bool,
        response: dict[str, Any] | None,
    ) -> list[str]:
        return []

    def session_start(self, source: str, model: str) -> str:
        return ""

    def session_end(self, reason: str) -> None:
        pass

    def pre_compact(self, trigger: str, focus: str) -> None:
        pass

    def permission_request(
        self, request: AskRequest
    ) -> tuple[str | None, str, dict[str, Any] | None]:
        return None, "", None

    def notification(self, message: str, kind: str) -> None:
        pass

    def close(self) -> None:
        pass


class NoGuard:
    """No permission check (no rules, agi's default mode, no hooks, no one to ask): every tool
    is offered and every call runs; nothing of the call is parsed."""

    mode = "default"

    def offers(self, name: str) -> bool:
        return True

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
    ) -> str | None:
        return None

    def set_mode(self, mode: str) -> None:
        pass  # the run's next agent is assembled with a guard for the mode

    def update(self, entries: list[dict[str, Any]], source: str) -> list[str]:
        return []

    def hiding(self, cwd: str) -> Callable[[str], bool] | None:
        return None  # no rule keeps a file from Glob or Grep


class NoCompaction:
    """A bare agent's window is not watched: requests go as they are, refusals stand."""

    @property
    def usage(self) -> Usage:
        return Usage()  # no summary requests

    def before(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> Generator[Notice, None, bool]:
        return False
        yield  # a generator that yields nothing

    def observe(self, prompt_tokens: int) -> None:
        pass

    def resend_once(
        self, send: Callable[[], Generator[Any, None, T]], may: Callable[[], bool] = lambda: True
    ) -> Generator[Any, None, T]:
        return (yield from send())

    def run(
        self, trigger: str, focus: str = "", window: int | None = None
    ) -> Generator[Notice, None, Compaction | None]:
        return None
        yield  # a generator that yields nothing


class NoCheckpoints:
    """No checkpoints (a toolbox built alone; a subagent's turns are its parent's)."""

    def begin(self, prompt: str) -> None:
        pass

    def before_tool(self, name: str, input: dict[str, Any], cwd: str) -> None:
        pass

    def end(self) -> None:
        pass


NO_HOOKS, NO_GUARD, NO_COMPACTION, NO_CHECKPOINTS = (
    NoHooks(),
    NoGuard(),
    NoCompaction(),
    NoCheckpoints(),
)
