"""The first requests answered before the `mcp` SDK is loaded (docs: mcp-server). Importing
the SDK takes most of a second (its pydantic models), and a client such as Claude Code in `-p`
mode does not wait that long for a server's tools, so stdin is read here while the SDK imports
on a thread: a first `initialize` the SDK would accept is answered at once with what the SDK
answers (the same negotiation, the same fields), then `ping` and `tools/list` (a static list).
Every line read is handed to the SDK all the same, so its connection state is what it would
be, and its own replies to those requests are dropped (compared first: a difference is
reported on stderr, which the tests check)."""

from __future__ import annotations

import json
import os
import select
import sys
import threading
from collections.abc import Callable
from typing import Any

from agi.fileio import loads

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")  # the SDK's
LIMIT = 1 << 20  # a first line longer than this is the SDK's to read


def import_sdk(warm: Callable[[], object] | None = None) -> threading.Thread:
    """The SDK imported on a thread, then `warm()` (what a first call loads besides)."""

    def load() -> None:
        try:
            import mcp.server.lowlevel  # noqa: F401
            import mcp.server.stdio  # noqa: F401
            import mcp_types  # noqa: F401
        except ImportError:
            return  # reported where it is needed
        if warm is not None:
            try:
                warm()
            except Exception:  # nothing a call needs: the first call meets it and says so
                pass

    thread = threading.Thread(target=load, name="import mcp", daemon=True)
    thread.start()
    return thread


def answer_early(importing: threading.Thread, initialize: Any, tools: Any) -> tuple[bytes, Any]:
    """Read stdin while `importing` runs and answer what needs nothing of the SDK: a first
    line that is an `initialize` (`initialize(params)`: its result, or None), then `ping` and
    `tools/list` (`tools`). What was read, and the replies written by id. Any other request,
    the end of stdin or the end of the import hands the rest to the SDK."""
    buffer, start = b"", 0
    sent: dict[Any, Any] = {}
    while True:
        end = buffer.find(b"\n", start)
        if end < 0:
            if not importing.is_alive() or len(buffer) - start > LIMIT:
                break
            if not select.select([0], [], [], 0.02)[0]:
                continue
            chunk = os.read(0, 65536)
            if not chunk:
                break
            buffer += chunk
            continue
        message = _message(buffer[start:end])
        start = end + 1
        if message is None:
            break
        method, number, params = message.get("method"), message.get("id"), message.get("params")
        if sent and "id" not in message:  # a notification (notifications/initialized): the SDK's
            continue
        if not isinstance(number, (int, str)) or isinstance(number, bool) or number in sent:
            break
        if not sent and method == "initialize":
            result = initialize(params)
        elif sent and method in ("ping", "tools/list") and params in (None, {}):
            result = {} if method == "ping" else tools
        else:
            result = None
        if result is None:
            break
        sent[number] = {"jsonrpc": "2.0", "id": number, "result": result}
        data = (json.dumps(sent[number], separators=(",", ":")) + "\n").encode()
        while data:
            data = data[os.write(1, data) :]
    return buffer, sent


def _message(line: bytes) -> Any:
    try:
        message = loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    return message


def initialize_result(params: Any, version: str, title: str, instructions: str) -> Any:
    """The SDK's answer to `params` (None when it would not simply accept them)."""
    if not isinstance(params, dict):
        return None
    requested, info = params.get("protocolVersion"), params.get("clientInfo")
    if not isinstance(requested, str) or not isinstance(params.get("capabilities"), dict):
        return None
    if not isinstance(info, dict) or not all(
        isinstance(info.get(k), str) for k in ("name", "version")
    ):
        return None
    return {
        "capabilities": {"tools": {"listChanged": False}},
        "instructions": instructions,
        "protocolVersion": requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1],
        "serverInfo": {"name": "agi", "title": title, "version": version},
    }


class Deduplicated:
    """The SDK's stdout (an anyio text file) less its replies to the requests answered early
    (`sent`, by id)."""

    def __init__(self, out: Any, sent: dict[Any, Any]):
        self.out, self.sent = out, dict(sent)

    async def write(self, text: str) -> None:
        if self.sent:
            try:
                message = json.loads(text)
            except ValueError:
                message = None
            reply = isinstance(message, dict) and "method" not in message
            if reply and message.get("id") in self.sent:  # type: ignore[union-attr]
                early = self.sent.pop(message["id"])  # type: ignore[index]
                if message != early:
                    sys.stderr.write(f"agi: answered early as {early}, not {message}\n")
                return
        await self.out.write(text)

    async def flush(self) -> None:
        await self.out.flush()
