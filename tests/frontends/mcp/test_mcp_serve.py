"""`agi --mcp-serve` (issue 28, docs: mcp-server): the real executable as an MCP server,
driven by the `mcp` SDK's own client (ClientSession over stdio) against the scripted model.

Each test starts one server and makes several calls through it. Concurrency is shown by the
intervals the commands themselves record; time limits here are hang guards only.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from conftest import AGI
from fakeserver import FakeModel, call, hang, status, text

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mcp") is None, reason="the mcp package is not installed"
)

GUARD = 60  # seconds: a hang guard, never a measure


def model_env(env: dict[str, str], fake: FakeModel) -> dict[str, str]:
    return {**env, "AGI_BASE_URL": fake.url, "AGI_MODEL": "fake-model"}


@asynccontextmanager
async def connect(env: dict[str, str], tmp_path: Path, *options: str):
    """A ClientSession with `agi --mcp-serve OPTIONS` in a subprocess (its stderr to a file)."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=AGI, args=["--mcp-serve", *options], env=env, cwd=str(tmp_path)
    )
    with open(tmp_path / "server-stderr", "a") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def run(body: Any) -> None:
    import anyio

    async def guarded() -> None:
        with anyio.fail_after(GUARD):
            await body()

    anyio.run(guarded)


def one_line(result: Any) -> str:
    """The text of an isError result: exactly one `agi: ...` line."""
    assert result.is_error, result
    [content] = result.content
    assert content.text.startswith("agi: ") and "\n" not in content.text, content.text
    return content.text


def test_lists_the_tool_with_its_schemas(env, tmp_path):
    with FakeModel(text("unused")) as fake:

        async def body() -> None:
            async with connect(model_env(env, fake), tmp_path) as s:
                [tool] = (await s.list_tools()).tools
                assert tool.name == "agi"
                props = tool.input_schema["properties"]
                assert tool.input_schema["required"] == ["prompt"]
                assert set(props) == {
                    "prompt", "session", "cwd", "model", "schema", "exit_code", "sys",
                    "attachments", "ephemeral", "max_steps", "max_cost", "timeout",
                }  # fmt: skip
                out = tool.output_schema
                assert set(out["required"]) == {"answer", "exit", "session", "steps", "usage"}
                assert set(out["properties"]) == set(out["required"]) | {"verdict"}
                usage = out["properties"]["usage"]["required"]
                assert usage == ["input", "output", "cached", "cache_write", "reasoning", "cost"]

        run(body)
        assert fake.requests == []  # listing runs nothing


def test_a_call_answers_as_the_cli_would_and_its_session_continues(agi, env, tmp_path):
    with FakeModel(text("Paris is the capital.")) as fake:
        cli = agi("--no-stdin", "capital of France?", server=fake)
        assert cli.returncode == 0
        found: dict[str, Any] = {}

        async def body() -> None:
            async with connect(model_env(env, fake), tmp_path) as s:
                first = await s.call_tool("agi", {"prompt": "capital of France?"})
                found["first"] = first
                session = first.structured_content["session"]
                found["second"] = await s.call_tool(
                    "agi", {"prompt": "and Spain?", "session": session}
                )

        run(body)
    first, second = found["first"], found["second"]
    assert not first.is_error
    assert first.content[0].text + "\n" == cli.stdout  # the text is what the CLI prints
    out = first.structured_content
    assert out["answer"] == "Paris is the capital." and out["exit"] == 0 and out["steps"] == 1
    assert out["usage"]["input"] == 10 and out["usage"]["output"] == 5
    assert set(out["usage"]) == {"input", "output", "cached", "cache_write", "reasoning", "cost"}
    assert Path(out["session"]).is_absolute() and (Path(out["session"]) / "meta.json").is_file()
    assert second.structured_content["session"] == out["session"]
    sent = [m.get("content") for m in fake.requests[-1]["messages"]]
    assert "capital of France?" in sent and "Paris is the capital." in sent and "and Spain?" in sent


