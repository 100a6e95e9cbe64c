"""A base URL that speaks another protocol than the provider's: a Messages API model pointed at a
chat completions server (or the other way round) gets chunks it cannot read. That is one clear
provider error (exit 3) after one request, never an empty reply asked again step after step."""

from __future__ import annotations

import pytest

from fakeserver import FakeModel, anthropic_text, ollama_chat, text


def test_a_messages_model_against_a_chat_completions_server_fails_at_once(agi):
    with FakeModel(*[text("hello")] * 5) as server:
        base = server.url.removesuffix("/v1")
        r = agi("-m", "anthropic:claude-sonnet-4-5", "--base-url", base, "--no-tools", "hi",
                extra_env={"ANTHROPIC_API_KEY": "sk-ant-test"})  # fmt: skip
    assert r.returncode == 3, r.stderr
    assert r.stdout == ""
    assert len(server.requests) == 1
    line = r.stderr.strip().splitlines()[-1]
    assert "not a Messages API stream" in line and "base URL" in line, line


@pytest.mark.parametrize(
    ("args", "protocol"),
    [([], "not a chat completions stream"), (["--api", "responses"], "not a Responses API")],
)
def test_an_openai_model_against_a_messages_server_fails_at_once(agi, args, protocol):
    with FakeModel(*[anthropic_text("hello")] * 5) as server:
        r = agi(*args, "--no-tools", "hi", server=server)
    assert r.returncode == 3, r.stderr
    assert r.stdout == ""
    assert len(server.requests) == 1
    assert protocol in r.stderr, r.stderr


def test_a_chat_model_against_an_ollama_server_fails_and_ollama_reads_its_own(agi):
    with FakeModel(ollama_chat("hello")) as server:
        r = agi("--no-tools", "hi", server=server)
    assert r.returncode == 3, r.stderr
    assert "malformed response from the provider" in r.stderr  # NDJSON is not one JSON body
    assert len(server.requests) == 1
    with FakeModel(ollama_chat("hello")) as server:
        base = server.url.removesuffix("/v1")
        r = agi("-m", "ollama:qwen3", "--base-url", base, "--no-tools", "hi")
    assert (r.returncode, r.stdout) == (0, "hello\n"), r.stderr


def test_a_stream_of_the_protocol_without_text_is_still_an_empty_reply_not_this_error():
    """Only a stream with none of the protocol's chunks is refused: a chat stream whose chunks
    carry nothing but usage is the protocol's own (its empty reply is judged elsewhere)."""
    from agi.providers.chat import ChatAssembler

    asm = ChatAssembler()
    asm.feed({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 0}}, "")
    reply = asm.finish()
    assert (reply.text, reply.tool_calls) == ("", [])
    assert reply.usage is not None and reply.usage.input == 3
