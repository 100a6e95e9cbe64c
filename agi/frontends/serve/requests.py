"""One request's run, checked against the server's options (docs: serve): the fields of a batch
line (docs: batch) plus `stream`, `background`, `keep`, `tools` and `permission_mode`. The
server's options are the defaults and the limits of every request: a request may narrow
`max_steps`, `timeout`, `max_cost`, the tools and the permission mode, never widen them (a
Refused, 4xx, with the one line agi prints). Plain Python: the ASGI stack stays in app."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agi.errors import UsageError
from agi.options.config import agi_home

# how much each permission mode lets a run do without asking: a request may only go lower
MODE_RANK = {"plan": 0, "dontAsk": 1, "default": 1, "acceptEdits": 2, "bypassPermissions": 3}


class Refused(UsageError):
    """A request the server will not run as given: HTTP `status`, OpenAI's error `kind` and
    `code`, and agi's one line."""

    def __init__(self, message: str, status: int = 400, code: str = "invalid_request"):
        super().__init__(message)
        self.status, self.code = status, code
        self.kind = "invalid_request_error" if status < 500 else "server_error"


@dataclass
class Limits:
    """What the server's options allow every request."""

    max_steps: int = 50
    timeout: float | None = None
    max_cost: float | None = None
    tools: list[str] | None = None  # the names offered (None: every tool the server has)
    mode: str = "default"


@dataclass
class RunRequest:
    """One run a request asks for, checked and narrowed to the server's limits."""

    prompt: str
    id: str | None = None
    session: Path | None = None
    model: str | None = None
    schema: str | None = None
    exit_code: bool | str | None = None
    sys: list[str] | None = None
    attachments: list[str] | None = None
    max_steps: int | None = None
    max_cost: float | None = None
    timeout: float | None = None
    tools: list[str] | None = None
    permission_mode: str | None = None
    stream: bool = False
    background: bool = False
    keep: bool = False
    fields: set[str] = field(default_factory=set)

    @property
    def ephemeral(self) -> bool:
        """No session named and none asked to be kept: nothing is written (docs: volume)."""
        return self.session is None and not self.keep


def kind(value: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    names.update({list: "an array", dict: "an object", type(None): "null"})
    return names.get(type(value), type(value).__name__)


def text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise Refused(f"{name}: expected a string, got {kind(value)}")
    if not value.strip():
        raise Refused(f"{name}: must not be empty")
    if "\0" in value:
        raise Refused(f"{name}: must not contain a NUL character")
    return value


def number(name: str, value: Any, integer: bool = False) -> Any:
    wanted = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, wanted):
        what = "an integer" if integer else "a number"
        raise Refused(f"{name}: expected {what}, got {kind(value)}")
    if not math.isfinite(value) or value <= 0:
        raise Refused(f"{name}: must be a positive number, got {value!r}")
    return value


def texts(name: str, value: Any) -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise Refused(f"{name}: expected a string or an array of strings, got {kind(value)}")
    return [text(name, v) for v in items]


