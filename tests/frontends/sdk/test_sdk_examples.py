"""The Claude Agent SDK's own examples (tests/fixtures/sdk_examples/, MIT, copied unchanged from
anthropics/claude-agent-sdk-python) run with agi as their CLI, `cli_path` and the environment
alone set (example_runner.py), against the scripted model server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import AGI
from fakeserver import FakeModel, call, text

pytestmark = pytest.mark.timeout(180)

EXAMPLES = Path(__file__).parents[2] / "fixtures" / "sdk_examples"
RUNNER = Path(__file__).with_name("example_runner.py")


def run_example(env, server: FakeModel, tmp_path: Path, name: str, *args: str) -> str:
    e = {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model", "AGI_SDK_CLI": AGI}
    e["CLAUDE_CONFIG_DIR"] = str(tmp_path / "claude")
    done = subprocess.run([sys.executable, str(RUNNER), str(EXAMPLES / name), *args], env=e,
                          cwd=tmp_path, capture_output=True, text=True, timeout=150)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_quick_start(env, tmp_path):
    hello = tmp_path / "hello.txt"
    script = [text("2 + 2 = 4"), text("Python is a programming language."),
              call("Write", file_path=str(hello), content="Hello, World!"),
              text("I created hello.txt.")]  # fmt: skip
    with FakeModel(*script) as server:
        out = run_example(env, server, tmp_path, "quick_start.py")
        systems = [r["messages"][0] for r in server.requests]
    assert "Claude: 2 + 2 = 4" in out
    assert "Claude: Python is a programming language." in out
    assert "Claude: I created hello.txt." in out
    assert hello.read_text() == "Hello, World!"  # allowed_tools=["Read", "Write"] let it run
    assert systems[1] == {"role": "system", "content": "You are a helpful assistant that "
                          "explains things simply."}  # fmt: skip


def test_streaming_mode_multi_turn_conversation(env, tmp_path):
    with FakeModel(text("Paris."), text("About 2.1 million people.")) as server:
        out = run_example(env, server, tmp_path, "streaming_mode.py", "multi_turn_conversation")
        sent = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]
    assert "Claude: Paris.\nResult ended" in out
    assert "Claude: About 2.1 million people.\nResult ended" in out
    assert sent == ["What's the capital of France?", "What's the population of that city?"]


def test_mcp_calculator(env, tmp_path):
    script = [text("I have add, subtract, multiply, divide, sqrt and power."),
              call("mcp__calc__add", a=15, b=27), text("15 + 27 is 42."),
              call("mcp__calc__divide", a=100, b=7), text("About 14.29."),
              call("mcp__calc__sqrt", n=144), text("12."),
              call("mcp__calc__power", base=2, exponent=8), text("256."),
              call("mcp__calc__add", a=12, b=8), text("50.")]  # fmt: skip
    with FakeModel(*script) as server:
        out = run_example(env, server, tmp_path, "mcp_calculator.py")
        offered = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert {f"mcp__calc__{n}" for n in ("add", "divide", "sqrt", "power")} <= offered
    assert out.count("Result ended") == 6
    assert "Using tool: mcp__calc__add" in out and "15 + 27 = 42" in out
    assert "100 ÷ 7 = 14.28" in out and "√144 = 12.0" in out and "2^8 = 256" in out
    assert "Claude: 50." in out
