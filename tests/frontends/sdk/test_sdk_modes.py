"""The SDK protocol's permission modes (docs: claude-agent-sdk): a mode agi does not
know, asked for by a `set_permission_mode` control request, is an error answer and changes
nothing (it had been kept, and a mode that is none of those that deny or ask let every call run).
Driven as the SDKs do it, NDJSON on the real `agi`'s stdin, and by the Python SDK. Found by the
sixth round of probes."""

from __future__ import annotations

import asyncio
import json

from claude_agent_sdk import ClaudeSDKClient, ResultMessage
from test_sdk_python import options

from fakeserver import FakeModel, calls, text

SDK = ("--output-format", "stream-json", "--input-format", "stream-json", "--verbose")


def test_an_unknown_mode_is_refused_and_the_flags_mode_holds(agi, tmp_path):
    lines = [
        {"type": "control_request", "request_id": "1", "request": {"subtype": "initialize"}},
        {"type": "control_request", "request_id": "2",
         "request": {"subtype": "set_permission_mode", "mode": "bogusMode"}},
        {"type": "user", "message": {"role": "user", "content": "go"}},
    ]  # fmt: skip
    feed = "".join(json.dumps(x) + "\n" for x in lines)
    steps = [calls(("Write", {"file_path": "made.txt", "content": "x"})), text("done")]
    with FakeModel(*steps) as server:
        r = agi(*SDK, "--permission-mode", "plan", server=server, cwd=tmp_path, input=feed)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    out = [json.loads(x) for x in r.stdout.splitlines()]
    (answer,) = [m["response"] for m in out if m.get("type") == "control_response"
                 and m["response"].get("request_id") == "2"]  # fmt: skip
    assert answer["subtype"] == "error" and "bogusMode" in answer["error"]
    init = [m for m in out if m.get("subtype") == "init"]
    assert init and init[0]["permissionMode"] == "plan"
    assert not (tmp_path / "made.txt").exists()
    assert out[-1]["type"] == "result"


def test_the_python_sdk_raises_the_error_of_an_unknown_mode(env, tmp_path):
    async def talk(opts) -> tuple[str, list[ResultMessage]]:
        async with ClaudeSDKClient(options=opts) as client:
            try:
                await client.set_permission_mode("bogusMode")
                said = ""
            except Exception as e:  # the SDK raises the error answer
                said = str(e)
            await client.query("go")
            got = [m async for m in client.receive_response()]
            return said, [m for m in got if isinstance(m, ResultMessage)]

    made = tmp_path / "made.txt"
    steps = [calls(("Write", {"file_path": str(made), "content": "x"})), text("ok")]
    with FakeModel(*steps) as server:
        said, results = asyncio.run(talk(options(env, server, tmp_path, permission_mode="plan")))
    assert "bogusMode" in said
    assert results[-1].subtype == "success" and not made.exists()  # plan holds
