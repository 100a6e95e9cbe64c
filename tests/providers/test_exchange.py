"""The exchange and its two seams (docs/providers/transport.md): the protocol object chosen per
provider, a protocol added from outside with the exchange unchanged, and the pool passed in —
clients lent one at a time with their connections kept, a cancel in flight, one backoff."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agi.errors import Cancelled, ProviderError
from agi.messages import Reply, TextDelta
from agi.options.config import ModelConfig
from agi.providers.anthropic import AnthropicMessages
from agi.providers.chat import ChatCompletions, read_events
from agi.providers.ollama import OllamaChat
from agi.providers.pool import ClientPool
from agi.providers.protocols import transport_for
from agi.providers.stream import StreamAssembler
from agi.providers.transport import Exchange, Transport
from agi.providers.usage import parse_usage
from agi.providers.wire import Event, Received

from fakeserver import FakeModel, hang, raw, status, text

HI = [{"role": "user", "content": "hi"}]


def drain(stream: Any) -> tuple[list[Any], Reply]:
    events = []
    while True:
        try:
            events.append(next(stream))
        except StopIteration as done:
            return events, done.value


@pytest.mark.parametrize(
    ("provider", "kind"),
    [("openai", ChatCompletions), ("anthropic", AnthropicMessages), ("ollama", OllamaChat)],
)
def test_transport_for_composes_the_exchange_with_the_providers_protocol_and_pool(provider, kind):
    pool = ClientPool()
    config = ModelConfig(provider, "m", "http://127.0.0.1:9/v1", "k")
    exchange = transport_for(config, pool=pool)
    assert type(exchange) is Exchange and Transport is Exchange
    assert type(exchange.protocol) is kind and exchange.pool is pool
    assert exchange.url == exchange.protocol.url
    assert not hasattr(Exchange, "shared")  # passed in, never set on the class
    assert transport_for(config).pool is None


# --- a protocol from outside: the exchange needs no change -------------------------------------


class EchoDecoder(StreamAssembler):
    """A Responses-API-like stream: `response.output_text.delta`, then `response.completed`."""

    def decode(self, chunk: dict[str, Any], event: str) -> list[Any]:
        if event == "response.output_text.delta":
            return self._emit(str(chunk.get("delta", "")), "")
        if event == "response.completed":
            self.finish_reason = "stop"
            usage = chunk.get("response", {}).get("usage") or {}
            self.usage = parse_usage(
                {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": 1}
            )
        return []


class Responses:
    """A protocol object written against agi.providers.wire.Wire alone."""

    conversation = "input"

    def __init__(self, config: ModelConfig):
        self.config = config

    @property
    def url(self) -> str:
        return self.config.base_url + "/responses"

    def headers(self) -> dict[str, str]:
        return {"authorization": "Bearer " + self.config.api_key}

    def body(self, messages: list[dict[str, Any]], tools: list[Any], **extra: Any) -> dict:
        return {"model": self.config.model, "input": messages, "stream": True, **extra}

    def decoder(self) -> StreamAssembler:
        return EchoDecoder()

    def read(self, response: Received, decoder: StreamAssembler) -> Iterator[Event]:
        return read_events(response, decoder)

    def error(self, status: int, body: Any) -> ProviderError:
        return ProviderError(f"responses said {status}", status, retryable=status >= 500)

    def amend(self, body: dict[str, Any], error: ProviderError) -> dict[str, Any] | None:
        return None

    def reply(self, reply: Reply, body: dict[str, Any]) -> Reply:
        reply.text = reply.text.upper()
        return reply


def responses_stream(words: list[str]) -> dict[str, Any]:
    frames = [
        f"event: response.output_text.delta\ndata: {json.dumps({'delta': w})}\n\n".encode()
        for w in words
    ]
    done = {"response": {"usage": {"input_tokens": 7}}}
    frames.append(f"event: response.completed\ndata: {json.dumps(done)}\n\n".encode())
    return raw(b"".join(frames))


def test_a_protocol_object_from_outside_drives_the_unchanged_exchange():
    """Endpoint, headers, body, decoder, error map and the reply are the protocol object's;
    retries, the trace (abbreviating the protocol's conversation key) are the exchange's."""
    records: list[dict[str, Any]] = []
    script = [status(500, {"error": "busy"}), responses_stream(["he", "llo"])]
    with FakeModel(*script, responses_stream(["again"])) as server:
        config = ModelConfig("custom", "m", server.url, "sk-1")
        exchange = Exchange(config, records.append, protocol=Responses(config))
        events, reply = drain(exchange.stream(HI, [], temperature=0))
        _, second = drain(exchange.stream([*HI, {"role": "user", "content": "more"}], []))
        exchange.close()
    assert server.paths == ["/v1/responses"] * 3
    assert server.headers[0]["authorization"] == "Bearer sk-1"
    assert server.requests[0] == {"model": "m", "input": HI, "stream": True, "temperature": 0}
    assert "responses said 500" in events[0].text  # the retry's notice: the protocol's error
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hello"
    assert reply.text == "HELLO" and reply.usage is not None and reply.usage.input == 7
    assert second.text == "AGAIN"
    requests = [r for r in records if r["type"] == "request"]
    assert requests[-1]["same"] == {"input": 1}  # the first message was sent before
    assert requests[-1]["body"]["input"] == [{"role": "user", "content": "more"}]


# --- the pool ----------------------------------------------------------------------------------


class KeepAlive:
    """A chat server that keeps connections open (whole JSON completions); `peers` holds the
    client port of each request, so a reused connection shows as a repeated port."""

    def __init__(self) -> None:
        self.peers: list[int] = []
        outer = self
        answer = {"role": "assistant", "content": "hi"}
        body = json.dumps({"choices": [{"index": 0, "message": answer, "finish_reason": "stop"}]})

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                outer.peers.append(self.client_address[1])
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True

    def __enter__(self) -> KeepAlive:
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def config(self) -> ModelConfig:
        return ModelConfig("local", "m", f"http://127.0.0.1:{self.server.server_address[1]}/v1")


def test_a_pool_lends_a_client_to_one_exchange_at_a_time_connections_kept():
    pool = ClientPool()
    with KeepAlive() as server:
        first, second = (
            transport_for(server.config, pool=pool),
            transport_for(server.config, pool=pool),
        )
        drain(first.stream(HI, []))
        drain(second.stream(HI, []))  # while `first` holds its client: another one
        assert first.client is not second.client
        lent = first.client
        first.cancel()  # not in flight: the connection stays open
        first.close()
        third = transport_for(server.config, pool=pool)
        drain(third.stream(HI, []))
        assert third.client is lent
        third.close()
        second.close()
        pool.close()
    assert len(server.peers) == 3 and server.peers[2] == server.peers[0]  # reused


def test_a_cancel_in_flight_shuts_the_lent_connection_and_the_next_borrower_reconnects():
    pool = ClientPool()
    with FakeModel(hang(), text("back")) as server:
        config = ModelConfig("local", "m", server.url)
        stuck = transport_for(config, pool=pool)
        threading.Timer(0.3, stuck.cancel).start()
        with pytest.raises(Cancelled):
            drain(stuck.stream(HI, []))  # the hang guard is the server's 120 s
        lent = stuck.client
        stuck.close()
        after = transport_for(config, pool=pool)
        _, reply = drain(after.stream(HI, []))
        assert after.client is lent and reply.text == "back"
        after.close()
        pool.close()
    assert len(server.requests) == 2


def test_a_long_retry_after_pauses_every_exchange_of_the_pool():
    """One exchange is told to wait 120 s (more than any retry waits): it fails, and another
    exchange of the same pool fails too, unsent; one outside the pool is not held."""
    pool = ClientPool()
    refusal = status(429, {"error": {"message": "slow down"}}, {"retry-after": "120"})
    with FakeModel(refusal, text("fine")) as server:
        config = ModelConfig("local", "m", server.url)
        with pytest.raises(ProviderError, match="retry after 120 s"):
            drain(transport_for(config, pool=pool).stream(HI, []))
        with pytest.raises(ProviderError, match="not sent") as held:
            drain(transport_for(config, pool=pool).stream(HI, []))
        assert held.value.status == 429
        assert len(server.requests) == 1
        _, reply = drain(transport_for(config).stream(HI, []))
        assert reply.text == "fine"
        pool.close()
