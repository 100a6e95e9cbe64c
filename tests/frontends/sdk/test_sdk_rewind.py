"""`rewind_files` over the SDK protocol (docs: claude-agent-sdk, checkpoints): the files go back
to their state before the turn a user message began, from agi's checkpoints; the message is
named by the uuid the replayed user message carries (--replay-user-messages) or the SDK gave it.
The Python SDK's ClaudeSDKClient, then raw NDJSON on the real `agi`'s stdin for a dry run."""

from __future__ import annotations

import asyncio
import json

import pytest
from claude_agent_sdk import ClaudeSDKClient, UserMessage
from test_sdk_python import options

from fakeserver import FakeModel, call, calls, text

pytestmark = pytest.mark.timeout(120)

SDK = ("--output-format", "stream-json", "--input-format", "stream-json", "--verbose")


def test_rewind_files_restores_the_files_before_a_user_messages_turn(env, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    a, b = work / "a.txt", work / "b.txt"
    script = [
        call("Write", file_path=str(a), content="one"), text("wrote one"),
        calls(("Write", {"file_path": str(a), "content": "two"}),
              ("Write", {"file_path": str(b), "content": "new"})), text("wrote two"),
    ]  # fmt: skip

    async def talk(opts) -> tuple[list[str], list[str], list[str]]:
        prompts, results, states = [], [], []
        async with ClaudeSDKClient(options=opts) as client:
            for prompt in ("first", "second"):
                await client.query(prompt)
                async for m in client.receive_response():
                    if isinstance(m, UserMessage) and isinstance(m.content, str) and m.uuid:
                        prompts.append(m.uuid)  # the replayed prompt
                    elif isinstance(m, UserMessage) and m.uuid:
                        results.append(m.uuid)  # a tool result's
            await client.rewind_files(prompts[1])
            states.append(f"{a.read_text()} {b.exists()}")
            await client.rewind_files(prompts[0])
            states.append(str(a.exists()))
            for unknown in (results[0], "no-such-message"):
                try:
                    await client.rewind_files(unknown)
                except Exception as e:  # the SDK raises the error answer
                    states.append(str(e))
        return prompts, results, states

    with FakeModel(*script) as server:
        opts = options(env, server, tmp_path, permission_mode="acceptEdits",
                       enable_file_checkpointing=True,
                       extra_args={"replay-user-messages": None})  # fmt: skip
        opts.cwd = str(work)
        prompts, results, states = asyncio.run(talk(opts))
    assert len(prompts) == 2 and len(set(prompts)) == 2
    assert states[:2] == ["one False", "False"]
    assert all("no checkpoint for user message" in s for s in states[2:]) and len(states) == 4


def test_a_dry_run_names_the_files_and_changes_nothing(agi, tmp_path):
    target = tmp_path / "made.txt"
    lines = [
        {"type": "control_request", "request_id": "1", "request": {"subtype": "initialize"}},
        {"type": "user", "uuid": "7d3c2f8e-1b0a-4c9d-8e7f-6a5b4c3d2e1f",
         "message": {"role": "user", "content": "make it"}},
        {"type": "control_request", "request_id": "2", "request": {
            "subtype": "rewind_files", "user_message_id": "7d3c2f8e-1b0a-4c9d-8e7f-6a5b4c3d2e1f",
            "dry_run": True}},
        {"type": "control_request", "request_id": "3", "request": {
            "subtype": "rewind_files", "user_message_id": "other", "dry_run": True}},
    ]  # fmt: skip
    feed = "".join(json.dumps(x) + "\n" for x in lines)
    with FakeModel(call("Write", file_path=str(target), content="x"), text("done")) as server:
        r = agi(*SDK, "--permission-mode", "acceptEdits", server=server, cwd=tmp_path, input=feed)
    assert r.returncode == 0, r.stderr
    out = [json.loads(x) for x in r.stdout.splitlines()]
    answers = {m["response"]["request_id"]: m["response"] for m in out
               if m.get("type") == "control_response"}  # fmt: skip
    assert answers["2"]["subtype"] == "success"
    assert answers["2"]["response"] == {"canRewind": True, "filesChanged": [str(target)]}
    assert answers["3"]["subtype"] == "success" and answers["3"]["response"]["canRewind"] is False
    assert "no checkpoint" in answers["3"]["response"]["error"]
    assert target.read_text() == "x"  # a dry run changes nothing
    (result,) = [m for m in out if m.get("type") == "result"]
    assert result["user_message_uuid"] == "7d3c2f8e-1b0a-4c9d-8e7f-6a5b4c3d2e1f"
    assert not [m for m in out if m.get("isReplay")]  # only under --replay-user-messages


def test_a_resumed_session_rewinds_to_a_message_of_an_earlier_process(env, tmp_path):
    made = tmp_path / "made.txt"

    async def first(opts) -> tuple[str, str]:
        async with ClaudeSDKClient(options=opts) as client:
            await client.query("make it")
            got = [m async for m in client.receive_response()]
        (uid,) = [m.uuid for m in got if isinstance(m, UserMessage) and isinstance(m.content, str)]
        return uid, got[-1].session_id

    async def later(opts, uid: str) -> None:
        async with ClaudeSDKClient(options=opts) as client:
            await client.rewind_files(uid)

    with FakeModel(call("Write", file_path=str(made), content="x"), text("made")) as server:
        replay = {"replay-user-messages": None}
        opts = options(env, server, tmp_path, permission_mode="acceptEdits", extra_args=replay)
        uid, sid = asyncio.run(first(opts))
        assert made.read_text() == "x"
        asyncio.run(later(options(env, server, tmp_path, resume=sid), uid))
    assert not made.exists()
