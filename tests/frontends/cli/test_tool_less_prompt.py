"""The built-in system prompt of a run that offers no tools (docs: prompts): lean, nothing about
tools; under --schema with the server's structured output, none; a user's --sys still wins."""

from __future__ import annotations

from agi.prompts import default_system_prompt

from fakeserver import FakeModel, text

SCHEMA = ("--schema", "kind: enum(sales|support|spam)")


def system_of(body: dict) -> str | None:
    first = body["messages"][0]
    return first["content"] if first["role"] == "system" else None


def test_a_tool_less_run_gets_the_lean_prompt(agi, tmp_path) -> None:
    (tmp_path / "b.md").write_text("Answer in French.")
    with FakeModel(text("Paris")) as server:
        for args in (
            ("--no-tools",),
            ("--tools", ""),
            ("--no-tools", "--sys", "default", "--sys", "b.md"),
            ("--no-tools", "--sys", "b.md"),
            (),
        ):
            assert agi(*args, "--no-stdin", "capital of France?", server=server).returncode == 0
    lean = default_system_prompt(False)
    assert "tool" not in lean.lower() and len(lean) < len(default_system_prompt()) / 4
    systems = [system_of(r) for r in server.requests]
    assert systems[:4] == [lean, lean, lean + "\n\nAnswer in French.", "Answer in French."]
    assert "tools" not in server.requests[0] and "tools" in server.requests[4]
    assert systems[4] == default_system_prompt() and systems[4].startswith("You are agi")


def test_one_call_schema_sends_no_built_in_prompt(agi, tmp_path) -> None:
    (tmp_path / "b.md").write_text("Be strict.")
    with FakeModel(text('{"kind": "spam"}')) as server:
        for extra in ((), ("--sys", "b.md")):
            args = ("--ephemeral", "--no-tools", *SCHEMA, *extra, "--no-stdin", "win a cruise!")
            done = agi(*args, server=server)
            assert (done.returncode, done.stdout.strip()) == (0, '{"kind":"spam"}'), done.stderr
    first, second = server.requests
    assert first["response_format"]["type"] == "json_schema"
    assert [m["role"] for m in first["messages"]] == ["user"]
    assert system_of(second) == "Be strict."  # the user's own prompt is sent
