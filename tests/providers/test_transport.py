"""Every recorded provider response in tests/fixtures/transport, replayed over real HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agi.errors import ProviderError
from agi.messages import ReasoningDelta, Reply, TextDelta, wire_message
from agi.options.config import ModelConfig
from agi.providers.anthropic import AnthropicMessages
from agi.providers.transport import Transport

from conftest import FIXTURES
from fakeserver import FakeModel, raw, status

TRANSPORT = FIXTURES / "transport"
EXPECTED = json.loads((Path(__file__).parent / "transport_expected.json").read_text())


def replay_step(name: str, entry: dict):
    path = TRANSPORT / entry["file"]
    if path.suffix == ".sse":
        return raw(path.read_bytes())
    if path.suffix == ".jsonl":
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        return raw(
            b"".join(b"data: " + line.encode() + b"\n\n" for line in lines) + b"data: [DONE]\n\n"
        )
    data = json.loads(path.read_text())
    if "status" in data and "body" in data:
        code, body = data["status"], data["body"]
    else:
        code, body = entry["status"], data
    if code != 200:
        return status(code, body)
    return raw(json.dumps(body).encode(), content_type="application/json")


def collect(server: FakeModel, name: str = ""):
    """One exchange with the fake server; a recorded Messages API stream is read as Anthropic's
    (each protocol has its own decoder: nothing guesses the protocol from a chunk)."""
    if name.startswith("anthropic_messages"):
        config = ModelConfig("anthropic", "m", server.url, "k")
        transport = Transport(config, protocol=AnthropicMessages(config))
    else:
        transport = Transport(ModelConfig("test", "m", server.url))
    events, error = [], None
    stream = transport.stream([{"role": "user", "content": "hi"}], [])
    try:
        while True:
            events.append(next(stream))
    except StopIteration as done:
        reply = done.value
    except ProviderError as e:
        reply, error = None, e
    finally:
        transport.close()
    return events, reply, error


def test_every_fixture_has_an_expectation():
    responses = {
        p.name.split(".")[0]
        for p in TRANSPORT.iterdir()
        if p.name.endswith((".sse", ".jsonl", ".response.json"))
        or p.name == "openai_error_400_max_tokens_unsupported.json"
    }
    assert responses == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture(name):
    entry = EXPECTED[name]
    with FakeModel(replay_step(name, entry)) as server:
        events, reply, error = collect(server, name)
    text = "".join(e.text for e in events if isinstance(e, TextDelta)).strip()
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta)).strip()
    if entry["error"]:
        assert error is not None, "expected a provider error"
        assert error.status == entry["error"]["status"]
        assert entry["error"]["contains"] in str(error)
        assert reasoning == entry["reasoning"]
        assert text == entry["text"]
        retryable = entry["error"]["status"] in (408, 409, 429) or entry["error"]["status"] >= 500
        # an error before any content is retried (3 attempts); after content, never
        expected_requests = 3 if retryable and not (text or reasoning) else 1
        assert len(server.requests) == expected_requests
        return
    assert error is None, error
    assert isinstance(reply, Reply)
    assert reply.text == entry["text"]
    assert reply.reasoning == entry["reasoning"]
    assert reasoning == entry["reasoning"]
    got_calls = [
        {"id": c.id, "name": c.name, "arguments": c.parse_arguments()} for c in reply.tool_calls
    ]
    for got, want in zip(got_calls, entry["tool_calls"], strict=True):
        assert got["name"] == want["name"]
        assert got["arguments"] == want["arguments"]
        if want["id"] is None:
            assert got["id"].startswith("call_")  # generated
        else:
            assert got["id"] == want["id"]
    if entry["usage"] is None:
        assert reply.usage is None
    else:
        u = reply.usage
        assert u.to_dict() == {**entry["usage"], "cost": entry["cost"]}
    assert reply.finish_reason == entry["finish_reason"]


@pytest.mark.parametrize(
    "turn,field",
    [
        ("deepseek_thinking_tools_turn1", "reasoning_content"),
        ("vllm_tool_call_reasoning_turn1", "reasoning"),
    ],
)
def test_reasoning_is_sent_back_on_tool_call_turns(turn, field):
    """DeepSeek's thinking mode needs reasoning_content replayed; vLLM replays `reasoning`."""
    with FakeModel(replay_step(turn, EXPECTED[turn])) as server:
        _, reply, _ = collect(server)
    sent = wire_message(reply.to_message())
    recorded_next = json.loads((TRANSPORT / (turn[:-1] + "2.request.json")).read_text())
    recorded = next(m for m in recorded_next["body"]["messages"] if m["role"] == "assistant")
    assert sent[field] == recorded[field].strip()
    assert sent["tool_calls"][0]["id"] == recorded["tool_calls"][0]["id"]
    # and a final answer's reasoning is not sent back
    final = Reply(text="done", reasoning="thoughts", reasoning_field=field).to_message()
    assert field not in wire_message(final) and final[field] == "thoughts"


def test_unicode_line_separators_inside_json_do_not_split_lines():
    """JSON may carry U+2028 raw; SSE lines end only at LF/CR."""
    body = {"choices": [{"index": 0, "delta": {"content": "a\u2028b\u0085c"}}]}
    data = b"data: " + json.dumps(body, ensure_ascii=False).encode() + b"\n\ndata: [DONE]\n\n"
    with FakeModel(raw(data)) as server:
        _, reply, error = collect(server)
    assert error is None and reply.text == "a\u2028b\u0085c"


def test_cancel_from_another_thread_ends_a_silent_exchange_at_once():
    import threading
    import time

    from agi.errors import Cancelled

    from fakeserver import hang

    with FakeModel(hang()) as server:
        transport = Transport(ModelConfig("test", "m", server.url))
        threading.Timer(0.5, transport.cancel).start()
        started = time.monotonic()
        with pytest.raises(Cancelled):
            list(transport.stream([{"role": "user", "content": "hi"}], []))
        assert time.monotonic() - started < 30  # a hang guard: the server is silent for 120 s
        assert len(server.requests) == 1  # no retry after a cancel


def test_cancel_mid_stream():
    import threading
    import time

    from agi.errors import Cancelled

    from fakeserver import text

    with FakeModel(text("x" * 100, delay=1.0, pieces=100)) as server:  # 100 s long
        transport = Transport(ModelConfig("test", "m", server.url))
        threading.Timer(0.8, transport.cancel).start()
        started = time.monotonic()
        with pytest.raises(Cancelled):
            list(transport.stream([{"role": "user", "content": "hi"}], []))
        assert time.monotonic() - started < 30  # a hang guard
        assert len(server.requests) == 1
