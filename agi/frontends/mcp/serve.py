"""`agi --mcp-serve`: agi as a Model Context Protocol server on stdio (docs: mcp-server).

The official `mcp` SDK's low-level server (it lets the tool declare an `outputSchema` and return
`structuredContent`, and hands each request to its own task, so calls run concurrently and a
`notifications/cancelled` cancels the request's scope). The SDK is imported only here, only for
this option.

Each call runs in a worker thread (a Run is synchronous); its progress events come back to the
event loop as `notifications/progress`. A cancelled call cancels its run (the model request is
closed, commands are killed) and waits for the worker to finish, so the session it used is left
whole and unlocked. Calls naming the same session wait for each other here (an anyio lock per
session directory, bounded by the call's timeout) as well as on the session's file lock.

While the server runs, the SDK points fd 1 at stderr and fd 0 at /dev/null, so nothing a tool,
hook or stray print writes can reach the protocol stream.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from agi import __version__
from agi.errors import LimitReached
from agi.frontends.cli.flags import flags_layer
from agi.frontends.mcp import early
from agi.frontends.mcp.call import (
    DESCRIPTION,
    INPUT_SCHEMA,
    OUTPUT_SCHEMA,
    Call,
    Outcome,
    Refused,
    failure,
    parse_call,
)
from agi.frontends.mcp.call_run import Base, CallRun
from agi.frontends.mcp.lines import claim_stdin, claim_stdout

TOOL = "agi"
CANCEL_GRACE = 5.0  # seconds a cancelled run has to end before its worker is left behind
INSTRUCTIONS = (
    "agi runs a task with its own model and tools and returns the final answer. Continue a "
    "conversation by passing back the `session` a result names."
)


class Calls:
    """What the calls of one server share: the server's base, and one lock per session."""

    def __init__(self, base: Base):
        self.base = base
        self.locks: dict[Path, Any] = {}  # session directory -> anyio.Lock
        self.users: dict[Path, int] = {}  # calls holding or waiting for each lock
        self.verbose = base.settings.verbose  # -v: each call's progress on stderr
        self.count = 0  # calls received: each is numbered in -v lines

    def log(self, number: int, text: str) -> None:
        """With -v, one stderr line about call `number` (never stdout: that is MCP's)."""
        if self.verbose:
            sys.stderr.write(f"agi: call {number}: {text}\n")
            sys.stderr.flush()

    def lock_for(self, path: Path) -> Any:
        import anyio

        if path not in self.locks:
            self.locks[path] = anyio.Lock()
        self.users[path] = self.users.get(path, 0) + 1
        return self.locks[path]

    def done_with(self, path: Path) -> None:
        self.users[path] -= 1
        if not self.users[path]:  # nobody waits: forget it (a long-lived server, many sessions)
            del self.users[path], self.locks[path]


def result(outcome: Outcome) -> Any:
    import mcp_types as types

    return types.CallToolResult(
        content=[types.TextContent(type="text", text=outcome.text)],
        structured_content=outcome.structured(),
        is_error=outcome.is_error,
    )


TOOL_JSON = {  # the SDK's JSON of tool() (agi.frontends.mcp.early compares the two)
    "name": TOOL,
    "title": "agi",
    "description": DESCRIPTION,
    "inputSchema": INPUT_SCHEMA,
    "outputSchema": OUTPUT_SCHEMA,
}


def initialize_result(params: Any) -> Any:
    return early.initialize_result(params, __version__, "agi", INSTRUCTIONS)


def tool() -> Any:
    import mcp_types as types

    return types.Tool(
        name=TOOL,
        title="agi",
        description=DESCRIPTION,
        input_schema=INPUT_SCHEMA,
        output_schema=OUTPUT_SCHEMA,
    )


