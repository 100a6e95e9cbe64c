"""`agi --mcp-serve` within bounds (docs: mcp-server, security): stdin lines are read in linear
time up to a bound, each bad line (over the bound, not JSON, nested too deep, no JSON-RPC
message) answered once with an error naming its line, and the server goes on; a call's `sys`
naming a device is refused unread; a cancelled call waiting on a stuck MCP tool ends within a
second and its session is free for the next call. The real executable; hang guards only."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from test_mcp_serve import connect, model_env, one_line, run

from conftest import AGI
from fakeserver import FakeModel, call, text

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mcp") is None, reason="the mcp package is not installed"
)
GUARD = 60  # seconds: hang guards only
MCP_SERVER = Path(__file__).parents[2] / "mcp_servers" / "server.py"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


def test_bad_lines_are_answered_once_each_and_the_server_goes_on(env, tmp_path):
    server = subprocess.Popen(
        [AGI, "--mcp-serve"],
        env={**env, "AGI_BASE_URL": "http://127.0.0.1:9/v1", "AGI_MODEL": "fake-model"},
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert server.stdin is not None and server.stdout is not None
    got: dict[str, Any] = {}

    def send(data: bytes) -> None:
        assert server.stdin is not None
        server.stdin.write(data)
        server.stdin.flush()

    def read() -> dict:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line, "the server ended"
        return json.loads(line)

    def body() -> None:
        send(json.dumps(INITIALIZE).encode() + b"\n")
        got["init"] = read()
        send(b'{"jsonrpc": "2.0", "id": 7, "method": "x", "params": ' + b"[" * 100_000 + b"\n")
        got["deep"] = read()
        for _ in range(64):  # 64 MB without a newline
            send(b"x" * (1 << 20))
        send(b"rest of it\n")
        got["long"] = read()
        send(b'{"not": "a message"}\n')
        got["nothing"] = read()
        send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).encode() + b"\n")
        got["list"] = read()

    worker = threading.Thread(target=body, daemon=True)
    worker.start()
    worker.join(GUARD * 3)
    alive = worker.is_alive()
    server.stdin.close()
    try:
        server.wait(GUARD)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    assert server.stderr is not None
    err = server.stderr.read()
    assert not alive, f"hung after {sorted(got)}"
    assert got["init"]["id"] == 0
    assert got["deep"]["id"] is None and got["deep"]["error"]["code"] == -32700
    assert "line 2" in got["deep"]["error"]["message"]
    assert "nested too deep" in got["deep"]["error"]["message"]
    assert got["long"]["error"]["code"] == -32600 and "line 3" in got["long"]["error"]["message"]
    assert got["nothing"]["error"]["code"] == -32600  # the long line was answered once
    assert got["list"]["id"] == 2 and got["list"]["result"]["tools"][0]["name"] == "agi"
    assert server.returncode == 0 and b"Traceback" not in err


def test_a_call_naming_a_device_as_sys_is_refused_unread(env, tmp_path):
    with FakeModel(text("unused")) as fake:
        found: dict[str, Any] = {}

        async def body() -> None:
            async with connect(model_env(env, fake), tmp_path) as s:
                found["zero"] = await s.call_tool("agi", {"prompt": "hi", "sys": "/dev/zero"})
                found["ok"] = await s.call_tool("agi", {"prompt": "hi"})

        run(body)
    refused = one_line(found["zero"])
    assert "/dev/zero" in refused and "not a regular file" in refused
    assert not found["ok"].is_error and len(fake.requests) == 1


def test_a_cancelled_call_on_a_stuck_mcp_tool_frees_its_session(env, tmp_path):
    mark = tmp_path / "called"
    servers = {
        "mcpServers": {
            "slow": {
                "command": sys.executable,
                "args": [str(MCP_SERVER)],
                "env": {"MCP_CALL_MARK": str(mark)},
            }
        }
    }
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps(servers))
    script = [call("mcp__slow__sleep", seconds=600), text("after")]
    options = ("--mcp", str(config), "--permission-mode", "bypassPermissions")
    with FakeModel(*script) as fake:
        found: dict[str, Any] = {}

        async def body() -> None:
            import anyio

            session = str(tmp_path / "conv")
            async with connect(model_env(env, fake), tmp_path, *options) as s:
                with anyio.CancelScope() as scope:  # leaving it sends notifications/cancelled

                    async def cancel_when_called() -> None:
                        while not mark.exists():
                            await anyio.sleep(0.05)
                        scope.cancel()

                    async with anyio.create_task_group() as tg:
                        tg.start_soon(cancel_when_called)
                        await s.call_tool("agi", {"prompt": "sleep", "session": session})
                with anyio.fail_after(15):  # the MCP call itself would wait 600 s
                    found["after"] = await s.call_tool(
                        "agi", {"prompt": "again", "session": session}
                    )

        run(body)
    after = found["after"]
    assert not after.is_error and after.structured_content["answer"] == "after"
