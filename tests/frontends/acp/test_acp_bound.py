"""`agi --acp` keeps the operator's options (docs: acp, security): `--permission-mode dontAsk`
binds every session (reported as the nearest ACP mode, with a description saying so), relative
path rules stay anchored where the server resolved them whatever `cwd` a session names, and the
key is redacted from every update. The real executable through the `acp` library's client."""

from __future__ import annotations

import json
import uuid

import pytest
from acp_client import Agent, Recorder, acp, agi_argv, run

from conftest import AGI
from fakeserver import FakeModel, call, text

pytestmark = pytest.mark.timeout(120)


def fake_env(env: dict[str, str], server: FakeModel, **more: str) -> dict[str, str]:
    return {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model", **more}


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_dont_ask_binds_every_session_and_is_never_relaxed_to_asking(env, tmp_path):
    marks = [tmp_path / f"ran{i}" for i in range(2)]
    script = [
        call("Bash", command=f"touch {marks[0]}"),
        text("first"),
        call("Bash", command=f"touch {marks[1]}"),
        text("second"),
    ]

    async def go(server: FakeModel) -> None:
        client = Recorder(answer="allow_once")  # a client that would approve anything
        argv = agi_argv(AGI, "--permission-mode", "dontAsk")
        async with Agent(argv, fake_env(env, server), tmp_path, client) as agent:
            await agent.conn.initialize(protocol_version=1)
            new = await agent.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            sid = new.session_id
            current = new.modes.current_mode_id
            assert current in {m.id for m in new.modes.available_modes}
            shown = next(m for m in new.modes.available_modes if m.id == current)
            assert "dontAsk" in (shown.description or ""), shown
            await agent.prompt(sid, "one")
            # the client picks the mode the server reports, or a laxer one: dontAsk stays
            await agent.conn.set_session_mode(session_id=sid, mode_id=current)
            with pytest.raises(acp.RequestError) as refused:
                await agent.conn.set_session_mode(session_id=sid, mode_id="bypassPermissions")
            assert "dontAsk" in str(refused.value.data or refused.value), refused.value
            await agent.prompt(sid, "two")
            await agent.close()
            agent.assert_valid()
        assert client.asked == []  # nothing was put to the editor
        for request in (server.requests[1], server.requests[3]):
            result = tool_results(request)[-1]
            assert "permission mode dontAsk" in result, result

    with FakeModel(*script) as server:
        run(go(server))
    assert not any(mark.exists() for mark in marks)


def test_relative_path_rules_stay_anchored_whatever_the_session_cwd(env, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "secrets").mkdir()
    target = tmp_path / "secrets" / "key.txt"
    script = [call("Write", file_path="../secrets/key.txt", content="pwned"), text("tried")]

    async def go(server: FakeModel) -> None:
        client = Recorder(answer="allow_once")
        argv = agi_argv(AGI, "--deny", "Write(secrets/**)")
        async with Agent(argv, fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start(cwd=tmp_path / "src")
            await agent.prompt(sid, "write it")
            await agent.close()
        (result,) = tool_results(server.requests[1])
        assert "denied by permission rule" in result, result

    with FakeModel(*script) as server:
        run(go(server))
    assert not target.exists()


def test_every_update_is_redacted(env, tmp_path):
    key = 'sk-a"cp\\x-' + uuid.uuid4().hex
    secret = tmp_path / "notes.txt"
    secret.write_text(f"token={key}\n")
    script = [
        call("Bash", command=f"cat {secret}; echo '{key}' > copy.txt"),
        call("Read", file_path=str(secret)),
        text(f"The key is {key}, done."),
    ]

    async def go(server: FakeModel) -> None:
        client = Recorder(answer="allow_once")
        async with Agent(
            agi_argv(AGI), fake_env(env, server, AGI_API_KEY=key), tmp_path, client
        ) as agent:
            sid = await agent.start()
            await agent.prompt(sid, "show me")
            await agent.close()
            agent.assert_valid()
        everything = json.dumps([u for _, u, _ in client.updates] + client.asked)
        assert key not in everything and json.dumps(key)[1:-1] not in everything
        assert "[REDACTED]" in client.text(sid)
        assert len(client.of(sid, "tool_call")) == 2

    with FakeModel(*script) as server:
        run(go(server))


def test_a_session_model_may_only_use_providers_the_operator_configured(env, tmp_path):
    from test_mcp_serve_bound import listener

    key = "sk-operator-" + uuid.uuid4().hex
    ears = [listener(11434)]

    async def go(server: FakeModel) -> None:
        client = Recorder()
        server_env = {
            **env,
            "OPENAI_BASE_URL": server.url,
            "AGI_MODEL": "openai:fake-model",
            "AGI_API_KEY": key,
        }
        async with Agent(agi_argv(AGI), server_env, tmp_path, client) as agent:
            sid = await agent.start()
            with pytest.raises(acp.RequestError) as refused:
                await agent.conn.set_config_option(
                    config_id="model", session_id=sid, value="ollama:x"
                )
            said = str(refused.value)
            assert "model: " in said and "ollama" in said, said
            reply = await agent.prompt(sid, "hi")  # the session keeps the operator's model
            assert reply.stop_reason == "end_turn"
            await agent.close()
            agent.assert_valid()

    try:
        with FakeModel(text("fine")) as server:
            run(go(server))
            assert server.headers[0]["Authorization"] == f"Bearer {key}"
    finally:
        for ear in ears:
            if ear is not None:
                ear.close()
    for ear in ears:
        if ear is not None:
            assert ear.heads == []
