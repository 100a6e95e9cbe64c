"""One model exchange over httpx, whatever the wire protocol: the client, streaming, retries,
deadlines, the idle limit, cancel, metering and the trace.

`Exchange` is the HTTP part alone, as httpx's transports are; what goes over it is one small
wire-protocol object (`agi.providers.wire.Wire`) in the protocol's own module: `ChatCompletions`
(agi.providers.chat, the default), `AnthropicMessages`, `OllamaChat`, `FimCompletions`. It gives
the endpoint, the headers, the body, the decoder, the error map, the request resent after a
refusal and the reply as returned; `agi.providers.protocols.transport_for` picks it. HTTP clients
and the backoff after a 429 come from a pool when one is passed (`agi.providers.pool`). What an
error means is `agi.providers.errors`'s."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any

from agi.attachments import elided
from agi.errors import Cancelled, ProviderError, TimeLimit
from agi.messages import Notice, Reply, Usage
from agi.providers.chat import ChatCompletions
from agi.providers.cost import tier_price  # a tier's own price (docs: responses)
from agi.providers.endpoint import require_key
from agi.providers.errors import MAX_RETRY_WAIT, http_error, unreachable
from agi.providers.pacing import pacer_for, request_tokens, warmup
from agi.providers.pool import new_client
from agi.providers.stream import StreamAssembler, sse_lines
from agi.providers.usage import header_cost
from agi.providers.wire import Event

if TYPE_CHECKING:
    import httpx

    from agi.options.config import ModelConfig
    from agi.providers.cost import Meter
    from agi.providers.pacing import Pacer
    from agi.providers.wire import Pool, Wire

ATTEMPTS = 3
FLEX_WAIT = 900.0  # seconds a request under service_tier "flex" may wait for its first byte


def backoff(attempt: int) -> float:
    """Exponential backoff with jitter, as the official SDKs do: ~0.5 s, 1 s, 2 s, at most 8 s."""
    import random  # only when a request is retried: not at every start

    return min(8.0, 0.5 * 2 ** (attempt - 1)) * (1 - 0.25 * random.random())


def _tokens(usage: Usage | None) -> float | None:
    return None if usage is None else float((usage.input or 0) + (usage.output or 0))


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


class Exchange:
    """Streams one model reply per call; the caller owns the conversation. Built from a model's
    config alone (chat completions unless given another `protocol`; a trace callable, a
    deadline, a meter and a pool are optional): no session needed."""

    def __init__(
        self,
        config: ModelConfig,
        trace: Callable[[dict[str, Any]], None] | None = None,
        deadline: float | None = None,
        timeout: float | None = None,
        meter: Meter | None = None,
        pool: Pool | None = None,
        *,
        protocol: Wire | None = None,
    ):
        require_key(config)  # exit 2 naming the variable, before anything is sent
        if protocol is None:
            protocol = ChatCompletions(config)
        self.protocol = protocol
        self.config = config
        self.meter = meter  # every call's usage and cost, and the --max-cost budget
        self.trace = trace or (lambda record: None)
        self.deadline = deadline  # time.monotonic() value, or None
        self.timeout = timeout  # the --timeout it came from, for messages
        self.pool = pool  # HTTP clients and the backoff shared with other runs, or None
        self._client: httpx.Client | None = None
        self._previous: dict[str, Any] = {}  # the last request's body, for the trace
        self._busy = False  # a request is in flight (sent, its answer not yet read to the end)
        self.cancelled = threading.Event()
        self.headers = protocol.headers()  # the same for every request

    @property
    def url(self) -> str:
        return self.protocol.url

    @property
    def client(self) -> httpx.Client:
        """The HTTP client: borrowed from the pool, or this exchange's own."""
        if self._client is None and self.pool is not None:
            self._client = self.pool.client()  # given back by close(), for the next run
        if self._client is None:
            self._client = new_client()
        return self._client

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None and self.pool is not None:
            self.pool.give_back(client)
        elif client is not None:
            client.close()

    def cancel(self) -> None:
        """From any thread: end the exchange in progress at once and send no more requests.

        Shutting the client's sockets down wakes a read that is waiting on a silent server; an
        exchange not in flight leaves them open (a pool lends its client on, connections kept).
        """
        self.cancelled.set()
        if not self._busy:
            return
        for sock in list(getattr(self._client, "sockets", ())):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

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
        body = self.protocol.body(messages, tools, **extra)
        trace = self.trace if not mark else lambda record: self.trace({**record, **mark})
        if self.meter is not None:  # before every model call: the budget may be spent
            self.meter.check(self.config.label, self.config.model, id(self))
        try:
            reply = yield from self._attempts(body, trace)
            return self.protocol.reply(reply, body)
        finally:  # however the call ended, it is no longer in flight
            if self.meter is not None:
                self.meter.release(id(self))

    def _attempts(self, body: dict[str, Any], trace: Any) -> Generator[Event, None, Reply]:
        """The call's attempts: what failed and may be retried is sent again."""
        for attempt in range(1, ATTEMPTS + 1):
            asm = self.protocol.decoder()
            started = time.monotonic()
            traced = elided(self._traced(body))  # attached files by name (docs: attachments)
            trace({"type": "request", "attempt": attempt, "url": self.url, **traced})
            try:
                reply = yield from self._metered(body, asm)
            except ProviderError as e:
                trace(failure_record(e, attempt, asm, started))
                if self.pool is not None:  # a 429 pauses every run sending here, even when
                    asked = e.retry_after  # this one gives up (its last attempt, a long wait)
                    self.pool.hold(self.url, backoff(attempt) if asked is None else asked, e)
                changed = self.protocol.amend(body, e) if attempt < ATTEMPTS else None
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
        writes = self._warm(body)  # a prefix shared with other runs: written once
        paced, written = None, False
        try:
            paced = self._paced(body)
            reply = yield from self._once(body, asm)
            written = True
        except ProviderError:
            if asm.usage is not None:
                self._record(asm.usage)
            raise
        except BaseException:
            if asm.chunks:
                self._record(asm.usage)
            raise
        finally:
            if paced is not None:
                paced[0].release(paced[1], _tokens(asm.usage))
            if writes is not None:
                warmup().done(writes, written)
        self._record(reply.usage)
        return reply

    def _warm(self, body: dict[str, Any]) -> str | None:
        """The cached prefix this request writes for the runs sharing it, or None (it has
        none, or reads one written already or being written: it waits for that first)."""
        shared = getattr(self.protocol, "shared_prefix", None)
        key = shared(body) if shared is not None else None
        if key is None:
            return None
        return key if warmup().enter(key, self.deadline, self.cancelled) else None

    def _paced(self, body: dict[str, Any]) -> tuple[Pacer, list[float]] | None:
        """Wait for the provider's pacer (docs: volume) before sending: its record of this
        request, or None without limits. A deadline or a cancel during the wait ends it."""
        c = self.config
        limits = (getattr(c, k, None) for k in ("rpm", "tpm", "max_concurrent"))
        pacer = pacer_for(c.provider, *limits)
        if pacer is None:
            return None
        record = pacer.acquire(request_tokens(body), self.deadline, self.cancelled)
        if record is None:
            self._check_cancelled()
            self._check_deadline()
            raise Cancelled()
        return pacer, record

    def _record(self, usage: Usage | None) -> None:
        tier = getattr(self.config, "service_tier", None)
        if tier and usage is not None and usage.cost is None and self.meter is not None:
            price = tier_price(self.config.label, self.config.model, tier, self.meter.prices)
            usage.cost = None if price is None else price.cost(usage)
        if self.meter is not None:
            self.meter.record(self.config.label, self.config.model, usage, id(self))

    def _failed(self, asm: StreamAssembler) -> None:
        """The call failed for good without reporting usage: its cost is unknown, not 0."""
        if self.meter is not None and asm.usage is None:
            self.meter.failed(self.config.label, self.config.model, id(self))

    def _traced(self, body: dict[str, Any]) -> dict[str, Any]:
        """The request as the trace keeps it. What this exchange's previous request already
        carried is not written again: `same` counts the leading messages (and flags the tools)
        that are as before, so a trace grows with the conversation rather than its square."""
        key = self.protocol.conversation  # "messages"; a request with none is kept whole
        previous, self._previous = self._previous, body
        messages, before = body.get(key) if key else None, previous.get(key) or []
        if not isinstance(messages, list):
            return {"body": body}
        kept, limit = 0, min(len(messages), len(before))
        while kept < limit and messages[kept] == before[kept]:
            kept += 1
        same: dict[str, Any] = {key: kept} if kept else {}
        if body.get("tools") and body.get("tools") == previous.get("tools"):
            same["tools"] = True
        if not same:
            return {"body": body}
        short = {k: v for k, v in body.items() if k not in same}
        return {"body": {**short, key: messages[kept:]}, "same": same}

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

    def _timeouts(self) -> httpx.Timeout:
        import httpx

        left = self.remaining()
        cap = lambda s: s if left is None else max(0.01, min(s, left))  # noqa: E731
        idle = self.config.idle_timeout
        if getattr(self.config, "service_tier", None) == "flex":  # docs: responses
            idle = max(idle, FLEX_WAIT)  # flex may be slow to begin its answer
        return httpx.Timeout(connect=cap(10.0), read=cap(idle), write=cap(30.0), pool=cap(10.0))

    def _once(self, body: dict[str, Any], asm: StreamAssembler) -> Generator[Event, None, Reply]:
        import httpx

        if self.pool is not None:
            self.pool.wait(self.url, self.cancelled, self.deadline)
        self._check_deadline()
        self._busy = True  # before the check: a cancel from here on shuts the sockets
        try:
            self._check_cancelled()
            with self.client.stream(
                "POST", self.url, json=body, headers=self.headers, timeout=self._timeouts()
            ) as resp:
                if resp.status_code >= 400:
                    raise self._http_error(resp)
                asm.provider_cost = header_cost(resp.headers)
                yield from self.protocol.read(Answer(self, resp), asm)
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
        finally:
            self._busy = False

    def lines(self, resp: httpx.Response) -> Generator[str, None, None]:
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
        self._check_cancelled()  # a cancel shuts the socket: the stream ends here

    def _http_error(self, resp: httpx.Response) -> ProviderError:
        raw = resp.read().decode("utf-8", "replace")
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.strip() or resp.reason_phrase
        return http_error(self.protocol.error(resp.status_code, body), raw, resp.headers)


