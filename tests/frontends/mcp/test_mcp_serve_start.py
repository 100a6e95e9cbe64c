"""`agi --mcp-serve` at start (issue 41, docs: mcp-server): with no model configured it
serves, and each call is an `isError` result with agi's one line; `-v` counts steps in
English."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from test_mcp_serve import connect, model_env, one_line, run

from fakeserver import FakeModel, text

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mcp") is None, reason="the mcp package is not installed"
)


def test_no_model_is_each_calls_error_and_the_server_keeps_serving(env, tmp_path):
    bare = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}  # Zed's `"env": {}`
    bare.update(AGI_HOME=env["AGI_HOME"], AGI_CONFIG=env["AGI_CONFIG"])
    found: dict[str, object] = {}

    async def body() -> None:
        async with connect(bare, tmp_path) as s:
            found["tools"] = [t.name for t in (await s.list_tools()).tools]
            found["calls"] = [await s.call_tool("agi", {"prompt": "hi"}) for _ in range(2)]

    run(body)
    assert found["tools"] == ["agi"]
    for result in found["calls"]:  # type: ignore[attr-defined]
        line = one_line(result)
        assert line.startswith("agi: no model configured: pass -m PROVIDER:MODEL"), line
        assert env["AGI_CONFIG"] in line
        assert result.structured_content["exit"] == 2
    assert not (Path(env["AGI_HOME"]) / "sessions").exists() or not any(
        (Path(env["AGI_HOME"]) / "sessions").iterdir()
    )


def test_verbose_counts_one_step_in_the_singular(env, tmp_path):
    with FakeModel(text("done")) as fake:

        async def body() -> None:
            async with connect(model_env(env, fake), tmp_path, "-v") as s:
                assert [t.name for t in (await s.list_tools()).tools] == ["agi"]
                assert not (await s.call_tool("agi", {"prompt": "hi"})).is_error

        run(body)
    log = (tmp_path / "server-stderr").read_text()
    assert "agi: call 1: exit 0, 1 step\n" in log or "agi: call 1: exit 0, 1 step," in log, log
    assert "1 steps" not in log
    # initialize and tools/list were answered before the SDK loaded, as the SDK answered them
    assert "answered early as" not in log and "Traceback" not in log, log
