"""A small FastMCP server for the tests: stdio by default, `--http PORT` for streamable HTTP.

Each start appends its pid to $MCP_START_LOG (when set), so tests can count server starts;
$MCP_START_DELAY seconds of sleep before serving make it a slow server.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
import time

try:  # mcp 2 renamed FastMCP to MCPServer
    from mcp.server.mcpserver import MCPServer as FastMCP
except ImportError:  # mcp 1
    from mcp.server.fastmcp import FastMCP  # type: ignore[no-redef]

TINY_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

server = FastMCP("agi-test")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"Hello, {name}!"


@server.tool()
def weather(city: str) -> dict:
    """Structured weather for a city."""
    return {"city": city, "celsius": 21}


@server.tool()
def picture():  # noqa: ANN201 - the SDK turns Image into image content
    """A one-pixel PNG."""
    try:
        from mcp.server.mcpserver import Image
    except ImportError:
        from mcp.server.fastmcp import Image  # type: ignore[no-redef]
    return Image(data=TINY_PNG, format="png")


@server.tool()
def fail(message: str) -> str:
    """Raise an error with the message."""
    raise ValueError(message)


@server.tool()
def crash() -> str:
    """Exit the server process at once, mid-call."""
    os._exit(3)


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleep, then answer (touching $MCP_CALL_MARK first, when set); other calls go on."""
    if os.environ.get("MCP_CALL_MARK"):
        open(os.environ["MCP_CALL_MARK"], "w").close()
    await asyncio.sleep(seconds)
    return "slept"


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


if __name__ == "__main__":
    if os.environ.get("MCP_START_LOG"):
        with open(os.environ["MCP_START_LOG"], "a") as log:
            log.write(f"{os.getpid()}\n")
    if os.environ.get("MCP_START_DELAY"):
        time.sleep(float(os.environ["MCP_START_DELAY"]))
    if sys.argv[1:2] == ["--http"]:
        port = int(sys.argv[2])
        try:
            server.run("streamable-http", host="127.0.0.1", port=port)
        except TypeError:  # mcp 1: host and port are settings
            server.settings.host, server.settings.port = "127.0.0.1", port
            server.run("streamable-http")
    else:
        server.run()
