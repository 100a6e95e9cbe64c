"""`agi --acp` within bounds (docs: acp): lines are read in linear time with a bound on the
first one too (a line over it is answered once, and the stream goes on at the next line), JSON
nested too deep is a parse error and the agent goes on; nothing is read for a Write or Edit
before it is allowed (its diff comes then, for regular files up to a bound); a cancel ends a
wait on a stuck MCP tool and the session goes on. The real executable; hang guards only."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from acp_client import Agent, Recorder, acp, agi_argv, run, wait_for

from conftest import AGI
from fakeserver import FakeModel, call, text

pytestmark = pytest.mark.timeout(300)
GUARD = 60  # seconds: hang guards only
MEMORY = 1 << 30  # bytes of address space agi may use where a test says so
MCP_SERVER = Path(__file__).parents[2] / "mcp_servers" / "server.py"
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}


def fake_env(env: dict[str, str], server: FakeModel | None = None) -> dict[str, str]:
    url = server.url if server is not None else "http://127.0.0.1:9/v1"
    return {**env, "AGI_BASE_URL": url, "AGI_MODEL": "fake-model"}


def small() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def message(data: dict) -> bytes:
    return json.dumps(data).encode() + b"\n"


class Raw:
    """agi --acp with its stdin and stdout as pipes, read a line at a time."""

    def __init__(self, env: dict[str, str], cwd: Path, limited: bool = False):
        self.process = subprocess.Popen(
            agi_argv(AGI),
            env=fake_env(env),
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=small if limited else None,
        )

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def read(self) -> dict:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, self.end()
        return json.loads(line)

    def end(self) -> str:
        """Close stdin (agi exits 0) and return what it wrote on stderr."""
        assert self.process.stdin is not None and self.process.stderr is not None
        if not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(GUARD)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        return self.process.stderr.read().decode("utf-8", "replace")


def guarded(body) -> None:
    """Run `body` in a thread with a hang guard (a blocked pipe read would hang the test)."""
    import threading

    failure: list[BaseException] = []

    def work() -> None:
        try:
            body()
        except BaseException as e:
            failure.append(e)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(GUARD * 3)
    assert not thread.is_alive(), "hung"
    if failure:
        raise failure[0]


def test_a_first_line_over_the_bound_is_answered_once_then_the_next_line_is_read(env, tmp_path):
    agent = Raw(env, tmp_path, limited=True)

    def body() -> None:
        for _ in range(64):  # 64 MB without a newline: linear, bounded
            agent.send(b"x" * (1 << 20))
        agent.send(b"tail\n" + message(INITIALIZE))
        refused = agent.read()
        assert refused["id"] is None and refused["error"]["code"] == -32600
        answer = agent.read()  # the over-long line was one message, answered once
        assert answer["id"] == 0 and answer["result"]["protocolVersion"] == 1
        agent.send(message({"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}}))
        assert agent.read()["id"] == 1
        assert "Traceback" not in agent.end()
        assert agent.process.returncode == 0

    guarded(body)


@pytest.mark.parametrize("first", [True, False])
def test_json_nested_too_deep_is_a_parse_error_and_the_agent_goes_on(env, tmp_path, first):
    agent = Raw(env, tmp_path)
    deep = b'{"jsonrpc": "2.0", "id": 5, "method": "x", "params": ' + b"[" * 100_000 + b"\n"

    def body() -> None:
        if not first:
            agent.send(message(INITIALIZE))
            assert agent.read()["id"] == 0
        agent.send(deep)
        refused = agent.read()
        assert refused["error"]["code"] == -32700 and refused["id"] is None
        assert "nested too deep" in refused["error"]["message"]
        assert f"line {1 if first else 2}" in refused["error"]["message"]
        if first:
            agent.send(message(INITIALIZE))
            assert agent.read()["id"] == 0
        agent.send(message({"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}}))
        assert agent.read()["id"] == 1
        assert "Traceback" not in agent.end()
        assert agent.process.returncode == 0

    guarded(body)


def test_nothing_is_read_for_a_write_or_edit_the_checks_refuse(env, tmp_path):
    key = tmp_path / "id_ed25519"
    key.write_text("-----BEGIN PRIVATE KEY----- s3cr3t-key-material\n")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    script = calls_of(
        ("Write", {"file_path": "/dev/zero", "content": "x"}),
        ("Write", {"file_path": str(key), "content": "replaced"}),
        ("Edit", {"file_path": str(fifo), "old_string": "a", "new_string": "b"}),
    )

    async def go(server: FakeModel) -> None:
        client = Recorder(answer="reject_once")
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            sid = await agent.start()
            await agent.conn.set_session_mode(session_id=sid, mode_id="plan")
            reply = await asyncio.wait_for(agent.prompt(sid, "write /dev/zero"), GUARD)
            assert reply.stop_reason == "end_turn"
            await agent.conn.set_session_mode(session_id=sid, mode_id="default")
            reply = await asyncio.wait_for(agent.prompt(sid, "write the key"), GUARD)
            assert reply.stop_reason == "end_turn"
            await agent.conn.set_session_mode(session_id=sid, mode_id="bypassPermissions")
            reply = await asyncio.wait_for(agent.prompt(sid, "edit the fifo"), GUARD)
            assert reply.stop_reason == "end_turn"
            await agent.close()
            agent.assert_valid()
        sent = json.dumps([u for _, u, _ in client.updates] + client.asked)
        assert "s3cr3t-key-material" not in sent  # a denied Write sent no oldText
        assert key.read_text().startswith("-----BEGIN")
        assert len(client.asked) == 1  # the key's Write asked, and was refused

    with FakeModel(*script) as server:
        run(go(server))


def calls_of(*steps: tuple[str, dict]) -> list:
    """Each call in its own turn, answered with text."""
    out: list = []
    for name, args in steps:
        out += [call(name, **args), text(f"{name} done")]
    return out


def test_a_cancel_ends_the_wait_on_a_stuck_mcp_tool(env, tmp_path):
    pytest.importorskip("mcp", reason="the mcp package is not installed")
    mark = tmp_path / "called"

    async def go(server: FakeModel) -> None:
        client = Recorder(answer="allow_once")
        async with Agent(agi_argv(AGI), fake_env(env, server), tmp_path, client) as agent:
            stdio = acp.schema.McpServerStdio(
                name="slow",
                command=sys.executable,
                args=[str(MCP_SERVER)],
                env=[acp.schema.EnvVariable(name="MCP_CALL_MARK", value=str(mark))],
            )
            sid = await agent.start(mcp_servers=[stdio])
            turn = asyncio.ensure_future(agent.prompt(sid, "sleep"))
            await wait_for(mark.exists, GUARD)
            await agent.conn.cancel(session_id=sid)
            reply = await asyncio.wait_for(turn, 10)  # the call waits 600 s by itself
            assert reply.stop_reason == "cancelled"
            again = await asyncio.wait_for(agent.prompt(sid, "again"), GUARD)
            assert again.stop_reason == "end_turn"  # the session is free
            await agent.close()
            agent.assert_valid()

    with FakeModel(call("mcp__slow__sleep", seconds=600), text("after")) as server:
        run(go(server))
