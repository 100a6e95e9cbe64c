"""`agi --acp`: cancel, a client that never answers or goes away, several sessions at once
(docs: acp). No wall-clock assertions: hang guards only, and concurrency shown by
the intervals the commands themselves record."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from acp_client import Agent, Recorder, agi_argv, alive, run, wait_for

from conftest import AGI
from fakeserver import FakeModel, call, hang, text

pytestmark = pytest.mark.timeout(120)
GUARD = 10  # seconds: a cancel is expected within one


def fake_env(env: dict[str, str], server: FakeModel) -> dict[str, str]:
    return {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}


def valid_session(sid: str) -> list[dict]:
    """Every line of messages.jsonl parses, and every tool call has its result."""
    lines = [json.loads(line) for line in (Path(sid) / "messages.jsonl").read_text().splitlines()]
    calls = {c["id"] for m in lines for c in m.get("tool_calls") or []}
    answered = {m["tool_call_id"] for m in lines if m["role"] == "tool"}
    assert calls == answered
    return lines


def test_cancel_closes_the_model_request_and_the_session_goes_on(env, tmp_path):
    async def go(server: FakeModel) -> None:
        client = Recorder()
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            turn = asyncio.ensure_future(agent.prompt(sid, "wait forever"))
            await wait_for(lambda: server.requests)
            await agent.conn.cancel(session_id=sid)
            reply = await asyncio.wait_for(turn, GUARD)
            assert reply.stop_reason == "cancelled"
            assert (await agent.prompt(sid, "again")).stop_reason == "end_turn"
            assert client.text(sid) == "after"
            await agent.close()
            agent.assert_valid()
        valid_session(sid)

    with FakeModel(hang(), text("after")) as server:
        run(go(server))


def test_cancel_kills_running_commands(env, tmp_path):
    pid = tmp_path / "pid"
    argv = agi_argv(AGI, "--permission-mode", "bypassPermissions")

    async def go(server: FakeModel) -> None:
        client = Recorder()
        async with Agent(argv, fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            turn = asyncio.ensure_future(agent.prompt(sid, "sleep"))
            await wait_for(lambda: pid.exists() and pid.read_text().strip())
            await agent.conn.cancel(session_id=sid)
            assert (await asyncio.wait_for(turn, GUARD)).stop_reason == "cancelled"
            await wait_for(lambda: not alive(int(pid.read_text())), GUARD)
            failed = client.of(sid, "tool_call_update")[-1]
            assert failed["status"] == "failed"
            assert (await agent.prompt(sid, "again")).stop_reason == "end_turn"
            await agent.close()
            agent.assert_valid()
        valid_session(sid)

    with FakeModel(call("Bash", command=f"echo $$ > {pid}; exec sleep 60"), text("ok")) as server:
        run(go(server))


def test_a_client_that_never_answers_a_permission_request_can_still_cancel(env, tmp_path):
    async def go(server: FakeModel) -> None:
        client = Recorder(answer=None)
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            turn = asyncio.ensure_future(agent.prompt(sid, "ask me"))
            await wait_for(lambda: client.asked)
            await agent.conn.cancel(session_id=sid)
            assert (await asyncio.wait_for(turn, GUARD)).stop_reason == "cancelled"
            assert not (tmp_path / "made").exists()
            assert client.of(sid, "tool_call_update")[-1]["status"] == "failed"
            client.answer = "allow_once"
            assert (await agent.prompt(sid, "again")).stop_reason == "end_turn"
            await agent.close()
            agent.assert_valid()
        valid_session(sid)

    with FakeModel(call("Bash", command=f"touch {tmp_path / 'made'}"), text("fine")) as server:
        run(go(server))


def test_a_client_that_disconnects_mid_turn(agi, env, tmp_path):
    pid = tmp_path / "pid"
    argv = agi_argv(AGI, "--permission-mode", "bypassPermissions")

    async def go(server: FakeModel) -> str:
        client = Recorder()
        agent = Agent(argv, fake_env(env, server), tmp_path, client)
        async with agent:
            sid = await agent.start()
            turn = asyncio.ensure_future(agent.prompt(sid, "sleep"))
            await wait_for(lambda: pid.exists() and pid.read_text().strip())
            code = await agent.close(timeout=GUARD)
            assert code == 0
            with pytest.raises(ConnectionError):
                await turn  # the client went away: its request is answered by no one
            agent.assert_valid()
        await wait_for(lambda: not alive(int(pid.read_text())), GUARD)
        return sid

    with FakeModel(call("Bash", command=f"echo $$ > {pid}; exec sleep 60")) as server:
        sid = run(go(server))
    valid_session(sid)
    with FakeModel(text("still here")) as server:
        r = agi("-s", sid, "are you there", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "still here"


def test_several_sessions_run_their_prompts_at_once(env, tmp_path):
    argv = agi_argv(AGI, "--permission-mode", "bypassPermissions")

    def step(body: dict) -> dict:
        asked = body["messages"][-1]
        if asked["role"] == "tool":
            return text("done")
        name = asked["content"]
        other = tmp_path / ("b" if name == "a" else "a")
        # each command waits (up to 20 s) until the other has started: they overlap only if
        # the two turns really run at once
        command = (
            f"date +%s.%N > {tmp_path / name}.start; "
            f"for i in $(seq 200); do [ -e {other}.start ] && break; sleep 0.1; done; "
            f"date +%s.%N > {tmp_path / name}.end"
        )
        return call("Bash", command=command)

    async def go(server: FakeModel) -> None:
        client = Recorder()
        async with Agent(argv, fake_env(env, server), tmp_path, client) as agent:
            one = await agent.start()
            new = await agent.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            two = new.session_id
            assert one != two
            replies = await asyncio.gather(agent.prompt(one, "a"), agent.prompt(two, "b"))
            assert [r.stop_reason for r in replies] == ["end_turn", "end_turn"]
            assert client.text(one) == "done" and client.text(two) == "done"
            await agent.close()
            agent.assert_valid()

    with FakeModel(step) as server:
        run(go(server))
    times = {n: float((tmp_path / n).read_text()) for n in ("a.start", "a.end", "b.start", "b.end")}
    assert times["a.start"] < times["b.end"] and times["b.start"] < times["a.end"]
