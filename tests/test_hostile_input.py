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
    from agi.claude.hooks import EVENTS, load_hooks

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
