"""Hostile input for the parsers: every recorded stream split at every byte boundary, and random
hooks settings files. Each either works the same or fails with agi's own error, never a crash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agi.errors import AgiError, ConfigError, ProviderError
from agi.providers.chat import ChatAssembler
from agi.providers.stream import iter_sse, sse_lines

from conftest import FIXTURES

STREAMS = sorted((FIXTURES / "transport").glob("*.sse"))


def decode(chunks: list[bytes]):
    """What the transport makes of a byte stream delivered in these chunks."""
    asm = ChatAssembler()
    events, error = [], None
    try:
        for _, data in iter_sse(sse_lines(chunks)):
            if data.strip() == "[DONE]":
                break
            events += asm.feed(json.loads(data), _)
        events += asm.flush()
        reply = asm.finish()
    except ProviderError as e:
        reply, error = None, (e.status, str(e))
    text = "".join(e.text for e in events if e.type == "text")
    reasoning = "".join(e.text for e in events if e.type == "reasoning")
    calls = [(c.id, c.name, c.arguments) for c in reply.tool_calls] if reply else None
    return text, reasoning, calls, error


@pytest.mark.parametrize("path", STREAMS, ids=[p.stem for p in STREAMS])
def test_every_byte_boundary(path):
    data = path.read_bytes()
    whole = decode([data])
    assert decode([data[i : i + 1] for i in range(len(data))]) == whole  # split everywhere
    for cut in range(0, len(data), max(1, len(data) // 97)):  # and in two, at many places
        assert decode([data[:cut], data[cut:]]) == whole


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_chunkings(data):
    path = data.draw(st.sampled_from(STREAMS))
    raw = path.read_bytes()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=40)))
    pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    assert decode(pieces) == decode([raw])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
events = st.sampled_from(["PreToolUse", "PostToolUse", "Stop", "UserPromptSubmit", "Bogus", ""])
hook_entry = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["command", "prompt", 3]),
        "command": st.text(max_size=20) | st.none(),
    },
    optional={"timeout": st.integers(-5, 100) | st.text(max_size=3)},
)
matcher_entry = st.fixed_dictionaries(
    {
        "matcher": st.text(max_size=12) | json_values,
        "hooks": st.lists(hook_entry, max_size=3) | json_values,
    },
)
# files that load (a command, or a type agi skips), so that what they load is checked too
good_entry = st.fixed_dictionaries(
    {"type": st.sampled_from(["command", "command", "prompt"]), "command": st.text(min_size=1)},
    optional={"timeout": st.integers(1, 100) | st.floats(0.5, 100)},
).filter(lambda entry: entry["command"].strip())
good_group = st.fixed_dictionaries(
    {"hooks": st.lists(good_entry, max_size=3)},
    optional={"matcher": st.sampled_from(["Bash", "Edit|Write", "", "*", "mcp__.*", "B.*h"])},
)
settings_files = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {
            "hooks": st.dictionaries(
                events, st.lists(matcher_entry, max_size=3) | json_values, max_size=3
            )
        }
    ),
    st.fixed_dictionaries(
        {"hooks": st.dictionaries(events, st.lists(good_group, max_size=3), max_size=3)}
    ),
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=settings_files | st.text(max_size=40).map(lambda t: {"raw": t}))
def test_random_hooks_settings_load_or_fail_cleanly(tmp_path: Path, content):
    from agi.claude.hooks.run import EVENTS, load_hooks

    path = tmp_path / "hooks.json"
    path.write_text(
        content["raw"]
        if isinstance(content, dict) and set(content) == {"raw"}
        else json.dumps(content)
    )
    try:
        hooks = load_hooks([path])
    except ConfigError as e:
        assert str(path) in str(e) and "\n" not in str(e)
        return
    except AgiError as e:  # pragma: no cover - any other agi error would be a wrong exit code
        raise AssertionError(f"unexpected {type(e).__name__}: {e}") from e
    # it loaded: it holds exactly the file's command hooks, notes the rest, and matches any payload
    want, notes = loaded_from(json.loads(path.read_text()), EVENTS)
    got = {e: [(h.command, h.timeout) for h in hooks.hooks.get(e, [])] for e in EVENTS}
    assert {e: hs for e, hs in got.items() if hs} == want
    assert bool(hooks) == bool(want) and all(hooks.has(e) == (e in want) for e in EVENTS)
    assert len(hooks.warnings) == notes, hooks.warnings
    for event in want:
        for payload in PAYLOADS:
            found = hooks.matching(event, payload)
            assert all(h in hooks.hooks[event] for h in found)


PAYLOADS = [
    {"tool_name": "Bash", "tool_input": {"command": "ls"}, "source": "startup"},
    {"tool_name": 3, "tool_input": "not an object", "source": None},
    {},
]


def loaded_from(data: dict, known: tuple[str, ...]) -> tuple[dict[str, list], int]:
    """What a settings file that loads must give: each event's (command, timeout) in file order,
    and how many notes (an event agi does not have; a hook type other than command)."""
    want: dict[str, list] = {}
    notes = 0
    for event, groups in data.get("hooks", {}).items():
        if event not in known:
            notes += 1
            continue
        for group in groups:
            for entry in group["hooks"]:
                if entry["type"] != "command":
                    notes += 1
                else:
                    timeout = float(entry.get("timeout", 60))
                    want.setdefault(event, []).append((entry["command"], timeout))
    return want, notes


# --- issue 27: wrong JSON types in streams, terminal control text, keys over several sends ------

any_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
tool_call_chunk = st.fixed_dictionaries(
    {},
    optional={
        "index": any_json, "id": any_json, "type": any_json,
        "function": any_json | st.fixed_dictionaries(
            {}, optional={"name": any_json, "arguments": any_json}
        ),
    },
)  # fmt: skip
chat_chunk = st.fixed_dictionaries(
    {},
    optional={
        "choices": any_json | st.lists(st.fixed_dictionaries({}, optional={
            "index": any_json, "finish_reason": any_json,
            "delta": any_json | st.fixed_dictionaries({}, optional={
                "content": any_json, "reasoning_content": any_json,
                "tool_calls": any_json | st.lists(tool_call_chunk, max_size=3),
            }),
        }), max_size=2),
        "usage": any_json,
    },
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(chat_chunk, max_size=5))
def test_chat_chunks_of_any_json_types_decode_or_fail_as_provider_errors(chunks):
    from agi.providers.chat import ChatAssembler

    asm = ChatAssembler()
    try:
        for chunk in chunks:
            asm.feed(chunk, "message")
        reply = asm.finish()
    except ProviderError:
        return
    for c in reply.tool_calls:  # every field a string: an odd one is an error result later
        assert isinstance(c.id, str) and isinstance(c.name, str)
        assert isinstance(c.arguments, str)


anthropic_event = st.fixed_dictionaries(
    {"type": st.sampled_from(["content_block_start", "content_block_delta", "message_delta"])},
    optional={
        "index": any_json,
        "content_block": any_json | st.fixed_dictionaries(
            {"type": st.sampled_from(["tool_use", "text", "thinking"])},
            optional={"id": any_json, "name": any_json, "input": any_json, "text": any_json},
        ),
        "delta": any_json | st.fixed_dictionaries(
            {"type": st.sampled_from(["input_json_delta", "text_delta"])},
            optional={"partial_json": any_json, "text": any_json},
        ),
    },
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(anthropic_event, max_size=6))
def test_anthropic_events_of_any_json_types_decode_or_fail_as_provider_errors(events):
    from agi.providers.anthropic import MessagesAssembler

    asm = MessagesAssembler()
    try:
        for event in events:
            asm.feed(event, event["type"])
        reply = asm.finish()
    except ProviderError:
        return
    for c in reply.tool_calls:
        assert isinstance(c.id, str) and isinstance(c.name, str)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_escaped_text_holds_no_control_character_but_newline_and_tab(text_):
    from agi.frontends.views.terminal import escape_controls

    shown = escape_controls(text_)
    assert not any((ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F for c in shown), (
        repr(shown)
    )
    if all(ord(c) >= 32 and not 0x7F <= ord(c) <= 0x9F or c in "\n\t" for c in text_):
        assert shown == text_  # ordinary text is untouched


keys = st.lists(
    st.sampled_from(
        ["a", "b", "r", "m", " ", "x", "<BS>", "<Left>", "<Right>", "<Home>", "<End>", "<C-u>",
         "<C-k>", "<C-w>", "<Enter>", "<Tab>", "<Up>", "<C-c>", "<Del>", "<lt>", "<C-a>", "<C-e>"]
    ),
    max_size=30,
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(keys, st.lists(st.integers(0, 30), max_size=5))
def test_the_lines_typed_do_not_depend_on_how_keys_are_split_into_sends(typed, cuts):
    from agi.tools.line_edit import LineEditor

    whole = LineEditor()
    expected = whole.feed("".join(typed))
    pieces = sorted(c % (len(typed) + 1) for c in cuts)
    bounds = [0, *pieces, len(typed)]
    split = LineEditor()
    got = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        got += split.feed("".join(typed[a:b]))
    assert got == expected
    assert (split.text, split.cursor, split.lost) == (whole.text, whole.cursor, whole.lost)


@settings(max_examples=200, deadline=None)
@given(any_json)
def test_meta_usage_of_any_json_reads_as_a_finite_usage(value):
    import math

    from agi.messages import Usage
    from agi.sessions.finite import finite

    usage = Usage.from_dict(finite({"usage": value}, "", []).get("usage"))
    for n in (usage.input, usage.output, usage.cached, usage.cache_write, usage.reasoning):
        assert isinstance(n, int) and n >= 0
    assert usage.cost is None or math.isfinite(usage.cost)


ollama_line = st.fixed_dictionaries(
    {},
    optional={
        "message": any_json | st.fixed_dictionaries({}, optional={
            "content": any_json, "thinking": any_json,
            "tool_calls": any_json | st.lists(st.fixed_dictionaries({}, optional={
                "id": any_json, "function": any_json | st.fixed_dictionaries(
                    {}, optional={"name": any_json, "arguments": any_json}),
            }), max_size=2),
        }),
        "done": any_json, "done_reason": any_json, "prompt_eval_count": any_json,
        "eval_count": any_json,
    },
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(ollama_line, max_size=4))
def test_ollama_lines_of_any_json_types_decode_or_fail_as_provider_errors(lines):
    from agi.providers.ollama import OllamaAssembler

    asm = OllamaAssembler()
    try:
        for line in lines:
            asm.feed(line, "message")
        reply = asm.finish()
    except ProviderError:
        return
    for c in reply.tool_calls:
        assert isinstance(c.id, str) and isinstance(c.name, str)
