"""The text ReAct protocol: the turn parser, the streamed cut at `Observation:`, and
ReactTransport against the scripted server (the real Transport and SSE parser underneath).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agi.engine.loop import Agent
from agi.messages import ReasoningDelta, Reply, TextDelta, tool_result, user
from agi.options.config import ModelConfig
from agi.providers.react import (
    ReactTransport,
    TurnStream,
    parse_turn,
    react_messages,
    react_system_prompt,
    react_text,
)
from agi.providers.transport import Transport
from agi.sessions.session import Session
from agi.tools import Toolbox, builtin_tools, spec
from agi.tools.calculate import Calculate

from fakeserver import FakeModel, text

SETTINGS = settings(max_examples=300, deadline=None)
TOOLS = [*builtin_tools(), Calculate()]
SPECS = [spec(t) for t in TOOLS]
NO_ACTION = (
    "Observation: No valid Action found. Respond with either an Action line or a Final Answer."
)


# --- the system prompt ---------------------------------------------------------------------


def test_system_prompt_lists_each_tool_after_the_base_prompt():
    prompt = react_system_prompt(TOOLS, "You are agi.")
    assert prompt.startswith("You are agi.\n\n")
    for tool in TOOLS:
        assert f"- {tool.name}: " in prompt
    assert "input: expression (string, required)" in prompt
    assert "input: file_path (string, required); offset (integer); limit (integer)" in prompt
    assert "Action: TOOL_NAME(ARGS)" in prompt and "Final Answer:" in prompt
    assert 'Action: calculate("(12 * 9) + 3")' in prompt  # the example
    assert "{" + "tools}" not in prompt and "{example}" not in prompt
    # tool specs (what the agent passes to a transport) give the same prompt
    assert react_system_prompt(SPECS, "You are agi.") == prompt


def test_system_prompt_without_calculate_uses_a_tool_it_has():
    prompt = react_system_prompt([t for t in builtin_tools() if t.name != "calculate"], "")
    assert "calculate" not in prompt
    assert 'Action: Bash({"command": "..."})' in prompt


def test_the_nudge_is_the_contracts_text():
    assert react_text("no_action") == NO_ACTION


# --- the parser ------------------------------------------------------------------------------


def action(text: str) -> tuple[str, dict[str, Any]] | None:
    turn = parse_turn(text, TOOLS)
    assert turn.error is None, turn.error
    return turn.action


@pytest.mark.parametrize(
    ("reply", "name", "input"),
    [
        ('Action: calculate("(12 * 9) + 3")', "calculate", {"expression": "(12 * 9) + 3"}),
        ("Action: calculate('2 + 2')", "calculate", {"expression": "2 + 2"}),
        ("Action: calculate(2 + 2)", "calculate", {"expression": "2 + 2"}),
        ('Action: calculate(""quoted"")', "calculate", {"expression": '"quoted"'}),  # one pair
        ('Action: calculate({"expression": "1/0"})', "calculate", {"expression": "1/0"}),
        ('Action: calculate(expression="3*3")', "calculate", {"expression": "3*3"}),
        ("Action: calculate(max(1, (2)))", "calculate", {"expression": "max(1, (2))"}),
        ('Action: Bash("echo \\"(\\"")', "Bash", {"command": 'echo \\"(\\"'}),
        ("Action: Bash(echo ')')", "Bash", {"command": "echo ')'"}),
        ("Action: Bash(echo it's (here))", "Bash", {"command": "echo it's (here)"}),
        (
            'Action: Bash({"command": "ls (x)", "timeout": 5000})',
            "Bash",
            {"command": "ls (x)", "timeout": 5000},
        ),
        ('Action: Read({"file_path": "a.txt"})', "Read", {"file_path": "a.txt"}),
        ("Action: TempDir()", "TempDir", {}),
        ("Action: TempDir({})", "TempDir", {}),
        ("**Action:** `calculate(1+1)`", "calculate", {"expression": "1+1"}),
        ("action: bash(ls)", "Bash", {"command": "ls"}),  # case of marker and name forgiven
        ("Action: calculate\nAction Input: 6 * 7", "calculate", {"expression": "6 * 7"}),
        (
            'Action: Write({"file_path": "x", "content": "a\nb"})',
            "Write",
            {"file_path": "x", "content": "a\nb"},
        ),
        ('Action: nope({"a": 1})', "nope", {"a": 1}),  # unknown: the tool runner says so
        ("Action: nope(text)", "nope", {"input": "text"}),
    ],
)
def test_actions(reply, name, input):
    assert action(f"Thought: go\n{reply}") == (name, input)


def test_multi_line_json_with_parentheses_and_quotes_inside_strings():
    reply = (
        "Thought: write the file\n"
        "Action: Write({\n"
        '  "file_path": "f.py",\n'
        '  "content": "def f(x):\\n    return g(\\")\\", (x)"\n'
        "})\n"
    )
    assert action(reply) == (
        "Write",
        {"file_path": "f.py", "content": 'def f(x):\n    return g(")", (x)'},
    )


def test_multi_line_raw_text():
    reply = "Action: Bash(\ncat <<EOF\nhello (world\nEOF\n)"
    assert action(reply) == ("Bash", {"command": "cat <<EOF\nhello (world\nEOF"})


def test_thought_and_only_the_first_action():
    turn = parse_turn(
        "Thought: first\nmore thinking\nAction: calculate(1)\nAction: calculate(2)", TOOLS
    )
    assert turn.thought == "first\nmore thinking"
    assert turn.action == ("calculate", {"expression": "1"})


def test_final_answer_spans_lines_and_is_cut_at_observation():
    turn = parse_turn(
        "Thought: done\nFinal Answer: line one\nAction: not an action\nline three\nObservation: x",
        TOOLS,
    )
    assert turn.thought == "done"
    assert turn.final == "line one\nAction: not an action\nline three"
    assert turn.action is None and turn.error is None


def test_a_hallucinated_observation_is_never_used():
    turn = parse_turn(
        'Action: calculate("1+1")\nObservation: 3\nThought: so\nFinal Answer: 3', TOOLS
    )
    assert turn.action == ("calculate", {"expression": "1+1"})
    assert turn.final is None
    # an Observation: before the action leaves no action at all
    assert parse_turn("Thought: hm Observation: 1\nAction: calculate(1)", TOOLS).action is None


def test_neither_action_nor_answer():
    turn = parse_turn("Thought: I think the answer is 4", TOOLS)
    assert turn == type(turn)(thought="I think the answer is 4")


@pytest.mark.parametrize(
    ("reply", "shown"),
    [
        ("Action: calculate", 'Action: calculate({"expression": "..."})'),
        ("Action: calculate 2+2", 'Action: calculate("...")'),
        ("Action: calculate(2+2", "no ')' closes 'calculate('"),
        ("Action: Write(some text)", 'Action: Write({"file_path": "...", "content": "..."})'),
        ("Action: Write([1, 2])", "ARGS must be a JSON object"),
        ("Action:", "no tool name after 'Action:'"),
        ("Action: (1+1)", "TOOL_NAME("),
    ],
)
def test_malformed_actions_get_the_exact_format(reply, shown):
    turn = parse_turn(reply, TOOLS)
    assert turn.action is None and turn.final is None
    assert turn.error is not None
    assert turn.error.startswith("Observation: Error: your Action could not be read: ")
    assert "Write it in exactly this format" in turn.error
    assert shown in turn.error


marker_biased = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "Thought:",
                "Action:",
                "Action Input:",
                "Final Answer:",
                "Observation:",
                "Obs",
                "calculate",
                "Bash",
                "Write",
                "(",
                ")",
                '"',
                "'",
                "\\",
                "{",
                "}",
                ":",
                ",",
                "\n",
                " ",
                "**",
                "`",
                '{"expression": "1"}',
                '{"command": ',
            ]
        ),
        st.text(max_size=5),
    ),
    max_size=40,
).map("".join)


@SETTINGS
@given(marker_biased)
@example("Action: Write(" + "[" * 5000 + ")")
@example("Action: calculate(" + "(" * 5000)
@example("Action: " + "x" * 10000)
def test_parse_turn_never_raises(reply):
    turn = parse_turn(reply, TOOLS)
    assert sum(x is not None for x in (turn.action, turn.final, turn.error)) <= 1
    if turn.action:
        name, input = turn.action
        assert isinstance(name, str) and name and isinstance(input, dict)
        json.dumps(input)
    assert "Observation:" not in turn.thought + (turn.final or "")


def chunks_of(s: str, cuts: list[int]) -> list[str]:
    points = sorted(p % (len(s) + 1) for p in cuts)
    bounds = [0, *points, len(s)]
    return [s[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def shown(stream: TurnStream, pieces: list[str]) -> tuple[str, str]:
    events = [e for p in pieces for e in stream.feed(p)] + stream.finish()
    thought = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    answer = "".join(e.text for e in events if isinstance(e, TextDelta))
    return thought, answer


@SETTINGS
@given(marker_biased, st.lists(st.integers(0, 10_000), max_size=12))
@example("Thought: a\nFinal Answer: 42\nObservation: 41", [25, 26, 27, 30])
@example("Thought: x\nAct", [12])
def test_the_streamed_cut_does_not_depend_on_chunking(reply, cuts):
    whole, chunked = TurnStream(), TurnStream()
    expected = shown(whole, [reply])
    assert shown(chunked, chunks_of(reply, cuts)) == expected
    assert chunked.text == whole.text == reply.split("Observation:")[0]
    turn = parse_turn(reply, TOOLS)
    if turn.final is not None:
        assert expected[1].strip() == turn.final
    else:
        assert expected[1] == ""
    if turn.action is None and turn.error is None:
        assert expected[0].strip() == turn.thought


def test_streaming_shows_thoughts_as_reasoning_and_never_the_action():
    stream = TurnStream()
    reply = 'Thought: I should compute\nAction: calculate("(12 * 9) + 3")\nObserv'
    events = [e for ch in reply for e in stream.feed(ch)]  # one character at a time
    events += stream.feed("ation: 105\nThought: so 105")
    assert stream.cut
    events += stream.finish()
    assert all(isinstance(e, ReasoningDelta) for e in events)
    assert "".join(e.text for e in events) == "I should compute\n"


# --- ReactTransport against the scripted server -------------------------------------------------


def run_stream(transport: Any, messages: list[dict[str, Any]]) -> tuple[list[Any], Reply]:
    events: list[Any] = []
    stream = transport.stream(messages, SPECS)
    while True:
        try:
            events.append(next(stream))
        except StopIteration as done:
            return events, done.value


def conversation(prompt: str = "What is (12 * 9) + 3?") -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You are agi."}, user(prompt)]


def test_an_action_becomes_a_native_tool_call_and_the_hallucination_is_dropped():
    reply_text = 'Thought: I should compute\nAction: calculate("(12 * 9) + 3")\nObservation: 105'
    with FakeModel(text(reply_text, pieces=7)) as server:
        transport = ReactTransport(Transport(ModelConfig("test", "m", server.url)))
        events, reply = run_stream(transport, conversation())
        transport.close()
    assert reply.text == ""
    assert reply.reasoning == "I should compute"
    [call] = reply.tool_calls
    assert call.name == "calculate" and call.id.startswith("call_")
    assert json.loads(call.arguments) == {"expression": "(12 * 9) + 3"}
    assert "105" not in reply.text + reply.reasoning + call.arguments  # (the id is random)
    assert "105" not in "".join(e.text for e in events)
    assert not any(isinstance(e, TextDelta) for e in events)
    body = server.requests[0]
    assert body["stop"] == ["Observation:"]
    assert "tools" not in body
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][0]["content"].startswith("You are agi.\n\nYou use tools")


def test_the_stream_is_closed_at_the_cut():
    """A server that ignores `stop` and goes on slowly: the adapter does not wait for the rest."""
    reply_text = 'Action: calculate("1+1")\nObservation: ' + "and so on " * 2000
    with FakeModel(text(reply_text, pieces=100, delay=0.5)) as server:  # the cut in the first
        transport = ReactTransport(Transport(ModelConfig("test", "m", server.url)))
        started = time.monotonic()
        _, reply = run_stream(transport, conversation())
        elapsed = time.monotonic() - started
        transport.close()
    assert reply.tool_calls[0].name == "calculate"
    assert elapsed < 10  # a hang guard: all 102 frames would take 51 s


def test_final_answer_streams_as_text():
    with FakeModel(text("Thought: easy\nFinal Answer: 111\nand more", pieces=9)) as server:
        transport = ReactTransport(Transport(ModelConfig("test", "m", server.url)))
        events, reply = run_stream(transport, conversation())
    assert reply.nudge is None
    assert reply.text == "111\nand more" and reply.reasoning == "easy" and not reply.tool_calls
    assert "".join(e.text for e in events if isinstance(e, TextDelta)).strip() == "111\nand more"
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)).strip() == "easy"


def test_send_stop_false_leaves_stop_out_and_still_cuts():
    with FakeModel(text("Action: TempDir()\nObservation: /tmp/x")) as server:
        transport = ReactTransport(Transport(ModelConfig("test", "m", server.url)), send_stop=False)
        _, reply = run_stream(transport, conversation())
    assert "stop" not in server.requests[0]
    assert reply.tool_calls[0].name == "TempDir"


def test_two_turns_without_an_action_nudge_then_answer():
    with FakeModel(text("Thought: hmm, let me see"), text("Thought: It is 111.")) as server:
        transport = ReactTransport(Transport(ModelConfig("test", "m", server.url)))
        messages = conversation()
        _, first = run_stream(transport, messages)
        assert first.nudge == NO_ACTION
        assert first.text == "Thought: hmm, let me see" and not first.tool_calls
        # what the agent loop does with a nudge: store the reply, tell the model, go on
        messages += [first.to_message(), user(first.nudge)]
        _, second = run_stream(transport, messages)
    assert second.text == "It is 111." and second.nudge is None
    sent = server.requests[1]["messages"]
    assert sent[-2:] == [
        {"role": "assistant", "content": "Thought: hmm, let me see"},
        {"role": "user", "content": NO_ACTION},
    ]


def test_an_unreadable_action_gets_the_format_not_the_no_action_nudge():
    with FakeModel(text("Action: calculate 2+2")) as server:
        transport = ReactTransport(Transport(ModelConfig("test", "m", server.url)))
        _, reply = run_stream(transport, conversation())
    assert reply.nudge
    assert reply.nudge.startswith("Observation: Error: your Action could not be read")
    assert 'Action: calculate("...")' in reply.nudge


def test_an_empty_turn_is_nudged_even_twice():
    transport = ReactTransport(Transport(ModelConfig("test", "m", "http://127.0.0.1:9")))
    reply = transport.reply(
        "", [*conversation(), {"role": "assistant", "content": ""}, user(NO_ACTION)], SPECS
    )
    assert reply.nudge == NO_ACTION and reply.text == ""


# --- the native session as the text protocol ------------------------------------------------


def test_native_history_becomes_text_messages():
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "calculate", "arguments": '{"expression": "(12 * 9) + 3"}'},
    }
    native = [
        {"role": "system", "content": "You are agi."},
        user("What is (12 * 9) + 3?"),
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [call],
            "reasoning_content": "I should compute",
        },
        tool_result("call_1", "111"),
        {"role": "assistant", "content": "111", "reasoning_content": "I now know"},
        user("And 1/0?"),
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    **call,
                    "id": "c2",
                    "function": {"name": "calculate", "arguments": '{"expression": "1/0"}'},
                }
            ],
        },
        tool_result("c2", "Error: division by zero"),
        {"role": "assistant", "content": "I do not know"},
        user(NO_ACTION),
    ]
    assert react_messages(native, SPECS)[1:] == [
        {"role": "user", "content": "What is (12 * 9) + 3?"},
        {
            "role": "assistant",
            "content": "Thought: I should compute\n"
            'Action: calculate({"expression": "(12 * 9) + 3"})',
        },
        {"role": "user", "content": "Observation: 111"},
        {"role": "assistant", "content": "Thought: I now know\nFinal Answer: 111"},
        {"role": "user", "content": "And 1/0?"},
        {"role": "assistant", "content": 'Action: calculate({"expression": "1/0"})'},
        {"role": "user", "content": "Observation: Error: division by zero"},
        {"role": "assistant", "content": "I do not know"},  # a nudged turn stays verbatim
        {"role": "user", "content": NO_ACTION},
    ]
    system = react_messages(native, SPECS)[0]
    assert system == {"role": "system", "content": react_system_prompt(SPECS, "You are agi.")}


def test_several_calls_of_one_turn_alternate_with_their_observations():
    calls = [
        {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "Bash", "arguments": json.dumps({"command": c})},
        }
        for i, c in enumerate(["ls", "pwd"])
    ]
    native = [
        user("look"),
        {"role": "assistant", "content": "Looking.", "tool_calls": calls},
        tool_result("c0", "a b"),
        tool_result("c1", "/tmp"),
        user("again"),  # a continued session: joined to the observation before it
    ]
    out = react_messages(native, SPECS)
    assert out[0]["role"] == "system"  # added when the conversation has none
    assert out[1:] == [
        {"role": "user", "content": "look"},
        {"role": "assistant", "content": 'Thought: Looking.\nAction: Bash({"command": "ls"})'},
        {"role": "user", "content": "Observation: a b"},
        {"role": "assistant", "content": 'Action: Bash({"command": "pwd"})'},
        {"role": "user", "content": "Observation: /tmp\n\nagain"},
    ]


# --- the unchanged agent loop, with ReactTransport in place of the transport ---------------------


def run_agent(tmp_path, *script: Any) -> tuple[Reply, FakeModel, Session]:
    with FakeModel(*script) as server:
        transport = ReactTransport(Transport(ModelConfig("test", "m", server.url)))
        session = Session.open(tmp_path / "s")
        toolbox = Toolbox([Calculate()])
        agent = Agent(transport, toolbox, session, "You are agi.")  # type: ignore[arg-type]
        events = agent.run("question")
        while True:
            try:
                next(events)
            except StopIteration as done:
                transport.close()
                return done.value, server, session


def test_the_agent_loop_runs_a_react_turn(tmp_path):
    first = 'Thought: I should compute\nAction: calculate("(12 * 9) + 3")\nObservation: 105'
    reply, server, session = run_agent(tmp_path, text(first), text("Final Answer: 111"))
    assert reply.text == "111"
    second = server.requests[1]["messages"]
    assert {"role": "user", "content": "Observation: 111"} in second
    assert "105" not in json.dumps(second)
    assert "tools" not in server.requests[1]
    # the session keeps the native format
    assert [m["role"] for m in session.messages] == ["user", "assistant", "tool", "assistant"]
    assert session.messages[1]["tool_calls"][0]["function"]["name"] == "calculate"


def test_a_tool_error_reaches_the_model_as_an_observation(tmp_path):
    reply, server, _ = run_agent(
        tmp_path, text("Action: calculate(1 / 0)"), text("Final Answer: undefined")
    )
    assert reply.text == "undefined"
    sent = server.requests[1]["messages"]
    assert sent[-1] == {"role": "user", "content": "Observation: Error: division by zero"}


def test_the_agent_nudges_once_then_takes_the_plain_reply(tmp_path):
    reply, server, session = run_agent(tmp_path, text("Let me think."), text("Thought: It is 4."))
    assert reply.text == "It is 4."
    assert len(server.requests) == 2
    assert server.requests[1]["messages"][-1] == {"role": "user", "content": NO_ACTION}
    assert [m["role"] for m in session.messages] == ["user", "assistant", "user", "assistant"]