def test_schema_answers_json_and_exit_code_judges(env, tmp_path):
    script = [
        text("Ann is three."),
        text('{"name": "Ann", "age": 3}'),
        text("I cannot know that."),
        text(json.dumps({"reason": "nobody can know", "success": False})),
        text("Bo."),
        text('{"name": "Bo"}'),
    ]
    with FakeModel(*script) as fake:
        found: dict[str, Any] = {}

        async def body() -> None:
            async with connect(model_env(env, fake), tmp_path) as s:
                found["schema"] = await s.call_tool(
                    "agi", {"prompt": "who?", "schema": "name: str, age: int"}
                )
                found["judged"] = await s.call_tool(
                    "agi", {"prompt": "what am I thinking?", "exit_code": True}
                )
                schema = {"type": "object", "properties": {"name": {"type": "string"}}}
                found["object"] = await s.call_tool("agi", {"prompt": "who?", "schema": schema})

        run(body)
    shaped = found["schema"]
    assert not shaped.is_error
    assert shaped.structured_content["answer"] == {"name": "Ann", "age": 3}
    assert shaped.content[0].text == '{"name":"Ann","age":3}'
    stored = Path(shaped.structured_content["session"]) / "messages.jsonl"
    lines = [json.loads(line) for line in stored.read_text().splitlines()]
    assert lines[-1]["content"] == "Ann is three."  # the ghost exchange left nothing behind
    judged = found["judged"]
    assert not judged.is_error  # exit 1 is an answer, not a failure
    assert judged.structured_content["exit"] == 1
    verdict = judged.structured_content["verdict"]  # the CLI's `agi: judged failed: ...` line
    assert verdict == {"success": False, "reason": "nobody can know"}
    assert "verdict" not in shaped.structured_content  # only under exit_code
    assert judged.content[0].text == "I cannot know that."
    assert found["object"].structured_content["answer"] == {"name": "Bo"}  # JSON Schema given


def test_a_failure_is_is_error_with_agis_one_line(env, tmp_path):
    with FakeModel(status(401, {"error": {"message": "bad key"}})) as fake:
        found: dict[str, Any] = {}

        async def body() -> None:
            async with connect(model_env(env, fake), tmp_path) as s:
                found["failed"] = await s.call_tool("agi", {"prompt": "hi"})

        run(body)
    failed = found["failed"]
    line = one_line(failed)
    assert "401" in line or "bad key" in line
    out = failed.structured_content
    assert out["exit"] == 3 and out["answer"] is None
    assert set(out) == {"answer", "exit", "session", "steps", "usage"}
    assert out["session"] and Path(out["session"]).is_dir()


BAD_CALLS = [
    ({}, "prompt: missing"),
    ({"prompt": 5}, "prompt: expected a string, got an integer"),
    ({"prompt": "   "}, "prompt: must not be empty"),
    ({"prompt": "x", "max_steps": "ten"}, "max_steps: expected an integer"),
    ({"prompt": "x", "max_steps": True}, "max_steps: expected an integer, got a boolean"),
    ({"prompt": "x", "max_steps": 0}, "max_steps: must be a positive number"),
    ({"prompt": "x", "timeout": -1}, "timeout: must be a positive number"),
    ({"prompt": "x", "exit_code": 3}, "exit_code: expected true, false or the criteria"),
    ({"prompt": "x", "sys": 4}, "sys: expected a file name"),
    ({"prompt": "x", "colour": "red"}, "unknown field 'colour'"),
    ({"prompt": "x", "tools": "Bash,Write"}, "a call cannot change the tools"),
    ({"prompt": "x", "deny": []}, "a call cannot change the permission rules"),
    ({"prompt": "x", "sandbox": "off"}, "a call cannot change the sandbox"),
    ({"prompt": "x", "schema": "name: strr"}, "unknown type 'strr'"),
    ({"prompt": "x", "schema": ["name"]}, "schema: expected a string, got an array"),
    ({"prompt": "x", "max_steps": 11}, "max_steps 11 is above the server's limit of 10"),
    ({"prompt": "x", "timeout": 1000}, "timeout 1000 s is above the server's limit of 300 s"),
    ({"prompt": "x", "cwd": "/no/such/dir"}, "cwd: not a directory"),
    ({"prompt": "x", "sys": ["/no/such/file"]}, "cannot read /no/such/file"),
]


def test_bad_input_is_refused_with_one_line_and_nothing_is_lost(env, tmp_path):
    precious = tmp_path / "notes.txt"
    precious.write_text("keep me\n")
    bad = [*BAD_CALLS, ({"prompt": "x", "session": str(precious)}, "session: not a directory")]
    with FakeModel(text("fine")) as fake:
        found: list[Any] = []

        async def body() -> None:
            options = ("--max-steps", "10", "--timeout", "300")
            async with connect(model_env(env, fake), tmp_path, *options) as s:
                for arguments, _ in bad:
                    found.append(await s.call_tool("agi", arguments))
                found.append(await s.call_tool("agi", {"prompt": "still there?"}))

        run(body)
        for (arguments, expected), result in zip(bad, found, strict=False):
            line = one_line(result)
            assert expected in line, (arguments, line)
            assert result.structured_content["exit"] == 2
        assert fake.requests and len(fake.requests) == 1  # only the good call reached the model
    assert found[-1].structured_content["answer"] == "fine"
    assert precious.read_text() == "keep me\n"