def switch(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise Refused(f"{name}: expected true or false, got {kind(value)}")
    return value


def criteria(value: Any) -> bool | str:
    if isinstance(value, (bool, str)):
        return value
    raise Refused(f"exit_code: expected true, false or the criteria, got {kind(value)}")


def mode(value: Any) -> str:
    if value not in MODE_RANK:
        raise Refused(f"permission_mode: expected one of {', '.join(MODE_RANK)}, got {value!r}")
    return str(value)


PARSERS: dict[str, Any] = {
    "id": lambda v: str(v) if type(v) is int else text("id", v),
    "prompt": lambda v: text("prompt", v),
    "session": lambda v: Path(os.path.abspath(os.path.expanduser(text("session", v)))),
    "model": lambda v: text("model", v),
    "schema": lambda v: json.dumps(v) if isinstance(v, dict) else text("schema", v),
    "exit_code": criteria,
    "sys": lambda v: texts("sys", v),
    "attachments": lambda v: texts("attachments", v),
    "max_steps": lambda v: number("max_steps", v, integer=True),
    "max_cost": lambda v: number("max_cost", v),
    "timeout": lambda v: number("timeout", v),
    "tools": lambda v: [] if v == [] else texts("tools", v),
    "permission_mode": mode,
    "ephemeral": lambda v: switch("ephemeral", v),
    "stream": lambda v: switch("stream", v),
    "background": lambda v: switch("background", v),
    "keep": lambda v: switch("keep", v),
}


def parse_run(body: Any, limits: Limits) -> RunRequest:
    """`POST /v1/runs`'s body, each field checked; Refused for the first that is wrong. A null
    value counts as absent."""
    if not isinstance(body, dict):
        raise Refused(f"the request body must be a JSON object, got {kind(body)}")
    for name in body:
        if name not in PARSERS:
            raise Refused(f"unknown field {name!r} (known: {', '.join(PARSERS)})")
    given = {k: v for k, v in body.items() if v is not None}
    if "prompt" not in given:
        raise Refused("prompt: missing (a run needs a prompt)")
    values = {name: PARSERS[name](value) for name, value in given.items()}
    ephemeral = values.pop("ephemeral", None)
    if ephemeral is True and (values.get("keep") or "session" in values):
        raise Refused("ephemeral keeps no session: it cannot be used with session or keep")
    request = RunRequest(**values, fields=set(values))
    if request.stream and request.background:
        raise Refused("stream and background: a background run is asked for later, not streamed")
    if request.session is not None and request.session.exists() and not request.session.is_dir():
        raise Refused(f"session: not a directory: {request.session}")
    narrow(request, limits)
    return request


def confined(request: RunRequest) -> None:
    """The files a client's request names (`sys`, `attachments`, `schema @FILE`, `session`) lie
    inside the server's working directory, sessions also under $AGI_HOME: a client reads and
    writes nothing else of the host's (Refused 403 naming the field)."""
    here = os.path.realpath(os.getcwd())
    named: list[tuple[str, str]] = [("sys", s) for s in request.sys or [] if s != "default"]
    named += [("attachments", a) for a in request.attachments or []]
    if isinstance(request.schema, str) and request.schema.startswith("@"):
        named.append(("schema", request.schema[1:]))
    if request.session is not None:
        named.append(("session", str(request.session)))
    for name, value in named:
        real = os.path.realpath(os.path.join(here, os.path.expanduser(value)))
        roots = [here, os.path.realpath(agi_home())] if name == "session" else [here]
        if not any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots):
            raise Refused(
                f"{name}: {value} is outside the server's working directory ({here})",
                status=403,
                code="outside_working_directory",
            )


def opt_in_tools() -> set[str]:
    """The tools offered only when named (Glob, Grep, WebFetch, …)."""
    # lazy: the tools are imported only when a request names tools
    from agi.tools import builtin_tools

    return {t.name for t in builtin_tools() if getattr(t, "opt_in", False)}


def narrow(request: RunRequest, limits: Limits) -> None:
    """The server's limits applied: a request asking for more than one of them is refused,
    naming the limit and the option that sets it; what it leaves out is the server's."""

    def above(what: str, asked: str, limit: str, option: str) -> Refused:
        return Refused(
            f"{what} {asked} is above the server's limit of {limit} (start the server with a "
            f"higher {option})",
            status=403,
            code="limit_exceeded",
        )

    if request.max_steps is not None and request.max_steps > limits.max_steps:
        raise above("max_steps", str(request.max_steps), str(limits.max_steps), "--max-steps")
    timeout, cost = limits.timeout, limits.max_cost
    if request.timeout is not None and timeout is not None and request.timeout > timeout:
        raise above("timeout", f"{request.timeout:g} s", f"{timeout:g} s", "--timeout")
    if request.max_cost is not None and cost is not None and request.max_cost > cost:
        raise above("max_cost", f"{request.max_cost:g} USD", f"{cost:g} USD", "--max-cost")
    if request.tools is not None and limits.tools is not None:
        extra = [t for t in request.tools if t not in limits.tools]
        if extra:
            offered = ", ".join(limits.tools) or "none"
            raise above("tools", ", ".join(extra), f"the tools it offers ({offered})", "--tools")
    elif request.tools is not None:  # the server's default tools: the opt-in ones are not
        extra = sorted(set(request.tools) & opt_in_tools())
        if extra:
            raise above("tools", ", ".join(extra), "its default tools", "--tools naming them")
    if request.permission_mode is not None:
        asked, server = request.permission_mode, limits.mode
        if MODE_RANK[asked] > MODE_RANK.get(server, 1):
            raise above("permission_mode", asked, server, "--permission-mode")
