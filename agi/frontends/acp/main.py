"""`agi --acp`: an Agent Client Protocol (v1) agent on stdio, for editors (docs: acp).

JSON-RPC over stdin/stdout through the official `agent-client-protocol` library (imported only
here); stdout carries nothing else. Each ACP session is an ordinary agi session directory whose
absolute path is the sessionId; its turns run on worker threads, several sessions at once.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
from typing import Any

from agi.errors import UsageError


def serve(args: argparse.Namespace, flags: Any) -> int:
    """Serve until stdin closes (exit 0); `flags` is the command line's layer of options, for
    every session. Bad settings are a usage error before anything is served."""
    # lazy: agi.frontends.acp.stdio loads asyncio
    from agi.frontends.acp import stdio as acp_stdio

    gate = threading.Event()  # set: the library imports (after the first session, or idle)
    dropped = threading.Event()  # set before the gate: it is not imported (the start failed)
    importing = acp_stdio.import_library(gate, dropped)
    # lazy: agi.frontends.acp.server loads asyncio
    from agi.frontends.acp import server as acp_server

    server = acp_server.Server(args, flags)
    try:
        server.check()  # the model and options resolve now: exit 2 before the editor waits
        line, rest = acp_stdio.first_line()
        params = acp_stdio.answer_initialize(line, server.initialized)
        if params is None:
            unread = line + rest
        else:  # a first session/new too, while the library imports
            unread = acp_stdio.answer_early(importing, gate, rest, server.new_session_now)
    except BaseException:
        dropped.set()
        raise
    finally:
        gate.set()
        importing.join()  # exiting while the thread imports can abort the interpreter (SIGABRT)
    try:
        import acp  # noqa: F401
    except ImportError:
        raise UsageError(
            "--acp needs the agent-client-protocol package "
            "(pip install 'agi-cli[acp]', or pip install agent-client-protocol)"
        ) from None
    try:
        asyncio.run(server.main(unread))
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
    return 0