def test_a_call_narrows_the_server_limits_and_max_cost_is_capped(env, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[prices."fake-model"]\ninput = 1000\noutput = 1000\n')
    script = [call("Bash", command="echo one"), call("Bash", command="echo two"), text("done")]
    with FakeModel(*script) as fake:
        found: dict[str, Any] = {}

        async def body() -> None:
            async with connect(model_env(env, fake), tmp_path, "--max-cost", "0.001") as s:
                found["steps"] = await s.call_tool("agi", {"prompt": "go", "max_steps": 1})
                found["cost"] = await s.call_tool("agi", {"prompt": "go", "max_cost": 100})

        run(body)
    steps = found["steps"]
    assert "step limit reached" in one_line(steps) and steps.structured_content["exit"] == 4
    cost = found["cost"]
    assert "cost limit reached" in one_line(cost) and "$0.001" in one_line(cost)
    assert cost.structured_content["usage"]["cost"] > 0


def test_progress_per_model_call_and_tool_call(env, tmp_path):
    with FakeModel(call("Bash", command="echo hi"), text("done")) as fake:
        seen: list[str] = []

        async def progress(value: float, total: float | None, message: str | None) -> None:
            seen.append(message or "")

        async def body() -> None:
            async with connect(model_env(env, fake), tmp_path) as s:
                got = await s.call_tool("agi", {"prompt": "say hi"}, progress_callback=progress)
                assert got.structured_content["answer"] == "done"

        run(body)
    assert seen == ["model call 1", "Bash: echo hi", "model call 2"]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_cancelled_calls_stop_and_leave_the_session_valid(env, tmp_path):
    pidfile = tmp_path / "pid"
    sleeper = f"echo $$ > {pidfile}; sleep 60"
    script = [call("Bash", command=sleeper), hang(), text("after")]
    with FakeModel(*script) as fake:
        found: dict[str, Any] = {}

        async def body() -> None:
            import anyio

            session = str(tmp_path / "conv")
            async with connect(model_env(env, fake), tmp_path) as s:
                for waiting_for in ("command", "model"):
                    with anyio.CancelScope() as scope:  # leaving it sends notifications/cancelled

                        async def cancel_when_running(what: str = waiting_for) -> None:
                            while (what == "command" and not pidfile.exists()) or (
                                what == "model" and len(fake.requests) < 2
                            ):
                                await anyio.sleep(0.05)
                            await anyio.sleep(0.2)
                            scope.cancel()

                        async with anyio.create_task_group() as tg:
                            tg.start_soon(cancel_when_running)
                            await s.call_tool("agi", {"prompt": "sleep", "session": session})
                    if waiting_for == "command":
                        pid = int(pidfile.read_text())
                        deadline = time.monotonic() + 5  # hang guard: 5x the contract's second
                        while alive(pid) and time.monotonic() < deadline:
                            await anyio.sleep(0.05)
                        found["killed"] = not alive(pid)
                found["after"] = await s.call_tool("agi", {"prompt": "again", "session": session})

        run(body)
    assert found["killed"]
    after = found["after"]
    assert not after.is_error and after.structured_content["answer"] == "after"
    stored = tmp_path / "conv" / "messages.jsonl"
    lines = [json.loads(line) for line in stored.read_text().splitlines()]
    assert lines[-1]["content"] == "after"
    tool_results = [m for m in lines if m["role"] == "tool"]
    assert len(tool_results) == 1  # the killed command has its result: the history is valid


def intervals(path: Path) -> list[tuple[float, float]]:
    """(start, end) pairs a command wrote as `start T` / `end T` lines."""
    words = [line.split() for line in path.read_text().splitlines()]
    starts = [float(t) for kind, t in words if kind == "start"]
    ends = [float(t) for kind, t in words if kind == "end"]
    return list(zip(starts, ends, strict=True))


def test_calls_run_concurrently_and_one_session_serialises(env, tmp_path):
    log = tmp_path / "log"

    def step(body: dict[str, Any]) -> Any:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return text("done")
        name = last["content"].split()[-1]
        mark = f"echo {{}} $(date +%s.%N) >> {log}-{name}"
        return call("Bash", command=f"{mark.format('start')}; sleep 2; {mark.format('end')}")

    with FakeModel(step) as fake:

        async def body() -> None:
            import anyio

            async with connect(model_env(env, fake), tmp_path) as s:

                async def ask(prompt: str, session: str | None = None) -> None:
                    args = {"prompt": prompt} | ({"session": session} if session else {})
                    got = await s.call_tool("agi", args)
                    assert got.structured_content["answer"] == "done", got

                async with anyio.create_task_group() as tg:  # two sessions at once
                    tg.start_soon(ask, "work a")
                    tg.start_soon(ask, "work a")
                shared = str(tmp_path / "shared")
                async with anyio.create_task_group() as tg:  # one session, twice
                    tg.start_soon(ask, "work b", shared)
                    tg.start_soon(ask, "work b", shared)

        run(body)
    (a1, a2), (b1, b2) = sorted(intervals(Path(f"{log}-a"))), sorted(intervals(Path(f"{log}-b")))
    assert a2[0] < a1[1]  # overlapped
    assert b2[0] >= b1[1]  # one after the other


HOOKS = {
    "hooks": {
        "PreToolUse": [
            {"hooks": [{"type": "command", "command": "echo HOOK-LEAK >/proc/$PPID/fd/1; true"}]}
        ]
    }
}


def raw_session(env: dict[str, str], tmp_path: Path, messages: list[dict[str, Any]], *options: str):
    """The server over plain pipes: every stdout line, and its exit code after stdin closes."""
    proc = subprocess.Popen(
        [AGI, "--mcp-serve", *options],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    lines: list[str] = []
    for message in messages:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        proc.stdin.flush()
        if "id" in message:  # wait for its answer
            while True:
                line = proc.stdout.readline()
                assert line, "the server closed stdout"
                lines.append(line)
                if json.loads(line).get("id") == message["id"]:
                    break
    rest, err = proc.communicate(timeout=GUARD)  # closes stdin first
    return lines + rest.splitlines(keepends=True), err, proc.returncode


def test_stdout_carries_nothing_but_mcp_messages(env, tmp_path):
    hooks = tmp_path / "hooks.json"
    hooks.write_text(json.dumps(HOOKS))
    leak = "echo BASH-LEAK; echo BASH-ERR >&2; echo PARENT-LEAK >/proc/$PPID/fd/1; env"
    with FakeModel(call("Bash", command=leak), text("done")) as fake:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}}
        hello["clientInfo"] = {"name": "raw", "version": "1"}
        messages = [
            {"id": 1, "method": "initialize", "params": hello},
            {"method": "notifications/initialized"},
            {
                "id": 2,
                "method": "tools/call",
                "params": {"name": "agi", "arguments": {"prompt": "x"}},
            },
        ]
        keyed = {**model_env(env, fake), "AGI_API_KEY": "sk-test-SECRETKEY-0123456789"}
        lines, err, code = raw_session(keyed, tmp_path, messages, "--hooks", str(hooks))
    assert code == 0  # stdin closed: the server ends, exit 0
    for line in lines:
        assert json.loads(line)["jsonrpc"] == "2.0", line
    answer = json.loads(lines[-1])
    assert answer["id"] == 2 and answer["result"]["structuredContent"]["answer"] == "done"
    assert "LEAK" not in "".join(lines)
    assert "PARENT-LEAK" in err and "HOOK-LEAK" in err  # written to agi's own fd 1: it is stderr
    sent = json.dumps(fake.requests[-1]["messages"])
    assert "BASH-LEAK" in sent  # the command's output went to the model, as it should
    assert "SECRETKEY" not in sent and "SECRETKEY" not in "".join(lines)  # no child has the key


