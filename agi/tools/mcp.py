"""Tools from MCP servers, configured in Claude Code's `mcpServers` format, offered as `mcp__S__T`.

Config (agi.tools.mcp_config): `{"mcpServers": {NAME: {"command", "args", "env"} | {"type": "http"|
"sse", "url", "headers"}}}`. `MCP_TIMEOUT` and `MCP_TOOL_TIMEOUT` (milliseconds, as in Claude
Code) bound a server's start and a call.

Cache: each server's tool list is stored in one JSON file under the hash of its name and expanded
configuration, so a run with a warm cache offers the tools without starting anything; a server
starts when one of its tools is first called. An entry is replaced when the configuration
changes (new hash), after CACHE_TTL, and whenever the server starts (its fresh list is saved; a
call of a tool the fresh list lacks is an error that says so).

Threads: the SDK is asyncio; the tools of one `load_mcp` share a Runtime: one event loop in a
daemon thread, started on first use, that owns every session; tools (which may run in several
threads at once) submit coroutines to it. `Runtime.close()` (the toolbox's close(), or interpreter
exit) ends sessions and stdio processes and joins the thread; a later call starts anew.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agi.errors import ToolError
from agi.policy.environment import child_env
from agi.tools.mcp_config import Cache, ServerConfig, read_configs
from agi.tools.mcp_content import dump, result_text, size
from agi.tools.mcp_process import kill_groups, recording
from agi.tools.protocol import ToolContext, ToolText

if TYPE_CHECKING:
    import asyncio  # imported where used: it costs 30 ms, and a warm cache never needs it

START_TIMEOUT = 30.0  # seconds a server may take to start and list its tools (MCP_TIMEOUT)
CALL_TIMEOUT = 600.0  # seconds a call may take (MCP_TOOL_TIMEOUT)
CLOSE_TIMEOUT = 8.0  # the SDK gives a stdio server 2 s after EOF, then SIGTERM, 2 s, SIGKILL
DESCRIPTION_LIMIT = 2048  # Claude Code's cap on MCP tool descriptions
CONNECTION_CLOSED = -32000  # the SDK's error code when the transport ends under a request
UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def _timeout(var: str, default: float) -> float:
    """A Claude Code variable in milliseconds, as seconds."""
    try:
        return max(0.1, float(os.environ[var]) / 1000)
    except (KeyError, ValueError):
        return default


def reason(error: BaseException) -> str:
    """A one-line account of a failure, unwrapping anyio's exception groups."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, ModuleNotFoundError) and (error.name or "").startswith("mcp"):
        return "the mcp package is not installed (pip install mcp, or agi-cli's [mcp] extra)"
    if isinstance(error, OSError) and error.strerror:
        return f"{error.strerror}: {error.filename}" if error.filename else error.strerror
    if isinstance(error, TimeoutError):
        return "timed out"
    message = getattr(getattr(error, "error", None), "message", None)
    return str(message or error or type(error).__name__).strip().splitlines()[0][:500]


