"""The SDKs' `add_dirs` (--add-dir) under agi's `--sandbox workspace` (docs: claude-agent-sdk,
sandbox): those directories are writable beside the working directory, for commands under real
bubblewrap and for Write alike; anywhere else stays read-only. The Python SDK is the client."""

from __future__ import annotations

import asyncio

import pytest
from test_sandbox import needs_bwrap
from test_sdk_python import collect, options

from fakeserver import FakeModel, call, text

pytestmark = [pytest.mark.timeout(120), needs_bwrap]


def test_add_dir_is_writable_in_the_workspace_sandbox(env, tmp_path):
    work, extra, outside = tmp_path / "work", tmp_path / "extra", tmp_path / "outside"
    for d in (work, extra, outside):
        d.mkdir()
    script = [
        call("Bash", command=f"echo in > {extra}/a.txt"),
        call("Bash", command=f"echo out > {outside}/b.txt"),
        call("Bash", command="echo here > w.txt"),
        call("Write", file_path=str(extra / "c.txt"), content="written"),
        call("Write", file_path=str(outside / "d.txt"), content="no"),
        text("done"),
    ]
    with FakeModel(*script) as server:
        opts = options(env, server, tmp_path, add_dirs=[extra],
                       permission_mode="bypassPermissions",
                       extra_args={"sandbox": "workspace"})  # fmt: skip
        opts.cwd = str(work)
        got = asyncio.run(collect("write around", opts))
        results = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert got[-1].subtype == "success"
    assert (extra / "a.txt").read_text() == "in\n" and (work / "w.txt").read_text() == "here\n"
    assert (extra / "c.txt").read_text() == "written"
    assert not (outside / "b.txt").exists() and not (outside / "d.txt").exists()
    assert "b.txt" in results[1] and "exit code 1" in results[1]  # out of the sandbox's reach
    assert "does not allow writing" in results[4] and str(extra) in results[4]
