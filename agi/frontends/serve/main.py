"""`agi --serve [HOST:]PORT`: the address and the token checked, the socket listening, the
application served by uvicorn until SIGINT/SIGTERM (running requests drained within
`--timeout`). The application is built and the server's options loaded on a thread once uvicorn
has started, so the first request is answered at once (`/healthz`, serve.early); a run waits
for them, a bad option ends the server with exit 2 (docs: serve)."""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import sys
import threading
from types import ModuleType
from typing import TYPE_CHECKING, Any

from agi.errors import AgiError, UsageError
from agi.frontends.serve.early import Early

if TYPE_CHECKING:
    from agi.options.values import Layer

DEFAULT = ("127.0.0.1", 8765)


def address(text: str) -> tuple[str, int]:
    """`[HOST:]PORT` (`''`: the default; `[::1]:PORT` for IPv6)."""
    if not text:
        return DEFAULT
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = DEFAULT[0], text
    host = host.strip("[]") or DEFAULT[0]
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"--serve: expected [HOST:]PORT, got {text!r} (a port is 0 to 65535)")
    return host, int(port)


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def listening(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise UsageError(f"--serve: cannot listen on {host}:{port}: {e.strerror or e}") from None
    # a response is two writes (head, body): without this, Nagle holds the body for the ACK
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # (40 ms a request, kept-alive)
    sock.listen(2048)
    return sock


def main(args: argparse.Namespace, layer: Layer) -> int:
    host, port = address(args.serve)
    token = args.serve_token or os.environ.get("AGI_SERVE_TOKEN") or None
    if token is None and not loopback(host):
        raise UsageError(
            f"--serve {host}: binding to anything but loopback needs a token (--serve-token or "
            "AGI_SERVE_TOKEN)"
        )
    uvicorn = asgi_server()
    sock = listening(host, port)
    served = Served(args, layer, token, uvicorn)
    bound = sock.getsockname()
    sys.stderr.write(f"agi: serving on http://{host_text(bound[0])}:{bound[1]}\n")
    sys.stderr.flush()
    served.http.run(sockets=[sock])
    if served.failed:
        raise served.failed[0]
    return 0


def asgi_server() -> ModuleType:
    """uvicorn, once Starlette is known to be there too (the `serve` extra)."""
    try:
        # lazy: the ASGI server, the `serve` extra, loaded on this path alone
        import starlette  # noqa: F401  (the framework the application is built on, checked now)
        import uvicorn
    except ImportError as e:
        raise UsageError(
            f"--serve needs the serve extra: pip install 'agi-cli[serve]' ({e})"
        ) from None
    return uvicorn


class Served:
    """uvicorn serving `Early` at once; the application built and the options loaded on a
    thread once uvicorn has started (a failure ends the server: `failed`)."""

    def __init__(self, args: argparse.Namespace, layer: Layer, token: str | None, asgi: ModuleType):
        self.args, self.layer, self.token = args, layer, token
        self.early = Early(token)
        self.failed: list[AgiError] = []
        self.config = asgi.Config(
            self.early,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=None,
            server_header=False,
        )
        assemble = self.assemble

        class Http(asgi.Server):  # type: ignore[misc,name-defined]
            async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                await super().startup(sockets)
                threading.Thread(target=assemble, name="agi-serve-load", daemon=True).start()

        self.http = Http(self.config)

    def assemble(self) -> None:
        """The application built, then the options loaded (runs wait for them: `ready`)."""
        ready = None
        try:
            # lazy: the application, its framework and the engine, after the socket answers
            from agi.frontends.serve.app import Server
            from agi.frontends.serve.routes import build
            from agi.frontends.serve.runner import Shared, load

            args = self.args
            shared = Shared(self.layer, args.budget)
            queue = 64 if args.queue is None else args.queue
            server = Server(shared, self.token, args.jobs or 8, queue)
            ready = server.ready
            self.early.app = build(server)
            self.early.built.set()
            shared.loaded = load(self.layer, args.budget)
            loaded_timeout = shared.loaded.kept.timeout
            self.config.timeout_graceful_shutdown = int(loaded_timeout) if loaded_timeout else None
        except AgiError as e:
            self.failed.append(e)
            self.http.should_exit = True
        except Exception as e:  # a bug: the server cannot serve
            self.failed.append(AgiError(f"internal error: {type(e).__name__}: {e}"))
            self.http.should_exit = True
        finally:
            self.early.built.set()
            if ready is not None:
                ready.set()


def host_text(host: Any) -> str:
    return f"[{host}]" if ":" in str(host) else str(host)
