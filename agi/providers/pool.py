"""HTTP clients and one backoff per endpoint, shared by the runs of one process: `agi --batch`'s
workers and `agi --mcp-serve`'s calls. A `ClientPool` (agi.providers.wire.Pool) is handed to each
exchange (`transport_for(..., pool=)`), which borrows a client for itself alone and gives it back,
connections open, when it closes; a 429 (or any retry-after) then pauses every exchange sending
to that endpoint. Also the clients an exchange makes for itself (TLS set up on first use)."""

from __future__ import annotations

import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

from agi.errors import ProviderError
from agi.providers.errors import MAX_RETRY_WAIT

if TYPE_CHECKING:
    import socket
    import ssl

    import httpx


class ClientPool:
    """Clients lent from a free list, so runs reuse connections to the model whatever thread
    runs them; one client is never used by two exchanges at once, so an exchange cancelled in
    flight may shut its client's sockets (the next borrower reconnects). TLS is set up once for
    every client. After a 429 (or any retry-after) no request goes to that endpoint until the
    wait asked for is over; a wait longer than a retry would make (MAX_RETRY_WAIT) is not
    waited out: each request it stops fails at once, unsent, saying so."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._until: dict[str, float] = {}  # by URL: when its pause ends (time.monotonic())
        self._free: list[httpx.Client] = []
        self._clients: list[httpx.Client] = []
        self._tls: ssl.SSLContext | None = None

    def client(self) -> httpx.Client:
        with self._lock:
            if self._free:
                return self._free.pop()
        client = new_client(self._context)
        with self._lock:
            self._clients.append(client)
        return client

    def give_back(self, client: httpx.Client) -> None:
        with self._lock:
            if client in self._clients and client not in self._free:  # lent once at a time
                self._free.append(client)

    def _context(self) -> ssl.SSLContext:
        with self._lock:
            if self._tls is None:
                import httpx

                self._tls = httpx.create_ssl_context()
            return self._tls

    def hold(self, url: str, seconds: float, error: ProviderError) -> None:
        if error.status != 429 and error.retry_after is None:
            return
        with self._lock:
            self._until[url] = max(self._until.get(url, 0.0), time.monotonic() + seconds)

    def wait(self, url: str, cancelled: threading.Event, deadline: float | None) -> None:
        while True:
            with self._lock:
                left = self._until.get(url, 0.0) - time.monotonic()
            if left > MAX_RETRY_WAIT:
                raise ProviderError(
                    f"rate limited: the provider asked to wait {left:.0f} s more before the "
                    f"next request to {url} (retry-after); not sent",
                    429,
                    retry_after=left,
                )
            if deadline is not None:
                left = min(left, deadline - time.monotonic())
            if left <= 0 or cancelled.wait(left):
                return  # the exchange then raises the time limit or the cancel itself

    def close(self) -> None:
        """Close every client (the process is done with the model)."""
        with self._lock:
            clients, self._clients, self._free = self._clients, [], []
        for client in clients:
            client.close()


def new_client(tls: Any = None) -> httpx.Client:
    """An httpx client that knows its sockets (`sockets`: every connection it opened, so an
    exchange can shut them to wake a read waiting on a silent server); TLS is set up on the
    first https request, from `tls()` when given: loading the CA certificates costs 20-40 ms,
    wasted on a plain-http endpoint (a local model)."""
    import httpx

    class Client(httpx.Client):
        def __init__(self) -> None:
            super().__init__(follow_redirects=True, transport=lazy_tls_transport(tls))
            self.sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()

        def send(self, request: httpx.Request, **kwargs: Any) -> httpx.Response:
            request.extensions["trace"] = self._watch
            return super().send(request, **kwargs)

        def _watch(self, event: str, info: dict[str, Any]) -> None:
            """httpcore's trace extension: remember each socket as it connects."""
            if event.endswith(("connect_tcp.complete", "start_tls.complete")):
                stream = info.get("return_value")
                sock = stream.get_extra_info("socket") if stream is not None else None
                if sock is not None:
                    self.sockets.add(sock)

    return Client()


def lazy_tls_transport(tls: Any = None) -> httpx.BaseTransport:
    """httpx's transport, with TLS set up on the first https request (from `tls()`, a shared
    SSL context, when given)."""
    import httpx

    class LazyTLS(httpx.BaseTransport):
        def __init__(self) -> None:
            self.plain = httpx.HTTPTransport(verify=False)  # only ever given http:// URLs
            self.tls: httpx.HTTPTransport | None = None

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            if request.url.scheme == "http":
                return self.plain.handle_request(request)
            if self.tls is None:
                self.tls = httpx.HTTPTransport(verify=tls()) if tls else httpx.HTTPTransport()
            return self.tls.handle_request(request)

        def close(self) -> None:
            self.plain.close()
            if self.tls is not None:
                self.tls.close()

    return LazyTLS()