def test_the_server_rules_hold_for_every_call(env, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("here\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    system = tmp_path / "terse.md"
    system.write_text("Be terse.")
    script = [
        call("Bash", command=f"rm {victim}"),
        text("tried"),
        call("Bash", command="pwd"),
        text("ok"),
    ]
    with FakeModel(*script) as fake:
        found: dict[str, Any] = {}

        async def body() -> None:
            async with connect(model_env(env, fake), tmp_path, "--deny", "Bash(rm:*)") as s:
                found["rm"] = await s.call_tool("agi", {"prompt": "delete it"})
                found["pwd"] = await s.call_tool(
                    "agi",
                    {"prompt": "where?", "cwd": str(sub), "sys": str(system), "model": "other-m"},
                )

        run(body)
        assert victim.read_text() == "here\n"  # the deny rule held
        denied = json.dumps(fake.requests[1]["messages"])
        assert "denied by permission rule" in denied
        assert str(sub) in json.dumps(fake.requests[3]["messages"])  # the call's cwd
        assert fake.requests[3]["model"] == "other-m"  # the call's model
        assert fake.requests[3]["messages"][0] == {"role": "system", "content": "Be terse."}
    assert found["pwd"].structured_content["answer"] == "ok"


def test_stdin_closed_while_a_call_runs_ends_the_server_and_its_commands(env, tmp_path):
    pidfile = tmp_path / "pid"
    with FakeModel(call("Bash", command=f"echo $$ > {pidfile}; sleep 60"), text("x")) as fake:
        proc = subprocess.Popen(
            [AGI, "--mcp-serve"],
            env=model_env(env, fake),
            cwd=tmp_path,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdin is not None
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}}
        hello["clientInfo"] = {"name": "raw", "version": "1"}
        for message in (
            {"id": 1, "method": "initialize", "params": hello},
            {"method": "notifications/initialized"},
            {
                "id": 2,
                "method": "tools/call",
                "params": {"name": "agi", "arguments": {"prompt": "x"}},
            },
        ):
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        proc.stdin.flush()
        deadline = time.monotonic() + GUARD
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        pid = int(pidfile.read_text())
        try:
            proc.communicate(timeout=GUARD)  # closes stdin first
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
    assert proc.returncode == 0
    assert not alive(pid)


def test_a_call_waiting_for_its_session_gives_up_at_its_timeout(env, tmp_path):
    started = tmp_path / "started"
    script = [call("Bash", command=f"touch {started}; sleep 3"), text("first done")]
    with FakeModel(*script) as fake:
        found: dict[str, Any] = {}

        async def body() -> None:
            import anyio

            shared = str(tmp_path / "shared")
            async with connect(model_env(env, fake), tmp_path) as s:

                async def first() -> None:
                    found["first"] = await s.call_tool("agi", {"prompt": "a", "session": shared})

                async def second() -> None:
                    while not started.exists():
                        await anyio.sleep(0.05)
                    args = {"prompt": "b", "session": shared, "timeout": 0.5}
                    found["second"] = await s.call_tool("agi", args)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(first)
                    tg.start_soon(second)

        run(body)
        assert len(fake.requests) == 2  # the second call never reached the model
    assert found["first"].structured_content["answer"] == "first done"
    line = one_line(found["second"])
    assert "time limit reached" in line and found["second"].structured_content["exit"] == 4


def inspector() -> str | None:
    """The MCP Inspector's command line (npm `@modelcontextprotocol/inspector`): $MCP_INSPECTOR,
    or installed beside the test servers (`npm install --prefix tests/mcp_servers ...`)."""
    import shutil

    local = Path(__file__).parents[2] / "mcp_servers" / "node_modules" / ".bin" / "mcp-inspector"
    found = os.environ.get("MCP_INSPECTOR") or (str(local) if local.exists() else None)
    return found if found and shutil.which("node") else None


@pytest.mark.skipif(inspector() is None, reason="the MCP Inspector (npm) and node are not here")
def test_a_client_nobody_here_wrote_the_mcp_inspector(env, tmp_path):
    with FakeModel(text("The answer is 42.")) as fake:
        given = model_env(env, fake)
        passed = [f"-e{k}={given[k]}" for k in ("AGI_BASE_URL", "AGI_MODEL", "AGI_HOME")]
        passed.append(f"-eAGI_CONFIG={given['AGI_CONFIG']}")
        base = [inspector(), "--cli", *passed, AGI, "--mcp-serve", "--max-steps", "10"]

        def inspect(*more: str) -> Any:
            done = subprocess.run(
                [*base, *more], capture_output=True, text=True, timeout=GUARD, cwd=tmp_path
            )
            assert done.returncode == 0, done.stderr
            return json.loads(done.stdout)

        [tool] = inspect("--method", "tools/list")["tools"]
        call = ["--method", "tools/call", "--tool-name", "agi"]
        answered = inspect(*call, "--tool-arg", "prompt=hello")
        refused = inspect(*call, "--tool-arg", "prompt=hello", "--tool-arg", "max_steps=11")
    assert tool["name"] == "agi" and tool["outputSchema"]["required"]
    assert answered["structuredContent"]["answer"] == "The answer is 42."
    assert answered["content"][0]["text"] == "The answer is 42." and not answered["isError"]
    assert refused["isError"] and "above the server's limit of 10" in refused["content"][0]["text"]
