"""One model exchange over httpx, whatever the wire protocol: the client, streaming, retries,
deadlines, the idle limit, cancel, metering and the trace.

`Transport` speaks OpenAI-compatible chat completions (`agi.providers.chat`); another protocol
(`agi.providers.anthropic`, `agi.providers.ollama`, Neovim's fill-in-the-middle) overrides the
wire hooks at the end of the class: the endpoint, the headers, the body, the decoder, the error
map and the request resent after a refusal. What an error means is `agi.providers.errors`'s."""

from __future__ import annotations

import json
import socket
import threading
import time
import weakref
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from agi.errors import Cancelled, ProviderError, TimeLimit
from agi.messages import Notice, ReasoningDelta, Reply, TextDelta, Usage
from agi.providers import chat
from agi.providers.endpoint import require_key
from agi.providers.errors import http_error, provider_error, unreachable
from agi.providers.stream import StreamAssembler, iter_sse, sse_lines
from agi.providers.usage import header_cost

if TYPE_CHECKING:
    import httpx

    from agi.options.config import ModelConfig
    from agi.providers.cost import Meter
    from agi.providers.wire import Pool

ATTEMPTS = 3
MAX_RETRY_WAIT = 60.0
Event = TextDelta | ReasoningDelta | Notice


def backoff(attempt: int) -> float:
    """Exponential backoff with jitter, as the official SDKs do: ~0.5 s, 1 s, 2 s, at most 8 s."""
    import random  # only when a request is retried: not at every start

    return min(8.0, 0.5 * 2 ** (attempt - 1)) * (1 - 0.25 * random.random())


def failure_record(
    error: ProviderError, attempt: int, asm: StreamAssembler, started: float
) -> dict[str, Any]:
    """The trace's record of an attempt that failed: the error, the whole body, the chunks."""
    return {
        "type": "response",
        "attempt": attempt,
        "error": str(error),
        "status": error.status,
        **({"body": error.body} if error.body else {}),
        "chunks": asm.chunks,
        "seconds": round(time.monotonic() - started, 3),
    }


def lazy_tls_transport() -> httpx.BaseTransport:
    """httpx's transport, but TLS is set up on the first https request: loading the CA
    certificates costs 20-40 ms per run, wasted on a plain-http endpoint (a local model)."""
    import httpx

    class LazyTLS(httpx.BaseTransport):
        def __init__(self) -> None:
            self.plain = httpx.HTTPTransport(verify=False)  # only ever given http:// URLs
            self.tls: httpx.HTTPTransport | None = None

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            if request.url.scheme == "http":
                return self.plain.handle_request(request)
            if self.tls is None:
                self.tls = httpx.HTTPTransport()
            return self.tls.handle_request(request)

        def close(self) -> None:
            self.plain.close()
            if self.tls is not None:
                self.tls.close()

    return LazyTLS()


