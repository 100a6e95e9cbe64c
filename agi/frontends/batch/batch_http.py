"""What the provider batch APIs share (docs: batch): one request a job as the batch carries
it, the answer a result line stands for, and the HTTP client their few requests go through
(retried like a model call: connection failures, 408, 409, 429 and 5xx, three attempts in all,
honouring retry-after up to a minute)."""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from agi.errors import ProviderError
from agi.messages import Usage
from agi.providers.errors import MAX_RETRY_WAIT, RETRYABLE_STATUS, retry_after

if TYPE_CHECKING:
    from agi.options.settings import Settings

ATTEMPTS = 3


@dataclass
class Answer:
    """One job's result as a batch returned it: the reply's text (None when the provider
    answered with an error), its usage, and the error's message and agi's exit code for it."""

    text: str | None = None
    usage: Usage | None = None
    error: str | None = None
    code: int = 0


@dataclass
class Polled:
    """A batch's state as the provider reports it: its status word, whether it has ended (no
    request of it will change any more), its counts, and what a failed batch says."""

    status: str
    ended: bool
    counts: dict[str, int] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None  # a batch that failed as a whole: why


class Spool:
    """A batch's requests, each encoded as it is made, kept in an unnamed temporary file (not
    in memory: a batch of 50,000 requests costs the memory of one), then sent from it."""

    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile()  # noqa: SIM115 (closed once sent)
        self.count = self.size = 0

    def add(self, item: bytes) -> None:
        self.file.write(item)
        self.count += 1
        self.size += len(item)

    def body(self, head: bytes = b"", tail: bytes = b"", trim: int = 0) -> Body:
        """The request body `head` + the requests (less their last `trim` bytes) + `tail`,
        read from the file each time it is sent (a retried request sends it again)."""
        return Body(self, head, tail, trim)

    def close(self) -> None:
        self.file.close()


class Body:
    """A request body streamed from a Spool; iterable again for every attempt."""

    CHUNK = 64 * 1024

    def __init__(self, spool: Spool, head: bytes, tail: bytes, trim: int):
        self.spool, self.head, self.tail, self.trim = spool, head, tail, trim
        self.length = len(head) + spool.size - trim + len(tail)

    def __iter__(self) -> Iterator[bytes]:
        yield self.head
        f, left = self.spool.file, self.spool.size - self.trim
        f.flush()
        f.seek(0)
        while left > 0:
            data = f.read(min(self.CHUNK, left))
            if not data:
                break
            left -= len(data)
            yield data
        yield self.tail


class BatchApi(Protocol):
    """One provider's batch API for one endpoint, key and model."""

    name: str
    max_requests: int
    max_bytes: int

    def item(self, custom_id: str, settings: Settings, prompt: str) -> bytes:
        """The job's request as one entry of a batch, encoded (JSON in UTF-8): kept as bytes
        until it is sent, a tenth of what the request's objects would hold."""
        ...

    def submit(self, requests: Spool, token: str) -> str:
        """Create a batch of the spooled requests, marked with `token` where the provider keeps
        a mark; its id."""
        ...

    def find(self, token: str, count: int, since: float) -> list[str]:
        """The ids of the batches that may be the one `submit` was sending with `token` (of
        `count` requests, at `since`): none when it was never created."""
        ...

    def poll(self, batch_id: str) -> Polled: ...

    def results(self, polled: Polled) -> Iterator[tuple[str, Answer]]:
        """(custom_id, answer) of every request an ended batch returned, one at a time."""
        ...

    def cancel(self, batch_id: str) -> None: ...

    def close(self) -> None: ...


class Http:
    """An httpx client for one endpoint; `error` turns an error response into a
    ProviderError in the provider's words."""

    def __init__(self, headers: dict[str, str], error: Callable[[int, Any], ProviderError]):
        import httpx

        self.client = httpx.Client(headers=headers, timeout=httpx.Timeout(120, connect=20))
        self.error = error

    def request(self, method: str, url: str, what: str, **kw: Any) -> Any:
        """The response of `method url`, retried while the provider or the network allows;
        a ProviderError naming `what` once it cannot be had. `stream=True`: the body is not
        read yet (`lines` reads it a line at a time)."""
        import httpx

        stream = bool(kw.pop("stream", False))
        failure = ProviderError(f"{what}: no attempt made")
        for attempt in range(ATTEMPTS):
            wait = min(8.0, 0.5 * 2**attempt) * (0.5 + random.random())
            try:
                response = self.client.send(
                    self.client.build_request(method, url, **kw), stream=stream
                )
                if stream and response.status_code >= 400:
                    response.read()
            except httpx.HTTPError as e:
                failure = ProviderError(f"{what}: {type(e).__name__}: {e}", retryable=True)
            else:
                if response.status_code < 400:
                    return response
                try:
                    body: Any = response.json()
                except ValueError:
                    body = response.text
                error = self.error(response.status_code, body)
                failure = ProviderError(
                    f"{what}: {error}", response.status_code, retryable=error.retryable
                )
                if response.status_code not in RETRYABLE_STATUS:
                    raise failure
                asked = retry_after(response.headers)
                if asked is not None:
                    if asked > MAX_RETRY_WAIT:
                        raise failure
                    wait = asked
            if attempt + 1 < ATTEMPTS:
                time.sleep(wait)
        raise failure

    def json(self, method: str, url: str, what: str, **kw: Any) -> dict[str, Any]:
        """The response's JSON object (anything else: a malformed response)."""
        response = self.request(method, url, what, **kw)
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise ProviderError(f"{what}: malformed response: {response.text[:200]!r}")
        return body

    def lines(self, url: str, what: str) -> Iterator[dict[str, Any]]:
        """The JSON objects of a JSONL file at `url`, read from the network a line at a time
        (a results file of 50,000 answers is never held whole)."""
        import httpx

        response = self.request("GET", url, what, stream=True)
        try:
            for line in response.iter_lines():
                yield from _objects([line])
        except httpx.HTTPError as e:
            raise ProviderError(f"{what}: {type(e).__name__}: {e}", retryable=True) from None
        finally:
            response.close()

    def close(self) -> None:
        self.client.close()


SKEW = 600.0  # seconds a provider's clock may be behind ours when a batch is looked for
LISTED = 100  # batches a listing page asks for


def table(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object, else an empty one (a provider's odd answer)."""
    return value if isinstance(value, dict) else {}


def _objects(lines: Iterable[bytes | str]) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL results file's lines one at a time, each made into an answer
    and let go before the next is read (a line that is no object is left out)."""
    import json

    for line in lines:
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value
