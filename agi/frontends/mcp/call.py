"""One call of the MCP tool `agi` (docs: mcp-server): its arguments checked against the
server's limits, its run, and its result. Plain Python: the `mcp` SDK stays in mcp_serve.

The server's options are the defaults and the limits of every call. A call may narrow them
(`max_steps` and `timeout` no higher than the server's, `max_cost` capped at the server's) and
choose what the CLI lets a prompt choose (session, cwd, model, schema, exit_code, sys); it cannot
touch tools, permission rules, hooks or the sandbox: those fields do not exist, and naming one is
refused with a line that says so.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agi.engine.result import RunResult, mcp_structured
from agi.errors import AgiError, CostLimit, UsageError

USAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        **{k: {"type": "integer"} for k in ("input", "output", "cached", "cache_write")},
        "reasoning": {"type": "integer"},
        "cost": {"type": ["number", "null"], "description": "USD; null when unknown"},
    },
    "required": ["input", "output", "cached", "cache_write", "reasoning", "cost"],
}

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "prompt": {"type": "string", "description": "The task, as `agi PROMPT` takes it."},
        "session": {
            "type": "string",
            "description": "A session directory: created if missing, continued if it is one "
            "(pass back the `session` of an earlier result to continue it).",
        },
        "cwd": {"type": "string", "description": "Working directory for the run's tools."},
        "model": {"type": "string", "description": "provider:model, as agi -m."},
        "schema": {
            "type": ["string", "object"],
            "description": "Answer with JSON: agi's --schema DSL (e.g. 'name: str, age: int'), "
            "a JSON Schema (an object, or its text), or @FILE.",
        },
        "exit_code": {
            "type": ["boolean", "string"],
            "description": "Judge success: true for the generic rule, or the criteria; "
            "`exit` is then 0 or 1.",
        },
        "sys": {
            "type": ["string", "array"],
            "items": {"type": "string"},
            "description": "System prompt file(s), as --sys ('default' is the built-in one).",
        },
        "attachments": {
            "type": ["string", "array"],
            "items": {"type": "string"},
            "description": "Image (PNG, JPEG, GIF, WebP) or PDF file(s) sent with the prompt, "
            "as -a FILE (relative to cwd).",
        },
        "ephemeral": {
            "type": "boolean",
            "description": "Keep nothing: no session, trace or checkpoint (as --ephemeral); "
            "the result's `session` is null. Not with `session`.",
        },
        "max_steps": {"type": "integer", "minimum": 1, "description": "At most the server's."},
        "max_cost": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "USD; capped at the server's --max-cost.",
        },
        "timeout": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "Seconds; at most the server's --timeout.",
        },
    },
    "required": ["prompt"],
    "additionalProperties": False,
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"description": "The answer's text; the JSON value under `schema`."},
        "exit": {"type": "integer", "description": "The exit code `agi` would give."},
        "session": {"type": ["string", "null"], "description": "The session directory."},
        "steps": {"type": "integer", "description": "Model calls made."},
        "usage": USAGE_SCHEMA,
        "verdict": {
            "type": "object",
            "description": "Under `exit_code`: the judge's {success, reason}.",
            "properties": {"success": {"type": "boolean"}, "reason": {"type": "string"}},
        },
    },
    "required": ["answer", "exit", "session", "steps", "usage"],
}

DESCRIPTION = (
    "Run agi, a small command-line LLM agent with tools (shell, files, ...), on a task and get "
    "its final answer. Use it to hand work to another (often local, cheaper) model. `schema` "
    "makes the answer JSON; `exit_code` judges success; `session` continues a conversation."
)

# Fields a caller might reach for that only the server's own options decide.
SERVER_ONLY = {
    "tools": "the tools",
    "no_tools": "the tools",
    "tool": "the tools",
    "mcp": "the tools",
    "allow": "the permission rules",
    "deny": "the permission rules",
    "ask": "the permission rules",
    "permission_mode": "the permission rules",
    "settings": "the permission rules",
    "hooks": "the hooks",
    "sandbox": "the sandbox",
    "no_sandbox": "the sandbox",
    "allow_write": "the sandbox",
    "network": "the sandbox",
    "base_url": "the endpoint",
}


class Refused(UsageError):
    """A call the server will not run as given (exit 2), with the one line that says why."""


@dataclass
class Limits:
    """What the server's options allow every call."""

    max_steps: int = 50
    timeout: float | None = None
    max_cost: float | None = None


@dataclass
class Call:
    """One call's arguments, checked and narrowed to the server's limits."""

    prompt: str
    session: Path | None = None
    cwd: str | None = None
    model: str | None = None
    schema: str | None = None
    exit_code: bool | str | None = None
    sys: list[str] | None = None
    attachments: list[str] | None = None
    ephemeral: bool | None = None
    max_steps: int | None = None
    max_cost: float | None = None
    timeout: float | None = None
    fields: set[str] = field(default_factory=set)  # the fields the call gave


