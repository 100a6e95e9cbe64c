"""stdin and stdout for `agi --acp`. The `acp` library takes a while to import (its pydantic
schema), so it is imported on a thread while the first message is read, and `initialize` is
answered here at once, from the same data the library's path answers it with. The rest of
stdin, and stdout, then become the library's streams (threads instead of epoll when they are
files or /dev/null)."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import threading
from typing import Any

LIMIT = 50 * 1024 * 1024  # the library's default line limit (multimodal prompts)


def import_library() -> threading.Thread:
    def load() -> None:
        try:
            import acp.core  # noqa: F401
            import acp.schema  # noqa: F401
        except ImportError:
            pass  # reported where it is needed

    thread = threading.Thread(target=load, name="import acp", daemon=True)
    thread.start()
    return thread


def first_line() -> tuple[bytes, bytes]:
    """The first line on stdin and what was read after it (b"" at end of input)."""
    data = b""
    while b"\n" not in data:
        chunk = os.read(0, 65536)
        if not chunk:
            return data, b""
        data += chunk
    line, _, rest = data.partition(b"\n")
    return line + b"\n", rest


def answer_initialize(line: bytes, result: Any) -> dict[str, Any] | None:
    """When `line` is an `initialize` request: write its answer (`result(params)`) to stdout
    and return its params; None for anything else (the library will read it)."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    params = message.get("params")
    if "id" not in message or not isinstance(params, dict):
        return None
    if not isinstance(params.get("protocolVersion"), int):
        return None
    reply = {"jsonrpc": "2.0", "id": message["id"], "result": result(params)}
    data = (json.dumps(reply, separators=(",", ":")) + "\n").encode()
    while data:
        data = data[os.write(1, data) :]
    return params


def _pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


async def streams(unread: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The library's reader (holding `unread` first; only JSON objects reach it) and writer
    over fds 0 and 1."""
    reader, writer = await _streams(unread)
    return checked(reader, writer), writer


def checked(source: asyncio.StreamReader, writer: asyncio.StreamWriter) -> asyncio.StreamReader:
    """A reader of the lines of `source` that are JSON objects. The others are answered here
    as JSON-RPC says (-32700 for a line that is not JSON, -32600 for one that is not an
    object or is too long), where the library would end the connection or log a traceback."""
    target = asyncio.StreamReader(limit=LIMIT)

    async def pump() -> None:
        try:
            while True:
                try:
                    line = await source.readline()
                except ValueError:  # longer than LIMIT: dropped up to its end
                    _refuse(writer, -32600, f"Invalid Request: a message over {LIMIT} bytes")
                    continue
                if not line:
                    return
                if not line.strip():
                    continue
                problem = _problem(line)
                if problem is None:
                    target.feed_data(line if line.endswith(b"\n") else line + b"\n")
                else:
                    _refuse(writer, *problem)
        finally:
            target.feed_eof()

    task = asyncio.ensure_future(pump())
    _pumps.add(task)
    task.add_done_callback(_pumps.discard)
    return target


_pumps: set[asyncio.Future[Any]] = set()  # the running pumps (tasks are weakly held)


def _problem(line: bytes) -> tuple[int, str] | None:
    """None for a JSON object, else the error to answer."""
    try:
        message = json.loads(line)
    except ValueError:
        return (-32700, "Parse error: a line that is not JSON")
    if not isinstance(message, dict):
        return (-32600, "Invalid Request: a message must be a JSON object")
    return None


def _refuse(writer: asyncio.StreamWriter, code: int, message: str) -> None:
    reply = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    writer.write((json.dumps(reply, separators=(",", ":")) + "\n").encode())


async def _streams(unread: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LIMIT)
    if unread:
        reader.feed_data(unread)
    if _pipe(0):
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0))
    else:
        _feed(loop, reader)
    if _pipe(1):
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(1, "wb")
        )
        return reader, asyncio.StreamWriter(transport, protocol, reader, loop)
    from acp.stdio import _StdoutTransport, _WritePipeProtocol  # a file: writes never wait

    writer = asyncio.StreamWriter(_StdoutTransport(), _WritePipeProtocol(), None, loop)  # type: ignore[arg-type]
    return reader, writer


def _feed(loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader) -> None:
    def read() -> None:
        try:
            while chunk := os.read(0, 65536):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
        except OSError:
            pass
        finally:
            loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=read, name="acp stdin", daemon=True).start()
