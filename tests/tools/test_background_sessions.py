"""Background commands end with what started them where a process outlives one run: the REPL
session (`agi -i`), an ACP session, an `agi --mcp-serve` call. Each test's command line is
unique (`sleep 9NNN.RANDOM`), so the process table shows only its own commands."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import uuid
from pathlib import Path

import pytest

from conftest import AGI
from fakeserver import FakeModel, call, text

TOOLS = ("--tools", "Bash,BashOutput,KillShell", "--allow", "Bash")


def marker() -> str:
    n = uuid.uuid4().int  # unique to this test run: no other test's command line matches it
    return f"sleep 9{n % 1000:03d}.{n // 1000 % 10**9:09d}"


def alive(mark: str) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in ps.splitlines() if mark in line and "ps -eo" not in line]


def model_env(env: dict[str, str], fake: FakeModel) -> dict[str, str]:
    return {**env, "AGI_BASE_URL": fake.url, "AGI_MODEL": "fake-model"}


def test_the_repl_session_ends_its_background_commands(agi, tmp_path):
    mark = marker()
    steps = [
        call("Bash", command=f"{mark}; true", run_in_background=True),
        text("started"),
        call("BashOutput", bash_id="bash_1"),
        text("still running"),
    ]
    with FakeModel(*steps) as server:
        r = agi("-i", *TOOLS, server=server, input="start it\nread it\n")
    assert r.returncode == 0, r.stderr
    read = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"][-1]
    assert read.startswith("<status>running</status>")  # it outlived its turn, in its session
    assert alive(mark) == []  # and ended with the session


@pytest.mark.skipif(importlib.util.find_spec("acp") is None, reason="acp is not installed")
def test_an_acp_session_ends_its_background_commands(env, tmp_path):
    from acp_client import Agent, Recorder, agi_argv

    mark = marker()
    steps = [call("Bash", command=f"{mark}; true", run_in_background=True), text("started")]
    seen: dict[str, list[str]] = {}

    async def go(server: FakeModel) -> None:
        argv = agi_argv(AGI, *TOOLS)
        async with Agent(argv, model_env(env, server), tmp_path, Recorder()) as agent:
            sid = await agent.start()
            reply = await agent.prompt(sid, "start it")
            assert reply.stop_reason == "end_turn"
            seen["after turn"] = alive(mark)
            assert await agent.close() == 0
            agent.assert_valid()

    with FakeModel(*steps) as server:
        asyncio.run(asyncio.wait_for(go(server), 60))  # a hang guard
    assert seen["after turn"]  # the session still holds it
    assert alive(mark) == []


@pytest.mark.skipif(importlib.util.find_spec("mcp") is None, reason="mcp is not installed")
def test_an_mcp_server_call_ends_its_background_commands(env, tmp_path):
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    mark = marker()
    steps = [call("Bash", command=f"{mark}; true", run_in_background=True), text("started")]
    seen: dict[str, object] = {}

    async def body(fake: FakeModel) -> None:
        params = StdioServerParameters(
            command=AGI, args=["--mcp-serve", *TOOLS], env=model_env(env, fake), cwd=str(tmp_path)
        )
        with open(tmp_path / "server-stderr", "a") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                result = await session.call_tool("agi", {"prompt": "start it"})
                seen["answer"] = result.structured_content["answer"]
                seen["after call"] = alive(mark)  # the server still runs; the call ended

    with FakeModel(*steps) as fake:

        async def guarded() -> None:
            with anyio.fail_after(60):  # a hang guard
                await body(fake)

        anyio.run(guarded)
    assert seen["answer"] == "started", Path(tmp_path / "server-stderr").read_text()
    started = [m["content"] for m in fake.requests[-1]["messages"] if m["role"] == "tool"]
    assert started[0].startswith("Command running in background with ID: bash_1")
    assert seen["after call"] == []
    assert alive(mark) == []
