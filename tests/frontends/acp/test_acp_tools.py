"""`agi --acp`: tool calls as the editor sees them, permissions through the editor, the
editor's files, MCP servers from session/new, hooks (docs: acp)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from acp_client import Agent, Recorder, acp, agi_argv, run

from conftest import AGI
from fakeserver import FakeModel, call, calls, text

pytestmark = pytest.mark.timeout(120)
MCP_SERVER = Path(__file__).parents[2] / "mcp_servers" / "server.py"


def fake_env(env: dict[str, str], server: FakeModel) -> dict[str, str]:
    return {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def position(client: Recorder, sid: str, kind: str, call_id: str) -> int:
    return next(
        i
        for i, (s, u, _) in enumerate(client.updates)
        if s == sid and u["sessionUpdate"] == kind and u.get("toolCallId") == call_id
    )


def test_tool_calls_their_diffs_and_the_permission_questions(env, tmp_path):
    """default mode: Bash and Write ask after their tool_call (with the diff); Read does not;
    a rejected call ends failed and the turn goes on."""
    old = tmp_path / "old.txt"
    old.write_text("one\ntwo\n")
    target = tmp_path / "new.txt"

    def answer(request: dict) -> str:
        return (
            "reject_once" if request["toolCall"]["toolCallId"] == rejected_id[0] else "allow_once"
        )

    rejected_id: list[str] = []

    async def go(server: FakeModel) -> None:
        client = Recorder(answer=answer)
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            reply = await agent.prompt(sid, "work")
            assert reply.stop_reason == "end_turn"
            await agent.close()
            agent.assert_valid()
        starts = {u["title"].split()[0].rstrip(":"): u for u in client.of(sid, "tool_call")}
        read, write, edit, bash = starts["Read"], starts["Write"], starts["Edit"], starts["Bash"]
        assert read["kind"] == "read" and read["locations"] == [{"path": str(old)}]
        assert read["rawInput"] == {"file_path": str(old)}
        assert write["kind"] == "edit" and bash["kind"] == "execute"
        assert write["content"] == [{"type": "diff", "path": str(target), "newText": "hello\n"}]
        assert "content" not in read  # nothing is read for a call before it may run
        let_run = {
            u["toolCallId"]: u
            for u in client.of(sid, "tool_call_update")
            if u.get("status") == "in_progress"
        }
        assert let_run[edit["toolCallId"]]["content"][0]["oldText"] == "one\ntwo\n"
        assert let_run[edit["toolCallId"]]["content"][0]["newText"] == "one\n2\n"
        assert bash["title"] == "Bash: echo hi"
        asked = {r["toolCall"]["toolCallId"] for r in client.asked}
        assert asked == {write["toolCallId"], edit["toolCallId"], bash["toolCallId"]}
        for request in client.asked:
            call_id = request["toolCall"]["toolCallId"]
            assert [o["kind"] for o in request["options"]] == [
                "allow_once",
                "allow_always",
                "reject_once",
                "reject_always",
            ]
            announced = client.updates[position(client, sid, "tool_call", call_id)][2]
            assert announced <= request["time"]  # the tool_call came first
        assert client.asked[0]["toolCall"]["content"][0]["type"] == "diff"
        ends = {u["toolCallId"]: u for u in client.of(sid, "tool_call_update") if "content" in u}
        assert ends[read["toolCallId"]]["status"] == "completed"
        assert "one" in ends[read["toolCallId"]]["content"][0]["content"]["text"]
        assert ends[write["toolCallId"]]["content"][0]["type"] == "diff"
        assert ends[bash["toolCallId"]]["status"] == "failed"
        assert "the user said no" in ends[bash["toolCallId"]]["content"][-1]["content"]["text"]
        progress = [
            u["toolCallId"]
            for u in client.of(sid, "tool_call_update")
            if u.get("status") == "in_progress"
        ]
        assert bash["toolCallId"] not in progress and write["toolCallId"] in progress
        assert target.read_text() == "hello\n" and old.read_text() == "one\n2\n"
        assert "the user said no" in tool_results(server.requests[-1])[3]

    def script(body: dict) -> dict:
        return text("all done")

    first = calls(
        ("Read", {"file_path": str(old)}),
        ("Write", {"file_path": str(target), "content": "hello\n"}),
        ("Edit", {"file_path": str(old), "old_string": "two", "new_string": "2"}),
        ("Bash", {"command": "echo hi"}),
    )
    rejected_id.append(
        json.loads(first["frames"][-5].split(b"data: ")[1])["choices"][0]["delta"]["tool_calls"][0][
            "id"
        ]
    )
    with FakeModel(first, script) as server:
        run(go(server))


def test_always_answers_become_session_rules_written_as_claude_code_writes_them(env, tmp_path):
    async def go(server: FakeModel) -> None:
        answers = iter(["allow_always", "reject_always"])
        client = Recorder(answer=lambda request: next(answers))
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            await agent.prompt(sid, "commit twice, then remove")
            await agent.close()
            agent.assert_valid()
        assert len(client.asked) == 2  # the second commit ran under the new rule
        kept = json.loads((Path(sid) / "settings.json").read_text())
        assert kept == {"permissions": {"allow": ["Bash(git commit:*)"], "deny": ["Bash(rm:*)"]}}
        results = tool_results(server.requests[-1])
        assert "denied" not in results[0] and "denied" not in results[1]
        assert "denied" in results[2]
        return sid

    with FakeModel(
        call("Bash", command="git commit --dry-run -m one"),
        call("Bash", command="git commit --dry-run -m two"),
        call("Bash", command="rm -f nothing"),
        text("done"),
    ) as server:
        run(go(server))


def test_rules_and_hooks_hold_in_every_mode(env, tmp_path):
    """bypassPermissions: deny rules and a PreToolUse hook still deny, an ask rule still asks;
    acceptEdits: Write inside the working directory runs, Bash asks."""
    hooks = tmp_path / "hooks.json"
    deny = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "frozen by a hook",
        }
    }
    entry = {
        "matcher": "Edit",
        "hooks": [{"type": "command", "command": f"echo '{json.dumps(deny)}'"}],
    }
    hooks.write_text(json.dumps({"hooks": {"PreToolUse": [entry]}}))
    (tmp_path / "f.txt").write_text("a")
    argv = agi_argv(AGI, "--deny", "Bash(rm:*)", "--ask", "Bash(touch:*)", "--hooks", str(hooks))

    async def go(server: FakeModel) -> None:
        client = Recorder(answer="reject_once")
        async with Agent(argv, fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            await agent.conn.set_session_mode(session_id=sid, mode_id="bypassPermissions")
            await agent.prompt(sid, "bypass")
            assert len(client.asked) == 1 and "touch" in json.dumps(client.asked[0])
            await agent.conn.set_session_mode(session_id=sid, mode_id="acceptEdits")
            await agent.prompt(sid, "accept edits")
            await agent.close()
            agent.assert_valid()
        bypass = tool_results(server.requests[1])
        assert "denied by permission rule" in bypass[0]
        assert "frozen by a hook" in bypass[1]
        assert "the user said no" in bypass[2]
        assert bypass[3] == "ran"
        edits = tool_results(server.requests[3])[-2:]
        assert edits[0].startswith("Created") and "the user said no" in edits[1]
        assert len(client.asked) == 2

    with FakeModel(
        calls(
            ("Bash", {"command": "rm -f x"}),
            ("Edit", {"file_path": str(tmp_path / "f.txt"), "old_string": "a", "new_string": "b"}),
            ("Bash", {"command": "touch y"}),
            ("Bash", {"command": "echo ran"}),
        ),
        text("bypassed"),
        calls(
            ("Write", {"file_path": str(tmp_path / "w.txt"), "content": "w"}),
            ("Bash", {"command": "echo asks"}),
        ),
        text("accepted"),
    ) as server:
        run(go(server))


def test_the_editors_files_are_what_read_write_and_edit_see(env, tmp_path):
    on_disk = tmp_path / "a.py"
    on_disk.write_text("x = 1\n")
    buffers = {str(on_disk): "x = 2  # unsaved\n"}

    async def go(server: FakeModel) -> None:
        client = Recorder(files=buffers, answer="allow_once")
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start(fs=True)
            await agent.prompt(sid, "edit it")
            await agent.close()
            agent.assert_valid()
        results = tool_results(server.requests[-1])
        assert "x = 2  # unsaved" in results[0]
        assert results[1].startswith("Edited")
        assert buffers[str(on_disk)] == "x = 3  # unsaved\n"
        assert on_disk.read_text() == "x = 1\n"  # the edit landed in the editor, not on disk
        assert (str(tmp_path / "b.py"), "new\n") in client.writes
        assert not (tmp_path / "b.py").exists()
        edit = next(u for u in client.of(sid, "tool_call") if u["kind"] == "edit")
        let_run = [
            u
            for u in client.of(sid, "tool_call_update")
            if u.get("status") == "in_progress" and u["toolCallId"] == edit["toolCallId"]
        ]
        assert let_run[0]["content"][0]["oldText"] == "x = 2  # unsaved\n"

    with FakeModel(
        calls(
            ("Read", {"file_path": str(on_disk)}),
            ("Edit", {"file_path": str(on_disk), "old_string": "x = 2", "new_string": "x = 3"}),
            ("Write", {"file_path": str(tmp_path / "b.py"), "content": "new\n"}),
        ),
        text("done"),
    ) as server:
        run(go(server))


def test_mcp_servers_from_session_new_join_the_tools(env, tmp_path):
    pytest.importorskip("mcp", reason="the mcp package is not installed")

    async def go(server: FakeModel) -> None:
        client = Recorder(answer="allow_once")
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            stdio = acp.schema.McpServerStdio(
                name="tiny", command=sys.executable, args=[str(MCP_SERVER)], env=[]
            )
            sid = await agent.start(mcp_servers=[stdio])
            await agent.prompt(sid, "add")
            await agent.close()
            agent.assert_valid()
        offered = {t["function"]["name"] for t in server.requests[0]["tools"]}
        assert "mcp__tiny__add" in offered
        assert tool_results(server.requests[-1]) == ["5"]
        assert len(client.asked) == 1  # an MCP tool can change something: it asks

    with FakeModel(call("mcp__tiny__add", a=2, b=3), text("5")) as server:
        run(go(server))


def test_a_dismissed_question_is_a_no_and_the_turn_goes_on(env, tmp_path):
    async def go(server: FakeModel) -> None:
        client = Recorder(answer="cancelled")
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            assert (await agent.prompt(sid, "touch it")).stop_reason == "end_turn"
            await agent.close()
            agent.assert_valid()
        assert not (tmp_path / "made").exists()
        assert "the user said no" in tool_results(server.requests[-1])[0]
        assert client.of(sid, "tool_call_update")[-1]["status"] == "failed"
        assert client.text(sid) == "understood"

    with FakeModel(
        call("Bash", command=f"touch {tmp_path / 'made'}"), text("understood")
    ) as server:
        run(go(server))


def test_a_subagents_calls_ask_too_and_are_closed_with_the_turn(env, tmp_path):
    """A Task's subagent asks through the editor like the main agent; its calls, announced
    when they ask, end with the turn."""

    def step(body: dict) -> dict:
        last = body["messages"][-1]
        if last["role"] == "user" and "Do the sub task" in str(last["content"]):
            return call("Bash", command="echo from-sub")  # the subagent's first step
        if last["role"] == "tool":
            return text("sub done" if "from-sub" in str(last["content"]) else "main done")
        return call("Task", description="sub", prompt="Do the sub task")

    async def go(server: FakeModel) -> None:
        client = Recorder(answer="allow_once")
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            assert (await agent.prompt(sid, "delegate")).stop_reason == "end_turn"
            await agent.close()
            agent.assert_valid()
        assert [r["toolCall"]["title"] for r in client.asked] == ["Bash: echo from-sub"]
        started = {u["toolCallId"] for u in client.of(sid, "tool_call")}
        closed = {
            u["toolCallId"]
            for u in client.of(sid, "tool_call_update")
            if u.get("status") in ("completed", "failed")
        }
        assert started == closed and len(started) == 2
        assert client.text(sid) == "main done"

    with FakeModel(step) as server:
        run(go(server))
