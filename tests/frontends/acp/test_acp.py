"""`agi --acp` through the `acp` library's client connection (docs: acp): the protocol,
sessions as directories, streaming, stop reasons, errors. Every message agi sends is checked
against the official v1 schema (tests/acp_client.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from acp_client import Agent, Recorder, acp, agi_argv, run, wait_for

from conftest import AGI
from fakeserver import FakeModel, call, status, text

pytestmark = pytest.mark.timeout(120)


def fake_env(env: dict[str, str], server: FakeModel) -> dict[str, str]:
    return {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}


def test_initialize_new_session_and_a_streamed_answer(env, tmp_path):
    Path(env["AGI_CONFIG"]).write_text('[prices."openai:fake-model"]\ninput = 1.0\noutput = 2.0\n')

    async def go(server: FakeModel) -> None:
        client = Recorder()
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            init = await agent.conn.initialize(protocol_version=1)
            assert init.protocol_version == 1
            caps = init.agent_capabilities
            assert caps.load_session and caps.prompt_capabilities.embedded_context
            assert caps.session_capabilities.list is not None
            assert init.agent_info.name == "agi"
            new = await agent.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            sid = new.session_id
            assert Path(sid).is_absolute() and (Path(sid) / "meta.json").is_file()
            assert new.modes.current_mode_id == "default"
            assert {o.id for o in new.config_options} == {"model", "mode"}
            reply = await agent.prompt(sid, "say hello")
            assert reply.stop_reason == "end_turn"
            assert client.text(sid) == "hello there"
            assert client.of(sid, "available_commands_update")
            # the model's window is unknown: no usage_update (its `size` is required; never 0)
            assert client.of(sid, "usage_update") == []
            code = await agent.close()
            assert code == 0
            assert agent.stderr == b""  # stdout carries the protocol; stderr is silent
            agent.assert_valid()
            messages = (Path(sid) / "messages.jsonl").read_text().splitlines()
            assert json.loads(messages[0])["content"] == "say hello"

    with FakeModel(text("hello there")) as server:
        run(go(server))


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def length_cut(content: str) -> dict:
    """A streamed reply cut at the output limit (finish_reason `length`)."""
    from fakeserver import _chunk

    frames = [_chunk({"role": "assistant", "content": content}), _chunk({}, "length")]
    return {"kind": "sse", "frames": [*frames, b"data: [DONE]\n\n"], "delay": 0.0}


def test_thoughts_stop_reasons_and_a_failure_that_leaves_the_session_usable(env, tmp_path):
    async def go(server: FakeModel) -> None:
        client = Recorder()
        argv = agi_argv(AGI, "--max-steps", "1", "--permission-mode", "bypassPermissions")
        async with Agent(argv, fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            assert (await agent.prompt(sid, "think")).stop_reason == "end_turn"
            assert client.text(sid, "agent_thought_chunk") == "let me see"
            assert (await agent.prompt(sid, "long")).stop_reason == "max_tokens"
            assert (await agent.prompt(sid, "loop")).stop_reason == "max_turn_requests"
            with pytest.raises(acp.RequestError) as failed:
                await agent.prompt(sid, "fail")
            assert "400" in failed.value.args[0] and "\n" not in failed.value.args[0]
            assert not failed.value.args[0].startswith("agi:")
            assert (await agent.prompt(sid, "again")).stop_reason == "end_turn"
            assert client.text(sid).endswith("back")
            await agent.close()
            agent.assert_valid()

    with FakeModel(
        text("ok", reasoning="let me see"),
        length_cut("cut"),
        call("Bash", command="true"),
        status(400, {"error": {"message": "bad request"}}),
        text("back"),
    ) as server:
        run(go(server))


def test_bad_input_gets_a_clear_error_and_loses_nothing(env, tmp_path):
    async def go(server: FakeModel) -> None:
        client = Recorder()
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            with pytest.raises(acp.RequestError) as unknown:
                await agent.prompt("/no/such/session", "hi")
            assert unknown.value.code == -32002 and "unknown session" in unknown.value.args[0]
            with pytest.raises(acp.RequestError) as bad:
                await agent.conn._conn.send_request("session/prompt", {"sessionId": sid})
            assert bad.value.code == -32602
            with pytest.raises(acp.RequestError) as load:
                await agent.conn.load_session(
                    cwd=str(tmp_path), session_id=str(tmp_path), mcp_servers=[]
                )
            assert load.value.code == -32002
            with pytest.raises(acp.RequestError) as cwd:
                await agent.conn.new_session(cwd="relative/dir", mcp_servers=[])
            assert cwd.value.code == -32602
            with pytest.raises(acp.RequestError) as mode:
                await agent.conn.set_session_mode(session_id=sid, mode_id="yolo")
            assert "unknown mode" in mode.value.args[0]
            with pytest.raises(acp.RequestError) as unknown_command:
                await agent.prompt(sid, "/nosuchcommand now")
            assert "nosuchcommand" in unknown_command.value.args[0]
            first = asyncio.ensure_future(agent.prompt(sid, "slow"))
            await wait_for(lambda: server.requests)
            with pytest.raises(acp.RequestError) as busy:
                await agent.prompt(sid, "second")
            assert "busy" in busy.value.args[0]
            assert (await first).stop_reason == "end_turn"
            assert (await agent.prompt(sid, "third")).stop_reason == "end_turn"
            await agent.close()
            agent.assert_valid()

    with FakeModel(text("slow answer", delay=0.3), text("fine")) as server:
        run(go(server))


def test_a_session_is_a_directory_shared_with_the_shell(agi, env, tmp_path):
    """Begun in the editor, continued with `agi -s`, loaded again (replayed) and listed."""
    work = tmp_path / "work"
    work.mkdir()

    async def first(server: FakeModel) -> str:
        client = Recorder()
        argv = agi_argv(AGI, "--permission-mode", "bypassPermissions")
        async with Agent(argv, fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start(cwd=work)
            assert (await agent.prompt(sid, "run it")).stop_reason == "end_turn"
            await agent.close()
            agent.assert_valid()
        return sid

    with FakeModel(call("Bash", command="echo from-bash"), text("ran it")) as server:
        sid = run(first(server))
    with FakeModel(text("continued")) as server:
        r = agi("-s", sid, "go on", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "continued"
    listing = agi("--list-sessions")
    assert sid in listing.stdout

    async def again(server: FakeModel) -> None:
        client = Recorder()
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            await agent.conn.initialize(protocol_version=1)
            found = await agent.conn.list_sessions(cwd=str(work))
            assert [s.session_id for s in found.sessions] == [sid]
            assert found.sessions[0].title == "run it"
            assert not (await agent.conn.list_sessions(cwd=str(tmp_path))).sessions
            loaded = await agent.conn.load_session(cwd=str(work), session_id=sid, mcp_servers=[])
            assert loaded.modes.current_mode_id == "default"
            kinds = [u["sessionUpdate"] for u in client.of(sid)]
            assert kinds[:5] == [
                "user_message_chunk",
                "tool_call",
                "tool_call_update",
                "agent_message_chunk",
                "user_message_chunk",
            ]
            assert client.text(sid, "user_message_chunk") == "run itgo on"
            assert client.text(sid) == "ran itcontinued"
            done = client.of(sid, "tool_call_update")[0]
            assert done["status"] == "completed"
            assert "from-bash" in done["content"][0]["content"]["text"]
            assert (await agent.prompt(sid, "and more")).stop_reason == "end_turn"
            await agent.close()
            agent.assert_valid()
        sent = server.requests[-1]["messages"]
        assert [m["content"] for m in sent if m["role"] == "user"] == [
            "run it",
            "go on",
            "and more",
        ]

    with FakeModel(text("more")) as server:
        run(again(server))


def test_modes_models_and_commands(env, tmp_path):
    config = Path(env["AGI_CONFIG"])
    config.write_text('[prices."openai:other-model"]\ninput = 1.0\noutput = 2.0\n')
    commands = config.parent / "commands"
    commands.mkdir()
    (commands / "hello.md").write_text(
        "---\ndescription: Say hello\n---\nSay hello to $ARGUMENTS\n"
    )

    async def go(server: FakeModel) -> None:
        client = Recorder()
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            await agent.conn.initialize(protocol_version=1)
            new = await agent.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            sid = new.session_id
            model = next(o for o in new.config_options if o.id == "model")
            values = [o.value for o in model.options]
            assert values[0] == "openai:fake-model" and "openai:other-model" in values
            assert [m.id for m in new.modes.available_modes] == [
                "default",
                "acceptEdits",
                "plan",
                "bypassPermissions",
            ]
            listed = await wait_for(lambda: client.of(sid, "available_commands_update"))
            names = [c["name"] for c in listed[0]["availableCommands"]]
            assert "compact" in names and "hello" in names
            await agent.conn.set_session_mode(session_id=sid, mode_id="plan")
            assert client.of(sid, "current_mode_update")[-1]["currentModeId"] == "plan"
            changed = await agent.conn.set_config_option(
                config_id="model", session_id=sid, value="openai:other-model"
            )
            current = {o.id: o.current_value for o in changed.config_options}
            assert current == {"model": "openai:other-model", "mode": "plan"}
            await agent.prompt(sid, "/hello world")
            await agent.conn.set_config_option(config_id="mode", session_id=sid, value="default")
            await agent.prompt(sid, "plain")
            await agent.close()
            agent.assert_valid()
        planned, plain = server.requests
        assert planned["model"] == "other-model"
        assert planned["messages"][-1]["content"] == "Say hello to world"
        offered = {t["function"]["name"] for t in planned["tools"]}
        assert "Read" in offered and not offered & {"Bash", "Write", "Edit", "Terminal"}
        assert {"Bash", "Write"} <= {t["function"]["name"] for t in plain["tools"]}

    with FakeModel(text("hi world"), text("plain")) as server:
        run(go(server))


def test_prompt_resources_become_context_blocks(env, tmp_path):
    linked = tmp_path / "notes.txt"
    linked.write_text("linked file text\n")

    async def go(server: FakeModel) -> None:
        client = Recorder()
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            blocks = [
                acp.text_block("summarise"),
                acp.resource_link_block(name="notes.txt", uri=linked.as_uri()),
                acp.embedded_text_resource(uri="file:///buffer.py", text="print('unsaved')"),
            ]
            blocks[2] = acp.resource_block(blocks[2])
            await agent.conn.prompt(session_id=sid, prompt=blocks)
            await agent.close()
            agent.assert_valid()
        sent = server.requests[0]["messages"][-1]["content"]
        assert sent.startswith("summarise")
        assert "linked file text" in sent and "print('unsaved')" in sent

    with FakeModel(text("ok")) as server:
        run(go(server))


def test_compact_is_a_slash_command(env, tmp_path):
    async def go(server: FakeModel) -> None:
        client = Recorder()
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            await agent.prompt(sid, "remember the number 7")
            assert (await agent.prompt(sid, "/compact keep the number")).stop_reason == "end_turn"
            assert "THE SUMMARY" in client.text(sid)
            await agent.prompt(sid, "which number?")
            await agent.close()
            agent.assert_valid()
        last = server.requests[-1]["messages"]
        assert any("THE SUMMARY" in str(m.get("content")) for m in last)
        assert "remember the number 7" not in json.dumps(last)

    with FakeModel(text("noted"), text("THE SUMMARY: the number is 7"), text("7")) as server:
        run(go(server))


def test_bad_settings_fail_before_serving_and_end_of_input_exits_0(agi, env, tmp_path):
    r = agi("--acp", "--max-steps", "0", input="")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("agi: ") and len(r.stderr.splitlines()) == 1
    r = agi("--acp", input="")  # no model: served, each session/new says so (test_acp_no_model)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == ""
    with FakeModel(text("unused")) as server:
        r = agi("--acp", server=server, input="")
    assert r.returncode == 0 and r.stdout == "" and r.stderr == ""
    with FakeModel(text("unused")) as server:
        r = agi("--acp", "--sys", str(tmp_path / "missing.md"), server=server, input="")
    assert r.returncode == 2 and "missing.md" in r.stderr
