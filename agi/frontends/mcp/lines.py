"""The MCP server's stdin (docs: mcp-server): lines read in linear time up to LIMIT bytes, for
the SDK's stdio transport. A line the SDK could not use (over LIMIT, not JSON, nested too deep,
not a JSON-RPC message) is answered here with one JSON-RPC error naming its line (the SDK
would drop it without a word), and the next line is read only once the client has taken the
answer; a line over LIMIT is answered once and its bytes are dropped up to its newline."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from typing import Any

from agi.fileio import loads

LIMIT = 50 * 1024 * 1024  # bytes of one message (as the ACP server's)
CHUNK = 1 << 20


class Lines:
    """An async iterable of stdin's usable lines (str), over the descriptor `fd`. `reply` is
    set once the transport's write stream exists: an awaitable taking a JSON-RPC error."""

    def __init__(self, fd: int):
        self.fd = fd
        self.number = 0  # lines read so far
        self.reply: Callable[[Any], Any] | None = None
        self.unread = b""  # read from stdin before the server started (agi.frontends.mcp.early)

    def __aiter__(self) -> AsyncIterator[str]:
        return self.lines()

    async def chunks(self) -> AsyncIterator[bytes]:
        import anyio.to_thread

        if self.unread:
            first, self.unread = self.unread, b""
            yield first
        while chunk := await anyio.to_thread.run_sync(
            os.read, self.fd, CHUNK, abandon_on_cancel=True
        ):
            yield chunk

    async def lines(self) -> AsyncIterator[str]:
        pieces: list[bytes] = []
        size, dropping = 0, False
        async for chunk in self.chunks():
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                self.number += 1
                piece = chunk[start:end]
                if not dropping and size + len(piece) > LIMIT:
                    await self.refuse(
                        -32600, f"Invalid Request: line {self.number}: over {LIMIT} bytes"
                    )
                elif not dropping:
                    line = await self.usable(b"".join([*pieces, piece]))
                    if line is not None:
                        yield line
                pieces, size, dropping = [], 0, False
                start = end + 1
            if dropping or start == len(chunk):
                continue
            size += len(chunk) - start
            pieces.append(chunk[start:])
            if size > LIMIT:
                await self.refuse(
                    -32600, f"Invalid Request: line {self.number + 1}: over {LIMIT} bytes"
                )
                pieces, size, dropping = [], 0, True
        if pieces and not dropping:
            self.number += 1
            line = await self.usable(b"".join(pieces))
            if line is not None:
                yield line

    async def usable(self, raw: bytes) -> str | None:
        """The line as text when it is a JSON-RPC message; else None, once answered."""
        import mcp_types as types

        text = raw.decode("utf-8", "replace")
        if not text.strip():
            return None
        try:
            types.jsonrpc_message_adapter.validate_json(text, by_name=False)
            return text
        except ValueError:
            pass
        try:
            loads(text)
        except ValueError as e:
            where = f"line {self.number}, column {getattr(e, 'colno', 1)}"
            await self.refuse(-32700, f"Parse error: {where}: {getattr(e, 'msg', e)}")
            return None
        await self.refuse(-32600, f"Invalid Request: line {self.number} is no JSON-RPC message")
        return None

    async def refuse(self, code: int, message: str) -> None:
        """Answer a bad line (id null, as JSON-RPC says), waiting until it is written."""
        if self.reply is None:
            return
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        error = types.JSONRPCError(
            jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=message)
        )
        await self.reply(SessionMessage(error))


def claim_stdout() -> tuple[Any, Callable[[], None]]:
    """The SDK's stdout (a private copy of fd 1, as an anyio text file), with fd 1 pointed at
    stderr while the server runs, as the SDK does; None (the SDK's own) for another SDK."""
    import sys

    try:
        import anyio
        from mcp.server.stdio import _claim_fd, _open_stdout_diversion, _UnownedTextWrapper

        buffer, release = _claim_fd(1, sys.stdout, "wb", _open_stdout_diversion)
        text = anyio.wrap_file(_UnownedTextWrapper(buffer, encoding="utf-8"))
        return text, release or (lambda: None)
    except (ImportError, AttributeError, OSError, ValueError):
        return None, lambda: None


def claim_stdin() -> tuple[Lines, Callable[[], None]]:
    """Lines over a private copy of fd 0, with fd 0 itself pointed at /dev/null while the
    server runs (as the SDK does when it reads stdin itself); the function that undoes it."""
    import sys

    try:
        from mcp.server.stdio import _claim_fd, _open_stdin_diversion

        stream, release = _claim_fd(0, sys.stdin, "rb", _open_stdin_diversion)
        return Lines(stream.fileno()), release or (lambda: None)
    except (ImportError, AttributeError, OSError, ValueError):  # another SDK: stdin as it is
        return Lines(0), lambda: None
