"""What a tool is: the Tool protocol, the context a call runs in, and the text it returns.

Tool modules import this, not the `agi.tools` package, which imports them (builtin_tools).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from agi.errors import ToolError
from agi.policy.environment import child_env
from agi.policy.sandbox import Policy


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


def _no_sandbox() -> Policy:
    return Policy()


@dataclass
class ToolContext:
    cwd: str = field(default_factory=os.getcwd)
    deadline: float | None = None  # time.monotonic() value
    sandbox: Policy = field(default_factory=_no_sandbox)  # what commands and writes may touch
    # variables set on top of os.environ for every process a tool starts (hooks export them)
    env: dict[str, str] = field(default_factory=dict)
    # real paths Write and Edit refuse, with what lies below (the running session's directory,
    # agi's checkpoint records); and the files Read refuses too (the records' key)
    protected: tuple[str, ...] = ()
    unreadable: tuple[str, ...] = ()
    # set for each call by the toolbox: whether the permission rules keep a file from the file
    # tools (Glob and Grep leave it out), the judge of a call a tool makes on its own behalf
    # (WebFetch's redirects: a denial text or None) and the names the toolbox offers
    hides: Callable[[str], bool] | None = None
    judge: Callable[[str, dict[str, Any]], str | None] | None = None
    offered: frozenset[str] = frozenset()
    # WebFetch: the model's answer to a prompt about a page (a separate small request), and
    # the config keys web_allow_private and webfetch_raw
    reader: Callable[[str, str], str] | None = None
    web_allow_private: bool = False
    webfetch_raw: bool = False

    def hidden(self, path: str) -> bool:
        """Whether a search must leave the file out: the checkpoint records' key, or a file
        a `Read` deny or ask rule covers."""
        if self.unreadable and os.path.realpath(path) in self.unreadable:
            return True
        return self.hides is not None and self.hides(path)

    def remaining(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def environ(self) -> dict[str, str] | None:
        """The whole environment for a process, or None when ours serves unchanged."""
        return child_env(self.env)


class Tool(Protocol):
    """What the toolbox needs of a tool. A tool that starts processes also has `interrupt()`
    (kill what runs now) and/or `close()` (end all it started); tools that share one such
    resource (the MCP tools of a load) name it as `resource` instead, so it is closed once."""

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
