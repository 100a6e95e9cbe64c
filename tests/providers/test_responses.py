"""OpenAI's Responses API (docs: responses), driven through the real `agi` executable against
the scripted server: its Responses steps (tests/fakeresponses.py, written from OpenAI's API
reference) and real recorded streams (tests/fixtures/responses, see SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES
from fakeresponses import Events, r_call, r_error, r_failed, r_incomplete, r_text, usage
from fakeserver import FakeModel, anthropic_text, raw
from fakeserver import text as chat_text

R = FIXTURES / "responses"


def items(body: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [i for i in body["input"] if i.get("type") == kind]


def output_json(done: Any) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_tool_loop_sends_every_reasoning_item_back_in_place(agi, tmp_path: Path) -> None:
    script = (
        r_call("Bash", {"command": "echo one"}, summary="First, look.", encrypted="ENC-1"),
        r_call("Bash", {"command": "echo two"}, encrypted="ENC-2", text="Now the second."),
        r_text("done: one two", encrypted="ENC-3", used=usage(900, 800, 30, 20)),
    )
    with FakeModel(*script) as server:
        done = agi("-m", "openai:gpt-5.1", "--output", "json", "count", server=server)
    result = output_json(done)
    assert result["answer"] == "done: one two"
    assert server.paths == ["/v1/responses"] * 3
    first, second, third = server.requests
    for body in server.requests:
        assert body["store"] is False and body["stream"] is True
        assert body["include"] == ["reasoning.encrypted_content"]
        assert "previous_response_id" not in body
        assert "messages" not in body and body["instructions"]
        bash = next(t for t in body["tools"] if t["name"] == "Bash")
        assert set(bash) == {"type", "name", "description", "parameters"}
        assert bash["type"] == "function" and bash["parameters"]["type"] == "object"
    assert first["input"] == [{"role": "user", "content": "count"}]
    kinds = [i.get("type") or i["role"] for i in third["input"]]
    assert kinds == [
        "user",
        "reasoning",
        "function_call",
        "function_call_output",
        "reasoning",
        "assistant",
        "function_call",
        "function_call_output",
    ]
    reasoning = items(third, "reasoning")
    assert [r["encrypted_content"] for r in reasoning] == ["ENC-1", "ENC-2"]
    assert reasoning[0]["summary"] == [{"type": "summary_text", "text": "First, look."}]
    assert items(second, "reasoning") == reasoning[:1]
    calls, outputs = items(third, "function_call"), items(third, "function_call_output")
    assert [json.loads(c["arguments"]) for c in calls] == [
        {"command": "echo one"},
        {"command": "echo two"},
    ]
    assert [o["call_id"] for o in outputs] == [c["call_id"] for c in calls]
    assert [o["output"].strip() for o in outputs] == ["one", "two"]
    # usage of the three calls, cached and reasoning tokens included; gpt-5.1's price
    assert result["usage"]["input"] == 40 + 40 + 900
    assert result["usage"]["cached"] == 800
    assert result["usage"]["output"] == 12 + 12 + 30
    assert result["usage"]["reasoning"] == 4 + 4 + 20
    fresh = 40 + 40 + 100
    expected = (fresh * 1.25 + 800 * 0.125 + 54 * 10.0) / 1e6
    assert result["usage"]["cost"] == pytest.approx(expected)


def test_the_session_keeps_the_reasoning_items_and_the_summary(agi, tmp_path: Path) -> None:
    session = tmp_path / "s"
    script = (r_call("Bash", {"command": "true"}, summary="Plan it.", encrypted="ENC-A"),)
    with FakeModel(*script, r_text("ok", reasoning=False)) as server:
        done = agi("-m", "openai:gpt-5.1", "-s", str(session), "go", server=server)
    assert done.returncode == 0, done.stderr
    stored = [json.loads(line) for line in (session / "messages.jsonl").read_text().splitlines()]
    asked = next(m for m in stored if m.get("tool_calls"))
    kept = asked["reasoning_items"]
    assert kept["model"] == "gpt-5.1"
    assert [e["item"]["encrypted_content"] for e in kept["items"]] == ["ENC-A"]
    assert asked["reasoning_content"] == "Plan it."


def test_a_recorded_gpt_5_5_stream_replays_and_its_reasoning_goes_back(agi) -> None:
    """pydantic-ai's cassette of gpt-5.5: a reasoning item (encrypted), commentary text and a
    function call, then the answer; agi sends the reasoning item back unchanged, before the
    call, as the recorded client did."""
    recorded = json.loads((R / "gpt55_reasoning_tool_turn2.request.json").read_text())["body"]
    with FakeModel(
        raw((R / "gpt55_reasoning_tool_turn1.sse").read_bytes()),
        raw((R / "gpt55_reasoning_tool_turn2.sse").read_bytes()),
    ) as server:
        done = agi("-m", "openai:gpt-5.5", "--output", "json", "capital?", server=server)
    result = output_json(done)
    assert result["answer"] == "The capital of PotatoLand is **Potato City**."
    assert result["usage"]["input"] == 63 + 147
    assert result["usage"]["reasoning"] == 26
    sent = server.requests[1]
    mine, theirs = items(sent, "reasoning"), items(recorded, "reasoning")
    assert [r["encrypted_content"] for r in mine] == [r["encrypted_content"] for r in theirs]
    assert [r["id"] for r in mine] == [r["id"] for r in theirs]
    call, recorded_call = items(sent, "function_call")[0], items(recorded, "function_call")[0]
    assert (call["call_id"], call["name"], call["arguments"]) == (
        recorded_call["call_id"],
        recorded_call["name"],
        recorded_call["arguments"],
    )
    order = [i.get("type") or i["role"] for i in sent["input"]]
    assert order.index("reasoning") < order.index("function_call")
    assert items(sent, "function_call_output")[0]["call_id"] == recorded_call["call_id"]


def test_a_recorded_gpt_4o_stream_replays_with_api_responses(agi) -> None:
    with FakeModel(
        raw((R / "gpt4o_tool_turn1.sse").read_bytes()),
        raw((R / "gpt4o_tool_turn2.sse").read_bytes()),
    ) as server:
        done = agi("--api", "responses", "--output", "json", "capital?", server=server)
    result = output_json(done)
    assert server.paths == ["/v1/responses", "/v1/responses"]
    assert result["answer"] == "The capital of France is Paris."
    assert result["usage"]["input"] == 255 + 278 and result["usage"]["output"] == 16 + 9
    assert items(server.requests[1], "function_call")[0]["name"] == "get_capital"
    assert not items(server.requests[1], "reasoning")


@pytest.mark.parametrize(
    ("config", "flags", "path"),
    [
        ("", ("-m", "openai:gpt-5-mini"), "/v1/responses"),
        ("", ("-m", "openai:o4-mini"), "/v1/responses"),
        ("", ("-m", "openai:gpt-4.1"), "/v1/chat/completions"),
        ("", ("-m", "openai:gpt-5.1", "--api", "chat"), "/v1/chat/completions"),
        ('api = "responses"\n', (), "/v1/responses"),
        ('[models."fake-model"]\napi = "responses"\n', (), "/v1/responses"),
        ('[providers.openai]\napi = "responses"\n', (), "/v1/responses"),
        ('[providers.openai]\napi = "chat"\n', ("-m", "openai:gpt-5.1"), "/v1/chat/completions"),
        ('[models."gpt-5.1"]\napi = "chat"\n', ("-m", "gpt-5.1"), "/v1/chat/completions"),
        ('[models."fake-model"]\napi = "responses"\n', ("--api", "chat"), "/v1/chat/completions"),
    ],
)
def test_which_api_a_model_is_spoken_to_in(agi, tmp_path: Path, config, flags, path) -> None:
    (tmp_path / "config.toml").write_text(config)
    step = r_text("hi") if path.endswith("responses") else chat_text("hi")
    with FakeModel(step) as server:
        done = agi(*flags, "--no-tools", "hello", server=server)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hi"
    assert server.paths == [path]


def test_a_bad_api_value_is_a_usage_error(agi, tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[providers.openai]\napi = "grpc"\n')
    with FakeModel(r_text("hi")) as server:
        done = agi("hello", server=server)
    assert done.returncode == 2
    assert done.stderr.startswith("agi: ") and "providers.openai.api" in done.stderr
    assert server.requests == []


def test_the_session_continues_on_chat_completions_and_anthropic(agi, tmp_path: Path) -> None:
    session = tmp_path / "s"
    with FakeModel(
        r_call("Bash", {"command": "echo hi"}, encrypted="ENC-X", summary="Think."),
        r_text("first answer", encrypted="ENC-Y"),
    ) as server:
        done = agi("-m", "openai:gpt-5.1", "-s", str(session), "one", server=server)
    assert done.returncode == 0, done.stderr
    with FakeModel(chat_text("second answer")) as server:
        done = agi("-m", "openai:gpt-4.1", "-s", str(session), "two", server=server)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "second answer"
    messages = server.requests[0]["messages"]
    assert all("reasoning_items" not in m for m in messages)
    assert "ENC-X" not in json.dumps(messages)
    calls = [m for m in messages if m.get("tool_calls")]
    assert len(calls) == 1 and calls[0]["tool_calls"][0]["function"]["name"] == "Bash"
    results = [m for m in messages if m["role"] == "tool"]
    assert [r["tool_call_id"] for r in results] == [calls[0]["tool_calls"][0]["id"]]
    with FakeModel(anthropic_text("third answer")) as server:
        env = {"ANTHROPIC_BASE_URL": server.url.removesuffix("/v1"), "ANTHROPIC_API_KEY": "k"}
        done = agi("-m", "anthropic:claude-sonnet-4-5", "-s", str(session), "three", extra_env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "third answer"
    body = server.requests[0]
    assert server.paths == ["/v1/messages"]
    assert "ENC-X" not in json.dumps(body) and "reasoning_items" not in json.dumps(body)
    roles = [m["role"] for m in body["messages"]]
    assert all(a != b for a, b in zip(roles, roles[1:], strict=False))  # alternating turns
    blocks = [b for m in body["messages"] for b in m["content"]]
    use = [b for b in blocks if b["type"] == "tool_use"]
    result = [b for b in blocks if b["type"] == "tool_result"]
    assert len(use) == 1 and [r["tool_use_id"] for r in result] == [use[0]["id"]]
    # and back on the Responses API with the same model: its own reasoning items return
    with FakeModel(r_text("fourth")) as server:
        done = agi("-m", "openai:gpt-5.1", "-s", str(session), "four", server=server)
    assert done.returncode == 0, done.stderr
    sent = [r["encrypted_content"] for r in items(server.requests[0], "reasoning")]
    assert sent == ["ENC-X", "ENC-Y"]


def test_another_models_reasoning_is_not_sent(agi, tmp_path: Path) -> None:
    session = tmp_path / "s"
    with FakeModel(r_text("a", encrypted="ENC-MINI")) as server:
        assert (
            agi("-m", "openai:gpt-5-mini", "-s", str(session), "x", server=server).returncode == 0
        )
    with FakeModel(r_text("b")) as server:
        done = agi("-m", "openai:gpt-5.1", "-s", str(session), "y", server=server)
    assert done.returncode == 0, done.stderr
    assert not items(server.requests[0], "reasoning")
    assert [i.get("role") for i in server.requests[0]["input"]] == ["user", "assistant", "user"]


def test_a_failed_response_is_retried_then_answered(agi) -> None:
    with FakeModel(
        r_failed("server_error"), r_error("rate_limit_exceeded", "slow"), r_text("ok")
    ) as s:
        done = agi("-m", "openai:gpt-5.1", "--no-tools", "hi", server=s)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert len(s.requests) == 3


def test_an_invalid_prompt_failure_is_exit_3_at_once(agi) -> None:
    with FakeModel(r_failed("invalid_prompt", "Invalid prompt: flagged")) as server:
        done = agi("-m", "openai:gpt-5.1", "--no-tools", "hi", server=server)
    assert done.returncode == 3
    assert done.stderr.startswith("agi: ") and "Invalid prompt: flagged" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert len(server.requests) == 1


def test_an_error_event_fails_the_run_after_the_retries(agi) -> None:
    with FakeModel(r_error("server_error", "upstream went away")) as server:
        done = agi("-m", "openai:gpt-5.1", "--no-tools", "hi", server=server)
    assert done.returncode == 3
    assert "upstream went away" in done.stderr.strip().splitlines()[-1]
    assert len(server.requests) == 3


def test_an_incomplete_response_is_a_length_stop(agi, tmp_path: Path) -> None:
    session = tmp_path / "s"
    with FakeModel(r_incomplete("The answer is cut")) as server:
        done = agi("-m", "openai:gpt-5.1", "--no-tools", "-s", str(session), "hi", server=server)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "The answer is cut"
    trace = [json.loads(line) for line in (session / "trace.jsonl").read_text().splitlines()]
    finished = [r["finish_reason"] for r in trace if r.get("type") == "response"]
    assert finished == ["length"]


def test_max_tokens_is_max_output_tokens(agi, tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("max_tokens = 300\n")
    with FakeModel(r_text("hi")) as server:
        assert agi("-m", "openai:gpt-5.1", "--no-tools", "x", server=server).returncode == 0
    assert server.requests[0]["max_output_tokens"] == 300
    assert "max_tokens" not in server.requests[0]


def test_schema_goes_in_text_format_strict(agi) -> None:
    with FakeModel(r_text("thinking done"), r_text('{"city": "Paris"}')) as server:
        done = agi(
            "-m", "openai:gpt-5.1", "--no-tools", "--schema", "city: str", "x", server=server
        )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"city": "Paris"}
    ghost = server.requests[-1]
    fmt = ghost["text"]["format"]
    assert fmt["type"] == "json_schema" and fmt["strict"] is True
    assert fmt["schema"]["properties"]["city"]["type"] == "string"
    assert "response_format" not in ghost


def test_react_works_over_responses(agi) -> None:
    script = (
        r_text(
            'Thought: look\nAction: Bash\nAction Input: {"command": "echo seen"}', reasoning=False
        ),
        r_text("Final Answer: seen it", reasoning=False),
    )
    with FakeModel(*script) as server:
        done = agi("-m", "openai:gpt-5.1", "--react", "look", server=server)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "seen it"
    assert server.paths == ["/v1/responses", "/v1/responses"]
    assert all("tools" not in body and "stop" not in body for body in server.requests)
    observation = server.requests[1]["input"][-1]
    assert observation["role"] == "user" and "seen" in json.dumps(observation)


def test_events_are_numbered_as_the_reference_says() -> None:
    """The scripted server's own frames: `event:` names the data's `type`; numbers ascend."""
    events = Events()
    events.reasoning("s")
    events.call("Bash", {"command": "ls"})
    step = events.completed()
    seen = []
    for frame in step["frames"]:
        head, data = frame.decode().strip().split("\n")
        body = json.loads(data.removeprefix("data: "))
        assert head == f"event: {body['type']}"
        seen.append(body["sequence_number"])
    assert seen == sorted(seen) == list(range(len(seen)))