def make_server(calls: Calls) -> Any:
    import mcp_types as types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=[tool()])

    async def call_tool(ctx: Any, params: Any) -> Any:
        started = time.monotonic()
        if params.name != TOOL:
            return result(failure(Refused(f"unknown tool {params.name!r}: this server has {TOOL}")))
        calls.count += 1
        number = calls.count
        if calls.base.missing is not None:  # the client shows it (docs: mcp-server)
            calls.log(number, f"refused: {calls.base.missing}")
            return result(failure(calls.base.missing))
        try:
            call = parse_call(params.arguments, calls.base.limits)
        except Refused as e:
            calls.log(number, f"refused: {e}")
            return result(failure(e))
        calls.log(number, "started" + (f" (session {call.session})" if call.session else ""))
        try:
            outcome = await serve_call(calls, call, ctx, started, number)
        except BaseException:
            calls.log(number, "cancelled")
            raise
        usage = outcome.usage.get("cost")
        cost = "" if usage is None else f", ${usage:.4f}"
        steps = f"{outcome.steps} step{'s' * (outcome.steps != 1)}"
        calls.log(number, f"exit {outcome.exit}, {steps}{cost}")
        return result(outcome)

    server = Server(
        "agi",
        version=__version__,
        title="agi",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    server.middleware = []  # no OpenTelemetry span per message: nothing here exports them
    return server


async def serve_call(calls: Calls, call: Call, ctx: Any, started: float, number: int) -> Outcome:
    """The call's run, after the calls before it on the same session (within its timeout)."""
    import anyio

    if call.session is None:
        return await in_worker(calls, call, ctx, started, number)
    key = Path(os.path.realpath(call.session))  # one lock however the directory is named
    lock = calls.lock_for(key)
    try:
        with anyio.move_on_after(call.timeout if call.timeout else float("inf")) as waited:
            await lock.acquire()
        if waited.cancelled_caught:
            why = f"time limit reached: {call.timeout:g} s waiting for another call on the session"
            out = failure(LimitReached(why))  # the session is untouched: no "is kept" here
            named = dataclasses.replace(out.result, session=Path(call.session))
            return dataclasses.replace(out, result=named)
        try:
            return await in_worker(calls, call, ctx, started, number)
        finally:
            lock.release()
    finally:
        calls.done_with(key)


async def in_worker(calls: Calls, call: Call, ctx: Any, started: float, number: int) -> Outcome:
    """Run the call in a worker thread; progress comes back here; a cancelled request cancels
    the run and waits (shielded, CANCEL_GRACE at most) for the worker to end it cleanly."""
    import anyio
    import anyio.from_thread

    ended = threading.Event()
    sent = 0

    def progress(message: str) -> None:  # in the worker thread
        nonlocal sent
        sent += 1
        calls.log(number, message)
        try:
            anyio.from_thread.run(ctx.session.report_progress, float(sent), None, message)
        except Exception:  # the loop is gone (shutting down) or the request ended: not needed
            pass

    job = CallRun(call, calls.base, started, progress)

    def work() -> Outcome:
        try:
            return job.run()
        finally:
            ended.set()

    try:
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        job.cancel()
        with anyio.move_on_after(CANCEL_GRACE, shield=True):
            while not ended.is_set():
                await anyio.sleep(0.02)
        raise


NOT_WITH = {  # what means nothing to a server: each call names its own prompt and session
    "prompt": "prompt: each call gives its own",
    "session": "-s/--session: each call names its session",
    "cont": "-c/--continue: each call names its session",
    "fork": "--fork: each call names its session",
    "repl": "-i/--repl",
    "compact": "--compact",
    "list_extensions": "--list-extensions",
    "acp": "--acp",
}


def main(args: Any) -> int:
    """`agi --mcp-serve [OPTIONS]`: the options resolved once (a bad one is exit 2 now), then
    the server until stdin closes."""
    for name, what in NOT_WITH.items():
        if getattr(args, name, None):
            raise Refused(f"--mcp-serve takes no {what}")
    base = Base.load(flags_layer(args))
    importing = early.import_sdk(base.warm)  # meanwhile `initialize` is answered (docs: mcp-server)
    tools = {"tools": [TOOL_JSON]}
    read, sent = early.answer_early(importing, initialize_result, tools)
    importing.join()
    return serve(base, read, sent)


def serve(base: Base, read: bytes = b"", sent: dict[Any, Any] | None = None) -> int:
    """Serve on stdin/stdout until stdin closes (`read`: what was read of stdin already;
    `sent`: the replies written to its requests, by id); 0 then."""
    import anyio

    anyio.run(_serve, base, read, sent)
    return 0


async def _serve(base: Base, read: bytes, sent: dict[Any, Any] | None) -> None:
    from mcp.server.stdio import stdio_server

    server = make_server(Calls(base))
    stdin, release = claim_stdin()  # bounded lines, bad ones answered (docs: mcp-server)
    stdin.unread = read
    stdout, restore = claim_stdout() if sent else (None, lambda: None)
    out = early.Deduplicated(stdout, sent or {}) if stdout is not None else None
    try:
        async with stdio_server(stdin=stdin, stdout=out) as (r, write):  # type: ignore[arg-type]
            stdin.reply = write.send
            await server.run(r, write, server.create_initialization_options())
    finally:
        restore()
        release()
        base.pool.close()  # the calls' model connections
