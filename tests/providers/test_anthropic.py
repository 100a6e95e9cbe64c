"""The native Anthropic Messages transport and the Gemini preset (docs: models).

Recorded streams (tests/fixtures/anthropic, see SOURCES.md) are replayed over real HTTP by the
scripted server and fed to the decoder split at every byte boundary; the expected values below
were read off the fixtures by hand. The loop runs in-process against the scripted server, and
through the real `agi` executable once the run's wiring picks AnthropicMessages.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from agi.errors import ProviderError
from agi.messages import Notice, ReasoningDelta, TextDelta, wire_message
from agi.options.config import PROVIDERS, ModelConfig
from agi.providers.anthropic import (
    MessagesAssembler,
    add_cache_breakpoints,
    claude_model,
    default_max_tokens,
    messages_url,
    request_body,
    to_messages,
    to_tool_choice,
)
from agi.providers.protocols import transport_for
from agi.providers.stream import iter_sse, sse_lines
from agi.providers.transport import Transport

from conftest import FIXTURES
from fakeserver import (
    FakeModel,
    anthropic_call,
    anthropic_calls,
    anthropic_events,
    anthropic_text,
    raw,
    status,
)
from fakeserver import call as openai_call
from fakeserver import text as openai_text

A = FIXTURES / "anthropic"
T = FIXTURES / "transport"
KEY = "sk-ant-test-0123456789"
CACHE = {"type": "ephemeral"}


def sse_bytes(path: Path) -> bytes:
    """A fixture as the API sends it: `.jsonl` (events without framing) gets its SSE framing."""
    if path.suffix != ".jsonl":
        return path.read_bytes()
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    return b"".join(
        f"event: {json.loads(line)['type']}\ndata: {line}\n\n".encode() for line in lines
    )


def decode(chunks: list[bytes]) -> tuple[Any, list[Any]]:
    """The decoder alone (what Transport does per response, without HTTP)."""
    asm, events = MessagesAssembler(), []
    for event, data in iter_sse(sse_lines(chunks)):
        events += asm.feed(json.loads(data), event)
    events += asm.flush()
    return asm.finish(), events


def config(url: str, model: str = "claude-sonnet-4-5", **params: Any) -> ModelConfig:
    return ModelConfig("anthropic", model, url, KEY, params)


def run(transport: Any, messages: list[dict[str, Any]], tools: Any = (), **extra: Any) -> Any:
    """Drive one stream to its reply; returns (reply, events)."""
    events: list[Any] = []
    stream = transport.stream(messages, list(tools), **extra)
    while True:
        try:
            events.append(next(stream))
        except StopIteration as done:
            return done.value, events


def usage(reply: Any) -> tuple[int, ...]:
    u = reply.usage
    return (u.input, u.output, u.cached, u.cache_write, u.reasoning)


THINKING_TOOL_THOUGHT = (
    "The user wants me to:\n1. Use the fixed_version tool\n2. Tell them the version\n3. Make a "
    "short joke about it\n\nLet me first call the fixed_version tool to see what version it "
    "returns."
)
CLEAR_THOUGHT = "The previous result was 925. Now I need to divide that by 5.\n\n925 ÷ 5 = 185"

# fixture -> what it must decode to, read off the recordings:
# text, reasoning, tool calls (id, name, input), finish_reason, usage (input, output, cached,
# cache_write, reasoning), thinking blocks (type, thinking or data prefix, signature prefix)
EXPECTED: dict[str, dict[str, Any]] = {
    "anthropic/text_basic.sse": dict(text="Hello there!", finish="stop", usage=(11, 6, 0, 0, 0)),
    "transport/anthropic_messages_text_stream.jsonl": dict(
        text="Hello! I'm doing well, thank you for asking. How are you doing today? Is there "
        "anything I can help you with?",
        finish="stop",
        usage=(12, 30, 0, 0, 0),
    ),
    "transport/anthropic_messages_tool_stream.jsonl": dict(
        text="I'll update the issue list for you.",
        calls=[("toolu_01QE1WLsSVp5hy5Q3GmGTmjP", "updateIssueList", {})],
        finish="tool_calls",
        usage=(565, 48, 0, 0, 0),
    ),
    "anthropic/tool_use_partial_json.sse": dict(
        text="I'll check the current weather in Paris for you.",
        calls=[("toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather", {"location": "Paris"})],
        finish="tool_calls",
        usage=(377, 65, 0, 0, 0),
    ),
    "anthropic/thinking_text.jsonl": dict(
        text="925 ÷ 5 = 185",
        reasoning=CLEAR_THOUGHT,
        thinking=[("thinking", CLEAR_THOUGHT, "EvQBCkYICxgCKkAxhD4N")],
        finish="stop",
        usage=(69, 53, 0, 0, 0),
    ),
    "anthropic/thinking_tool_turn1.sse": dict(
        reasoning=THINKING_TOOL_THOUGHT,
        thinking=[("thinking", THINKING_TOOL_THOUGHT, "EoQDCm0IDhgCKkCDzGs2")],
        calls=[("toolu_01825dXWLSoJwCst1qTsiWdb", "fixed_version", {})],
        finish="tool_calls",
        usage=(598, 92, 0, 0, 53),
    ),
    "anthropic/thinking_tool_turn2.sse": dict(
        text="The version is **0.32a0**.\n\nHere's a joke about it: \n\nLooks like this version "
        "is still in alpha testing... I guess you could say it's going through a \"0.32a good "
        "time\" before becoming stable! 😄\n\n(It's at version 0.32a, which means it's far "
        "from 1.0, so plenty of room to grow!)",
        finish="stop",
        usage=(707, 89, 0, 0, 0),
    ),
    "anthropic/parallel_tools_turn1.sse": dict(
        calls=[
            ("toolu_01LtHJmixrs9NcWQkK8hu8hj", "pelican_name_generator", {}),
            ("toolu_01N8a4jWyf116qKTMqKKmjyt", "pelican_name_generator", {}),
        ],
        finish="tool_calls",
        usage=(542, 62, 0, 0, 0),
    ),
    "anthropic/parallel_tools_turn2.sse": dict(
        text="Here are two great names for your pet pelican:\n\n1. **Charles** - A sophisticated "
        "and dignified name, perfect for a pelican with personality!\n2. **Sammy** - A "
        "friendly and playful name that gives off warm, approachable vibes.\n\nEither of "
        "these would make an excellent name for your feathered friend! 🦅",
        finish="stop",
        usage=(678, 82, 0, 0, 0),
    ),
    "anthropic/redacted_thinking.sse": dict(
        text="I notice that you've sent what appears to be some kind of test string or command. "
        'I don\'t have any special "magic string" triggers or backdoor commands that would '
        "expose internal systems or change my behavior.\n\nI'm Claude, an AI assistant "
        "created by Anthropic to be helpful, harmless, and honest. How can I assist you today "
        "with a legitimate task or question?",
        thinking=[
            ("redacted_thinking", "EqkECkYIBxgCKkA8AZ4n", None),
            ("redacted_thinking", "EtgBCkYIBxgCKkDQfGkw", None),
        ],
        finish="stop",
        usage=(92, 189, 0, 0, 0),
    ),
    # server tools (code execution) are the API's own: not tool calls for agi to run; the final
    # usage is message_delta's: 6 uncached + 6289 read + 3337 written
    "anthropic/cache_usage_server_tools.jsonl": dict(
        text="The sum of the squares of the numbers 1 through 12 is **650**.",
        finish="stop",
        usage=(9632, 198, 6289, 3337, 0),
    ),
}


def check(reply: Any, events: list[Any], want: dict[str, Any]) -> None:
    assert reply.text == want.get("text", "")
    assert reply.reasoning == want.get("reasoning", "")
    calls = [(c.id, c.name, c.parse_arguments()) for c in reply.tool_calls]
    assert calls == want.get("calls", [])
    assert reply.finish_reason == want["finish"]
    assert usage(reply) == want["usage"]
    blocks = reply.thinking_blocks
    assert len(blocks) == len(want.get("thinking", []))
    for block, (kind, body, signature) in zip(blocks, want.get("thinking", []), strict=True):
        assert block["type"] == kind
        if kind == "thinking":
            assert block["thinking"] == body and block["signature"].startswith(signature)
        else:
            assert block["data"].startswith(body) and len(block["data"]) > 100
    # what was streamed is what was kept
    assert "".join(e.text for e in events if isinstance(e, TextDelta)).strip() == reply.text
    shown = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert shown.strip() == reply.reasoning


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recorded_stream_over_http(name: str) -> None:
    data = sse_bytes(FIXTURES / name)
    with FakeModel(raw(data)) as server:
        reply, events = run(transport_for(config(server.url)), [{"role": "user", "content": "hi"}])
    check(reply, events, EXPECTED[name])
    assert server.paths == ["/v1/messages"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recorded_stream_split_at_every_byte(name: str) -> None:
    data = sse_bytes(FIXTURES / name)
    whole, _ = decode([data])
    check(whole, decode([data])[1], EXPECTED[name])
    for cut in range(1, len(data)):
        reply, events = decode([data[:cut], data[cut:]])
        assert (reply.text, reply.reasoning, reply.tool_calls) == (
            whole.text,
            whole.reasoning,
            whole.tool_calls,
        ), cut
        assert reply.thinking_blocks == whole.thinking_blocks, cut
    reply, events = decode([data[i : i + 1] for i in range(len(data))])
    check(reply, events, EXPECTED[name])


@pytest.mark.parametrize(
    "name", ["anthropic/thinking_tool_turn1.sse", "anthropic/tool_use_partial_json.sse"]
)
def test_recorded_stream_byte_by_byte_over_http(name: str) -> None:
    data = sse_bytes(FIXTURES / name)
    step = {"kind": "sse", "frames": [data[i : i + 1] for i in range(len(data))], "delay": 0.0}
    with FakeModel(step) as server:
        reply, events = run(transport_for(config(server.url)), [{"role": "user", "content": "hi"}])
    check(reply, events, EXPECTED[name])


# ---- errors and retries ----


def test_error_event_after_content_is_a_provider_error_and_not_retried() -> None:
    with FakeModel(raw(sse_bytes(A / "error_midstream.sse")), anthropic_text("late")) as server:
        transport = transport_for(config(server.url))
        events: list[Any] = []
        with pytest.raises(ProviderError) as caught:
            for event in transport.stream([{"role": "user", "content": "hi"}], []):
                events.append(event)
    assert "overloaded_error" in str(caught.value) and "Overloaded" in str(caught.value)
    assert caught.value.exit_code == 3
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hello"]
    assert len(server.requests) == 1  # content was delivered: never sent again


def test_overloaded_error_event_before_content_is_retried() -> None:
    script = (raw(sse_bytes(A / "error_before_content.sse")), anthropic_text("fine now"))
    with FakeModel(*script) as server:
        reply, events = run(transport_for(config(server.url)), [{"role": "user", "content": "hi"}])
    assert reply.text == "fine now"
    assert len(server.requests) == 2
    assert any(isinstance(e, Notice) and "overloaded_error" in e.text for e in events)


def test_529_overloaded_is_retried_after_retry_after() -> None:
    recorded = json.loads((A / "overloaded_529.response.json").read_text())
    headers = {"retry-after": recorded["headers"]["retry-after"]}
    with FakeModel(status(529, recorded["body"], headers), anthropic_text("ok")) as server:
        started = time.monotonic()
        reply, events = run(transport_for(config(server.url)), [{"role": "user", "content": "hi"}])
    assert reply.text == "ok" and len(server.requests) == 2
    assert time.monotonic() - started >= 0.9  # retry-after: 1 honoured
    notice = next(e.text for e in events if isinstance(e, Notice))
    assert "529" in notice and "overloaded_error" in notice


def test_429_three_times_is_a_provider_error_naming_the_type() -> None:
    body = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    with (
        FakeModel(status(429, body, {"retry-after": "0"})) as server,
        pytest.raises(ProviderError) as caught,
    ):
        run(transport_for(config(server.url)), [{"role": "user", "content": "hi"}])
    assert len(server.requests) == 3
    assert caught.value.status == 429 and "rate_limit_error: slow down" in str(caught.value)


def test_400_is_not_retried_and_keeps_the_api_message() -> None:
    body = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 210000 tokens > 200000 maximum",
        },
    }
    with FakeModel(status(400, body)) as server, pytest.raises(ProviderError) as caught:
        run(transport_for(config(server.url)), [{"role": "user", "content": "hi"}])
    assert len(server.requests) == 1 and caught.value.status == 400
    assert "prompt is too long" in str(caught.value)  # what compaction looks for


def test_idle_limit_applies() -> None:
    cfg = config("http://127.0.0.1:1")
    with FakeModel({"kind": "keepalive", "interval": 0.05}) as server:
        cfg.base_url, cfg.idle_timeout = server.url, 0.3
        with pytest.raises(ProviderError) as caught:
            run(transport_for(cfg), [{"role": "user", "content": "hi"}])
    assert "keep-alives" in str(caught.value)


# ---- the request ----


def test_endpoint_headers_and_base_url_forms() -> None:
    with FakeModel(anthropic_text("a")) as server:
        root = server.url[: -len("/v1")]
        for base in (server.url, server.url + "/", root, root + "/"):
            run(transport_for(config(base)), [{"role": "user", "content": "hi"}])
    assert server.paths == ["/v1/messages"] * 4
    headers = {k.lower(): v for k, v in server.headers[0].items()}
    assert headers["x-api-key"] == KEY
    assert headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in headers
    assert messages_url("https://api.anthropic.com") == "https://api.anthropic.com/v1/messages"
    assert (
        messages_url("https://gw.example/anthropic/v1")
        == "https://gw.example/anthropic/v1/messages"
    )


def test_presets() -> None:
    assert PROVIDERS["anthropic"][:2] == ("https://api.anthropic.com", "ANTHROPIC_API_KEY")
    assert PROVIDERS["gemini"][:2] == (
        "https://generativelanguage.googleapis.com/v1beta/openai",
        "GEMINI_API_KEY",
    )


def strip_cache(value: Any) -> Any:
    """The request without its cache_control markers (the recorded requests had none)."""
    if isinstance(value, dict):
        return {k: strip_cache(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_cache(v) for v in value]
    return value


def test_request_matches_the_recorded_parallel_tool_turn() -> None:
    """agi's stored conversation for the recorded exchange converts to the recorded request:
    both tool results in one user message (llm sent a blank text block, which agi leaves out)."""
    recorded = json.loads((A / "parallel_tools_turn2.request.json").read_text())["body"]
    ids = ["toolu_01LtHJmixrs9NcWQkK8hu8hj", "toolu_01N8a4jWyf116qKTMqKKmjyt"]
    fn = {"name": "pelican_name_generator", "arguments": "{}"}
    conversation = [
        {"role": "user", "content": "Two names for a pet pelican"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": i, "type": "function", "function": fn} for i in ids],
        },
        {"role": "tool", "tool_call_id": ids[0], "content": "Charles"},
        {"role": "tool", "tool_call_id": ids[1], "content": "Sammy"},
    ]
    tools = [
        {
            "type": "function",
            "function": {
                "name": "pelican_name_generator",
                "description": "",
                "parameters": {"properties": {}, "type": "object"},
            },
        }
    ]
    body = request_body(recorded["model"], conversation, tools, {"temperature": 1.0})
    expected = recorded["messages"]
    expected[1]["content"] = [b for b in expected[1]["content"] if b["type"] != "text"]
    assert strip_cache(body["messages"]) == expected
    assert strip_cache(body["tools"]) == recorded["tools"]
    assert body["temperature"] == 1.0 and body["stream"] is True and body["max_tokens"] > 0


def test_thinking_block_goes_back_unchanged_as_recorded() -> None:
    """Decode the recorded turn 1, store it as agi does, and the next request carries the
    thinking block with its signature exactly as the recorded turn 2 request did."""
    recorded = json.loads((A / "thinking_tool_turn2.request.json").read_text())["body"]
    reply, _ = decode([(A / "thinking_tool_turn1.sse").read_bytes()])
    stored = json.loads(json.dumps(reply.to_message()))  # as messages.jsonl keeps it
    assert stored["thinking_blocks"][0]["signature"].endswith("hANWRjSBwUxgB")
    prompt = recorded["messages"][0]["content"][0]["text"]
    conversation = [
        {"role": "user", "content": prompt},
        stored,
        {"role": "tool", "tool_call_id": reply.tool_calls[0].id, "content": "0.32a0"},
    ]
    thinking = recorded["thinking"]
    body = request_body(recorded["model"], conversation, [], {"thinking": thinking})
    assert strip_cache(body["messages"]) == recorded["messages"]
    assert body["thinking"] == thinking
    assert body["max_tokens"] > thinking["budget_tokens"]


def test_cache_breakpoints_on_the_last_tool_system_block_and_newest_message() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": n,
                "description": n,
                "parameters": {"type": "object", "properties": {}},
            },
        }
        for n in ("Bash", "Read")
    ]
    conversation = [
        {"role": "system", "content": "You are agi."},
        {"role": "user", "content": "list files"},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {
                    "id": "t1",
                    "type": "function",
                    "function": {"name": "Bash", "arguments": '{"command": "ls"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "a.txt"},
    ]
    body = request_body("claude-sonnet-4-5", conversation, tools)
    marked = json.dumps(body).count("cache_control")
    assert marked == 3
    assert body["tools"][-1]["cache_control"] == CACHE and "cache_control" not in body["tools"][0]
    assert body["system"] == [{"type": "text", "text": "You are agi.", "cache_control": CACHE}]
    assert body["messages"][-1]["content"][-1] == {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": "a.txt",
        "cache_control": CACHE,
    }
    assert conversation[3] == {
        "role": "tool",
        "tool_call_id": "t1",
        "content": "a.txt",
    }  # untouched
    # a thinking block never carries the marker
    body = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "x"},
                    {"type": "redacted_thinking", "data": "d"},
                ],
            }
        ]
    }
    add_cache_breakpoints(body)
    assert body["messages"][0]["content"][0]["cache_control"] == CACHE
    assert "cache_control" not in body["messages"][0]["content"][1]


def test_conversion_merges_roles_and_hoists_system() -> None:
    conversation = [
        {"role": "system", "content": "one"},
        {"role": "user", "content": "first"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "second"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "functions.Bash:0",
                    "type": "function",
                    "function": {"name": "Bash", "arguments": "not json"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "functions.Bash:0", "content": "Error: interrupted"},
        {"role": "user", "content": "go on", "compaction": None},
        {"role": "assistant", "content": "   "},  # blank text is not sent
        {"role": "system", "content": "two"},
    ]
    system, turns = to_messages(conversation)
    assert system == [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[0]["content"] == [
        {"type": "text", "text": "first"},
        {"type": "text", "text": "second"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
    ]
    assert turns[1]["content"] == [
        {"type": "tool_use", "id": "functions_Bash_0", "name": "Bash", "input": {}}
    ]
    assert turns[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "functions_Bash_0", "content": "Error: interrupted"},
        {"type": "text", "text": "go on"},
    ]


def test_params_pass_through_and_chat_completions_ones_are_translated() -> None:
    params = {
        "temperature": 0.2,
        "top_k": 5,
        "stop": "Observation:",
        "stream_options": {"include_usage": True},
        "response_format": {"type": "json_object"},
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "metadata": {"user_id": "u1"},
    }
    tools = [{"type": "function", "function": {"name": "X", "parameters": {"type": "object"}}}]
    body = request_body("claude-haiku-4-5", [{"role": "user", "content": "hi"}], tools, params)
    assert body["stop_sequences"] == ["Observation:"]
    assert body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert (body["temperature"], body["top_k"], body["metadata"]) == (0.2, 5, {"user_id": "u1"})
    for gone in ("stop", "stream_options", "response_format", "parallel_tool_calls"):
        assert gone not in body
    assert to_tool_choice({"type": "function", "function": {"name": "X"}}) == {
        "type": "tool",
        "name": "X",
    }
    assert to_tool_choice("none") == {"type": "none"} and to_tool_choice(None) is None
    no_tools = request_body("claude-haiku-4-5", [{"role": "user", "content": "hi"}], [], params)
    assert "tool_choice" not in no_tools and "tools" not in no_tools


def test_max_tokens_always_sent() -> None:
    msgs = [{"role": "user", "content": "hi"}]
    assert request_body("claude-sonnet-4-5", msgs, [])["max_tokens"] == default_max_tokens(
        "claude-sonnet-4-5"
    )
    assert default_max_tokens("claude-3-5-haiku-20241022") == 8192
    assert default_max_tokens("claude-3-haiku-20240307") == 4096
    assert default_max_tokens("deepseek-chat") == 8192
    assert request_body("claude-opus-5", msgs, [], {"max_tokens": 1000})["max_tokens"] == 1000
    assert (
        request_body("claude-opus-5", msgs, [], {"max_tokens": 1000}, max_tokens=2000)["max_tokens"]
        == 2000
    )
    budget = {"thinking": {"type": "enabled", "budget_tokens": 40000}}
    assert request_body("claude-opus-5", msgs, [], budget)["max_tokens"] > 40000


def test_thinking_off_for_a_tool_turn_another_provider_made() -> None:
    """The API wants the tool turn being continued to begin with its thinking: a turn made by
    another provider has none, so that one request goes without thinking."""
    call = {"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": "{}"}}
    foreign = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    assert "thinking" not in request_body("claude-sonnet-4-5", foreign, [], thinking)
    signed = [{"type": "thinking", "thinking": "t", "signature": "s"}]
    own = [foreign[0], {**foreign[1], "thinking_blocks": signed}, foreign[2]]
    body = request_body("claude-sonnet-4-5", own, [], thinking)
    assert body["thinking"] == thinking["thinking"]
    assert body["messages"][1]["content"][0] == signed[0]
    # a new prompt after a foreign tool loop: thinking stays on
    later = [
        *foreign,
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "more"},
    ]
    assert "thinking" in request_body("claude-sonnet-4-5", later, [], thinking)


def test_thinking_blocks_never_reach_an_openai_compatible_provider() -> None:
    msg = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "X", "arguments": "{}"}}
        ],
        "reasoning_content": "thought",
        "thinking_blocks": [{"type": "thinking", "thinking": "thought", "signature": "sig"}],
    }
    sent = wire_message(msg)
    assert "thinking_blocks" not in sent and sent["reasoning_content"] == "thought"
    assert "thinking_blocks" in msg  # the stored message is not changed
    final = {"role": "assistant", "content": "x", "thinking_blocks": msg["thinking_blocks"]}
    assert wire_message(final) == {"role": "assistant", "content": "x"}


def test_claude_model_aliases() -> None:
    assert claude_model("sonnet") == "claude-sonnet-5"
    assert claude_model("opus") == "claude-opus-5"
    assert claude_model(" Haiku ") == "claude-haiku-4-5"
    assert claude_model("inherit") is None and claude_model(None) is None
    assert claude_model("gpt-4o") is None


# ---- the loop, in process, against the scripted Messages API server ----


def calculator_agent(transport: Any, session_dir: Path) -> Any:
    from agi.engine.loop import Agent
    from agi.sessions.session import Session
    from agi.tools import Toolbox
    from agi.tools.calculate import Calculate

    session = Session.open(session_dir)
    session.lock()
    session.load()
    transport.trace = session.trace
    return Agent(transport, Toolbox([Calculate()]), session, "You are agi, a careful assistant.")


def ask(agent: Any, prompt: str) -> str:
    from agi.messages import drain

    try:
        return drain(agent.run(prompt)).text
    finally:
        agent.session.unlock()


def stored(session_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (session_dir / "messages.jsonl").read_text().splitlines()]


def test_tool_loop_with_thinking_caching_and_signatures(tmp_path: Path) -> None:
    script = (
        anthropic_calls(
            ("calculate", {"expression": "6*7"}),
            thinking="Multiply with the tool.",
            signature="sig-abc+/=",
            usage={"input_tokens": 3, "cache_creation_input_tokens": 2000},
        ),
        anthropic_text("It is 42.", usage={"input_tokens": 20, "cache_read_input_tokens": 2000}),
    )
    thinking = {"type": "enabled", "budget_tokens": 1024}
    with FakeModel(*script) as server:
        transport = transport_for(config(server.url, thinking=thinking))
        agent = calculator_agent(transport, tmp_path / "s")
        answer = ask(agent, "What is 6 times 7?")
    assert answer == "It is 42."
    assert server.paths == ["/v1/messages"] * 2
    first, second = server.requests
    assert first["system"] == [
        {"type": "text", "text": "You are agi, a careful assistant.", "cache_control": CACHE}
    ]
    assert [t["name"] for t in first["tools"]] == ["calculate"]
    assert first["tools"][-1]["cache_control"] == CACHE and "input_schema" in first["tools"][0]
    assert first["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "What is 6 times 7?", "cache_control": CACHE}],
        }
    ]
    assert first["thinking"] == thinking and first["max_tokens"] > 1024 and first["stream"] is True
    # the second step: thinking with its signature first, then tool_use; the result in a user
    # turn, marked for the cache; the earlier prompt is no longer marked
    call_id = second["messages"][1]["content"][1]["id"]
    assert second["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What is 6 times 7?"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "thinking",
                    "thinking": "Multiply with the tool.",
                    "signature": "sig-abc+/=",
                },
                {
                    "type": "tool_use",
                    "id": call_id,
                    "name": "calculate",
                    "input": {"expression": "6*7"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": call_id,
                    "content": "42",
                    "cache_control": CACHE,
                }
            ],
        },
    ]
    # the session keeps the thinking blocks beside the OpenAI-format message
    messages = stored(tmp_path / "s")
    assistant = messages[1]
    assert assistant["tool_calls"][0]["id"] == call_id
    assert assistant["thinking_blocks"] == [
        {"type": "thinking", "thinking": "Multiply with the tool.", "signature": "sig-abc+/="}
    ]
    assert assistant["reasoning_content"] == "Multiply with the tool."
    # usage in agi's terms, and the key is never in the trace
    assert agent.usage.input == (3 + 2000) + (20 + 2000)  # uncached + written, uncached + read
    assert (agent.usage.cached, agent.usage.cache_write) == (2000, 2000)
    trace = (tmp_path / "s" / "trace.jsonl").read_text()
    assert KEY not in trace and '"thinking_blocks"' in trace


def test_session_from_anthropic_continued_with_openai_and_back(tmp_path: Path) -> None:
    session = tmp_path / "s"
    with FakeModel(
        anthropic_calls(("calculate", {"expression": "2+2"}), thinking="Add.", signature="sig-1"),
        anthropic_text("4"),
    ) as server:
        ask(calculator_agent(transport_for(config(server.url)), session), "2+2?")
    with FakeModel(openai_call("calculate", expression="4*4"), openai_text("16")) as server:
        cfg = ModelConfig("openai", "gpt-4o-mini", server.url, "sk-openai")
        assert ask(calculator_agent(Transport(cfg), session), "and 4*4?") == "16"
    for body in server.requests:  # OpenAI never sees the signed thinking
        assert "thinking_blocks" not in json.dumps(body)
        assert body["messages"][0]["role"] == "system"
    first_call = stored(session)[1]["tool_calls"][0]
    assert server.requests[0]["messages"][2]["tool_calls"][0]["id"] == first_call["id"]
    with FakeModel(anthropic_text("Done.")) as server:
        assert (
            ask(calculator_agent(transport_for(config(server.url)), session), "thanks") == "Done."
        )
    turns = server.requests[0]["messages"]
    assert [t["role"] for t in turns] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    # Anthropic's own tool turn gets its signed thinking back; the OpenAI one has none to give
    assert turns[1]["content"][0] == {"type": "thinking", "thinking": "Add.", "signature": "sig-1"}
    assert [b["type"] for b in turns[5]["content"]] == ["tool_use"]
    assert turns[6]["content"][0]["type"] == "tool_result"
    assert turns[8]["content"][-1] == {"type": "text", "text": "thanks", "cache_control": CACHE}


def test_session_from_openai_continued_with_anthropic(tmp_path: Path) -> None:
    session = tmp_path / "s"
    with FakeModel(openai_call("calculate", expression="3*3"), openai_text("9")) as server:
        cfg = ModelConfig("openai", "gpt-4o-mini", server.url, "sk-openai")
        ask(calculator_agent(Transport(cfg), session), "3*3?")
    with FakeModel(anthropic_text("Yes, 9.")) as server:
        cfg = config(server.url, thinking={"type": "enabled", "budget_tokens": 1024})
        assert ask(calculator_agent(transport_for(cfg), session), "sure?") == "Yes, 9."
    body = server.requests[0]
    call = stored(session)[1]["tool_calls"][0]
    assert body["messages"][1]["content"] == [
        {"type": "tool_use", "id": call["id"], "name": "calculate", "input": {"expression": "3*3"}}
    ]
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": call["id"], "content": "9"}
    ]
    assert body["thinking"]["type"] == "enabled"  # a new prompt: thinking stays on


def test_react_sends_stop_sequences() -> None:
    from agi.providers.react import ReactTransport

    with FakeModel(anthropic_text("Thought: easy.\nFinal Answer: 5", reason="end_turn")) as server:
        chat = ReactTransport(transport_for(config(server.url)))
        reply, _ = run(chat, [{"role": "user", "content": "2+3?"}], [])
    assert reply.text == "5"
    assert server.requests[0]["stop_sequences"] == ["Observation:"]
    assert "stop" not in server.requests[0]


def test_schema_forces_an_answer_tool_or_falls_back_to_instructions() -> None:
    from agi.messages import drain
    from agi.structured.schema import ghost_json

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    convo = [{"role": "user", "content": "pick a number"}]
    with FakeModel(anthropic_call("answer", n=7)) as server:
        data = drain(ghost_json(transport_for(config(server.url)), convo, schema, "JSON please"))
    assert data == {"n": 7}
    body = server.requests[0]
    assert body["tool_choice"] == {"type": "tool", "name": "answer"}
    assert body["tools"][0]["name"] == "answer" and body["tools"][0]["input_schema"] == schema
    assert "response_format" not in body
    # thinking cannot be combined with a forced tool: the instructions must do
    with FakeModel(anthropic_text('{"n": 8}', thinking="hmm")) as server:
        cfg = config(server.url, thinking={"type": "enabled", "budget_tokens": 1024})
        assert drain(ghost_json(transport_for(cfg), convo, schema, "JSON please")) == {"n": 8}
    assert "tools" not in server.requests[0] and "response_format" not in server.requests[0]


def test_a_whole_message_from_a_server_ignoring_stream() -> None:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "t", "signature": "s"},
            {"type": "text", "text": "Calling."},
            {"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {"command": "ls"}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 5, "output_tokens": 7},
    }
    with FakeModel(raw(json.dumps(message).encode(), "application/json")) as server:
        reply, _ = run(transport_for(config(server.url)), [{"role": "user", "content": "hi"}])
    assert reply.text == "Calling." and reply.finish_reason == "tool_calls"
    assert [(c.id, c.parse_arguments()) for c in reply.tool_calls] == [
        ("toolu_9", {"command": "ls"})
    ]
    assert reply.thinking_blocks == [{"type": "thinking", "thinking": "t", "signature": "s"}]


def test_events_written_by_hand_stream_as_reasoning_and_text() -> None:
    events = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 1, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "One."},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "text_delta", "text": "Two."},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "max_tokens"},
            "usage": {"output_tokens": 4},
        },
        {"type": "message_stop"},
    ]
    with FakeModel(anthropic_events(events)) as server:
        reply, _ = run(transport_for(config(server.url)), [{"role": "user", "content": "hi"}])
    assert reply.text == "One.\n\nTwo." and reply.finish_reason == "length"


# ---- the real executable ----


def anthropic_env(server: FakeModel) -> dict[str, str]:
    return {
        "ANTHROPIC_API_KEY": KEY,
        "AGI_MODEL": "anthropic:claude-sonnet-4-5",
        "AGI_BASE_URL": server.url,
    }


def test_cli_tool_loop(agi: Any, tmp_path: Path) -> None:
    script = (anthropic_call("calculate", expression="6*7"), anthropic_text("42"))
    with FakeModel(*script) as server:
        base = server.url[: -len("/v1")]
        result = agi(
            "-m",
            "anthropic:claude-sonnet-4-5",
            "--base-url",
            base,
            "-s",
            str(tmp_path / "s"),
            "--tools",
            "calculate",
            "what is 6*7?",
            extra_env={"ANTHROPIC_API_KEY": KEY},
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "42\n"
    assert server.paths == ["/v1/messages"] * 2
    assert {k.lower(): v for k, v in server.headers[0].items()}["x-api-key"] == KEY
    second = server.requests[1]
    assert second["messages"][-1]["content"][-1]["type"] == "tool_result"
    assert second["messages"][-1]["content"][-1]["cache_control"] == CACHE
    assert (
        second["tools"][-1]["cache_control"] == CACHE
        and second["system"][-1]["cache_control"] == CACHE
    )
    assert second["max_tokens"] > 0
    assert KEY not in (tmp_path / "s" / "trace.jsonl").read_text()


def test_cli_error_event_mid_stream_exits_3(agi: Any) -> None:
    with FakeModel(raw(sse_bytes(A / "error_midstream.sse"))) as server:
        result = agi("--no-tools", "hi", extra_env=anthropic_env(server))
    assert result.returncode == 3, result.stderr
    assert "overloaded_error" in result.stderr and result.stdout == ""
    assert len(server.requests) == 1


def test_cli_529_retried(agi: Any) -> None:
    body = json.loads((A / "overloaded_529.response.json").read_text())["body"]
    with FakeModel(status(529, body, {"retry-after": "0"}), anthropic_text("ok")) as server:
        result = agi("--no-tools", "hi", extra_env=anthropic_env(server))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n" and len(server.requests) == 2


def test_cli_react_schema_and_exit_code(agi: Any) -> None:
    with FakeModel(anthropic_text("Final Answer: 5")) as server:
        result = agi("--react", "--no-tools", "2+3?", extra_env=anthropic_env(server))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "5\n" and server.requests[0]["stop_sequences"] == ["Observation:"]
    with FakeModel(anthropic_text("Paris."), anthropic_call("answer", city="Paris")) as server:
        result = agi(
            "--no-tools",
            "--schema",
            "city: str",
            "capital of France?",
            extra_env=anthropic_env(server),
        )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"city": "Paris"}
    assert server.requests[1]["tool_choice"] == {"type": "tool", "name": "answer"}
    verdict = anthropic_call("answer", reason="P=NP is an open problem.", success=False)
    with FakeModel(anthropic_text("I cannot prove it."), verdict) as server:
        result = agi("--no-tools", "--exit-code", "prove P=NP", extra_env=anthropic_env(server))
    assert result.returncode == 1, result.stderr
    assert result.stdout == "I cannot prove it.\n"
    assert server.requests[1]["tool_choice"] == {"type": "tool", "name": "answer"}


def test_cli_session_across_providers(agi: Any, tmp_path: Path) -> None:
    session = str(tmp_path / "s")
    with FakeModel(
        anthropic_calls(("calculate", {"expression": "1+1"}), thinking="Add.", signature="sig-9"),
        anthropic_text("2"),
    ) as server:
        result = agi("-s", session, "--tools", "calculate", "1+1?", extra_env=anthropic_env(server))
    assert result.returncode == 0, result.stderr
    with FakeModel(openai_text("yes")) as server:
        result = agi(
            "-s",
            session,
            "--tools",
            "calculate",
            "sure?",
            extra_env={
                "AGI_MODEL": "openai:gpt-4o-mini",
                "AGI_BASE_URL": server.url,
                "OPENAI_API_KEY": "k",
            },
        )
    assert result.returncode == 0, result.stderr
    assert "thinking_blocks" not in json.dumps(server.requests[0])
    with FakeModel(anthropic_text("bye")) as server:
        result = agi("-s", session, "--tools", "calculate", "ok", extra_env=anthropic_env(server))
    assert result.returncode == 0, result.stderr
    assert server.requests[0]["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "Add.",
        "signature": "sig-9",
    }


def test_cli_task_subagent_with_a_claude_alias(agi: Any, tmp_path: Path) -> None:
    """A subagent file's `model: haiku` under an Anthropic parent is the current Haiku; the
    subagent speaks the Messages API too."""
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "helper.md").write_text(
        "---\nname: helper\ndescription: Answers small questions.\nmodel: haiku\n---\nYou help.\n"
    )
    task = {"description": "ask", "prompt": "say hi", "subagent_type": "helper"}
    script = (
        anthropic_call("Task", **task),
        anthropic_text("hi from helper"),
        anthropic_text("done"),
    )
    with FakeModel(*script) as server:
        result = agi("--agents", str(agents), "delegate", extra_env=anthropic_env(server))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "done\n"
    assert server.paths == ["/v1/messages"] * 3
    assert [r["model"] for r in server.requests] == [
        "claude-sonnet-4-5",
        "claude-haiku-4-5",
        "claude-sonnet-4-5",
    ]
    assert server.requests[1]["system"][0]["text"].startswith("You help.")
    last = server.requests[2]["messages"][-1]["content"][-1]
    assert last["type"] == "tool_result" and "hi from helper" in json.dumps(last)


# ---- Gemini's OpenAI-compatible endpoint ----


def test_cli_gemini_preset_and_empty_tool_call_ids(agi: Any) -> None:
    """`gemini:MODEL` sends GEMINI_API_KEY; the recorded reply's empty tool-call id is replaced
    by a unique one, which the tool result then names."""
    recorded = json.loads((T / "gemini_compat_tool_call_empty_id.response.json").read_text())[
        "body"
    ]
    with FakeModel(
        raw(json.dumps(recorded).encode(), "application/json"), openai_text("It is noon.")
    ) as server:
        result = agi(
            "what time is it?",
            extra_env={
                "AGI_MODEL": "gemini:gemini-2.5-pro",
                "AGI_BASE_URL": server.url,
                "GEMINI_API_KEY": "gm-key",
            },
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "It is noon.\n"
    assert {k.lower(): v for k, v in server.headers[0].items()}["authorization"] == "Bearer gm-key"
    assert server.requests[0]["model"] == "gemini-2.5-pro"
    second = server.requests[1]["messages"]
    call_id = second[-2]["tool_calls"][0]["id"]
    assert call_id and second[-1]["tool_call_id"] == call_id


def test_a_transport_converts_each_message_once_and_nothing_leaks_between_requests() -> None:
    """The memo a transport keeps: the same bodies as without it, blocks converted once (a tool
    loop's step costs what is new, not the whole conversation), no cache marker left on an
    earlier message, a replaced message converted anew, and only the current conversation kept."""
    prompt = {"role": "user", "content": "add them"}
    conversation: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}, prompt]
    memo: dict[int, Any] = {}
    bodies = []
    for i in range(3):
        with_memo = request_body("claude-x", conversation, [], memo=memo)
        assert with_memo == request_body("claude-x", conversation, [])
        bodies.append(with_memo)
        call = {"id": f"t{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        conversation += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"t{i}", "content": str(i)},
        ]
    first, _, last = bodies
    assert first["messages"][0]["content"][0]["cache_control"] == CACHE
    assert last["messages"][0]["content"] == [{"type": "text", "text": "add them"}]
    assert json.dumps(last).count("cache_control") == 2  # the system block and the newest result
    assert last["messages"][-1]["content"][-1] == {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": "1",
        "cache_control": CACHE,
    }
    assert last["messages"][1]["content"][0] is bodies[1]["messages"][1]["content"][0]  # once
    assert len(memo) == len(conversation) - 2  # the last request's conversation, no more
    conversation[1] = {"role": "user", "content": "multiply them"}  # a new message: converted
    again = request_body("claude-x", conversation[:4], [], memo=memo)
    assert again["messages"][0]["content"][0]["text"] == "multiply them"
    assert id(prompt) not in memo and len(memo) == 4
