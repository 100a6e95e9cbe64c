"""docs: acp point by point, where tests/frontends/acp/test_acp*.py left a point unproven: each test
drives `agi --acp` through the `acp` library's client connection (tests/acp_client.py), and
every message agi sends is checked against the official v1 schema."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from acp_client import Agent, Recorder, acp, agi_argv, run, wait_for

from conftest import AGI
from fakeserver import FakeModel, call, calls, hang, status, text

pytestmark = pytest.mark.timeout(180)
SUMMARY_MARK = "Summarise the conversation above for an assistant"


def fake_env(env: dict[str, str], server: FakeModel) -> dict[str, str]:
    return {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


class Raw(Agent):
    """The client connection, also keeping every message agi sent as it was on the wire."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.raw: list[dict[str, Any]] = []

    def _observe(self, event: Any) -> None:
        if event.direction.value == "incoming":
            self.raw.append(event.message)
        super()._observe(event)

    def result(self, request_id: Any) -> dict[str, Any]:
        return next(m["result"] for m in self.raw if m.get("id") == request_id and "result" in m)


def by_title(client: Recorder, sid: str) -> dict[str, dict]:
    return {u["title"]: u for u in client.of(sid, "tool_call")}


def allowed(client: Recorder, sid: str) -> dict[str, dict]:
    """The in_progress tool_call_update of each call let run (a Write's or Edit's diff)."""
    return {
        u["toolCallId"]: u
        for u in client.of(sid, "tool_call_update")
        if u.get("status") == "in_progress"
    }


def ends(client: Recorder, sid: str) -> dict[str, dict]:
    """The closing tool_call_update of each call."""
    return {
        u["toolCallId"]: u
        for u in client.of(sid, "tool_call_update")
        if u.get("status") in ("completed", "failed")
    }


# --- initialize ----------------------------------------------------------------------------