class Answer:
    """A 2xx response as a protocol reads it (agi.providers.wire.Received)."""

    def __init__(self, exchange: Exchange, response: httpx.Response):
        self.exchange, self.response = exchange, response
        self.content_type = response.headers.get("content-type", "")

    def lines(self) -> Iterator[str]:
        return self.exchange.lines(self.response)

    def text(self) -> str:
        return self.response.read().decode("utf-8", "replace")


Transport = Exchange  # the name the engine, the front ends and the tests import


class Fallback:
    """The run's model, and `make()`'s (the SDKs' --fallback-model) for every call once a call
    to it failed in a way a later try might not (`retryable`, after its own retries) before
    anything of a reply arrived; `warn` is told of the switch."""

    def __init__(self, main: Exchange, make: Callable[[], Exchange], warn: Callable[[str], None]):
        self.main, self.make, self.warn = main, make, warn
        self.other: Exchange | None = None

    @property
    def deadline(self) -> float | None:
        return (self.other or self.main).deadline

    @deadline.setter
    def deadline(self, value: float | None) -> None:
        for t in (self.main, self.other):
            if t is not None:
                t.deadline = value

    def stream(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        mark: dict[str, Any] | None = None,
        **kw: Any,
    ) -> Generator[Event, None, Reply]:
        if self.other is None:
            events = self.main.stream(messages, tools, mark, **kw)
            arrived = False
            try:
                while True:
                    event = next(events)
                    arrived = arrived or not isinstance(event, Notice)
                    yield event
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            except ProviderError as e:
                if arrived or not e.retryable or e.too_long:
                    raise
                self.other = self.make()
                self.warn(f"{e}: the fallback model from now on")
        return (yield from self.other.stream(messages, tools, mark, **kw))

    def cancel(self) -> None:
        for t in (self.main, self.other):
            if t is not None:
                t.cancel()

    def close(self) -> None:
        for t in (self.main, self.other):
            if t is not None:
                t.close()
