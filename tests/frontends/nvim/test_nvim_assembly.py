"""Neovim runs are assembled exactly as the command line's: `Task` runs subagents, variables
that SessionStart hooks export reach the tools, and `react = true` speaks the ReAct protocol.
A real headless Neovim, the real remote plugin, the scripted model server."""

# ruff: noqa: F811  (the Neovim fixtures imported from test_nvim are test parameters here)
from __future__ import annotations

import json
from pathlib import Path

from test_nvim import PY_BUFFER, editor, manifest, needs_nvim  # noqa: F401  (fixtures)

from fakeserver import FakeModel, call, text

REFACTORED = "```python\nresult = [x * 2 for x in items]\n```"
EXPECTED = [
    "def double_all(items):",
    "    result = [x * 2 for x in items]",
    "    return result",
    "",
    "print(double_all([1, 2]))",
]


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


@needs_nvim
def test_task_runs_a_subagent_and_its_answer_reaches_the_result(editor, tmp_path):
    script = (
        call("Task", description="read the code", prompt="What does double_all return?"),
        text("A new list with every item doubled."),  # the subagent's answer
        text(REFACTORED),
    )
    with FakeModel(*script) as server:
        ed = editor(server, setup={"warmup": False, "tools": True})
        ed.buffer(PY_BUFFER)
        ed.command("2,4AgiRefactor use a list comprehension")
        (event,) = ed.done()
    assert event["status"] == "done", event
    assert ed.lines() == EXPECTED
    assert len(server.requests) == 3
    first, sub, last = server.requests
    assert "Task" in [t["function"]["name"] for t in first["tools"]]
    assert sub["messages"][-1] == {"role": "user", "content": "What does double_all return?"}
    assert tool_results(last) == ["A new list with every item doubled."]
    # the subagent's conversation is kept under the request's session
    kept = list((tmp_path / "agi-home" / "nvim").glob("*/subagents/*/messages.jsonl"))
    assert len(kept) == 1, kept
    lines = [json.loads(x) for x in kept[0].read_text().splitlines()]
    assert lines[-1]["content"] == "A new list with every item doubled."


@needs_nvim
def test_session_start_exports_reach_bash_in_neovim(editor, tmp_path: Path):
    # hooks.json beside the config file (AGI_CONFIG is tmp_path/config.toml in these tests)
    command = 'echo "export GREETING=from-hook" >> "$CLAUDE_ENV_FILE"'
    hooks = {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": command}]}]}}
    (tmp_path / "hooks.json").write_text(json.dumps(hooks))
    with FakeModel(call("Bash", command="echo $GREETING"), text(REFACTORED)) as server:
        ed = editor(server, setup={"warmup": False, "tools": ["Bash"]})
        ed.buffer(PY_BUFFER)
        ed.command("2,4AgiRefactor use a list comprehension")
        (event,) = ed.done()
    assert event["status"] == "done", event
    assert tool_results(server.requests[1]) == ["from-hook"]
    assert ed.lines() == EXPECTED


@needs_nvim
def test_react_option_speaks_the_text_protocol(editor):
    action = 'Thought: look first\nAction: Bash({"command": "echo looked"})'
    final = f"Thought: done\nFinal Answer: {REFACTORED}"
    with FakeModel(text(action), text(final)) as server:
        ed = editor(server, setup={"warmup": False, "tools": ["Bash"], "react": True})
        ed.buffer(PY_BUFFER)
        ed.command("2,4AgiRefactor use a list comprehension")
        (event,) = ed.done()
    assert event["status"] == "done", event
    assert ed.lines() == EXPECTED
    first, second = server.requests
    assert "tools" not in first and "Observation:" in first["stop"]
    assert "Action:" in first["messages"][0]["content"]  # the ReAct prompt is in the system text
    assert "Observation: looked" in json.dumps(second["messages"])


@needs_nvim
def test_a_bad_react_option_is_an_agi_error(editor):
    ed = editor(None, setup={"warmup": False})
    message = ed.lua(
        "local ok, err = pcall(require('agi').setup, {react = 'yes'}); return tostring(err)"
    )
    assert message.startswith("(agi)") and "react" in message
