"""The TypeScript Claude Agent SDK's example programs (tests/fixtures/sdk_examples/typescript/,
from anthropics/claude-agent-sdk-demos, MIT) run unchanged with agi as their CLI, against the
scripted model server: tsx runs the example, its `@anthropic-ai/claude-agent-sdk` the pinned
SDK of tests/sdk_clients with `pathToClaudeCodeExecutable` set to agi (with_agi.mjs), and the
environment does the rest. Each case is the example and the model's replies; those left out
are listed in SOURCES.md there, with the reason."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import AGI
from fakeserver import FakeModel, anthropic_call, anthropic_text

CLIENTS = Path(__file__).resolve().parents[2] / "sdk_clients"
EXAMPLES = Path(__file__).resolve().parents[2] / "fixtures" / "sdk_examples" / "typescript"
pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(
        not (CLIENTS / "node_modules" / ".bin" / "tsx").exists() or shutil.which("node") is None,
        reason="npm install --prefix tests/sdk_clients (.ci/run does)",
    ),
]


def introduces(out: str, server: FakeModel, agent: Path) -> None:
    assert out == "Claude says: I am agi, an agent run from the command line.\n"
    assert server.requests[0]["model"].startswith("claude-opus")  # its model: "opus"


def hook_allows(out: str, server: FakeModel, agent: Path) -> None:
    assert (agent / "custom_scripts" / "hello.js").read_text() == "console.log('hi');\n"
    assert out.endswith("Claude says: I wrote custom_scripts/hello.js.\n")


def hook_blocks(out: str, server: FakeModel, agent: Path) -> None:
    assert not (agent / "hello.js").exists()  # its PreToolUse hook: block, continue false
    assert len(server.requests) == 1 and "not reached" not in out


CASES: dict[str, tuple[str, Callable[[Path], list[Any]], Callable[..., None]]] = {
    "hello-world": ("hello-world/hello-world.ts", lambda a: [
        anthropic_text("I am agi, an agent run from the command line.")], introduces),
    "hello-world-hook-allows": ("hello-world/hello-world.ts", lambda a: [
        anthropic_call("Write", file_path=str(a / "custom_scripts" / "hello.js"),
                       content="console.log('hi');\n"),
        anthropic_text("I wrote custom_scripts/hello.js.")], hook_allows),
    "hello-world-hook-blocks": ("hello-world/hello-world.ts", lambda a: [
        anthropic_call("Write", file_path=str(a / "hello.js"), content="x"),
        anthropic_text("not reached")], hook_blocks),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
def test_typescript_sdk_example(env, tmp_path, name: str):
    example, script, check = CASES[name]
    agent = tmp_path / "agent"  # hello-world's README: mkdir -p agent/custom_scripts
    (agent / "custom_scripts").mkdir(parents=True)
    e = {**env, "AGI_SDK_CLI": str(AGI), "AGI_MODEL": "fake-model"}
    e["CLAUDE_CONFIG_DIR"] = str(tmp_path / "claude")
    with FakeModel(*script(agent.resolve())) as server:
        e["AGI_BASE_URL"] = server.url  # Claude models' calls too (ANTHROPIC_BASE_URL's place)
        tsx = [
            str(CLIENTS / "node_modules" / ".bin" / "tsx"),
            "--import",
            str(CLIENTS / "with_agi_hooks.mjs"),
        ]
        done = subprocess.run([*tsx, str(EXAMPLES / example)], env=e, cwd=tmp_path,
                              capture_output=True, text=True, timeout=150)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "Error" not in done.stderr, done.stderr  # main().catch(console.error)
        check(done.stdout, server, agent.resolve())