def test_initialize_answers_the_contracts_capabilities_on_both_paths(env, tmp_path):
    """The first line is answered before the library has loaded; an `initialize` that is not
    the first line goes through the library. Both say exactly the same."""
    from agi import __version__

    expected = {
        "protocolVersion": 1,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"embeddedContext": True, "image": True},
            "mcpCapabilities": {"http": True, "sse": True},
            "sessionCapabilities": {"list": {}},
        },
        "agentInfo": {"name": "agi", "title": "agi", "version": __version__},
        "authMethods": [],
    }

    def meaningful(value: Any) -> Any:  # a false/empty default says nothing
        if isinstance(value, dict):
            kept = {k: meaningful(v) for k, v in value.items() if v not in (False, None)}
            return {k: v for k, v in kept.items() if v != {} or k == "list"}
        return value

    async def go(server: FakeModel, first: bool) -> dict[str, Any]:
        client = Recorder()
        async with Raw(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            if not first:
                await agent.conn._conn.send_notification("_agi/hello", {})
            await agent.conn.initialize(protocol_version=1)
            answer = next(
                m["result"] for m in agent.raw if "protocolVersion" in m.get("result", {})
            )
            await agent.close()
            agent.assert_valid()
        return answer

    with FakeModel() as server:
        fast = run(go(server, True))
        library = run(go(server, False))
    assert fast == expected
    assert meaningful(library) == expected


# --- session/new: modes, configOptions, commands, usage ----------------------------------------


def test_the_model_select_names_every_configured_model_and_usage_has_window_and_cost(env, tmp_path):
    Path(env["AGI_CONFIG"]).write_text(
        "context_window = 32768\n"
        '[models."ollama:qwen3"]\ncontext_window = 40960\n'
        '[models."bare-model"]\ncontext_window = 1000\n'
        '[prices."openai:fake-model"]\ninput = 1.0\noutput = 2.0\n'
        '[prices."anthropic:claude-x"]\ninput = 1.0\noutput = 2.0\n'
        '[prices."ollama:qwen3"]\ninput = 0\noutput = 0\n'
    )

    async def go(server: FakeModel) -> None:
        client = Recorder()
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            await agent.conn.initialize(protocol_version=1)
            new = await agent.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            sid = new.session_id
            model = next(o for o in new.config_options if o.id == "model")
            assert model.current_value == "openai:fake-model"
            assert [o.value for o in model.options] == [
                "openai:fake-model",
                "ollama:qwen3",
                "openai:bare-model",
                "anthropic:claude-x",
            ]
            mode = next(o for o in new.config_options if o.id == "mode")
            assert mode.current_value == "default"
            assert [o.value for o in mode.options] == [
                "default",
                "acceptEdits",
                "plan",
                "bypassPermissions",
            ]
            await agent.prompt(sid, "hi")
            await agent.close()
            agent.assert_valid()
        usage = client.of(sid, "usage_update")[-1]
        assert usage["size"] == 32768 and usage["used"] == 15
        assert usage["cost"] == {"amount": 0.00002, "currency": "USD"}

    with FakeModel(text("hello")) as server:
        run(go(server))


def test_available_commands_list_plugins_commands_and_compact_after_session_new(env, tmp_path):
    plugin = tmp_path / "plugin"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text('{"name": "demo"}')
    (plugin / "commands").mkdir()
    (plugin / "commands" / "greet.md").write_text("---\ndescription: Greet\n---\nGreet $1\n")
    commands = Path(env["AGI_CONFIG"]).parent / "commands"
    commands.mkdir()
    (commands / "mine.md").write_text("---\ndescription: Mine\n---\nDo mine\n")

    async def go(server: FakeModel) -> None:
        client = Recorder()
        argv = agi_argv(AGI, "--plugin-dir", str(plugin))
        async with Raw(argv, fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            listed = await wait_for(lambda: client.of(sid, "available_commands_update"))
            names = {c["name"]: c for c in listed[0]["availableCommands"]}
            assert {"compact", "demo:greet", "mine"} <= set(names)
            assert names["demo:greet"]["description"] == "Greet"
            # the update follows the session/new response on the wire
            new_at = next(i for i, m in enumerate(agent.raw) if "sessionId" in m.get("result", {}))
            update_at = next(
                i
                for i, m in enumerate(agent.raw)
                if m.get("method") == "session/update"
                and m["params"]["update"]["sessionUpdate"] == "available_commands_update"
            )
            assert new_at < update_at
            await agent.prompt(sid, "/demo:greet Ann")
            await agent.close()
            agent.assert_valid()
        assert server.requests[0]["messages"][-1]["content"] == "Greet Ann"

    with FakeModel(text("hello Ann")) as server:
        run(go(server))


# --- tool calls as the editor sees them ------------------------------------------------------


def test_each_tools_kind_title_locations_and_raw_input(env, tmp_path):
    (tmp_path / "f.txt").write_text("1\n2\n3\n")
    tool = tmp_path / "bin" / "shout"
    tool.parent.mkdir()
    desc = json.dumps({"name": "shout", "description": "shout", "parameters": {"type": "object"}})
    tool.write_text(f"#!/bin/sh\n[ \"$1\" = --describe ] && echo '{desc}' && exit 0\necho HEY\n")
    tool.chmod(0o755)
    specs = [
        ("Read", {"file_path": "f.txt", "offset": 2}),
        ("Write", {"file_path": "w.txt", "content": "w\n"}),
        ("Edit", {"file_path": str(tmp_path / "f.txt"), "old_string": "2", "new_string": "two"}),
        ("Bash", {"command": "echo hi"}),
        ("Terminal", {"action": "start", "command": "echo term", "id": "t1", "wait_ms": 500}),
        ("calculate", {"expression": "2+3"}),
        ("shout", {}),
    ]

    def step(body: dict) -> dict:
        last = body["messages"][-1]
        if last["role"] == "user" and "SUBTASK" in str(last["content"]):
            return text("sub done")
        if last["role"] == "tool":
            if len(tool_results(body)) == len(specs):
                return call("Task", description="look", prompt="SUBTASK")
            return text("all done")
        return calls(*specs)

    async def go(server: FakeModel) -> None:
        client = Recorder()
        argv = agi_argv(AGI, "--permission-mode", "bypassPermissions", "--tool", str(tool))
        async with Agent(argv, fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            assert (await agent.prompt(sid, "every tool")).stop_reason == "end_turn"
            await agent.close()
            agent.assert_valid()
        starts = {u["title"].split()[0].rstrip(":"): u for u in client.of(sid, "tool_call")}
        kinds = {name: u["kind"] for name, u in starts.items()}
        assert kinds == {
            "Read": "read",
            "Write": "edit",
            "Edit": "edit",
            "Bash": "execute",
            "Terminal": "execute",
            "calculate": "think",
            "shout": "other",
            "Task": "think",
        }
        for name, input in specs:
            assert starts[name]["rawInput"] == input
            assert starts[name]["status"] == "pending"
        assert starts["Read"]["locations"] == [{"path": str(tmp_path / "f.txt"), "line": 2}]
        assert starts["Write"]["locations"] == [{"path": str(tmp_path / "w.txt")}]
        assert starts["Read"]["title"] == f"Read {tmp_path / 'f.txt'}"
        assert starts["Bash"]["title"] == "Bash: echo hi"
        assert starts["Task"]["title"] == "Task: look"
        closed = ends(client, sid)
        for u in starts.values():
            assert closed[u["toolCallId"]]["status"] == "completed", u
        result = closed[starts["shout"]["toolCallId"]]["content"][-1]["content"]["text"]
        assert result == "HEY"
        progress = [
            u["toolCallId"]
            for u in client.of(sid, "tool_call_update")
            if u.get("status") == "in_progress"
        ]
        assert set(progress) == {u["toolCallId"] for u in starts.values()}

    with FakeModel(step) as server:
        run(go(server))


def test_every_write_and_edit_carries_its_diff_whatever_the_mode(env, tmp_path):
    old = tmp_path / "old.txt"
    old.write_text("a a a\n")
    kept = tmp_path / "kept.txt"
    kept.write_text("before\n")
    first = calls(
        ("Write", {"file_path": str(tmp_path / "new.txt"), "content": "new\n"}),
        ("Write", {"file_path": str(kept), "content": "after\n"}),
        (
            "Edit",
            {"file_path": str(old), "old_string": "a", "new_string": "b", "replace_all": True},
        ),
    )
    second = calls(("Edit", {"file_path": str(kept), "old_string": "after", "new_string": "x"}))

    async def go(server: FakeModel) -> None:
        client = Recorder()
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            await agent.conn.set_session_mode(session_id=sid, mode_id="bypassPermissions")
            await agent.prompt(sid, "write")
            await agent.conn.set_session_mode(session_id=sid, mode_id="acceptEdits")
            await agent.prompt(sid, "edit")
            await agent.close()
            agent.assert_valid()
        assert not client.asked
        starts = client.of(sid, "tool_call")
        let_run = allowed(client, sid)  # the diff is read once the call may run
        diffs = [let_run[u["toolCallId"]]["content"] for u in starts]
        assert diffs == [
            [{"type": "diff", "path": str(tmp_path / "new.txt"), "newText": "new\n"}],
            [{"type": "diff", "path": str(kept), "oldText": "before\n", "newText": "after\n"}],
            [{"type": "diff", "path": str(old), "oldText": "a a a\n", "newText": "b b b\n"}],
            [{"type": "diff", "path": str(kept), "oldText": "after\n", "newText": "x\n"}],
        ]
        previews = [u.get("content") for u in starts]  # from the input alone: nothing read
        assert previews == [
            [{"type": "diff", "path": str(tmp_path / "new.txt"), "newText": "new\n"}],
            None,  # a Write over a file: its old text is not read before the call may run
            [{"type": "diff", "path": str(old), "oldText": "a", "newText": "b"}],
            [{"type": "diff", "path": str(kept), "oldText": "after", "newText": "x"}],
        ]
        closed = ends(client, sid)
        for start, diff in zip(starts, diffs, strict=True):
            end = closed[start["toolCallId"]]
            assert end["status"] == "completed" and end["content"][0] == diff[0]
        assert kept.read_text() == "x\n" and old.read_text() == "b b b\n"

    with FakeModel(first, text("written"), second, text("edited")) as server:
        run(go(server))


# --- permissions -----------------------------------------------------------------------------


def test_always_answers_are_claude_code_rules_that_last_the_session(env, tmp_path):
    """`npm run build` gives Bash(npm run:*), `echo hi` Bash(echo:*), Write `Write`; the rules
    hold for the rest of the session, in the session directory, loaded again by a new agi."""
    target = tmp_path / "w.txt"
    answers = {"Bash: npm run build": "allow_always", "Bash: echo hi": "allow_always"}
    answers[f"Write {target}"] = "allow_always"
    answers["Bash: rm -f nothing"] = "reject_always"

    def answer(request: dict) -> str:
        return answers.get(request["toolCall"]["title"], "reject_once")

    async def first(server: FakeModel) -> str:
        client = Recorder(answer=answer)
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            await agent.prompt(sid, "first")
            await agent.prompt(sid, "second")
            await agent.close()
            agent.assert_valid()
        assert sorted(r["toolCall"]["title"] for r in client.asked) == sorted(answers)
        return sid

    with FakeModel(
        calls(
            ("Bash", {"command": "npm run build"}),
            ("Bash", {"command": "echo hi"}),
            ("Write", {"file_path": str(target), "content": "one\n"}),
            ("Bash", {"command": "rm -f nothing"}),
        ),
        text("ok"),
        calls(
            ("Bash", {"command": "npm run test"}),
            ("Bash", {"command": "echo again --flag"}),
            ("Write", {"file_path": str(target), "content": "three\n"}),
            ("Bash", {"command": "rm -f other"}),
        ),
        text("ok"),
    ) as server:
        sid = run(first(server))
        second_results = tool_results(server.requests[3])[-4:]
    rules = json.loads((Path(sid) / "settings.json").read_text())
    assert set(rules) == {"permissions"}  # the calls of one step may ask in any order
    assert sorted(rules["permissions"]["allow"]) == ["Bash(echo:*)", "Bash(npm run:*)", "Write"]
    assert rules["permissions"]["deny"] == ["Bash(rm:*)"]
    assert "denied" not in " ".join(second_results[:3]) and "denied" in second_results[3]
    assert target.read_text() == "three\n"

    async def again(server: FakeModel) -> None:
        client = Recorder(answer="reject_once")
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            await agent.conn.initialize(protocol_version=1)
            await agent.conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            await agent.prompt(sid, "third")
            await agent.close()
            agent.assert_valid()
        assert client.asked == []  # every call was decided by the session's rules

    with FakeModel(
        calls(
            ("Bash", {"command": "echo third"}),
            ("Write", {"file_path": str(target), "content": "five\n"}),
            ("Bash", {"command": "rm -rf third"}),
        ),
        text("ok"),
    ) as server:
        run(again(server))
        results = tool_results(server.requests[-1])[-3:]
    assert results[0] == "third" and "denied" in results[2]
    assert target.read_text() == "five\n"


def test_accept_edits_asks_outside_the_working_directory_and_for_commands(env, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "in.txt").write_text("in\n")
    outside = tmp_path / "outside.txt"

    async def go(server: FakeModel) -> None:
        client = Recorder(answer="reject_once")
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start(cwd=work)
            await agent.conn.set_config_option(
                config_id="mode", session_id=sid, value="acceptEdits"
            )
            assert client.of(sid, "current_mode_update")[-1]["currentModeId"] == "acceptEdits"
            await agent.prompt(sid, "edit")
            await agent.close()
            agent.assert_valid()
        asked = {r["toolCall"]["title"]: r["toolCall"] for r in client.asked}  # in any order
        assert sorted(asked) == ["Bash: echo hi", f"Write {outside}"]
        assert asked[f"Write {outside}"]["content"][0]["type"] == "diff"  # a new file: its text
        results = tool_results(server.requests[-1])
        assert results[0].startswith("Edited") and "said no" in results[1]
        assert (work / "in.txt").read_text() == "out\n" and not outside.exists()

    with FakeModel(
        calls(
            ("Edit", {"file_path": str(work / "in.txt"), "old_string": "in", "new_string": "out"}),
            ("Write", {"file_path": str(outside), "content": "x\n"}),
            ("Bash", {"command": "echo hi"}),
        ),
        text("done"),
    ) as server:
        run(go(server))


def test_default_mode_asks_for_terminals_and_user_tools_not_for_what_changes_nothing(env, tmp_path):
    tool = tmp_path / "shout"
    desc = json.dumps({"name": "shout", "description": "shout", "parameters": {"type": "object"}})
    tool.write_text(f"#!/bin/sh\n[ \"$1\" = --describe ] && echo '{desc}' && exit 0\necho HEY\n")
    tool.chmod(0o755)
    (tmp_path / "r.txt").write_text("r\n")

    async def go(server: FakeModel) -> None:
        client = Recorder(answer="reject_once")
        argv = agi_argv(AGI, "--tool", str(tool))
        async with Agent(argv, fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            await agent.prompt(sid, "go")
            await agent.close()
            agent.assert_valid()
        kinds = sorted(r["toolCall"]["kind"] for r in client.asked)
        assert kinds == ["execute", "other"]
        failed = [u for u in ends(client, sid).values() if u["status"] == "failed"]
        assert len(failed) == 2
        results = tool_results(server.requests[-1])
        assert "r" in results[0] and results[1] == "5"

    with FakeModel(
        calls(
            ("Read", {"file_path": str(tmp_path / "r.txt")}),
            ("calculate", {"expression": "2+3"}),
            ("Terminal", {"action": "start", "command": "echo term"}),
            ("shout", {}),
        ),
        text("done"),
    ) as server:
        run(go(server))


# --- sessions --------------------------------------------------------------------------------


def test_session_list_with_and_without_cwd_and_the_shell_sees_acp_sessions(agi, env, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()

    async def go(server: FakeModel) -> tuple[str, str]:
        client = Recorder()
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            a = await agent.start(cwd=one)
            await agent.prompt(a, "in one")
            b = (await agent.conn.new_session(cwd=str(two), mcp_servers=[])).session_id
            await agent.prompt(b, "in two")
            everything = await agent.conn.list_sessions()
            ids = [s.session_id for s in everything.sessions]
            assert set(ids) >= {a, b}
            cwds = {s.session_id: s.cwd for s in everything.sessions}
            assert cwds[a] == str(one) and cwds[b] == str(two)
            only = await agent.conn.list_sessions(cwd=str(two))
            assert [s.session_id for s in only.sessions] == [b]
            await agent.close()
            agent.assert_valid()
        return a, b

    with FakeModel(text("1"), text("2")) as server:
        a, b = run(go(server))
    shown = agi("--show", a)
    assert shown.returncode == 0 and "in one" in shown.stdout
    with FakeModel(text("forked")) as server:
        forked = agi("--fork", a, "and then", server=server)
    assert forked.returncode == 0 and forked.stdout.strip() == "forked"
    sent = server.requests[0]["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["in one", "and then"]


def test_compaction_is_announced(env, tmp_path):
    Path(env["AGI_CONFIG"]).write_text("context_window = 8000\ncompact_threshold = 0.8\n")
    big = "word " * 2400  # 12 kB: two of them pass 80 % of the window

    def step(body: dict) -> dict:
        if SUMMARY_MARK in json.dumps(body["messages"][-1]):
            return text("SUMMARY: a long text was read")
        return text("read it")

    async def go(server: FakeModel) -> None:
        client = Recorder()
        argv = agi_argv(AGI, "--no-tools")
        async with Agent(argv, fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            await agent.prompt(sid, "first " + big)
            assert not client.of(sid, "agent_thought_chunk")
            assert (await agent.prompt(sid, "second " + big)).stop_reason == "end_turn"
            await agent.close()
            agent.assert_valid()
        assert any(SUMMARY_MARK in json.dumps(b["messages"][-1]) for b in server.requests)
        assert "compacting the conversation" in client.text(sid, "agent_thought_chunk")
        assert client.text(sid).endswith("read it")

    with FakeModel(step) as server:
        run(go(server))


# --- failures --------------------------------------------------------------------------------


def test_a_failure_is_agis_one_line_as_a_jsonrpc_error(agi, env, tmp_path):
    body = {"error": {"message": "the model is\nnot\tthere"}}
    with FakeModel(status(404, body)) as server:
        r = agi("hi", server=server)
    assert r.returncode == 3 and r.stderr.startswith("agi: ")
    line = r.stderr.strip().removeprefix("agi: ")

    async def go(server: FakeModel) -> None:
        client = Recorder()
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            with pytest.raises(acp.RequestError) as failed:
                await agent.prompt(sid, "hi")
            assert failed.value.args[0] == line
            assert failed.value.code == -32603
            assert (await agent.prompt(sid, "again")).stop_reason == "end_turn"
            await agent.close()
            agent.assert_valid()

    with FakeModel(status(404, body), text("back")) as server:
        run(go(server))


def test_max_cost_is_a_budget_a_model_change_does_not_reset(env, tmp_path):
    Path(env["AGI_CONFIG"]).write_text(
        '[prices."openai:fake-model"]\ninput = 1000000.0\noutput = 0\n'
        '[prices."openai:other-model"]\ninput = 1000000.0\noutput = 0\n'
    )

    async def go(server: FakeModel) -> None:
        client = Recorder()
        argv = agi_argv(AGI, "--max-cost", "5")
        async with Agent(argv, fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            assert (await agent.prompt(sid, "costly")).stop_reason == "end_turn"  # $10
            with pytest.raises(acp.RequestError) as spent:
                await agent.prompt(sid, "more")
            message = spent.value.args[0]
            assert "\n" not in message and "5" in message and "10" in message
            await agent.conn.set_config_option(
                config_id="model", session_id=sid, value="openai:other-model"
            )
            with pytest.raises(acp.RequestError):
                await agent.prompt(sid, "with another model")
            other = (await agent.conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            assert (await agent.prompt(other, "a new session")).stop_reason == "end_turn"
            await agent.close()
            agent.assert_valid()
        assert len(server.requests) == 2

    with FakeModel(text("one"), text("two"), text("three")) as server:
        run(go(server))


def test_stdout_carries_only_the_protocol_and_v_logs_to_stderr(env, tmp_path):
    """Raw pipes: every line agi writes to stdout is a JSON-RPC message, even while a command
    and a hook print to their stdout and stderr."""
    hooks = tmp_path / "hooks.json"
    hook = {"hooks": [{"type": "command", "command": "echo hook-out; echo hook-err >&2"}]}
    hooks.write_text(json.dumps({"hooks": {"PostToolUse": [hook]}}))
    with FakeModel(call("Bash", command="echo cmd-out; echo cmd-err >&2"), text("done")) as server:
        argv = [AGI, "--acp", "-v", "--permission-mode", "bypassPermissions", "--hooks", str(hooks)]
        p = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=fake_env(env, server),
            cwd=tmp_path,
        )
        lines = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "session/new",
                "params": {"cwd": str(tmp_path), "mcpServers": []},
            },
        ]
        assert p.stdin is not None and p.stdout is not None
        for line in lines:
            p.stdin.write((json.dumps(line) + "\n").encode())
        p.stdin.flush()
        seen: list[bytes] = []
        sid = None
        while sid is None:
            seen.append(p.stdout.readline())
            sid = json.loads(seen[-1]).get("result", {}).get("sessionId")
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "run"}]}
        p.stdin.write(
            (
                json.dumps(
                    {"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt}
                )
                + "\n"
            ).encode()
        )
        p.stdin.flush()
        while True:
            seen.append(p.stdout.readline())
            if json.loads(seen[-1]).get("id") == 3:
                break
        out, err = p.communicate(b"", timeout=60)
    seen += out.splitlines(keepends=True)
    for raw in seen:
        assert raw.endswith(b"\n") and json.loads(raw)["jsonrpc"] == "2.0", raw
    assert p.returncode == 0
    assert "agi: session" in err.decode() and "Traceback" not in err.decode()
    assert b"cmd-out" in b"".join(seen)  # inside a tool_call_update, as JSON


def test_a_busy_session_cannot_be_loaded_or_prompted_and_unknown_ids_say_so(env, tmp_path):
    async def go(server: FakeModel) -> None:
        client = Recorder()
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            turn = asyncio.ensure_future(agent.prompt(sid, "slow"))
            await wait_for(lambda: server.requests)
            with pytest.raises(acp.RequestError) as busy:
                await agent.conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            assert "busy" in busy.value.args[0]
            for request in (
                agent.conn.set_session_mode(session_id="/nope", mode_id="plan"),
                agent.conn.set_config_option(config_id="mode", session_id="/nope", value="plan"),
            ):
                with pytest.raises(acp.RequestError) as unknown:
                    await request
                assert unknown.value.code == -32002 and "unknown session" in unknown.value.args[0]
            with pytest.raises(acp.RequestError) as option:
                await agent.conn.set_config_option(config_id="color", session_id=sid, value="x")
            assert option.value.code == -32602
            await agent.conn.cancel(session_id="/nope")  # a notification: nothing to answer
            assert (await turn).stop_reason == "end_turn"
            assert (await agent.prompt(sid, "next")).stop_reason == "end_turn"
            await agent.close()
            agent.assert_valid()

    with FakeModel(text("slow answer", delay=0.5), text("next")) as server:
        run(go(server))


READ_ONLY_MCP = '''
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("ro")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def look(x: str) -> str:
    """Look."""
    return "looked " + x


@server.tool()
def change(x: str) -> str:
    """Change."""
    return "changed " + x


server.run()
'''


def test_plan_offers_only_what_changes_nothing_to_the_agent_and_its_subagents(env, tmp_path):
    pytest.importorskip("mcp.server.mcpserver", reason="mcp 2 is not installed")
    script = tmp_path / "ro_server.py"
    script.write_text(READ_ONLY_MCP)
    tool = tmp_path / "shout"
    desc = json.dumps({"name": "shout", "description": "shout", "parameters": {"type": "object"}})
    tool.write_text(f"#!/bin/sh\n[ \"$1\" = --describe ] && echo '{desc}' && exit 0\necho HEY\n")
    tool.chmod(0o755)

    def step(body: dict) -> dict:
        last = body["messages"][-1]
        if last["role"] == "user" and "SUBTASK" in str(last["content"]):
            return call("Bash", command=f"touch {tmp_path / 'made'}")  # not offered: refused
        if last["role"] == "tool":
            return text("planned" if "looked" in str(last["content"]) else "sub done")
        if "look" in str(last["content"]):
            return call("mcp__ro__look", x="around")
        return call("Task", description="sub", prompt="SUBTASK")

    async def go(server: FakeModel) -> None:
        client = Recorder(answer="allow_once")
        argv = agi_argv(AGI, "--tool", str(tool), "--permission-mode", "plan")
        async with Agent(argv, fake_env(env, server), tmp_path, client) as agent:
            mcp = acp.schema.McpServerStdio(
                name="ro", command=sys.executable, args=[str(script)], env=[]
            )
            sid = await agent.start(mcp_servers=[mcp])
            assert (await agent.prompt(sid, "look")).stop_reason == "end_turn"
            assert (await agent.prompt(sid, "delegate")).stop_reason == "end_turn"
            await agent.close()
            agent.assert_valid()
        offered = [{t["function"]["name"] for t in b.get("tools", [])} for b in server.requests]
        assert "mcp__ro__look" in offered[0] and "Read" in offered[0]
        for names in offered:
            assert not names & {"Bash", "Write", "Edit", "Terminal", "shout", "mcp__ro__change"}
        assert tool_results(server.requests[1]) == ["looked around"]
        assert not (tmp_path / "made").exists()
        assert client.asked == []

    with FakeModel(step) as server:
        run(go(server))


class Silent:
    """A model server that accepts a request, starts an event stream, says nothing more, and
    notes when agi closes the connection."""

    def __init__(self) -> None:
        import socket
        import threading

        self.socket = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}/v1"
        self.requested = threading.Event()
        self.closed = threading.Event()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        connection, _ = self.socket.accept()
        data = b""
        while b"\r\n\r\n" not in data:
            data += connection.recv(65536)
        connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
        self.requested.set()
        try:
            while connection.recv(65536):
                pass
        except OSError:
            pass
        self.closed.set()


def test_cancel_closes_the_model_request(env, tmp_path):
    server = Silent()

    async def go() -> None:
        client = Recorder()
        environment = {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}
        async with Agent(agi_argv(AGI), environment, tmp_path, client) as agent:
            sid = await agent.start()
            turn = asyncio.ensure_future(agent.prompt(sid, "wait"))
            await wait_for(server.requested.is_set)
            assert not server.closed.is_set()
            await agent.conn.cancel(session_id=sid)
            assert (await asyncio.wait_for(turn, 10)).stop_reason == "cancelled"
            await wait_for(server.closed.is_set, 10)
            await agent.close()
            agent.assert_valid()

    run(go())


def test_lines_that_are_not_json_rpc_are_answered_and_the_agent_goes_on(env, tmp_path):
    """Before this was handled, a line holding a JSON array ended `agi --acp` with a traceback
    (exit 1), and one that was not JSON printed a traceback on stderr."""

    async def go(server: FakeModel) -> None:
        client = Recorder()
        async with Raw(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            agent.process.stdin.write(b'not json\n\n[1, 2]\n"text"\n{"jsonrpc": "2.0", "id"\n')
            await agent.process.stdin.drain()
            refused = await wait_for(
                lambda: (
                    [m for m in agent.raw if "error" in m and m.get("id") is None][3:]
                    and [
                        m["error"]["code"]
                        for m in agent.raw
                        if "error" in m and m.get("id") is None
                    ]
                )
            )
            assert refused == [-32700, -32600, -32600, -32700]
            assert (await agent.prompt(sid, "still there?")).stop_reason == "end_turn"
            assert await agent.close() == 0
            agent.assert_valid()
        assert agent.stderr == b""

    with FakeModel(text("yes")) as server:
        run(go(server))


def test_cancel_works_while_the_turn_waits_for_a_session_a_shell_run_holds(env, tmp_path):
    """`agi -s SESSIONID` in a shell holds the session while it runs; the editor's prompt for
    the same session waits for it, and a cancel still ends that prompt."""
    from conftest import start_agi

    async def go(server: FakeModel, shell_server: FakeModel) -> None:
        client = Recorder()
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            shell = start_agi([AGI, "-s", sid, "from the shell"], fake_env(env, shell_server))
            try:
                await wait_for(lambda: shell_server.requests)  # the shell run holds the lock
                turn = asyncio.ensure_future(agent.prompt(sid, "from the editor"))
                await asyncio.sleep(0.5)
                assert not turn.done() and not server.requests  # waiting for the session
                await agent.conn.cancel(session_id=sid)
                assert (await asyncio.wait_for(turn, 10)).stop_reason == "cancelled"
            finally:
                shell.kill()
                shell.wait()
            assert (await agent.prompt(sid, "now")).stop_reason == "end_turn"
            await agent.close()
            agent.assert_valid()

    with FakeModel(text("editor")) as server, FakeModel(hang()) as shell_server:
        run(go(server, shell_server))


def test_cancelling_one_session_leaves_the_other_running(env, tmp_path):
    def step(body: dict) -> dict:
        if body["messages"][-1]["content"] == "wait":
            return hang()
        return text("the other answer", delay=0.2)

    async def go(server: FakeModel) -> None:
        client = Recorder()
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            one = await agent.start()
            two = (await agent.conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            waiting = asyncio.ensure_future(agent.prompt(one, "wait"))
            await wait_for(lambda: server.requests)
            other = asyncio.ensure_future(agent.prompt(two, "answer"))
            await wait_for(lambda: len(server.requests) == 2)
            await agent.conn.cancel(session_id=one)
            assert (await asyncio.wait_for(waiting, 10)).stop_reason == "cancelled"
            assert (await asyncio.wait_for(other, 30)).stop_reason == "end_turn"
            assert client.text(two) == "the other answer" and client.text(one) == ""
            await agent.close()
            agent.assert_valid()

    with FakeModel(step) as server:
        run(go(server))


def test_an_http_mcp_server_from_session_new_joins_the_tools(env, tmp_path):
    pytest.importorskip("mcp", reason="the mcp package is not installed")
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    helper = Path(__file__).parents[2] / "mcp_servers" / "server.py"
    mcp = subprocess.Popen(
        [sys.executable, str(helper), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)

        async def go(server: FakeModel) -> None:
            client = Recorder(answer="allow_once")
            async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
                http = acp.schema.HttpMcpServer(
                    name="web", url=f"http://127.0.0.1:{port}/mcp", headers=[], type="http"
                )
                sid = await agent.start(mcp_servers=[http])
                await agent.prompt(sid, "add")
                await agent.close()
                agent.assert_valid()
            assert "mcp__web__add" in {t["function"]["name"] for t in server.requests[0]["tools"]}
            assert tool_results(server.requests[-1]) == ["5"]

        with FakeModel(call("mcp__web__add", a=2, b=3), text("5")) as server:
            run(go(server))
    finally:
        mcp.kill()
        mcp.wait()


def _bwrap_works() -> bool:
    from agi.errors import UsageError
    from agi.policy.sandbox import Policy

    try:
        Policy.load("read-only").check()
    except UsageError:
        return False
    return True


@pytest.mark.skipif(not _bwrap_works(), reason="bwrap is missing or cannot create namespaces")
def test_the_sandbox_holds_for_the_editors_files_and_commands(env, tmp_path):
    """--sandbox workspace: the workspace is the session's directory (not the one agi was
    started in); a Write outside it is refused before it reaches the editor
    (fs/write_text_file), and a command cannot write there either."""
    work = tmp_path / "work"
    work.mkdir()
    outside = tmp_path / "outside.txt"

    async def go(server: FakeModel) -> None:
        client = Recorder(files={}, answer="allow_once")
        argv = agi_argv(AGI, "--sandbox", "workspace", "--permission-mode", "bypassPermissions")
        async with Agent(argv, fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start(fs=True, cwd=work)
            await agent.prompt(sid, "escape")
            await agent.close()
            agent.assert_valid()
        assert client.writes == [(str(work / "in.txt"), "in\n")]
        results = tool_results(server.requests[-1])
        assert results[0].startswith("Created") and "Error" in results[1]
        assert not outside.exists()

    with FakeModel(
        calls(
            ("Write", {"file_path": str(work / "in.txt"), "content": "in\n"}),
            ("Write", {"file_path": str(outside), "content": "out\n"}),
            ("Bash", {"command": f"echo out > {outside}"}),
        ),
        text("done"),
    ) as server:
        run(go(server))


def test_a_subagents_writes_and_edits_show_their_diffs_when_nothing_asks(env, tmp_path):
    """acceptEdits: a Task's subagent writes and edits inside the working directory without
    asking; the editor still sees those calls, with their diffs."""
    kept = tmp_path / "kept.txt"
    kept.write_text("old\n")

    def step(body: dict) -> dict:
        last = body["messages"][-1]
        if last["role"] == "user" and "SUBTASK" in str(last["content"]):
            return calls(
                ("Write", {"file_path": str(tmp_path / "sub.txt"), "content": "sub\n"}),
                ("Edit", {"file_path": str(kept), "old_string": "old", "new_string": "new"}),
            )
        if last["role"] == "tool":
            return text("main done" if "sub done" in str(last["content"]) else "sub done")
        return call("Task", description="edit", prompt="SUBTASK")

    async def go(server: FakeModel) -> None:
        client = Recorder(answer="reject_once")
        argv = agi_argv(AGI, "--permission-mode", "acceptEdits")
        async with Agent(argv, fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            assert (await agent.prompt(sid, "delegate")).stop_reason == "end_turn"
            await agent.close()
            agent.assert_valid()
        assert client.asked == []
        starts = {u["title"]: u for u in client.of(sid, "tool_call")}
        write, edit = starts[f"Write {tmp_path / 'sub.txt'}"], starts[f"Edit {kept}"]
        let_run = allowed(client, sid)  # the diffs, read once the calls may run
        assert let_run[write["toolCallId"]]["content"] == [
            {"type": "diff", "path": str(tmp_path / "sub.txt"), "newText": "sub\n"}
        ]
        assert let_run[edit["toolCallId"]]["content"] == [
            {"type": "diff", "path": str(kept), "oldText": "old\n", "newText": "new\n"}
        ]
        closed = ends(client, sid)
        for start in (write, edit):
            assert closed[start["toolCallId"]]["status"] == "completed"
            assert (
                closed[start["toolCallId"]]["content"][0]
                == let_run[start["toolCallId"]]["content"][0]
            )
        assert kept.read_text() == "new\n" and client.text(sid) == "main done"

    with FakeModel(step) as server:
        run(go(server))
