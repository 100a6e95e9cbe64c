"""What uvicorn serves from the moment `agi --serve`'s socket listens (docs: serve): a plain
ASGI callable, no framework, so the first request is answered before the application is built.
Starlette, the routes and the engine are imported on a thread once uvicorn has started; until
the application is there, `GET /healthz` is answered here (`starting`, or the 401 of a wrong
token) and every other request waits for it, then goes to it unchanged."""

from __future__ import annotations

import asyncio
import hmac
import json
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

NO_TOKEN = "a bearer token is required (Authorization: Bearer TOKEN)"


def authorised(token: str | None, header: str) -> bool:
    """Whether an `Authorization` header's value carries `token` (None: no token is asked)."""
    if token is None:
        return True
    scheme, _, value = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        value.strip().encode(), token.encode()
    )


def failure(message: str, status: int, code: str) -> dict[str, Any]:
    """OpenAI's error shape, with agi's one line."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": f"agi: {message}", "type": kind, "code": code, "param": None}}


class Early:
    """The served application: `app` once built (`built` set), this meanwhile."""

    def __init__(self, token: str | None):
        self.token = token
        self.app: App | None = None
        self.built = threading.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.app is None and scope["type"] == "http" and health(scope):
            await self.healthz(scope, send)
            return
        if self.app is None:
            await asyncio.get_running_loop().run_in_executor(None, self.built.wait)
        if self.app is None:  # the application could not be built: the server is ending
            await answer(send, 503, failure("the server could not start", 503, "unavailable"))
            return
        await self.app(scope, receive, send)

    async def healthz(self, scope: Scope, send: Send) -> None:
        header = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
        if not authorised(self.token, header.decode("latin-1")):
            await answer(send, 401, failure(NO_TOKEN, 401, "invalid_api_key"))
        else:
            await answer(send, 200, {"status": "starting"})


def health(scope: Scope) -> bool:
    return scope["path"] == "/healthz" and scope["method"] in ("GET", "HEAD")


async def answer(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
