"""Tools the model can call: the protocol, the registry, and running calls (in parallel)."""

from __future__ import annotations

import os
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from agi.errors import AgiError
from agi.messages import ToolCall, ToolEnd, ToolStart

if TYPE_CHECKING:
    from agi.sandbox import Policy


class ToolError(Exception):
    """A tool failed in a way the model should read about; becomes an `Error: …` result."""


class ToolText(str):
    """A tool's result text, with the structured form hooks get as `tool_response`."""

    response: dict[str, Any] | None = None
    error: bool = False  # a failure reported in the tool's own words (no `Error: ` prefix)

    @classmethod
    def with_response(cls, text: str, response: dict[str, Any]) -> ToolText:
        out = cls(text)
        out.response = response
        return out

    @classmethod
    def failure(cls, text: str) -> ToolText:
        out = cls(text)
        out.error = True
        return out


def _with_notes(text: str, notes: list[str]) -> str:
    return "\n\n".join([text, *[n for n in notes if n]])


def _no_sandbox() -> Policy:
    from agi.sandbox import Policy

    return Policy()


@dataclass
class ToolContext:
    cwd: str = field(default_factory=os.getcwd)
    deadline: float | None = None  # time.monotonic() value
    sandbox: Policy = field(default_factory=_no_sandbox)  # what commands and writes may touch

    def remaining(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())


class Tool(Protocol):
    name: str
    description: str
    parameters: dict[str, Any]

    def run(self, input: dict[str, Any], ctx: ToolContext) -> str: ...


def spec(tool: Tool) -> dict[str, Any]:
    """The OpenAI `tools` entry for a tool."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def require(input: dict[str, Any], key: str, kind: type = str) -> Any:
    value = input.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise ToolError(f"'{key}' is required and must be a {kind.__name__}")
    return value


def builtin_tools() -> list[Tool]:
    from agi.tools.calculate import Calculate
    from agi.tools.files import Edit, Read, TempDir, Write
    from agi.tools.shell import Bash
    from agi.tools.terminal import Terminal

    return [Bash(), Read(), Write(), Edit(), TempDir(), Terminal(), Calculate()]


@dataclass
class Result:
    call: ToolCall
    text: str
    is_error: bool
    seconds: float


class Toolbox:
    """The tools offered in a run, by name."""

    def __init__(self, tools: list[Tool], ctx: ToolContext | None = None, lifecycle: Any = None):
        self.tools = {t.name: t for t in tools}
        self.ctx = ctx or ToolContext()
        self.lifecycle = lifecycle  # fires PreToolUse / PostToolUse hooks, when there are any

    @property
    def specs(self) -> list[dict[str, Any]]:
        return [spec(t) for t in self.tools.values()]

    def run_one(self, call: ToolCall) -> Result:
        """Run a call, with its hooks; every failure becomes an `Error: …` result."""
        started = time.monotonic()
        try:
            tool = self.tools.get(call.name)
            if tool is None:
                names = ", ".join(self.tools) or "none"
                raise ToolError(f"there is no tool named {call.name!r} (available: {names})")
            try:
                input = call.parse_arguments()
            except ValueError as e:
                raise ToolError(
                    f"the arguments are not a valid JSON object ({e}); "
                    f"you sent: {call.arguments[:500]}"
                ) from e
        except ToolError as e:
            return Result(call, f"Error: {e}", True, time.monotonic() - started)
        notes: list[str] = []
        if self.lifecycle is not None:
            input, denied, notes = self.lifecycle.before_tool(call, input)
            if denied is not None:
                text = _with_notes(denied, notes)
                return Result(call, text, True, time.monotonic() - started)
        text, is_error, response = self._execute(tool, input)
        if self.lifecycle is not None:
            notes += self.lifecycle.after_tool(call, input, text, is_error, response)
        return Result(call, _with_notes(text, notes), is_error, time.monotonic() - started)

    def _execute(self, tool: Tool, input: dict[str, Any]) -> tuple[str, bool, Any]:
        try:
            output = tool.run(input, self.ctx)
            return str(output), getattr(output, "error", False), getattr(output, "response", None)
        except ToolError as e:
            return f"Error: {e}", True, None
        except OSError as e:
            where = f": {e.filename}" if e.filename else ""
            return f"Error: {e.strerror or e}{where}", True, None
        except AgiError:
            raise  # a hook stopped the run, or it was interrupted
        except Exception as e:  # a tool bug must not end the run; the model reads what happened
            return f"Error: {type(e).__name__}: {e}", True, None

    def run_all(self, calls: list[ToolCall]) -> Generator[ToolStart | ToolEnd, None, list[Result]]:
        """Run one turn's calls concurrently; yield start and end events; results in call order."""
        for call in calls:
            try:
                input = call.parse_arguments()
            except ValueError:
                input = {"_raw": call.arguments}
            yield ToolStart(call, input)
        if len(calls) == 1:
            results = [self.run_one(calls[0])]
            yield ToolEnd(calls[0], results[0].text, results[0].is_error, results[0].seconds)
            return results
        from concurrent.futures import ThreadPoolExecutor

        results = []
        pool = ThreadPoolExecutor(max_workers=min(8, len(calls)))
        try:
            futures = [pool.submit(self.run_one, c) for c in calls]
            for future in futures:
                r = future.result()
                results.append(r)
                yield ToolEnd(r.call, r.text, r.is_error, r.seconds)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        return results
