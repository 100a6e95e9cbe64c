"""The Python Claude Agent SDK (claude-agent-sdk, pinned in the test extra) as the client of
`agi` as its CLI (cli_path), against the scripted model server (docs: claude-agent-sdk)."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    PermissionResultDeny,
    ResultMessage,
    create_sdk_mcp_server,
    query,
    tool,
)

from conftest import AGI
from fakeserver import FakeModel, call, status, text

pytestmark = pytest.mark.timeout(120)


def options(env: dict[str, str], server: FakeModel, tmp_path: Path, **more) -> ClaudeAgentOptions:
    e = {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}
    e["CLAUDE_CONFIG_DIR"] = str(tmp_path / "claude")
    return ClaudeAgentOptions(cli_path=AGI, env=e, cwd=str(tmp_path), **more)


async def collect(prompt, opts: ClaudeAgentOptions) -> list:
    async def one():
        yield {"type": "user", "message": {"role": "user", "content": prompt}}

    return [m async for m in query(prompt=one(), options=opts)]


def test_query_answers_with_a_result(env, tmp_path):
    with FakeModel(text("hello from agi")) as server:
        got = asyncio.run(collect("hi", options(env, server, tmp_path)))
    result = got[-1]
    assert isinstance(result, ResultMessage)
    assert (result.subtype, result.is_error, result.result) == ("success", False, "hello from agi")
    assert result.num_turns == 1 and result.session_id
    assert (Path(env["AGI_HOME"]) / "sessions" / result.session_id / "messages.jsonl").is_file()


def test_can_use_tool_denies_a_write(env, tmp_path):
    target = tmp_path / "out.txt"
    asked = []

    async def deny(name, input, context):
        asked.append((name, input))
        return PermissionResultDeny(message="no writing here")

    with FakeModel(call("Write", file_path=str(target), content="x"), text("ok")) as server:
        opts = options(env, server, tmp_path, can_use_tool=deny)
        got = asyncio.run(collect("write it", opts))
        seen = server.requests[-1]["messages"][-1]
    assert asked and asked[0][0] == "Write"
    assert not target.exists()
    assert seen["role"] == "tool" and "no writing here" in seen["content"]
    assert got[-1].subtype == "success"


def test_a_pre_tool_use_hook_blocks_bash(env, tmp_path):
    marker = tmp_path / "ran"
    heard = []

    async def block(input, tool_use_id, context):
        heard.append(input["tool_input"]["command"])
        decision = {"permissionDecision": "deny", "permissionDecisionReason": "no shell today"}
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", **decision}}

    hooks = {"PreToolUse": [HookMatcher(matcher="Bash", hooks=[block])]}
    with FakeModel(call("Bash", command=f"touch {marker}"), text("ok")) as server:
        opts = options(env, server, tmp_path, hooks=hooks, permission_mode="bypassPermissions")
        asyncio.run(collect("run it", opts))
        seen = server.requests[-1]["messages"][-1]
    assert heard == [f"touch {marker}"]
    assert not marker.exists()
    assert "no shell today" in seen["content"]


def test_an_sdk_mcp_tool_is_called(env, tmp_path):
    calls = []

    @tool("add", "Add two numbers", {"a": int, "b": int})
    async def add(args):
        calls.append(args)
        return {"content": [{"type": "text", "text": str(args["a"] + args["b"])}]}

    server_config = create_sdk_mcp_server("calc", tools=[add])
    with FakeModel(call("mcp__calc__add", a=2, b=3), text("5")) as server:
        opts = options(env, server, tmp_path, mcp_servers={"calc": server_config},
                       allowed_tools=["mcp__calc__add"])  # fmt: skip
        got = asyncio.run(collect("add", opts))
        seen = server.requests[-1]["messages"][-1]
    assert calls == [{"a": 2, "b": 3}]
    assert seen["content"] == "5"
    assert got[-1].subtype == "success"


def test_json_schema_gives_structured_output(env, tmp_path):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    with FakeModel(text("seven"), text(json.dumps({"n": 7}))) as server:
        opts = options(
            env, server, tmp_path, output_format={"type": "json_schema", "schema": schema}
        )
        got = asyncio.run(collect("a number", opts))
    assert got[-1].structured_output == {"n": 7}


def test_max_turns_ends_with_its_subtype(env, tmp_path):
    with FakeModel(call("Read", file_path=str(tmp_path / "x"))) as server:
        got = asyncio.run(collect("loop", options(env, server, tmp_path, max_turns=1)))
    assert (got[-1].subtype, got[-1].is_error) == ("error_max_turns", True)


def test_client_over_several_turns_then_resume(env, tmp_path):
    async def talk(opts: ClaudeAgentOptions) -> list[str]:
        answers = []
        async with ClaudeSDKClient(options=opts) as client:
            for prompt in ("one", "two"):
                await client.query(prompt)
                async for m in client.receive_response():
                    if isinstance(m, ResultMessage):
                        answers.append((m.result, m.session_id))
        return answers

    with FakeModel(text("first"), text("second"), text("third")) as server:
        answers = asyncio.run(talk(options(env, server, tmp_path)))
        sid = answers[0][1]
        assert [a for a, _ in answers] == ["first", "second"] and answers[1][1] == sid
        again = asyncio.run(collect("three", options(env, server, tmp_path, resume=sid)))
        sent = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]
    assert again[-1].session_id == sid and again[-1].result == "third"
    assert sent == ["one", "two", "three"]


def test_list_sessions_finds_agis_sessions(env, tmp_path, monkeypatch):
    from claude_agent_sdk import get_session_messages, list_sessions

    with FakeModel(text("listed")) as server:
        got = asyncio.run(collect("find me", options(env, server, tmp_path)))
    sid = got[-1].session_id
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    found = {s.session_id: s for s in list_sessions(directory=str(tmp_path))}
    assert sid in found and found[sid].first_prompt == "find me"
    texts = [str(m.message) for m in get_session_messages(sid, directory=str(tmp_path))]
    assert any("listed" in t for t in texts)


def test_max_budget_usd_ends_with_its_subtype(env, tmp_path):
    (tmp_path / "config.toml").write_text('[prices."fake-model"]\ninput = 1000\noutput = 1000\n')
    with FakeModel(call("Read", file_path=str(tmp_path / "x"))) as server:
        opts = options(env, server, tmp_path, max_budget_usd=0.001)
        got = asyncio.run(collect("spend", opts))
    assert (got[-1].subtype, got[-1].is_error) == ("error_max_budget_usd", True)
    assert got[-1].total_cost_usd > 0


def test_interrupt_during_a_slow_stream(env, tmp_path):
    async def talk(opts: ClaudeAgentOptions) -> list:
        async with ClaudeSDKClient(options=opts) as client:
            await client.query("talk slowly")
            got, interrupted = [], []
            async for m in client.receive_response():
                got.append(m)
                delta = getattr(m, "event", {}).get("type") == "content_block_delta"
                if delta and not interrupted:  # the reply is streaming: stop it
                    interrupted.append(m)
                    await client.interrupt()
            await client.query("again")
            async for m in client.receive_response():
                got.append(m)
            return got

    with FakeModel(text("x" * 400, delay=0.05, pieces=200), text("after")) as server:
        opts = options(env, server, tmp_path, include_partial_messages=True)
        got = asyncio.run(asyncio.wait_for(talk(opts), 60))
    results = [m for m in got if isinstance(m, ResultMessage)]
    assert [r.subtype for r in results] == ["error_during_execution", "success"]
    assert len(server.requests) == 2
    assert results[1].result == "after"


@pytest.mark.parametrize(
    "flag",
    [
        ["--permission-prompt-tool", "mcp__x__ask"],
        ["--betas", "x"],
        ["--add-dir", "/no/such/dir"],
        ["--fallback-model", "openai:m", "--model", "openai:m"],
        ["--session-id", "not-a-uuid"],
        ["--session-id", "0b6c1f3e-2a4d-4c5e-9f70-1a2b3c4d5e6f", "--resume", "x"],
        ["--session-id", "0b6c1f3e-2a4d-4c5e-9f70-1a2b3c4d5e6f", "--continue"],
    ],
)
def test_flags_agi_cannot_honour_are_refused_naming_them(agi, flag):
    done = agi("--output-format", "stream-json", "--input-format", "stream-json", "--verbose",
               *flag, input="")  # fmt: skip
    assert done.returncode == 2 and flag[0] in done.stderr and not done.stdout


def test_can_use_tool_rewrites_the_input_and_its_rules_hold(env, tmp_path):
    from claude_agent_sdk import PermissionResultAllow
    from claude_agent_sdk.types import PermissionRuleValue, PermissionUpdate

    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    asked = []

    async def allow(name, input, context):
        asked.append(input["file_path"])
        rule = PermissionRuleValue(tool_name="Write")
        keep = PermissionUpdate(type="addRules", rules=[rule], behavior="allow",
                                destination="session")  # fmt: skip
        return PermissionResultAllow(updated_input={**input, "content": "changed"},
                                     updated_permissions=[keep])  # fmt: skip

    script = [call("Write", file_path=str(a), content="x"),
              call("Write", file_path=str(b), content="y"), text("ok")]  # fmt: skip
    with FakeModel(*script) as server:
        asyncio.run(collect("write", options(env, server, tmp_path, can_use_tool=allow)))
    assert asked == [str(a)]  # the rule it added let the second call run unasked
    assert a.read_text() == "changed" and b.read_text() == "y"


def test_add_dir_lets_accept_edits_write_there_and_only_there(env, tmp_path):
    extra, outside = tmp_path / "extra", tmp_path / "outside"
    work = tmp_path / "work"
    for d in (extra, outside, work):
        d.mkdir()
    asked = []

    async def deny(name, input, context):
        asked.append(input["file_path"])
        return PermissionResultDeny(message="not there")

    script = [call("Write", file_path=str(extra / "a.txt"), content="a"),
              call("Write", file_path=str(outside / "b.txt"), content="b"), text("ok")]  # fmt: skip
    with FakeModel(*script) as server:
        opts = options(env, server, tmp_path, add_dirs=[extra], permission_mode="acceptEdits",
                       can_use_tool=deny)  # fmt: skip
        opts.cwd = str(work)
        asyncio.run(collect("write", opts))
    assert (extra / "a.txt").read_text() == "a"
    assert asked == [str(outside / "b.txt")] and not (outside / "b.txt").exists()


def test_fallback_model_answers_once_the_main_one_is_overloaded(env, tmp_path):
    busy = status(529, {"error": {"message": "overloaded"}}, {"retry-after": "0"})
    with FakeModel(busy, busy, busy, text("from the fallback"), text("still")) as server:
        opts = options(env, server, tmp_path, fallback_model="spare-model")
        got = asyncio.run(collect("hi", opts))
        models = [r["model"] for r in server.requests]
    assert (got[-1].subtype, got[-1].result) == ("success", "from the fallback")
    assert models == ["fake-model"] * 3 + ["spare-model"]


def test_strict_mcp_config_leaves_out_agis_own_mcp_json(env, tmp_path):
    log = tmp_path / "starts.log"
    helper = Path(__file__).parents[2] / "mcp_servers" / "server.py"
    own = {"command": sys.executable, "args": [str(helper)], "env": {"MCP_START_LOG": str(log)}}
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"own": own}}))

    @tool("add", "Add two numbers", {"a": int, "b": int})
    async def add(args):
        return {"content": [{"type": "text", "text": str(args["a"] + args["b"])}]}

    calc = create_sdk_mcp_server("calc", tools=[add])
    for strict in (False, True):
        with FakeModel(text("ok")) as server:
            opts = options(env, server, tmp_path, mcp_servers={"calc": calc},
                           strict_mcp_config=strict)  # fmt: skip
            asyncio.run(collect("tools?", opts))
            offered = {t["function"]["name"] for t in server.requests[0].get("tools", [])}
        assert "mcp__calc__add" in offered
        assert ("mcp__own__add" in offered) is not strict


def test_session_id_names_the_fork_of_resume_and_continue(env, tmp_path):
    forked, again = str(uuid.uuid4()), str(uuid.uuid4())
    with FakeModel(text("first"), text("second"), text("third")) as server:
        sid = asyncio.run(collect("one", options(env, server, tmp_path)))[-1].session_id
        opts = options(env, server, tmp_path, resume=sid, fork_session=True, session_id=forked)
        got = asyncio.run(collect("two", opts))
        opts = options(env, server, tmp_path, continue_conversation=True, fork_session=True,
                       session_id=again)  # fmt: skip
        last = asyncio.run(collect("three", opts))
        sent = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]
    assert (got[-1].session_id, last[-1].session_id) == (forked, again)
    assert sent == ["one", "two", "three"]  # the fork of the fork, the session last used
    sessions = Path(env["AGI_HOME"]) / "sessions"
    assert "two" not in (sessions / sid / "messages.jsonl").read_text()
