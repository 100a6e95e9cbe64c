"""stdin and stdout for `agi --acp`. The `acp` library takes a while to import (its pydantic
schema), so it is imported on a thread while the first messages are read: `initialize` is
answered here at once, from the same data the library's path answers it with, and so is a
first `session/new` (the session is the server's, the library never sees its request); the
import waits until then, or until stdin is quiet, so that they have the process. The rest of
stdin, and stdout, then become the library's streams (threads instead of epoll when they are
files or /dev/null)."""

from __future__ import annotations

import asyncio
import json
import os
import select
import stat
import threading
from typing import Any

from agi.fileio import loads

LIMIT = 50 * 1024 * 1024  # the library's default line limit (multimodal prompts)
PAUSE = 1 << 20  # stdin is not read further while this much of it waits unread (twice this)


def import_library(
    gate: threading.Event | None = None, dropped: threading.Event | None = None
) -> threading.Thread:
    """The library imported on a thread, once `gate` is set (at once without one), unless
    `dropped` is set by then: until then the first messages have the process to themselves."""

    def load() -> None:
        if gate is not None:
            gate.wait()
        if dropped is not None and dropped.is_set():
            return
        try:
            import acp.core  # noqa: F401
            import acp.schema  # noqa: F401
        except ImportError:
            pass  # reported where it is needed

    thread = threading.Thread(target=load, name="import acp", daemon=True)
    thread.start()
    return thread


def first_line() -> tuple[bytes, bytes]:
    """The first line on stdin and what was read after it (b"" at end of input), read in
    linear time; a first line over LIMIT is b"", all that was read of it the rest (the
    reader then refuses it once and goes on at the next line)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = os.read(0, 65536)
        if not chunk:
            return b"".join(chunks), b""
        end = chunk.find(b"\n")
        if end >= 0 and size + end <= LIMIT:
            return b"".join([*chunks, chunk[: end + 1]]), chunk[end + 1 :]
        chunks.append(chunk)
        size += len(chunk)
        if end >= 0 or size > LIMIT:
            return b"", b"".join(chunks)


def answer_initialize(line: bytes, result: Any) -> dict[str, Any] | None:
    """When `line` is an `initialize` request: write its answer (`result(params)`) to stdout
    and return its params; None for anything else (the library will read it)."""
    try:
        message = loads(line)
    except ValueError:  # nested too deep too: the reader answers it
        return None
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    params = message.get("params")
    if "id" not in message or not isinstance(params, dict):
        return None
    if not isinstance(params.get("protocolVersion"), int):
        return None
    _write({"jsonrpc": "2.0", "id": message["id"], "result": result(params)})
    global _answered
    _answered = 1
    return params


_answered = 0  # lines of stdin answered here (the reader numbers the others after them)
IDLE = 0.05  # seconds of a quiet stdin after which the library's import starts all the same


def answer_early(
    importing: threading.Thread, gate: threading.Event, unread: bytes, new: Any
) -> bytes:
    """After `initialize`: read stdin while the library imports, and answer a `session/new`
    that needs nothing of it (`new(id, params)`: the reply, or None to leave it to the
    library), then another. The import starts (`gate`) once a session is answered, stdin is
    quiet for IDLE, or a message needs the library; any other message, a line that is not a
    JSON object, the end of stdin or the end of the import hands the rest to the library.
    What is left unread."""
    global _answered
    buffer, start = unread, 0
    try:
        while True:
            end = buffer.find(b"\n", start)
            if end < 0:
                if not importing.is_alive() or len(buffer) - start > PAUSE:
                    break
                if not select.select([0], [], [], IDLE)[0]:
                    gate.set()
                    continue
                chunk = os.read(0, 65536)
                if not chunk:
                    break
                buffer += chunk
                continue
            try:
                message = loads(buffer[start:end])
            except ValueError:
                break
            if not isinstance(message, dict) or message.get("method") != "session/new":
                break
            number = message.get("id")
            if message.get("jsonrpc") != "2.0" or isinstance(number, bool):
                break
            if not isinstance(number, (int, str)):
                break
            reply = new(number, message.get("params"))
            if reply is None:
                break
            _write(reply)
            gate.set()
            start, _answered = end + 1, _answered + 1
    finally:
        gate.set()
    return buffer[start:]


def _write(reply: dict[str, Any]) -> None:
    data = (json.dumps(reply, separators=(",", ":")) + "\n").encode()
    while data:
        data = data[os.write(1, data) :]


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
    as JSON-RPC says (-32700 for a line that is not JSON or nested too deep, -32600 for one
    that is not an object or is over LIMIT), where the library would end the connection or
    log a traceback. Lines are split in linear time; a line over LIMIT is answered once and
    dropped up to its newline; each answer waits until the client reads it (docs: acp)."""
    target = asyncio.StreamReader(limit=LIMIT)

    number = _answered  # the line's number on stdin, for its error

    async def deliver(line: bytes) -> None:
        if not line.strip():
            return
        problem = _problem(line, number)
        if problem is None:
            target.feed_data(line + b"\n")
            await _room(target)
        else:
            await _refuse(writer, *problem)

    async def pump() -> None:
        nonlocal number
        pieces: list[bytes] = []
        size, dropping = 0, False
        too_long = (-32600, f"Invalid Request: a message over {LIMIT} bytes")
        try:
            while chunk := await source.read(1 << 16):
                start = 0
                while (end := chunk.find(b"\n", start)) >= 0:
                    number += 1
                    piece = chunk[start:end]
                    if not dropping and size + len(piece) > LIMIT:
                        await _refuse(writer, *too_long)
                    elif not dropping:
                        await deliver(b"".join([*pieces, piece]))
                    pieces, size, dropping = [], 0, False
                    start = end + 1
                if dropping or start == len(chunk):
                    continue
                size += len(chunk) - start
                pieces.append(chunk[start:])
                if size > LIMIT:  # answered now, once; its bytes are dropped up to its end
                    await _refuse(writer, *too_long)
                    pieces, size, dropping = [], 0, True
            if pieces and not dropping:
                number += 1
                await deliver(b"".join(pieces))
        finally:
            target.feed_eof()

    task = asyncio.ensure_future(pump())
    _pumps.add(task)
    task.add_done_callback(_pumps.discard)
    return target


