"""The two seams of a model exchange (`agi.providers.transport.Exchange`): the wire-protocol
object that says what goes over HTTP and how the answer reads (one per protocol, in its own
module: chat, anthropic, ollama, fim), and the pool the exchange may borrow its HTTP client from,
shared by the runs of one process (a batch's workers, the MCP server's calls)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from agi.messages import Notice, ReasoningDelta, Reply, TextDelta

if TYPE_CHECKING:
    import httpx

    from agi.errors import ProviderError
    from agi.providers.stream import StreamAssembler

Event = TextDelta | ReasoningDelta | Notice  # what an exchange yields while a reply streams


class Received(Protocol):
    """A response with a 2xx status, as a protocol reads it; every line checks the cancel, the
    deadline and the idle limit, and the lines end in Cancelled when a cancel closed them."""

    content_type: str

    def lines(self) -> Iterator[str]:
        """The body's lines (LF or CRLF), as they arrive."""
        ...

    def text(self) -> str:
        """The whole body (a server that answered a streamed request with one JSON object)."""
        ...


class Wire(Protocol):
    """One wire protocol, everything in an exchange that is not HTTP: the endpoint, the
    headers, the body, the decoder of the answer, the error map, the request resent at once
    after a refusal, and the reply as the caller gets it. Holds no connection: a protocol
    object may keep what it learns of its endpoint (Ollama's context size) from call to call."""

    config: Any  # agi.options.config.ModelConfig
    conversation: str  # the body's key holding the conversation (the trace abbreviates it); ""

    @property
    def url(self) -> str: ...

    def headers(self) -> dict[str, str]:
        """The headers of every request (asked once per exchange)."""
        ...

    def body(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **extra: Any
    ) -> dict[str, Any]:
        """The request body for a conversation; `extra` (response_format, stop, …) goes in."""
        ...

    def decoder(self) -> StreamAssembler:
        """A fresh decoder for one response."""
        ...

    def read(self, response: Received, decoder: StreamAssembler) -> Iterator[Event]:
        """Feed the response to `decoder`, yielding its events; a stream cut short before its
        end: a retryable ProviderError."""
        ...

    def error(self, status: int, body: Any) -> ProviderError:
        """The error an HTTP error response's body (JSON, or text) stands for."""
        ...

    def amend(self, body: dict[str, Any], error: ProviderError) -> dict[str, Any] | None:
        """The request to send at once instead of one refused with `error`, or None."""
        ...

    def reply(self, reply: Reply, body: dict[str, Any]) -> Reply:
        """The reply to `body` as the caller gets it (e.g. a forced answer tool's input as text)."""
        ...


class Pool(Protocol):
    """HTTP clients kept between runs and one backoff per endpoint, passed to each exchange
    (`transport_for(..., pool=)`): nothing about it is class state."""

    def client(self) -> httpx.Client:
        """A client for one exchange alone, with the connections it kept; until given back."""
        ...

    def give_back(self, client: httpx.Client) -> None:
        """The exchange is closed: `client` (and its open connections) may be lent again."""
        ...

    def hold(self, url: str, seconds: float, error: ProviderError) -> None:
        """A request to `url` failed with `error`: after a 429 or a retry-after, every
        exchange waits `seconds` before sending there, whether or not this one retries."""
        ...

    def wait(self, url: str, cancelled: threading.Event, deadline: float | None) -> None:
        """Before a request to `url`: wait out its pause, not past `deadline` nor a cancel
        (a pause longer than any retry would wait: ProviderError, unsent)."""
        ...
