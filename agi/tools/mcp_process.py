"""The processes of stdio MCP servers (docs: mcp): the SDK starts each in its own process group
and ends it gently (stdin closed, 2 s, SIGTERM, 2 s, SIGKILL). When a --timeout or a signal
ends the run while a server starts, there is no time for that: the pids recorded here as the
SDK starts them let agi kill the groups at once."""

from __future__ import annotations

import contextvars
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_spawning: contextvars.ContextVar[set[int] | None] = contextvars.ContextVar("agi_mcp_pids")


@contextmanager
def recording(pids: set[int]) -> Iterator[None]:
    """The stdio servers the SDK starts in this context add their pid to `pids`."""
    _install()
    token = _spawning.set(pids)
    try:
        yield
    finally:
        _spawning.reset(token)


def _install() -> None:
    """Wrap the SDK's spawning function, once (it is looked up by name at each start)."""
    import mcp.client.stdio as sdk

    spawn = getattr(sdk, "_create_platform_compatible_process", None)
    if spawn is None or getattr(spawn, "agi_records", False):
        return

    async def recorded(*args: Any, **kwargs: Any) -> Any:
        process = await spawn(*args, **kwargs)
        pids = _spawning.get(None)
        if pids is not None:
            pids.add(process.pid)
        return process

    recorded.agi_records = True  # type: ignore[attr-defined]
    sdk._create_platform_compatible_process = recorded


def kill_groups(pids: set[int]) -> None:
    """SIGKILL each recorded server's process group (each server leads its own)."""
    for pid in list(pids):
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