class Server:
    """One configured server: its connection, owned by a task on the runtime's loop."""

    def __init__(self, config: ServerConfig, cache: Cache):
        self.config, self.cache = config, cache
        self.tools: list[dict[str, Any]] | None = None  # as listed by the running server
        self.task: asyncio.Task[None] | None = None
        self.owners: set[asyncio.Task[None]] = set()  # this one and any still shutting down
        self.ready: asyncio.Future[Any] | None = None
        self.stop: asyncio.Event | None = None
        self.stderr: Any = None  # a stdio server's stderr, kept to explain a failed start
        self.pids: set[int] = set()  # its stdio processes (each leads its own process group)

    def kill(self) -> None:
        """End the server's processes at once (a --timeout or a signal is not a time to wait
        for them to exit by themselves); the SDK's own shutdown then finds them gone."""
        kill_groups(self.pids)

    async def connect(self, timeout: float) -> Any:
        """The live session, starting the server (once, for every caller) if needed."""
        import asyncio

        if self.task is None or self.task.done() or self.stop is None or self.stop.is_set():
            self.ready, self.stop = asyncio.get_running_loop().create_future(), asyncio.Event()
            self.task = asyncio.create_task(self._serve(self.ready, self.stop))
            self.owners.add(self.task)
            self.task.add_done_callback(self.owners.discard)
        assert self.ready is not None
        try:
            return await asyncio.wait_for(asyncio.shield(self.ready), timeout)
        except TimeoutError:
            self.task.cancel()
            name = self.config.name
            raise ToolError(f"MCP server {name} did not start within {timeout:g} s") from None
        except Exception as e:
            raise ToolError(f"MCP server {self.config.name} did not start: {self.why(e)}") from e

    def why(self, error: BaseException, since: int = 0) -> str:
        """The failure, with the last line the server wrote to stderr (after `since`) if any."""
        text = reason(error)
        if self.stderr is not None and not self.stderr.closed:
            self.stderr.seek(since)
            lines = [line.strip() for line in self.stderr.read().splitlines() if line.strip()]
            text += f" (its stderr: {lines[-1][:300]})" if lines else ""
        return text

    def mark(self) -> int:
        """Where the server's stderr ends now: a later failure quotes only what follows."""
        return 0 if self.stderr is None or self.stderr.closed else int(self.stderr.seek(0, 2))

    async def _serve(self, ready: asyncio.Future[Any], stop: asyncio.Event) -> None:
        """Open the transport and session, list the tools, hold them until told to stop."""
        from contextlib import AsyncExitStack

        try:
            async with AsyncExitStack() as stack:
                from mcp import ClientSession

                read, write = await self._open(stack)
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                self.tools = await _list_tools(session)
                self.cache.put(self.config, self.tools)
                ready.set_result(session)
                await stop.wait()
        except BaseException as e:
            if not ready.done():
                ready.set_exception(e if isinstance(e, Exception) else ConnectionError("stopped"))
            if not isinstance(e, Exception):
                raise
        finally:
            self.pids.clear()  # the transport has ended its process: its pid may be reused

    async def _open(self, stack: Any) -> tuple[Any, Any]:
        """The read and write streams of a stdio, SSE or streamable HTTP transport."""
        spec = self.config.spec
        if spec["type"] == "stdio":
            import tempfile

            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            env = child_env(spec["env"])  # like Claude Code: the whole environment, less the key
            params = StdioServerParameters(command=spec["command"], args=spec["args"], env=env)
            if self.stderr is not None:
                self.stderr.close()
            # not our stderr (only `agi:` lines go there); O_APPEND lets us read it meanwhile
            self.stderr = tempfile.TemporaryFile("a+", encoding="utf-8", errors="replace")  # noqa: SIM115
            with recording(self.pids):  # the process's pid, for kill()
                streams = await stack.enter_async_context(stdio_client(params, errlog=self.stderr))
        elif spec["type"] == "sse":
            from mcp.client.sse import sse_client

            streams = await stack.enter_async_context(sse_client(spec["url"], spec["headers"]))
        else:
            from mcp.client import streamable_http as http

            if hasattr(http, "streamable_http_client"):  # mcp >= 1.24 takes a client
                from mcp.shared._httpx_utils import create_mcp_http_client

                client = await stack.enter_async_context(create_mcp_http_client(spec["headers"]))
                streams = await stack.enter_async_context(
                    http.streamable_http_client(spec["url"], http_client=client)
                )
            else:
                streams = await stack.enter_async_context(
                    http.streamablehttp_client(spec["url"], headers=spec["headers"])  # type: ignore[attr-defined,unused-ignore]
                )
        return streams[0], streams[1]

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Call a tool; the result as its wire-format dict. Failures raise ToolError."""
        import asyncio

        name = self.config.name
        started = time.monotonic()
        session = await self.connect(min(_timeout("MCP_TIMEOUT", START_TIMEOUT), timeout))
        if self.tools is not None and tool not in {t["name"] for t in self.tools}:
            have = ", ".join(t["name"] for t in self.tools) or "none"
            raise ToolError(f"MCP server {name} no longer has a tool {tool!r} (it has: {have})")
        left = max(0.0, timeout - (time.monotonic() - started))
        since = self.mark()
        try:
            result = await asyncio.wait_for(session.call_tool(tool, arguments), left)
        except TimeoutError:
            raise ToolError(f"MCP server {name} did not answer within {timeout:g} s") from None
        except Exception as e:
            if not _lost(e):  # the server answered with an error
                raise ToolError(f"MCP server {name}: {reason(e)}") from e
            if self.stop is not None:
                self.stop.set()  # reap it; the next call starts it again
            raise ToolError(f"MCP server {name} closed the connection: {self.why(e, since)}") from e
        return dump(result)


def _lost(error: BaseException) -> bool:
    """Whether a failed request means the connection is gone (rather than a refusal)."""
    import anyio

    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    code = getattr(getattr(error, "error", None), "code", None)
    gone = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError)
    return code == CONNECTION_CLOSED or isinstance(error, gone)


async def _list_tools(session: Any) -> list[dict[str, Any]]:
    """Every page of `tools/list`, each tool as {name, description, inputSchema}."""
    tools, cursor = [], None
    for _ in range(100):
        if cursor is None:
            page = await session.list_tools()
        else:
            from mcp.types import PaginatedRequestParams

            page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
        for tool in page.tools:
            wire = dump(tool)
            keep = ("name", "title", "description", "inputSchema")
            entry = {k: wire[k] for k in keep if k in wire}
            if (wire.get("annotations") or {}).get("readOnlyHint") is True:
                entry["readOnly"] = True  # the server's hint: plan mode offers it (section 16)
            tools.append(entry)
        cursor = getattr(page, "next_cursor", None) or getattr(page, "nextCursor", None)
        if not cursor:
            break
    return tools


@dataclass
class McpTool:
    """One tool of an MCP server, offered as `mcp__SERVER__TOOL`."""

    name: str
    description: str
    parameters: dict[str, Any]
    tool: str  # the server's own name for it
    server: Server = field(repr=False)
    runtime: Runtime = field(repr=False)  # shared by every tool of a load
    read_only: bool = False  # annotations.readOnlyHint: changes nothing (agi.policy.guard)

    @property
    def resource(self) -> Runtime:
        """What the toolbox closes (once, however many tools share it)."""
        return self.runtime

    def close(self) -> None:
        self.runtime.close()

    def run(self, input: dict[str, Any], ctx: ToolContext) -> str:
        """Call the tool (starting its server if need be); an error result raises ToolError."""
        timeout = _timeout("MCP_TOOL_TIMEOUT", CALL_TIMEOUT)
        left = ctx.remaining()
        if left is not None and left <= 0:
            raise ToolError("no time left for the call (--timeout)")
        timeout = timeout if left is None else min(timeout, left)
        result = self.runtime.submit(self.server.call(self.tool, input, timeout), timeout + 5)
        text = result_text(result)
        if result.get("isError"):
            raise ToolError(text)
        for block in result.get("content") or []:  # no base64 in hook payloads
            for data in (block, block.get("resource") or {}):
                for key in ("data", "blob"):
                    if key in data:
                        data[key] = f"({size(data[key])})"
        return ToolText.with_response(text, result)


def offered(
    server: Server, tools: list[dict[str, Any]], taken: set[str], runtime: Runtime
) -> list[McpTool]:
    """The agi tools for a server's tool list; names made safe for every provider."""
    out = []
    prefix = f"mcp__{UNSAFE.sub('_', server.config.name)}__"
    for t in tools:
        name = (prefix + UNSAFE.sub("_", t["name"]))[:64]
        if name in taken:
            continue
        taken.add(name)
        given = t.get("inputSchema")
        schema = {"type": "object", "properties": {}, **(given if isinstance(given, dict) else {})}
        schema.pop("$schema", None)
        about = t.get("description") or t.get("title") or f"{t['name']} ({server.config.name})"
        tool = McpTool(name, about[:DESCRIPTION_LIMIT], schema, t["name"], server, runtime)
        tool.read_only = t.get("readOnly") is True
        out.append(tool)
    return out


