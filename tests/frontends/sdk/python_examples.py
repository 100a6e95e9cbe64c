"""The Python Claude Agent SDK's own examples (tests/fixtures/sdk_examples/python/examples/) as
test cases: for each, the scripted model's replies (what its prompts ask for) and what the run
must show. test_sdk_examples.py runs them; SOURCES.md there lists those left out and why."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fakeserver import FakeModel, anthropic_call, anthropic_text, call, text

PRICES = '[prices."fake-model"]\ninput = 1000\noutput = 1000\n'  # USD per million tokens
Check = Callable[[str, str, FakeModel, Path], None]  # stdout, stderr, server, tmp_path


@dataclass
class Case:
    example: str
    args: tuple[str, ...]
    script: Callable[[Path], list[Any]]  # tmp_path -> the model's replies
    check: Check
    config: str = ""  # config.toml


def said(server: FakeModel, n: int = -1) -> list[Any]:
    """The messages of the model's request `n`, after the system prompt."""
    return server.requests[n]["messages"][1:]


def replies(server: FakeModel) -> list[str]:
    """The assistant's texts in the model's last request: what the conversation kept."""
    messages = server.requests[-1]["messages"]
    return [str(m["content"]) for m in messages if m["role"] == "assistant"]


def cut_short(server: FakeModel, whole: str) -> bool:
    """The streamed reply that an interrupt stopped: kept in part (or not at all), not whole."""
    return all(whole.startswith(t) and t != whole for t in replies(server))


def tool_results(server: FakeModel) -> list[str]:
    messages = server.requests[-1]["messages"]
    return [str(m["content"]) for m in messages if m["role"] == "tool"]


