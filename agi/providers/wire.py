"""The two seams of a model exchange (`agi.providers.transport.Exchange`): the pool it may borrow
its HTTP client from, shared by the runs of one process (a batch's workers, the MCP server's
calls), and the wire-protocol object that says what goes over that client."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import httpx

    from agi.errors import ProviderError


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