class Runtime:
    """The event loop thread that owns the MCP sessions of a load's servers; started on use."""

    def __init__(self, servers: list[Server] | None = None) -> None:
        self.servers = servers or []
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()
        self.waiting: set[concurrent.futures.Future[Any]] = set()  # what submit() waits for

    def _start(self) -> asyncio.AbstractEventLoop:
        import asyncio
        import logging

        with self.lock:
            if self.loop is None:
                logging.getLogger("mcp").addHandler(logging.NullHandler())  # stderr is not theirs
                self.loop = asyncio.new_event_loop()
                self.loop.set_exception_handler(lambda loop, context: None)  # callers get failures
                self.thread = threading.Thread(
                    target=self._run, args=(self.loop,), name="agi-mcp", daemon=True
                )
                self.thread.start()
                atexit.register(self.close)  # a safety net: the toolbox closes it first
            return self.loop

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop) -> None:
        import asyncio

        asyncio.set_event_loop(loop)
        loop.run_forever()
        loop.close()

    def submit(self, coroutine: Any, timeout: float | None) -> Any:
        """Run a coroutine on the loop (starting it) and wait for it; an interrupt cancels it."""
        import asyncio

        future = asyncio.run_coroutine_threadsafe(coroutine, self._start())
        with self.lock:
            self.waiting.add(future)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise ToolError("the MCP call did not finish in time") from None
        except concurrent.futures.CancelledError:
            raise ToolError("the MCP call was cancelled") from None
        finally:
            future.cancel()
            with self.lock:
                self.waiting.discard(future)

    def interrupt(self) -> None:
        """A cancelled turn: every call waiting on a server ends now (the request is cancelled
        on the loop; the SDK tells the server), and the servers stay up (docs: mcp)."""
        with self.lock:
            waiting = list(self.waiting)
        for future in waiting:
            future.cancel()

    async def shutdown(self) -> None:
        """Stop every server (their transports end the processes), then cancel what is left."""
        import asyncio

        for server in self.servers:
            if server.stop is not None:
                server.stop.set()
            if server.task is not None and server.ready is not None and not server.ready.done():
                server.task.cancel()  # still starting: it will not look at `stop`
        tasks = [t for s in self.servers for t in s.owners]
        if tasks:
            await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT)
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in rest:
            task.cancel()
        if rest:
            await asyncio.wait(rest, timeout=2)
        for server in self.servers:
            if server.stderr is not None:
                server.stderr.close()
            server.task = server.ready = server.stop = None  # a later call starts it anew
            server.owners.clear()

    def close(self, hard: bool = False) -> None:
        """End every MCP session and server process and join the loop thread; safe to repeat.
        `hard`: the processes are killed first rather than given time to exit."""
        import asyncio

        if hard:
            for server in self.servers:
                server.kill()
        with self.lock:
            loop, thread, self.loop, self.thread = self.loop, self.thread, None, None
        if loop is None or thread is None:
            return
        atexit.unregister(self.close)
        try:
            asyncio.run_coroutine_threadsafe(self.shutdown(), loop).result(CLOSE_TIMEOUT + 4)
        except Exception:
            pass  # whatever is left dies with the loop
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


