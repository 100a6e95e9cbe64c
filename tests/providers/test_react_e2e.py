"""--react through the real executable: the text protocol, the cut at Observation:, calculate."""

from __future__ import annotations

import json
import re
import sys

from fakeserver import FakeModel, call, text
from test_terminal_view import run_with_tty_stderr

NUDGE = "Observation: No valid Action found. Respond with either an Action line or a Final Answer."


def user_texts(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def test_react_calculate_ignores_a_hallucinated_observation(agi, tmp_path):
    s = tmp_path / "s"
    script = [
        text(
            'Thought: I should compute this.\nAction: calculate("(12 * 9) + 3")\nObservation: 105'
        ),
        text("Thought: I know the answer.\nFinal Answer: 111"),
    ]
    with FakeModel(*script) as server:
        r = agi("--react", "-s", str(s), "What is (12 * 9) + 3?", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "111\n"
    first, second = server.requests
    assert first["stop"] == ["Observation:"] and "tools" not in first
    system = first["messages"][0]["content"]
    assert "Action:" in system and "Final Answer:" in system and "calculate" in system
    dumped = json.dumps(second)
    assert "Observation: 111" in dumped and "105" not in dumped
    assert "105" not in (s / "messages.jsonl").read_text()
    # the session keeps the native form: it can be continued without --react
    stored = [json.loads(x) for x in (s / "messages.jsonl").open()]
    assert stored[1]["tool_calls"][0]["function"]["name"] == "calculate"
    assert stored[2] == {
        "role": "tool",
        "tool_call_id": stored[1]["tool_calls"][0]["id"],
        "content": "111",
    }


def test_react_division_by_zero_and_the_nudge(agi):
    script = [
        text("Thought: divide.\nAction: calculate(1 / 0)"),
        text("I am not sure what to do."),
        text("Final Answer: it cannot be divided by zero"),
    ]
    with FakeModel(*script) as server:
        r = agi("--react", "divide one by zero", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "it cannot be divided by zero\n"
    assert "Observation: Error: division by zero" in user_texts(server.requests[1])[-1]
    assert user_texts(server.requests[2])[-1] == NUDGE


def test_two_turns_without_action_take_the_second_as_the_answer(agi):
    with FakeModel(text("Hmm."), text("The answer is 7.")) as server:
        r = agi("--react", "pick a number", server=server)
    assert r.returncode == 0
    assert r.stdout == "The answer is 7.\n"
    assert len(server.requests) == 2


def test_react_with_bash_and_a_user_tool(agi, tmp_path):
    tool = tmp_path / "shout"
    tool.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        "if sys.argv[1:] == ['--describe']:\n"
        "    print(json.dumps({'name': 'shout', 'description': 'Upper-case a text',\n"
        "        'parameters': {'type': 'object', 'properties': {'text': {'type': 'string'}},\n"
        "                       'required': ['text']}}))\n"
        "else:\n"
        "    print(json.load(sys.stdin)['text'].upper())\n"
    )
    tool.chmod(0o755)
    script = [
        text('Thought: list.\nAction: Bash({"command": "echo from-bash"})'),
        text('Thought: shout.\nAction: shout({"text": "quiet words"})'),
        text("Final Answer: done"),
    ]
    with FakeModel(*script) as server:
        r = agi("--react", "--tool", str(tool), "go", server=server)
    assert r.returncode == 0, r.stderr
    assert "Observation: from-bash" in user_texts(server.requests[1])[-1]
    assert "Observation: QUIET WORDS" in user_texts(server.requests[2])[-1]
    assert "shout" in server.requests[0]["messages"][0]["content"]


def test_react_thoughts_show_like_reasoning_in_a_terminal(env, tmp_path):
    script = [
        text("Thought: let me add.\nAction: calculate(2+2)"),
        text("Thought: easy.\nFinal Answer: 4"),
    ]
    with FakeModel(*script) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="m")
        code, out, err = run_with_tty_stderr(["--react", "2+2?"], env, tmp_path)
    assert code == 0 and out == "4\n"
    plain = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", err)
    assert "let me add." in plain and "\x1b[2m" in err  # dimmed, like reasoning
    assert "calculate(2+2)" in plain


def test_calculate_in_native_mode(agi):
    with FakeModel(call("calculate", expression="2 ** 10 - sqrt(16)"), text("1020")) as server:
        agi("compute", server=server)
    results = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert results == ["1020"]
