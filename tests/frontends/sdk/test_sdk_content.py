"""Image and document blocks in the SDK's user messages (docs: claude-agent-sdk, attachments):
base64 files become the prompt's attachments, so the model's request carries them; a source
agi cannot send is a `result` error naming it, and the process goes on to the next message.
The Python SDK (claude-agent-sdk) is the client, against the scripted model server."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest
from claude_agent_sdk import ClaudeSDKClient, ResultMessage
from test_sdk_python import options

from fakeserver import FakeModel, text

pytestmark = pytest.mark.timeout(120)

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(32))
PDF = b"%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"


def user(*blocks: dict) -> dict:
    return {"type": "user", "message": {"role": "user", "content": list(blocks)},
            "parent_tool_use_id": None, "session_id": "default"}  # fmt: skip


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def talk(opts, *messages: dict) -> list[ResultMessage]:
    """Each message sent in turn through ClaudeSDKClient; the result of each."""
    results = []
    async with ClaudeSDKClient(options=opts) as client:
        for message in messages:

            async def one(m=message):
                yield m

            await client.query(one())
            async for m in client.receive_response():
                if isinstance(m, ResultMessage):
                    results.append(m)
    return results


def test_image_and_pdf_blocks_reach_the_model_as_attachments(env, tmp_path):
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": b64(PNG)}}  # fmt: skip
    pdf = {
        "type": "document",
        "title": "spec.pdf",
        "source": {"type": "base64", "media_type": "application/pdf", "data": b64(PDF)},
    }
    note = {
        "type": "document",
        "title": "notes",
        "source": {"type": "text", "media_type": "text/plain", "data": "plain words"},
    }
    message = user({"type": "text", "text": "what is this?"}, image, pdf, note)
    with FakeModel(text("a picture and a spec")) as server:
        (result,) = asyncio.run(talk(options(env, server, tmp_path), message))
        sent = server.requests[0]["messages"][-1]
    assert (result.subtype, result.result) == ("success", "a picture and a spec")
    parts = sent["content"]
    words = [p["text"] for p in parts if p["type"] == "text"]
    assert "what is this?" in words[0] and 'document title="notes"' in words[0]
    assert "plain words" in words[0]
    urls = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    assert urls == [f"data:image/png;base64,{b64(PNG)}"]
    (file,) = [p["file"] for p in parts if p["type"] == "file"]
    assert file == {"filename": "spec.pdf", "file_data": f"data:application/pdf;base64,{b64(PDF)}"}
    session = Path(env["AGI_HOME"]) / "sessions" / result.session_id
    kept = sorted(p.suffix for p in (session / "attachments").iterdir())
    assert kept == [".pdf", ".png"]
    assert b64(PNG) not in (session / "messages.jsonl").read_text()  # kept once, by name


@pytest.mark.parametrize(
    ("block", "named"),
    [
        ({"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}, "a URL"),
        ({"type": "document", "source": {"type": "file", "file_id": "file_1"}}, "Files API"),
        (
            {
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": "image/png",
                    "data": b64(b"not a picture"),
                },
            },
            "not an image",
        ),
    ],  # fmt: skip
)
def test_a_file_agi_cannot_send_is_an_error_result_and_the_session_goes_on(
    env, tmp_path, block, named
):
    first = user({"type": "text", "text": "look"}, block)
    second = user({"type": "text", "text": "and now?"})
    with FakeModel(text("fine")) as server:
        results = asyncio.run(talk(options(env, server, tmp_path), first, second))
        asked = [json.dumps(r["messages"]) for r in server.requests]
    assert [r.subtype for r in results] == ["error_during_execution", "success"]
    assert results[0].is_error and named in results[0].result and "block 2" in results[0].result
    assert len(asked) == 1 and "look" not in asked[0]  # nothing was sent of the refused one
    assert results[1].session_id == results[0].session_id


def test_a_file_over_the_configured_attach_limit_is_refused(env, tmp_path):
    Path(env["AGI_CONFIG"]).write_text("attach_limit = 16\n")  # PNG here is 40 bytes
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": b64(PNG)}}  # fmt: skip
    first = user({"type": "text", "text": "look"}, image)
    second = user({"type": "text", "text": "and now?"})
    with FakeModel(text("fine")) as server:
        results = asyncio.run(talk(options(env, server, tmp_path), first, second))
        asked = len(server.requests)
    assert [r.subtype for r in results] == ["error_during_execution", "success"]
    assert "over attach_limit (16 bytes)" in results[0].result and "block 2" in results[0].result
    assert asked == 1
