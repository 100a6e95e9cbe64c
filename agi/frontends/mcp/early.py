"""`initialize` answered before the `mcp` SDK is loaded (docs: mcp-server). Importing the SDK
takes most of a second (its pydantic models), and a client such as Claude Code in `-p` mode
does not wait that long for a server, so the first line of stdin is read here while the SDK
imports on a thread; when it is an `initialize` the SDK would accept, it is answered at once
with what the SDK answers (the same negotiation, the same fields). The line is then handed to
the SDK all the same, so its connection state is what it would be, and the SDK's own reply to
it is dropped (compared first: a difference is reported on stderr, which the tests check)."""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any

from agi.fileio import loads

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")  # the SDK's
LIMIT = 1 << 20  # a first line longer than this is the SDK's to read


def import_sdk() -> threading.Thread:
    def load() -> None:
        try:
            import mcp.server.lowlevel  # noqa: F401
            import mcp.server.stdio  # noqa: F401
            import mcp_types  # noqa: F401
        except ImportError:
            pass  # reported where it is needed

    thread = threading.Thread(target=load, name="import mcp", daemon=True)
    thread.start()
    return thread


def first_line() -> bytes:
    """What stdin holds up to and including its first newline (or its end, or LIMIT)."""
    chunks: list[bytes] = []
    size = 0
    while size <= LIMIT:
        chunk = os.read(0, 65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if b"\n" in chunk:
            break
    return b"".join(chunks)


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


def answer(read: bytes, result: Any) -> Any:
    """Answer the first line of `read` when it is an `initialize`; its JSON-RPC reply, or None."""
    line = read.split(b"\n", 1)[0]
    try:
        message = loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    if message.get("jsonrpc") != "2.0" or not isinstance(message.get("id"), (int, str)):
        return None
    found = result(message.get("params"))
    if found is None:
        return None
    reply = {"jsonrpc": "2.0", "id": message["id"], "result": found}
    data = (json.dumps(reply, separators=(",", ":")) + "\n").encode()
    while data:
        data = data[os.write(1, data) :]
    return reply


class Deduplicated:
    """The SDK's stdout (an anyio text file) less its reply to the request answered early."""

    def __init__(self, out: Any, sent: Any):
        self.out, self.sent = out, sent

    async def write(self, text: str) -> None:
        if self.sent is not None:
            try:
                message = json.loads(text)
            except ValueError:
                message = None
            reply = isinstance(message, dict) and "method" not in message
            if reply and message.get("id") == self.sent["id"]:  # type: ignore[union-attr]
                if message != self.sent:
                    sys.stderr.write(f"agi: initialize answered as {self.sent}, not {message}\n")
                self.sent = None
                return
        await self.out.write(text)

    async def flush(self) -> None:
        await self.out.flush()