def quick_start(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    assert "Claude: 2 + 2 = 4" in out and "Claude: Python is a programming language." in out
    assert "Claude: I created hello.txt." in out
    assert (tmp / "hello.txt").read_text() == "Hello, World!"  # allowed_tools Read, Write
    assert server.requests[1]["messages"][0] == {
        "role": "system",
        "content": "You are a helpful assistant that explains things simply.",
    }


def basic_streaming(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    assert "User: What is 2+2?\nClaude: 4\nResult ended" in out


def multi_turn(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    assert "Claude: Paris.\nResult ended" in out
    assert "Claude: About 2.1 million people.\nResult ended" in out
    users = [m["content"] for m in said(server) if m["role"] == "user"]
    assert users == ["What's the capital of France?", "What's the population of that city?"]


def concurrent(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    for question, answer in (("2 + 2", "4"), ("the square root of 144", "12"), ("10% of 80", "8")):
        assert f"User: What is {question}?\nClaude: {answer}\nResult ended" in out


def interrupted(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    assert "[After 2 seconds, sending interrupt...]" in out
    assert cut_short(server, COUNT)
    assert out.count("Result ended") == 2
    assert "Claude: Why do programmers prefer dark mode?" in out
    assert said(server)[-1] == {"role": "user", "content": "Never mind, just tell me a quick joke"}


def manual(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    assert "Total languages mentioned: 6" in out and "Found language: Rust" in out  # Java too


def with_options(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    assert "Tools used: Write" in out and "Claude: Created hello.txt." in out
    assert (tmp / "hello.txt").read_text() == "Hello!"  # allowed_tools Read, Write
    system = server.requests[0]["messages"][0]["content"]
    assert system == "You are a helpful coding assistant."


def async_iterable(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    assert "Claude: Tokyo.\nResult ended" in out and "Claude: 30.\nResult ended" in out
    users = [m["content"] for m in said(server) if m["role"] == "user"]
    assert users[1:] == ["First, what's the capital of Japan?", "Second, what's 15% of 200?"]


def bash_command(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    assert "Tool Use: Bash" in out and "Command: echo 'Hello from bash!'" in out
    # no can_use_tool: nobody to ask, so the call is denied, as in Claude Code's print mode
    assert "Tool Result (id: " in out and "denied" in tool_results(server)[0]
    assert "Message types received:" in out and "UserMessage" in out


def control_protocol(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    assert "✓ Server info retrieved successfully!" in out and "Output style: default" in out
    assert "✓ Interrupt sent successfully" in out and cut_short(server, COUNT[:60])
    assert out.rstrip().endswith("Claude: Hello!")


def error_handling(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    assert "Response timeout after 3 seconds - demonstrating graceful handling" in out
    assert "Unexpected error" not in out and "Connection error" not in out


def trio_turns(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    assert "Claude: 42\nResult ended" in out and "Claude: 12.00\nResult ended" in out
    assert "Conversation complete!" in out
    assert server.requests[-1]["model"] == "claude-sonnet-4-5"  # its model, over Messages


def mcp_calculator(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    offered = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert {f"mcp__calc__{n}" for n in ("add", "divide", "sqrt", "power")} <= offered
    assert out.count("Result ended") == 6
    assert "Using tool: mcp__calc__add" in out and "15 + 27 = 42" in out
    assert "100 ÷ 7 = 14.28" in out and "√144 = 12.0" in out and "2^8 = 256" in out


def pre_tool_use(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    results = tool_results(server)
    assert results[0] == "Blocked by a PreToolUse hook: Command contains invalid pattern: foo.sh"
    assert results[1] == "Hello from hooks example!"  # the hook let echo run
    assert "Claude: It printed Hello from hooks example!" in out


def user_prompt_submit(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    # its callback answers with hookEventName SessionStart: refused, as Claude Code does
    assert "answered for SessionStart" in err
    assert "hot pink" not in json.dumps(server.requests[0]).lower()
    assert "Claude: I do not know your favourite colour." in out


def post_tool_use(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    # ls fails: PostToolUseFailure, not PostToolUse, as in Claude Code; the model sees the error
    assert "No such file or directory" in tool_results(server)[0]
    assert "Claude: There is no such directory.\nResult ended" in out


def decision_fields(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    assert not (tmp / "important_config.txt").exists()
    assert (tmp / "regular_file.txt").read_text() == "test data"
    results = [b["content"] for m in said(server) if m["role"] == "user"
               for b in m["content"] if b["type"] == "tool_result"]  # fmt: skip
    reason = "Security policy blocks writes to important files"
    assert results[0] == f"Blocked by a PreToolUse hook: {reason}"
    assert "🚫 Write operation blocked by security policy" in err  # its systemMessage
    assert server.requests[0]["model"] == "claude-sonnet-4-5-20250929"


def continue_control(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    assert len(server.requests) == 1  # continue_=False: the model is not asked again
    assert "🛑 Execution stopped due to critical error" in err and "Result ended" in out


def permission_callback(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    assert "⚠️  Redirecting write from /srv/project/hello.py to ./safe_output/hello.py" in out
    assert (tmp / "safe_output" / "hello.py").read_text() == 'print("Hello, World!")\n'
    assert not Path("/srv/project/hello.py").exists()
    assert tool_results(server)[-1] == "Hello, World!"  # the redirected script ran
    assert "✅ Task completed!" in out and "1. Tool: Bash" in out and "3. Tool: Bash" in out


def system_prompt(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    systems = [r["messages"][0]["content"] for r in server.requests]
    assert systems[1] == "You are a pirate assistant. Respond in pirate speak."
    assert systems[0] == systems[2] and systems[0].startswith("You are agi")  # agi's own
    assert systems[3].startswith(systems[0])
    assert systems[3].endswith("Always end your response with a fun fact.")
    assert "Claude: Arr, 4 it be." in out


def partial_messages(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    assert "StreamEvent(" in out and "'type': 'text_delta'" in out and "thinking_delta" in out
    assert "TextBlock(text='Why did the chicken cross the road?')" in out
    assert "ResultMessage(subtype='success'" in out


def max_budget(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    assert out.count("Status: success") == 2 and "Total cost: $0.0150" in out
    assert "Status: error_max_budget_usd\n⚠️  Budget limit exceeded!" in out
    assert len(server.requests) == 3  # the tight budget's first call ended it


def stderr_callback(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    assert "Running query with stderr capture..." in out and "Captured 0 stderr lines" in out


def tools_option(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    assert "Tools from system message: ['Read', 'Glob', 'Grep']" in out
    assert "Tools from system message: []" in out and "Tools from system message (" in out
    offered = [sorted(t["function"]["name"] for t in r.get("tools", [])) for r in server.requests]
    assert offered[0] == ["Glob", "Grep", "Read"] and offered[1] == []
    assert {"Bash", "Read", "Write", "Edit"} <= set(offered[2])


def agents(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    task = next(t for t in server.requests[0]["tools"] if t["function"]["name"] == "Task")
    kinds = task["function"]["parameters"]["properties"]["subagent_type"]["enum"]
    assert "code-reviewer" in kinds
    reviewer = server.requests[1]
    assert reviewer["messages"][0]["content"].startswith("You are a code reviewer.")
    assert sorted(t["function"]["name"] for t in reviewer["tools"]) == ["Grep", "Read"]
    assert server.requests[7]["messages"][0]["content"].startswith("You are a code analyzer.")
    assert "Claude: The code reviewer found no issues." in out
    assert "Claude: It defines a subagent." in out and "Claude: One file: examples/agents.py" in out


def filesystem_agents(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    assert "Init message received. Agents loaded: ['test-agent']" in out
    assert "SUCCESS: Received full response (init, assistant, result)" in out
    assert "SUCCESS: test-agent was loaded from filesystem" in out


def setting_sources(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    assert "✓ /commit is NOT available (expected: sources disabled)" in out
    assert "✓ /commit is NOT available (expected)" in out  # user only
    assert "Available slash commands: ['commit']\n✓ /commit is available (expected)" in out
    # no setting_sources: every source, as Claude Code reads them
    assert "✓ /commit is available (expected: CLI defaults loaded)" in out
    assert "unexpected" not in out


def plugin(out: str, err: str, server: FakeModel, tmp: Path) -> None:
    assert "Plugins loaded:\n  - demo-plugin (path: " in out
    assert "Plugin successfully configured!" in out


def task(kind: str, prompt: str) -> Any:
    return call("Task", subagent_type=kind, description="the task", prompt=prompt)


def slow(content: str, pieces: int) -> Any:
    return text(content, delay=0.2, pieces=pieces)


COUNT = ", ".join(str(i) for i in range(1, 101))
CASES: dict[str, Case] = {
    "quick_start": Case("quick_start.py", (), lambda t: [
        text("2 + 2 = 4"), text("Python is a programming language."),
        call("Write", file_path=str(t / "hello.txt"), content="Hello, World!"),
        text("I created hello.txt.")], quick_start),
    "streaming_mode-basic_streaming": Case("streaming_mode.py", ("basic_streaming",),
        lambda t: [text("4")], basic_streaming),
    "streaming_mode-multi_turn_conversation": Case("streaming_mode.py",
        ("multi_turn_conversation",), lambda t: [text("Paris."), text("About 2.1 million people.")],
        multi_turn),
    "streaming_mode-concurrent_responses": Case("streaming_mode.py", ("concurrent_responses",),
        lambda t: [text("4"), text("12"), text("8")], concurrent),
    "streaming_mode-with_interrupt": Case("streaming_mode.py", ("with_interrupt",), lambda t: [
        slow(COUNT, 100), text("Why do programmers prefer dark mode? Light attracts bugs.")],
        interrupted),
    "streaming_mode-manual_message_handling": Case("streaming_mode.py",
        ("manual_message_handling",), lambda t: [
            text("Python: data. JavaScript: the web. Go: servers. Rust: systems. Ruby: scripts.")],
        manual),
    "streaming_mode-with_options": Case("streaming_mode.py", ("with_options",), lambda t: [
        call("Write", file_path="hello.txt", content="Hello!"), text("Created hello.txt.")],
        with_options),
    "streaming_mode-async_iterable_prompt": Case("streaming_mode.py", ("async_iterable_prompt",),
        lambda t: [text("Hello! Ask away."), text("Tokyo."), text("30.")], async_iterable),
    "streaming_mode-bash_command": Case("streaming_mode.py", ("bash_command",), lambda t: [
        call("Bash", command="echo 'Hello from bash!'"), text("It was not allowed.")],
        bash_command),
    "streaming_mode-control_protocol": Case("streaming_mode.py", ("control_protocol",),
        lambda t: [slow(COUNT[:60], 40), text("Hello!")], control_protocol),
    "streaming_mode-error_handling": Case("streaming_mode.py", ("error_handling",),
        lambda t: [slow("I would run sleep 5 now, if asked to.", 30)], error_handling),
    "streaming_mode_trio": Case("streaming_mode_trio.py", (), lambda t: [
        anthropic_text("42"), anthropic_text("84"), anthropic_text("12.00")], trio_turns),
    "mcp_calculator": Case("mcp_calculator.py", (), lambda t: [
        text("I have add, subtract, multiply, divide, sqrt and power."),
        call("mcp__calc__add", a=15, b=27), text("15 + 27 is 42."),
        call("mcp__calc__divide", a=100, b=7), text("About 14.29."),
        call("mcp__calc__sqrt", n=144), text("12."),
        call("mcp__calc__power", base=2, exponent=8), text("256."),
        call("mcp__calc__add", a=12, b=8), text("50.")], mcp_calculator),
    "hooks-PreToolUse": Case("hooks.py", ("PreToolUse",), lambda t: [
        call("Bash", command="./foo.sh --help"), text("The hook blocked it."),
        call("Bash", command="echo 'Hello from hooks example!'"),
        text("It printed Hello from hooks example!")], pre_tool_use),
    "hooks-UserPromptSubmit": Case("hooks.py", ("UserPromptSubmit",),
        lambda t: [text("I do not know your favourite colour.")], user_prompt_submit),
    "hooks-PostToolUse": Case("hooks.py", ("PostToolUse",), lambda t: [
        call("Bash", command="ls /nonexistent_directory"), text("There is no such directory.")],
        post_tool_use),
    "hooks-DecisionFields": Case("hooks.py", ("DecisionFields",), lambda t: [
        anthropic_call("Write", file_path="important_config.txt", content="test data"),
        anthropic_text("The policy blocked it."),
        anthropic_call("Write", file_path="regular_file.txt", content="test data"),
        anthropic_text("Wrote regular_file.txt.")], decision_fields),
    "hooks-ContinueControl": Case("hooks.py", ("ContinueControl",), lambda t: [
        call("Bash", command="echo 'CRITICAL ERROR: system failure'"), text("not reached")],
        continue_control),
    "tool_permission_callback": Case("tool_permission_callback.py", (), lambda t: [
        call("Bash", command="ls"),  # Write's file_path is absolute, as Claude Code's must be
        call("Write", file_path="/srv/project/hello.py", content='print("Hello, World!")\n'),
        call("Bash", command="python3 safe_output/hello.py"), text("It printed Hello, World!")],
        permission_callback),
    "system_prompt": Case("system_prompt.py", (), lambda t: [
        text("4"), text("Arr, 4 it be."), text("4."), text("4. Fun fact: 4 is 2 + 2.")],
        system_prompt),
    "include_partial_messages": Case("include_partial_messages.py", (), lambda t: [
        anthropic_text("Why did the chicken cross the road?", thinking="Three jokes...")],
        partial_messages),
    "max_budget_usd": Case("max_budget_usd.py", (), lambda t: [
        text("4"), text("4"), call("Read", file_path="README.md"), text("not reached")],
        max_budget, PRICES),
    "stderr_callback_example": Case("stderr_callback_example.py", (), lambda t: [text("4")],
        stderr_callback),
    "tools_option": Case("tools_option.py", (), lambda t: [
        text("Read, Glob and Grep."), text("None."), text("Bash, Read, Write, Edit and more.")],
        tools_option),
    "agents": Case("agents.py", (), lambda t: [
        task("code-reviewer", "Review src/claude_agent_sdk/types.py"),
        text("types.py: no issues found."), text("The code reviewer found no issues."),
        task("doc-writer", "Explain AgentDefinition"),
        text("AgentDefinition defines a subagent."), text("It defines a subagent."),
        task("analyzer", "Find all Python files in examples/"),
        text("examples/agents.py"), text("One file: examples/agents.py")], agents),
    "filesystem_agents": Case("filesystem_agents.py", (), lambda t: [text("Hello there, friend.")],
        filesystem_agents),
    "setting_sources-all": Case("setting_sources.py", ("all",), lambda t: [text("4")],
        setting_sources),
    "plugin_example": Case("plugin_example.py", (), lambda t: [text("Hello!")], plugin),
}  # fmt: skip
