"""MCP calls take `attachments` (docs: attachments): files relative to the call's `cwd`, sent in
the request's own form; a bad file is the call's one-line error, with nothing sent."""

from __future__ import annotations

import base64
import importlib.util
from pathlib import Path
from typing import Any

import pytest
from test_attachments import PDF, png_bytes
from test_mcp_serve import connect, model_env, one_line, run

from fakeserver import FakeModel, text

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mcp") is None, reason="the mcp package is not installed"
)


def test_a_call_sends_its_attachments_and_refuses_a_bad_one(env, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "scan.png").write_bytes(png_bytes(8))
    (work / "letter.pdf").write_bytes(PDF)
    found: dict[str, Any] = {}
    with FakeModel(text("a scan and a letter")) as fake:

        async def body() -> None:
            async with connect(model_env(env, fake), tmp_path) as s:
                found["ok"] = await s.call_tool(
                    "agi",
                    {
                        "prompt": "what?",
                        "cwd": str(work),
                        "attachments": ["scan.png", "letter.pdf"],
                    },
                )
                found["requests"] = len(fake.requests)
                found["bad"] = await s.call_tool(
                    "agi", {"prompt": "what?", "cwd": str(work), "attachments": "gone.png"}
                )

        run(body)
        requests = list(fake.requests)
    assert not found["ok"].is_error, found["ok"]
    assert found["ok"].structured_content["answer"] == "a scan and a letter"
    content = requests[0]["messages"][-1]["content"]
    image = base64.b64encode((work / "scan.png").read_bytes()).decode()
    assert content[1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{image}"},
    }
    assert (
        content[2]["file"]["file_data"]
        == f"data:application/pdf;base64,{base64.b64encode(PDF).decode()}"
    )
    line = one_line(found["bad"])
    assert "gone.png: no such file" in line
    assert found["bad"].structured_content["exit"] == 2
    assert len(requests) == found["requests"] == 1
