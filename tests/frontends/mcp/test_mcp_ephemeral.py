"""MCP calls take `ephemeral` (docs: volume, mcp-server): the call's run keeps nothing under
AGI_HOME and its result's `session` is null; with `session` or not a boolean it is refused."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from test_mcp_serve import connect, model_env, one_line, run

from fakeserver import FakeModel, text

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mcp") is None, reason="the mcp package is not installed"
)


def files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def test_an_ephemeral_call_keeps_nothing(env, tmp_path: Path) -> None:
    home = Path(env["AGI_HOME"])
    found: dict[str, Any] = {}
    with FakeModel(text("kept nowhere"), text("kept")) as fake:

        async def body() -> None:
            async with connect(model_env(env, fake), tmp_path) as s:
                [tool] = (await s.list_tools()).tools
                found["schema"] = tool.input_schema["properties"]["ephemeral"]
                found["before"] = files(home)
                found["ephemeral"] = await s.call_tool("agi", {"prompt": "hi", "ephemeral": True})
                found["after"] = files(home)
                found["kept"] = await s.call_tool("agi", {"prompt": "hi", "ephemeral": False})
                found["both"] = await s.call_tool(
                    "agi", {"prompt": "hi", "ephemeral": True, "session": str(tmp_path / "s")}
                )
                found["bad"] = await s.call_tool("agi", {"prompt": "hi", "ephemeral": "yes"})

        run(body)
    assert found["schema"]["type"] == "boolean"
    done = found["ephemeral"].structured_content
    assert not found["ephemeral"].is_error and done["answer"] == "kept nowhere"
    assert done["session"] is None and done["exit"] == 0
    assert found["after"] == found["before"]
    kept = found["kept"].structured_content
    assert kept["answer"] == "kept" and Path(kept["session"]).is_dir()
    assert "cannot continue or make a session" in one_line(found["both"])
    assert not (tmp_path / "s").exists()
    assert one_line(found["bad"]).endswith("ephemeral: expected true or false, got a string")
    assert found["bad"].structured_content["exit"] == 2
