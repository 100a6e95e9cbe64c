"""Model output nested too deep (bounded input, docs: security): a `--schema` answer, a ReAct
action's input, a tool call's arguments and a provider's stream chunk of `[[[[…` a hundred
thousand deep, or deeper than the hundred levels agi takes apart, are each a clear problem (told to
the model, or one `agi:` line with the documented exit code), never a RecursionError traceback.
The real executable against the scripted server."""

from __future__ import annotations

import json

from fakeserver import FakeModel, _chunk, text

DEEP = "[" * 100_000 + "]" * 100_000
DEEPER_THAN_KEPT = "[" * 300 + "]" * 300  # decodes, but deeper than agi takes apart


def no_traceback(r) -> None:
    assert "Traceback" not in r.stderr and "RecursionError" not in r.stderr, r.stderr[-2000:]


def test_a_schema_answer_nested_too_deep_is_a_schema_failure(agi) -> None:
    for nested in (DEEP, '{"a": ' + DEEPER_THAN_KEPT + "}"):
        with FakeModel(text(nested), text(nested), text(nested)) as server:
            r = agi("--ephemeral", "--no-tools", "--schema", "a: int", "go", server=server)
        no_traceback(r)
        assert r.returncode == 5, r.stderr
        assert "nested too deep" in r.stderr, r.stderr
        assert len(server.requests) == 3  # each reply's problem went back to the model


def test_the_problem_goes_back_and_a_good_answer_wins(agi) -> None:
    with FakeModel(text(DEEP), text('{"a": 1}')) as server:
        r = agi("--ephemeral", "--no-tools", "--schema", "a: int", "go", server=server)
    no_traceback(r)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"a": 1}
    assert "nested too deep" in str(server.requests[1])


def arguments_call(arguments: str) -> dict:
    head = {"index": 0, "id": "c1", "type": "function"}
    frames = [
        _chunk({"role": "assistant", "content": None}),
        _chunk({"tool_calls": [{**head, "function": {"name": "Read", "arguments": arguments}}]}),
        _chunk({}, "tool_calls"),
        b"data: [DONE]\n\n",
    ]
    return {"kind": "sse", "frames": frames, "delay": 0.0}


def test_tool_arguments_and_react_input_nested_too_deep_are_bad_calls(agi) -> None:
    with FakeModel(arguments_call('{"file_path": ' + DEEP + "}"), text("done")) as server:
        r = agi("go", server=server)
    no_traceback(r)
    assert r.returncode == 0 and r.stdout.strip() == "done", r.stderr
    assert "nested" in str(server.requests[1]["messages"][-1])  # the call's error result
    react = 'Action: Read\nAction Input: {"file_path": ' + DEEP + "}"
    with FakeModel(text(react), text("Final Answer: done")) as server:
        r = agi("--react", "go", server=server)
    no_traceback(r)
    assert r.returncode == 0 and r.stdout.strip() == "done", r.stderr


def test_a_stream_chunk_nested_too_deep_is_a_malformed_response(agi) -> None:
    frames = [b"data: " + b"[" * 100_000 + b"\n\n", b"data: [DONE]\n\n"]
    with FakeModel({"kind": "sse", "frames": frames, "delay": 0.0}) as server:
        r = agi("go", server=server)
    no_traceback(r)
    assert r.returncode == 3, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agi: malformed response"), r.stderr
