"""`--schema` in one model call (docs: volume): an ephemeral run that offers no tools sends the
schema with its first request, counted on the scripted server's recorded requests; a refused
form of structured output is learnt once per process; runs with a session or tools keep the
ghost exchange."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fakeserver import FakeModel, status, text

SPEC = "kind: enum(sales|support|spam)"
ONE = ("--ephemeral", "--no-tools", "--schema", SPEC)


def users(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def refusing(*refused: str, answer: str = '{"kind": "spam"}'):
    """A server that refuses the response_format types in `refused` (json_object_schema is a
    json_object with a schema) with a 400 naming response_format, and answers otherwise."""

    def step(body: dict[str, Any]) -> dict[str, Any]:
        fmt = body.get("response_format")
        kind = None
        if fmt is not None:
            kind = fmt["type"] + ("_schema" if "schema" in fmt else "")
        if kind in refused:
            return status(400, {"error": {"message": f"response_format {kind} is not supported"}})
        return text(answer)

    return step


def test_one_request_carries_the_schema_and_its_reply_is_the_answer(agi) -> None:
    with FakeModel(text('{"kind": "spam"}')) as server:
        r = agi(*ONE, "--output", "json", "BUY CHEAP PILLS NOW", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    result = json.loads(r.stdout)
    assert result["answer"] == {"kind": "spam"} and result["steps"] == 1
    assert result["usage"]["input"] == 10  # one call's tokens
    assert len(server.requests) == 1
    (body,) = server.requests
    assert body["response_format"]["type"] == "json_schema"
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["kind"]["enum"] == ["sales", "support", "spam"]
    assert users(body) == ["BUY CHEAP PILLS NOW"]  # the server enforces it: no instruction
    assert body.get("tools") in (None, [])


def test_the_text_output_is_the_json(agi) -> None:
    with FakeModel(text('{"kind": "support"}')) as server:
        r = agi(*ONE, "my printer is broken", server=server)
    assert (r.returncode, r.stdout) == (0, '{"kind":"support"}\n')
    assert len(server.requests) == 1


def test_an_invalid_reply_costs_the_attempts(agi) -> None:
    """An invalid reply is answered with its problem (a second call); three invalid: exit 5."""
    with FakeModel(text('{"kind": "ham"}'), text('{"kind": "sales"}')) as server:
        fixed = agi(*ONE, "--output", "json", "quote please", server=server)
    assert fixed.returncode == 0, fixed.stderr
    assert json.loads(fixed.stdout)["answer"] == {"kind": "sales"}
    assert json.loads(fixed.stdout)["steps"] == 2
    assert len(server.requests) == 2
    second = server.requests[1]
    assert second["messages"][-2] == {"role": "assistant", "content": '{"kind": "ham"}'}
    assert "$.kind" in second["messages"][-1]["content"]
    with FakeModel(text("no idea")) as server:
        failed = agi(*ONE, "quote please", server=server)
    assert failed.returncode == 5
    assert failed.stderr.startswith("agi: no valid JSON after 3 attempts")
    assert failed.stderr.count("\n") == 1
    assert len(server.requests) == 3


def test_weaker_forms_add_the_instruction_to_that_request_only(agi, tmp_path: Path) -> None:
    """A server that takes no response_format at all: the first job pays the refusals, and the
    process remembers them, so every later job of the batch is one call whose request ends
    with the schema instruction."""
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("".join(json.dumps({"id": i, "prompt": f"mail {i}"}) + "\n" for i in range(4)))
    with FakeModel(refusing("json_schema", "json_object_schema", "json_object")) as server:
        r = agi("--batch", str(jobs), "--jobs", "1", *ONE, server=server)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert [x["answer"] for x in lines] == [{"kind": "spam"}] * 4
    assert len(server.requests) == 3 + 4  # three refusals, then one call per job
    answered = [b for b in server.requests if "response_format" not in b]
    assert len(answered) == 4
    for body in answered:
        prompt, instruction = users(body)
        assert prompt.startswith("mail ")
        assert '"enum"' in instruction and "JSON" in instruction


def test_a_grammar_form_sends_the_prompt_alone(agi) -> None:
    """json_object with the schema (llama.cpp's grammar) is enforced: no instruction added."""
    with FakeModel(refusing("json_schema")) as server:
        r = agi(*ONE, "hello there", server=server)
    assert r.returncode == 0, r.stderr
    assert len(server.requests) == 2
    last = server.requests[-1]
    assert last["response_format"]["type"] == "json_object" and "schema" in last["response_format"]
    assert users(last) == ["hello there"]


def test_runs_with_a_session_or_tools_keep_the_ghost_exchange(agi, tmp_path: Path) -> None:
    """Without --ephemeral, or with tools offered: the answer, then the ghost request."""
    script = (text("It is spam."), text('{"kind": "spam"}'))
    for args in (
        ("--no-tools", "--schema", SPEC),
        ("--ephemeral", "--schema", SPEC),
        ("-s", str(tmp_path / "kept"), "--no-tools", "--schema", SPEC),
    ):
        with FakeModel(*script) as server:
            r = agi(*args, "classify: win a prize", server=server)
        assert (r.returncode, r.stdout) == (0, '{"kind":"spam"}\n'), (args, r.stderr)
        assert len(server.requests) == 2, args
        assert "response_format" not in server.requests[0]


def test_exit_code_still_judges_after_the_one_call(agi) -> None:
    judged = text('{"reason": "classified", "success": true}')
    with FakeModel(text('{"kind": "sales"}'), judged) as server:
        r = agi(*ONE, "--exit-code", "--output", "json", "price list?", server=server)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["answer"] == {"kind": "sales"} and result["exit_code"] == 0
    assert len(server.requests) == 2
    assert server.requests[1]["messages"][2] == {
        "role": "assistant",
        "content": '{"kind": "sales"}',
    }


def test_anthropic_and_the_responses_api_answer_in_one_call_too(agi, tmp_path: Path) -> None:
    """The Messages API's form is a forced answer tool; the Responses API's `text.format`."""
    from fakeresponses import r_text
    from fakeserver import anthropic_call

    keys = {"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k"}
    with FakeModel(anthropic_call("answer", kind="spam")) as server:
        r = agi(*ONE, "-m", "anthropic:claude-sonnet-4-5", "buy now", server=server, extra_env=keys)
    assert (r.returncode, r.stdout) == (0, '{"kind":"spam"}\n'), r.stderr
    (body,) = server.requests
    assert [t["name"] for t in body["tools"]] == ["answer"]
    assert body["tool_choice"] == {"type": "tool", "name": "answer"}
    with FakeModel(r_text('{"kind": "sales"}')) as server:
        r = agi(*ONE, "-m", "openai:gpt-5-mini", "price?", server=server, extra_env=keys)
    assert (r.returncode, r.stdout) == (0, '{"kind":"sales"}\n'), r.stderr
    assert server.paths == ["/v1/responses"]
    assert server.requests[0]["text"]["format"]["type"] == "json_schema"