def load_mcp(
    paths: list[Path], cache_file: Path | None, runtime: Runtime | None = None
) -> tuple[list[McpTool], list[str]]:
    """The tools of every configured server: cached lists, or servers started concurrently.

    The tools share `runtime` (a new one if not given; pass one to be able to close it from
    another thread while servers start); closing any of them, or it, ends every server.
    """
    configs, warnings = read_configs(paths)
    if not configs:
        return [], warnings
    cache = Cache(cache_file)
    servers = [Server(c, cache) for c in configs]
    rt = runtime if runtime is not None else Runtime()
    rt.servers += servers
    lists = {s: cache.get(s.config) for s in servers}
    cold = [s for s in servers if lists[s] is None]
    if cold:  # with a warm cache, no thread, no asyncio, no mcp import: nothing starts
        import asyncio

        timeout = _timeout("MCP_TIMEOUT", START_TIMEOUT)

        async def start_all() -> list[Any]:
            jobs = [s.connect(timeout) for s in cold]
            return await asyncio.gather(*jobs, return_exceptions=True)

        try:
            started = rt.submit(start_all(), timeout + 5)
        except ToolError as e:
            started = [ToolError(f"MCP server {s.config.name} did not start: {e}") for s in cold]
        except BaseException:
            rt.close(hard=True)  # an interrupt or --timeout while servers start: none is left
            raise
        for server, outcome in zip(cold, started, strict=True):
            if isinstance(outcome, BaseException):
                warnings.append(f"{reason(outcome)}; its tools are not offered")
            lists[server] = server.tools or []
    tools: list[McpTool] = []
    taken: set[str] = set()
    for server in servers:
        tools += offered(server, lists[server] or [], taken, rt)
    return tools, warnings
