"""Under include_partial_messages each reply's `stream_event`s are a Messages API stream
(docs: claude-agent-sdk): message_start, its content blocks (text, then every tool_use), then
message_delta with the reply's stop_reason ("tool_use" or "end_turn") and usage, and
message_stop — before the tool results. The Python SDK is the client."""

from __future__ import annotations

import asyncio

import pytest
from claude_agent_sdk import ResultMessage, StreamEvent, UserMessage
from test_sdk_python import collect, options

from fakeserver import FakeModel, calls, text

pytestmark = pytest.mark.timeout(120)


def test_each_reply_streams_as_a_whole_message_ending_with_its_stop_reason(env, tmp_path):
    (tmp_path / "a.txt").write_text("A\n")
    (tmp_path / "b.txt").write_text("B\n")
    reads = [("Read", {"file_path": "a.txt"}), ("Read", {"file_path": "b.txt"})]
    with FakeModel(calls(*reads, content="reading"), text("both read")) as server:
        opts = options(env, server, tmp_path, include_partial_messages=True)
        got = asyncio.run(asyncio.wait_for(collect("read them", opts), 60))
    assert isinstance(got[-1], ResultMessage) and got[-1].result == "both read"
    seen: list[str] = []  # the stream events in order, and "result" where a tool result came
    for m in got:
        if isinstance(m, StreamEvent):
            e = m.event
            kind = e["type"]
            if kind == "content_block_start":
                kind += ":" + e["content_block"]["type"]
            if kind == "message_delta":
                kind += ":" + e["delta"]["stop_reason"]
                assert e["usage"]["input_tokens"] == 10 and e["usage"]["output_tokens"] == 5
            seen.append(kind)
        elif isinstance(m, UserMessage) and not isinstance(m.content, str):
            seen.append("result")
    first = seen.index("message_stop")
    assert seen[0] == "message_start"
    assert seen[: first + 1].count("content_block_start:tool_use") == 2
    assert seen[first - 1] == "message_delta:tool_use"
    assert seen.count("result") == 2 and seen.index("result") > first
    rest = seen[first + 1 :]
    rest = rest[rest.index("message_start") :]
    assert rest[1] == "content_block_start:text"
    assert rest[-2:] == ["message_delta:end_turn", "message_stop"]
    assert seen.count("message_start") == seen.count("message_stop") == 2