class Transport:
    """Streams one model reply per call; the caller owns the conversation. Built from a model's
    config alone (a trace callable, a deadline and a meter are optional): no session needed."""

    # Until a run's specification carries the pool, agi --batch and the MCP server set this and
    # transport_for() passes it as `pool` when given none; the exchange itself reads only `pool`.
    shared: Pool | None = None

    def __init__(
        self,
        config: ModelConfig,
        trace: Callable[[dict[str, Any]], None] | None = None,
        deadline: float | None = None,
        timeout: float | None = None,
        meter: Meter | None = None,
        pool: Pool | None = None,
    ):
        require_key(config)  # exit 2 naming the variable, before anything is sent
        self.config = config
        self.meter = meter  # every call's usage and cost, and the --max-cost budget
        self.trace = trace or (lambda record: None)
        self.deadline = deadline  # time.monotonic() value, or None
        self.timeout = timeout  # the --timeout it came from, for messages
        self.pool = pool  # HTTP clients and the backoff shared with other runs, or None
        self._client: httpx.Client | None = None
        self._previous: dict[str, Any] = {}  # the last request's body, for the trace
        self._sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()
        self.cancelled = threading.Event()
        self.headers = self.request_headers()  # the same for every request

    @property
    def client(self) -> httpx.Client:
        if self._client is None and self.pool is not None:
            self._client = self.pool.client()  # given back by close(), for the next run
        if self._client is None:
            import httpx

            self._client = httpx.Client(follow_redirects=True, transport=lazy_tls_transport())
        return self._client

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None and self.pool is not None:
            self.pool.give_back(client)
        elif client is not None:
            client.close()

    def keep_connections(self) -> None:
        """Forget the connections seen so far, so that cancel() leaves them open: a run that
        ended well gives its client, connections and all, back to a shared pool (MCP server)."""
        self._sockets.clear()

    def cancel(self) -> None:
        """From any thread: end the exchange in progress at once and send no more requests.

        Shutting the socket down wakes a read that is waiting on a silent server.
        """
        self.cancelled.set()
        for sock in list(self._sockets):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _watch_connection(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's trace extension: remember each socket, so cancel() can shut it down."""
        if event.endswith("connect_tcp.complete") or event.endswith("start_tls.complete"):
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if sock is not None:
                self._sockets.add(sock)

    def _check_cancelled(self) -> None:
        if self.cancelled.is_set():
            raise Cancelled()

    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def _check_deadline(self) -> None:
        left = self.remaining()
        if left is not None and left <= 0:
            raise TimeLimit(self.timeout or 0)

    def stream(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        mark: dict[str, Any] | None = None,
        **extra: Any,
    ) -> Generator[Event, None, Reply]:
        """Yield text and reasoning deltas, return the assembled reply; retry what is safe.

        `extra` goes into the request body (e.g. response_format, stop); `mark` into the trace
        records of this exchange (e.g. {"ghost": True}).
        """
        body = self.payload(messages, tools, **extra)
        trace = self.trace if not mark else lambda record: self.trace({**record, **mark})
        if self.meter is not None:  # before every model call: the budget may be spent
            self.meter.check(self.config.label, self.config.model, id(self))
        try:
            return (yield from self._attempts(body, trace))
        finally:  # however the call ended, it is no longer in flight
            if self.meter is not None:
                self.meter.release(id(self))

    def _attempts(self, body: dict[str, Any], trace: Any) -> Generator[Event, None, Reply]:
        """The call's attempts: what failed and may be retried is sent again."""
        for attempt in range(1, ATTEMPTS + 1):
            asm = self.assembler()
            started = time.monotonic()
            trace({"type": "request", "attempt": attempt, "url": self.url, **self._traced(body)})
            try:
                reply = yield from self._metered(body, asm)
            except ProviderError as e:
                trace(failure_record(e, attempt, asm, started))
                if self.pool is not None:  # a 429 pauses every run sending here, even when
                    asked = e.retry_after  # this one gives up (its last attempt, a long wait)
                    self.pool.hold(self.url, backoff(attempt) if asked is None else asked, e)
                changed = self.amend(body, e) if attempt < ATTEMPTS else None
                if changed is not None:
                    body = changed
                    continue
                if not e.retryable or asm.delivered or attempt == ATTEMPTS:
                    self._failed(asm)
                    raise
                wait = self._retry_wait(e, attempt, asm)
                yield Notice(f"{e}; retrying in {wait:.1f} s ({attempt + 1} of {ATTEMPTS})")
                if self.cancelled.wait(wait):
                    raise Cancelled() from e
                continue
            trace(
                {
                    "type": "response",
                    "attempt": attempt,
                    "chunks": asm.chunks,
                    "message": reply.to_message(),
                    "finish_reason": reply.finish_reason,
                    "usage": reply.usage.to_dict() if reply.usage else None,
                    "seconds": round(time.monotonic() - started, 3),
                }
            )
            return reply
        raise AssertionError("unreachable")

    def _metered(self, body: dict[str, Any], asm: StreamAssembler) -> Generator[Event, None, Reply]:
        """One attempt, told to the meter (which fills in the reply's cost): a failed call
        counts once its usage came; one cut short (Ctrl-C, a ReAct cut) once its answer began,
        at an unknown cost unless its usage came."""
        try:
            reply = yield from self._once(body, asm)
        except ProviderError:
            if asm.usage is not None:
                self._record(asm.usage)
            raise
        except BaseException:
            if asm.chunks:
                self._record(asm.usage)
            raise
        self._record(reply.usage)
        return reply

    def _record(self, usage: Usage | None) -> None:
        if self.meter is not None:
            self.meter.record(self.config.label, self.config.model, usage, id(self))

    def _failed(self, asm: StreamAssembler) -> None:
        """The call failed for good without reporting usage: its cost is unknown, not 0."""
        if self.meter is not None and asm.usage is None:
            self.meter.failed(self.config.label, self.config.model, id(self))

    def _traced(self, body: dict[str, Any]) -> dict[str, Any]:
        """The request as the trace keeps it. What this transport's previous request already
        carried is not written again: `same` counts the leading messages (and flags the tools)
        that are as before, so a trace grows with the conversation rather than its square."""
        previous, self._previous = self._previous, body
        messages, before = body["messages"], previous.get("messages", [])
        kept, limit = 0, min(len(messages), len(before))
        while kept < limit and messages[kept] == before[kept]:
            kept += 1
        same: dict[str, Any] = {"messages": kept} if kept else {}
        if body.get("tools") and body.get("tools") == previous.get("tools"):
            same["tools"] = True
        if not same:
            return {"body": body}
        short = {k: v for k, v in body.items() if k not in same}
        return {"body": {**short, "messages": messages[kept:]}, "same": same}

    def _retry_wait(self, error: ProviderError, attempt: int, asm: StreamAssembler) -> float:
        """How long to wait before the next attempt; an error when that is not allowed."""
        asked = error.retry_after
        if asked is not None and asked > MAX_RETRY_WAIT:
            self._failed(asm)
            raise ProviderError(
                f"{error} (the provider asks to retry after {asked:.0f} s)", error.status
            ) from error
        wait = asked if asked is not None else backoff(attempt)
        left = self.remaining()
        if left is not None and wait >= left:
            self._failed(asm)
            raise ProviderError(
                f"{error} (no time left to retry within --timeout)", error.status
            ) from error
        return wait

    # The wire hooks: chat completions here (agi.providers.chat); another protocol overrides them.

    @property
    def url(self) -> str:
        return chat.url(self.config)

    def request_headers(self) -> dict[str, str]:
        """The headers of every request (built once, in __init__)."""
        return chat.request_headers(self.config)

    def payload(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **extra: Any
    ) -> dict[str, Any]:
        """The request body for a conversation; `extra` goes into it (and wins)."""
        return chat.request_body(self.config, messages, tools, **extra)

    def assembler(self) -> StreamAssembler:
        """A fresh decoder for one response's chunks."""
        return chat.ChatAssembler()

    def amend(self, body: dict[str, Any], error: ProviderError) -> dict[str, Any] | None:
        """The request to send at once instead of one that failed this way, or None."""
        return chat.amended(body, error)

    def error_from(self, status: int, body: Any) -> ProviderError:
        """The error an HTTP error response's body (JSON, or text) stands for."""
        return provider_error(status, body)

    def _timeouts(self) -> httpx.Timeout:
        import httpx

        left = self.remaining()
        cap = lambda s: s if left is None else max(0.01, min(s, left))  # noqa: E731
        idle = self.config.idle_timeout
        return httpx.Timeout(connect=cap(10.0), read=cap(idle), write=cap(30.0), pool=cap(10.0))

    def _once(self, body: dict[str, Any], asm: StreamAssembler) -> Generator[Event, None, Reply]:
        import httpx

        if self.pool is not None:
            self.pool.wait(self.url, self.cancelled, self.deadline)
        self._check_deadline()
        self._check_cancelled()
        try:
            with self.client.stream(
                "POST",
                self.url,
                json=body,
                headers=self.headers,
                timeout=self._timeouts(),
                extensions={"trace": self._watch_connection},
            ) as resp:
                if resp.status_code >= 400:
                    raise self._http_error(resp)
                asm.provider_cost = header_cost(resp.headers)
                yield from self._read_body(resp, asm)
                yield from asm.flush()
                return asm.finish()
        except httpx.TimeoutException as e:
            self._check_cancelled()
            self._check_deadline()
            what = "no answer" if not asm.chunks else "the stream stalled"
            raise ProviderError(
                f"{what} from {self.url} ({type(e).__name__})", retryable=True
            ) from e
        except httpx.HTTPError as e:
            self._check_cancelled()
            raise unreachable(self.url, str(e) or type(e).__name__, self.config) from e

    def _read_body(
        self, resp: httpx.Response, asm: StreamAssembler
    ) -> Generator[Event, None, None]:
        """The response's chunks into the assembler: an event stream, or one whole completion
        from a server that ignores stream=true."""
        if "json" in resp.headers.get("content-type", ""):
            yield from asm.feed(self._json(resp.read().decode("utf-8", "replace")))
        else:
            yield from self._read_sse(resp, asm)

    def _read_sse(self, resp: httpx.Response, asm: StreamAssembler) -> Generator[Event, None, None]:
        for event, data in iter_sse(self._lines(resp)):
            if data.strip() == "[DONE]":
                return
            yield from asm.feed(self._json(data), event)
        self._check_cancelled()  # a cancel shuts the socket: the stream ends here
        if asm.finish_reason is None:  # [DONE] may be missing, but not both
            raise ProviderError(
                "the stream ended early (the connection closed before a finish_reason or [DONE])",
                retryable=True,
                empty=not asm.chunks,
            )

    def _lines(self, resp: httpx.Response) -> Generator[str, None, None]:
        """Response lines, checking the deadline and the idle limit even across keep-alives."""
        last_data = time.monotonic()
        for line in sse_lines(resp.iter_bytes()):
            self._check_cancelled()
            self._check_deadline()
            now = time.monotonic()
            if not line or line.startswith(":"):  # keep-alives and event ends are not data
                if now - last_data > self.config.idle_timeout:
                    raise ProviderError(
                        f"the stream sent only keep-alives for {self.config.idle_timeout:g} s",
                        retryable=True,
                    )
            else:
                last_data = now
            yield line

    @staticmethod
    def _json(text: str) -> Any:
        try:
            return json.loads(text)
        except ValueError as e:
            raise ProviderError(f"malformed response from the provider: {text[:200]!r}") from e

    def _http_error(self, resp: httpx.Response) -> ProviderError:
        raw = resp.read().decode("utf-8", "replace")
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.strip() or resp.reason_phrase
        return http_error(self.error_from(resp.status_code, body), raw, resp.headers)
