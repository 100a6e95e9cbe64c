"""The TypeScript Claude Agent SDK (tests/sdk_clients, pinned) as the client of agi as its CLI
(pathToClaudeCodeExecutable), against the scripted model server (docs: claude-agent-sdk)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import AGI
from fakeserver import FakeModel, call, text

CLIENTS = Path(__file__).resolve().parents[2] / "sdk_clients"
pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        not (CLIENTS / "node_modules").is_dir() or shutil.which("node") is None,
        reason="npm install --prefix tests/sdk_clients (.ci/run does)",
    ),
]


def run_query(env, server, tmp_path, prompt: str, *more: str) -> list[dict]:
    e = {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}
    done = subprocess.run(
        ["node", str(CLIENTS / "query.mjs"), str(AGI), prompt, *more],
        env=e, cwd=tmp_path, capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_query(env, tmp_path):
    with FakeModel(text("hello from agi")) as server:
        got = run_query(env, server, tmp_path, "hi")
    assert got[-1]["type"] == "result" and got[-1]["result"] == "hello from agi"
    assert got[-1]["subtype"] == "success"


def test_can_use_tool_denies_a_write(env, tmp_path):
    target = tmp_path / "out.txt"
    with FakeModel(call("Write", file_path=str(target), content="x"), text("ok")) as server:
        got = run_query(env, server, tmp_path, "write it", "deny")
        seen = server.requests[-1]["messages"][-1]
    assert not target.exists()
    assert "no Write here" in seen["content"]
    assert got[-1]["subtype"] == "success"


def test_rewind_files_dry_run_then_rewind(env, tmp_path):
    target = tmp_path / "made.txt"
    with FakeModel(call("Write", file_path=str(target), content="x"), text("made")) as server:
        e = {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}
        done = subprocess.run(
            ["node", str(CLIENTS / "rewind.mjs"), str(AGI), "make it"],
            env=e, cwd=tmp_path, capture_output=True, text=True, timeout=90,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    got = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    result = next(m for m in got if m.get("type") == "result")
    dry = next(m for m in got if "dry" in m)
    rewound = next(m for m in got if "rewound" in m)
    assert result["subtype"] == "success" and result["user_message_uuid"] == dry["id"]
    assert dry["dry"] == {"canRewind": True, "filesChanged": [str(target)]}
    assert rewound["rewound"]["canRewind"] is True and not target.exists()
