"""An editor's image blocks and blob resources (docs: attachments): `agi --acp` takes them as
the prompt's attachments, sent in the request's own form and kept once in the session; a block
agi cannot send is the prompt's error, with nothing sent."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest
from acp_client import Agent, Recorder, acp, agi_argv, run
from test_attachments import PDF, png_bytes

from conftest import AGI
from fakeserver import FakeModel, text

pytestmark = pytest.mark.timeout(120)


def test_image_blocks_and_blob_resources_are_attachments(env, tmp_path: Path) -> None:
    image = png_bytes(6)
    b64 = base64.b64encode(image).decode()
    pdf64 = base64.b64encode(PDF).decode()
    found: dict[str, object] = {}

    async def go(server: FakeModel) -> None:
        client = Recorder()
        agent_env = {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}
        async with Agent(agi_argv(AGI), agent_env, tmp_path, client) as agent:
            init = await agent.conn.initialize(protocol_version=1)
            found["image"] = init.agent_capabilities.prompt_capabilities.image
            sid = await agent.start()
            blocks = [
                acp.text_block("what are these?"),
                acp.image_block(b64, "image/png"),
                acp.resource_block(
                    acp.embedded_blob_resource(
                        "file:///letter.pdf", pdf64, mime_type="application/pdf"
                    )
                ),
            ]
            reply = await agent.conn.prompt(session_id=sid, prompt=blocks)
            found["stop"] = reply.stop_reason
            found["sent"] = len(server.requests)
            bad = [
                acp.text_block("and this?"),
                acp.image_block(base64.b64encode(b"not a picture").decode(), "image/png"),
            ]
            with pytest.raises(Exception) as refused:
                await agent.conn.prompt(session_id=sid, prompt=bad)
            found["refused"] = str(refused.value)
            found["after"] = len(server.requests)
            found["sid"] = sid
            await agent.close()
            agent.assert_valid()

    with FakeModel(text("a picture and a letter")) as server:
        run(go(server))
        requests = list(server.requests)
    assert found["image"] is True
    assert found["stop"] == "end_turn"
    content = requests[0]["messages"][-1]["content"]
    assert content[0] == {"type": "text", "text": "what are these?"}
    assert content[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64}"}}
    assert content[2] == {
        "type": "file",
        "file": {"filename": "letter.pdf", "file_data": f"data:application/pdf;base64,{pdf64}"},
    }
    session = Path(str(found["sid"]))
    kept = session / "attachments" / f"{hashlib.sha256(image).hexdigest()}.png"
    assert kept.read_bytes() == image
    assert b64 not in (session / "messages.jsonl").read_text()
    assert "not an image (PNG, JPEG, GIF, WebP) or a PDF" in str(found["refused"])
    assert found["sent"] == found["after"] == 1


def test_a_file_over_the_configured_attach_limit_is_refused(env, tmp_path: Path) -> None:
    Path(env["AGI_CONFIG"]).write_text("attach_limit = 100\n")
    found: dict[str, object] = {}

    async def go(server: FakeModel) -> None:
        agent_env = {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}
        async with Agent(agi_argv(AGI), agent_env, tmp_path, Recorder()) as agent:
            await agent.conn.initialize(protocol_version=1)
            sid = await agent.start()
            big = acp.image_block(base64.b64encode(png_bytes(64)).decode(), "image/png")
            with pytest.raises(Exception) as refused:
                await agent.conn.prompt(session_id=sid, prompt=[acp.text_block("see"), big])
            found["refused"] = str(refused.value)
            small = acp.image_block(base64.b64encode(png_bytes(1)).decode(), "image/png")
            reply = await agent.conn.prompt(session_id=sid, prompt=[acp.text_block("so"), small])
            found["stop"] = reply.stop_reason
            await agent.close()
            agent.assert_valid()

    with FakeModel(text("a small one")) as server:
        run(go(server))
        sent = len(server.requests)
    assert "over attach_limit (100 bytes)" in str(found["refused"])
    assert found["stop"] == "end_turn" and sent == 1
