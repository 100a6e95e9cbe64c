"""The SDKs' subagents and setting sources (docs: claude-agent-sdk): `initialize`'s `agents`
are agi's subagents, before the project's agent files of the same name; a field of an
AgentDefinition agi does not honour is an error answer naming it; `--setting-sources project`
is the project's `.claude/` files, and refused where it would read `settings.local.json`
unasked. Driven as the SDKs do it, NDJSON on the real `agi`'s stdin."""

from __future__ import annotations

import json

from fakeserver import FakeModel, call, text

SDK = ("--output-format", "stream-json", "--input-format", "stream-json", "--verbose")
PROJECT_AGENT = "---\nname: reviewer\ndescription: the project's own\n---\nYou are the project's.\n"


def feed(agents: dict) -> str:
    lines = [
        {"type": "control_request", "request_id": "1",
         "request": {"subtype": "initialize", "agents": agents}},
        {"type": "user", "message": {"role": "user", "content": "review it"}},
    ]  # fmt: skip
    return "".join(json.dumps(x) + "\n" for x in lines)


def test_the_sdks_agent_comes_before_the_project_file_of_its_name(agi, tmp_path):
    (tmp_path / ".claude" / "agents").mkdir(parents=True)
    (tmp_path / ".claude" / "agents" / "reviewer.md").write_text(PROJECT_AGENT)
    agents = {"reviewer": {"description": "Reviews code", "prompt": "You review code.",
                           "tools": ["Read"], "model": "sonnet"}}  # fmt: skip
    steps = [call("Task", subagent_type="reviewer", description="review", prompt="look"),
             text("fine"), text("The reviewer says fine.")]  # fmt: skip
    with FakeModel(*steps) as server:
        r = agi(*SDK, "--setting-sources", "project", server=server, input=feed(agents))
    assert r.returncode == 0, r.stderr
    out = [json.loads(x) for x in r.stdout.splitlines()]
    init = next(m for m in out if m.get("subtype") == "init")
    assert init["agents"] == ["reviewer"]
    child = server.requests[1]
    assert child["messages"][0]["content"] == "You review code."  # the SDK's, not the file's
    assert [t["function"]["name"] for t in child["tools"]] == ["Read"]
    assert out[-1]["result"] == "The reviewer says fine."


def test_an_agent_field_agi_does_not_honour_is_an_error_answer(agi, tmp_path):
    agents = {"bg": {"description": "d", "prompt": "p", "permissionMode": "bypassPermissions"}}
    with FakeModel(text("not reached")) as server:
        r = agi(*SDK, server=server, input=feed(agents))
    assert r.returncode != 0 and not server.requests
    answer = json.loads(r.stdout.splitlines()[0])["response"]
    assert answer["subtype"] == "error"
    assert "'bg'" in answer["error"] and "permissionMode" in answer["error"]


def test_project_without_local_is_refused_where_settings_local_json_is(agi, tmp_path):
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.local.json").write_text('{"permissions": {"allow": []}}')
    with FakeModel(text("not reached")) as server:
        r = agi(*SDK, "--setting-sources", "user,project", server=server, input="")
        assert r.returncode == 2
        assert "settings.local.json" in r.stderr and "add local" in r.stderr
        r = agi(*SDK, "--setting-sources", "project,local", server=server, input="")
        assert r.returncode == 0, r.stderr