def _string(name: str, value: Any, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise Refused(f"{name}: expected a string, got {_kind(value)}")
    if not empty and not value.strip():
        raise Refused(f"{name}: must not be empty")
    if "\0" in value:
        raise Refused(f"{name}: must not contain a NUL character")
    return value


def _kind(value: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    names.update({list: "an array", dict: "an object", type(None): "null"})
    return names.get(type(value), type(value).__name__)


def _number(name: str, value: Any, integer: bool = False) -> Any:
    wanted = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, wanted):
        what = "an integer" if integer else "a number"
        raise Refused(f"{name}: expected {what}, got {_kind(value)}")
    if not math.isfinite(value) or value <= 0:
        raise Refused(f"{name}: must be a positive number, got {value!r}")
    return value


def _sys(value: Any) -> list[str]:
    files = [value] if isinstance(value, str) else value
    if not isinstance(files, list) or not files:
        raise Refused(f"sys: expected a file name or an array of them, got {_kind(value)}")
    return [_string("sys", f) for f in files]


def _attachments(value: Any) -> list[str]:
    files = [value] if isinstance(value, str) else value
    if not isinstance(files, list) or not files:
        raise Refused(f"attachments: expected a file name or an array of them, got {_kind(value)}")
    return [_string("attachments", f) for f in files]


def _exit_code(value: Any) -> bool | str:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _string("exit_code", value, empty=True)
    raise Refused(f"exit_code: expected true, false or the criteria, got {_kind(value)}")


def _boolean(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise Refused(f"{name}: expected true or false, got {_kind(value)}")
    return value


PARSERS: dict[str, Any] = {
    "prompt": lambda v: _string("prompt", v),
    "session": lambda v: Path(_string("session", v)).expanduser(),
    "cwd": lambda v: _string("cwd", v),
    "model": lambda v: _string("model", v),
    "schema": lambda v: json.dumps(v) if isinstance(v, dict) else _string("schema", v),
    "exit_code": _exit_code,
    "sys": _sys,
    "attachments": _attachments,
    "ephemeral": lambda v: _boolean("ephemeral", v),
    "max_steps": lambda v: _number("max_steps", v, integer=True),
    "max_cost": lambda v: _number("max_cost", v),
    "timeout": lambda v: _number("timeout", v),
}


def parse_call(arguments: Any, limits: Limits) -> Call:
    """The call's arguments, each checked; Refused (one line) for the first that is wrong.
    A null value counts as absent."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise Refused(f"arguments: expected an object, got {_kind(arguments)}")
    for name in arguments:
        if name in SERVER_ONLY:
            what = SERVER_ONLY[name]
            raise Refused(f"{name}: a call cannot change {what}; the server's options decide them")
        if name not in PARSERS:
            known = ", ".join(PARSERS)
            raise Refused(f"unknown field {name!r} (the tool takes: {known})")
    given = {k: v for k, v in arguments.items() if v is not None}
    if "prompt" not in given:
        raise Refused("prompt: missing (the tool needs a prompt)")
    values = {name: PARSERS[name](value) for name, value in given.items()}
    call = Call(**values, fields=set(values))
    if call.ephemeral and call.session is not None:
        raise Refused("ephemeral: a call that keeps nothing cannot continue or make a session")
    narrow(call, limits)
    if call.cwd is not None:
        call.cwd = os.path.abspath(os.path.expanduser(call.cwd))
        if not os.path.isdir(call.cwd):
            raise Refused(f"cwd: not a directory: {call.cwd}")
    if call.session is not None:
        call.session = session_path(call.session, call.cwd)
    if call.attachments is not None:  # relative to the call's cwd, as its tools see files
        base = call.cwd or os.getcwd()
        call.attachments = [os.path.join(base, os.path.expanduser(a)) for a in call.attachments]
    return call


def narrow(call: Call, limits: Limits) -> None:
    """The server's limits applied: a higher max_steps or timeout is refused, a higher max_cost
    capped; what the call leaves out is the server's."""
    if call.max_steps is not None and call.max_steps > limits.max_steps:
        raise Refused(
            f"max_steps {call.max_steps} is above the server's limit of {limits.max_steps} "
            "(start the server with a higher --max-steps)"
        )
    if call.timeout is not None and limits.timeout is not None and call.timeout > limits.timeout:
        raise Refused(
            f"timeout {call.timeout:g} s is above the server's limit of {limits.timeout:g} s "
            "(start the server with a higher --timeout)"
        )
    if limits.max_cost is not None:
        call.max_cost = min(call.max_cost or limits.max_cost, limits.max_cost)
    call.max_steps = call.max_steps or limits.max_steps
    call.timeout = call.timeout or limits.timeout


def session_path(path: Path, cwd: str | None) -> Path:
    """The session directory, absolute (relative to the call's cwd); a file is refused now."""
    path = Path(cwd or os.getcwd()) / path
    path = Path(os.path.abspath(path))
    if path.exists() and not path.is_dir():
        raise Refused(f"session: not a directory: {path}")
    return path


@dataclass
class Outcome:
    """What a call returns: the text content, and the run's result, whose structured content
    is agi.engine.result.mcp_structured's; a failure is an error result."""

    text: str
    result: RunResult = field(default_factory=RunResult)

    @property
    def exit(self) -> int:
        return self.result.exit_code

    @property
    def steps(self) -> int:
        return self.result.steps

    @property
    def usage(self) -> dict[str, Any]:
        return self.result.usage.to_dict()

    @property
    def is_error(self) -> bool:
        return self.exit not in (0, 1)

    def structured(self) -> dict[str, Any]:
        return mcp_structured(self.result)


def answer_text(answer: Any, schema: bool) -> str:
    """The answer as the CLI prints it (without the final newline)."""
    if schema:
        return json.dumps(answer, ensure_ascii=False, separators=(",", ":"))
    return str(answer)


def failure(error: AgiError, before: RunResult | None = None) -> Outcome:
    """A failed call: agi's one line, as the CLI would write it on stderr, and what the run
    had done (`before`)."""
    message = " ".join(str(error).split()) or type(error).__name__
    session = before.session if before is not None else None
    if session is not None and error.exit_code == 4 and not isinstance(error, CostLimit):
        message += f"; the session is kept: {session}"
    return Outcome(f"agi: {message}", RunResult.failed(error, before))