_pumps: set[asyncio.Future[Any]] = set()  # the running pumps (tasks are weakly held)


async def _room(reader: asyncio.StreamReader, most: int = LIMIT) -> None:
    """Wait while `reader` holds more than `most` unread bytes (its reader reads on)."""
    while len(getattr(reader, "_buffer", b"")) > most:
        await asyncio.sleep(0.01)


def _problem(line: bytes, number: int = 0) -> tuple[int, str] | None:
    """None for a JSON object, else the error to answer (`number`: the line's, on stdin)."""
    try:
        message = loads(line)
    except json.JSONDecodeError as e:
        if e.msg == "nested too deep":
            return (-32700, f"Parse error: line {number} nested too deep (column {e.colno})")
        return (-32700, "Parse error: a line that is not JSON")
    except ValueError:
        return (-32700, "Parse error: a line that is not JSON")
    if not isinstance(message, dict):
        return (-32600, "Invalid Request: a message must be a JSON object")
    return None


async def _refuse(writer: asyncio.StreamWriter, code: int, message: str) -> None:
    """Answer a bad line, and read no further until the client has taken the answer."""
    reply = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    writer.write((json.dumps(reply, separators=(",", ":")) + "\n").encode())
    await writer.drain()


async def _streams(unread: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=PAUSE)  # the pump reads chunks: this only bounds a pipe
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
    async def put(chunk: bytes) -> None:
        reader.feed_data(chunk)
        await _room(reader, 2 * PAUSE)  # a file such as /dev/zero: no faster than it is used

    def read() -> None:
        try:
            while chunk := os.read(0, 65536):
                asyncio.run_coroutine_threadsafe(put(chunk), loop).result()
        except (OSError, RuntimeError):  # RuntimeError: the loop is closed
            pass
        finally:
            loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=read, name="acp stdin", daemon=True).start()
