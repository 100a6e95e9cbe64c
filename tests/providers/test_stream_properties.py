"""Property-based tests for agi.providers.stream: SSE framing, inline <think> splitting, chunk
assembly."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from agi.messages import ReasoningDelta, TextDelta, ToolCall
from agi.providers.chat import ChatAssembler
from agi.providers.stream import ThinkSplitter, iter_sse

SETTINGS = settings(max_examples=200, deadline=None)

OPEN, CLOSE = "<think>", "</think>"

# Text that str.splitlines() never breaks: no control characters (\r \n \v \f \x1c-\x1e \x85)
# and no line/paragraph separators (U+2028, U+2029).
line_text = st.text(
    st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")),
    max_size=30,
)

# Free text biased towards the characters of the think tags, so near-misses get generated.
tag_biased = st.text(
    st.one_of(st.sampled_from(list("<>/think \n\t")), st.characters(blacklist_categories=("Cs",))),
    max_size=40,
)
no_tags = tag_biased.filter(lambda s: OPEN not in s and CLOSE not in s)
leading_ws = st.text(st.sampled_from([" ", "\n", "\t", "\r"]), max_size=3)


def cut(s: str, positions: list[int]) -> list[str]:
    """Cut s at the given positions (taken modulo len(s)+1; repeats give empty pieces)."""
    points = sorted(p % (len(s) + 1) for p in positions)
    bounds = [0, *points, len(s)]
    return [s[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


cut_points = st.lists(st.integers(min_value=0, max_value=10_000), max_size=12)


# 1. iter_sse ------------------------------------------------------------------------------------

sse_event = st.tuples(
    st.one_of(st.none(), line_text.filter(bool)),  # event name
    st.lists(line_text, min_size=1, max_size=4),  # data lines
)


@SETTINGS
@given(
    events=st.lists(sse_event, max_size=6),
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
    drop_final_blank=st.booleans(),
    keepends=st.booleans(),
    data=st.data(),
)
def test_iter_sse_roundtrip(events, newline, drop_final_blank, keepends, data):
    lines: list[str] = []
    expected: list[tuple[str, str]] = []
    for name, data_lines in events:
        if data.draw(st.booleans(), label="comment before event"):
            lines.append(": keep-alive")
        block = []
        for value in data_lines:
            # "data:x" and "data: x" are the same field; without the space a leading space
            # of the value would be eaten, so only use it when the value has none.
            compact = not value.startswith(" ") and data.draw(st.booleans(), label="compact")
            block.append(("data:" if compact else "data: ") + value)
        if name is not None:
            at = data.draw(st.integers(0, len(block)), label="event line position")
            block.insert(at, f"event: {name}")
        # keep-alive comments may also sit inside an event
        for _ in range(data.draw(st.integers(0, 2), label="inner comments")):
            at = data.draw(st.integers(0, len(block)), label="comment position")
            block.insert(at, ": keep-alive")
        lines += block
        lines.append("")  # the blank line that dispatches the event
        expected.append((name or "message", "\n".join(data_lines)))
    if data.draw(st.booleans(), label="trailing comment"):
        lines += [": keep-alive", ""]
    text = "".join(line + newline for line in lines)
    if drop_final_blank and text.endswith(newline + newline):
        text = text[: -len(newline)]
    assert list(iter_sse(text.splitlines(keepends=keepends))) == expected


# 2. ThinkSplitter -------------------------------------------------------------------------------


def split_all(pieces: list[str]) -> tuple[str, str]:
    splitter = ThinkSplitter()
    text = reasoning = ""
    for piece in pieces:
        t, r = splitter.feed(piece)
        text, reasoning = text + t, reasoning + r
    t, r = splitter.flush()
    return text + t, reasoning + r


@SETTINGS
@given(lead=leading_ws, r=no_tags, t=no_tags, positions=cut_points)
def test_think_block_any_cutting(lead, r, t, positions):
    """Reasoning comes out exactly; text comes out whole up to leading whitespace."""
    text, reasoning = split_all(cut(lead + OPEN + r + CLOSE + t, positions))
    assert reasoning == r
    assert text.lstrip() == t.lstrip()
    assert t.endswith(text)


@SETTINGS
@example(lead="", r="r", t=" t", positions=[len(OPEN + "r" + CLOSE)])
@given(lead=leading_ws, r=no_tags, t=no_tags, positions=cut_points)
def test_think_block_text_lstripped_regardless_of_cutting(lead, r, t, positions):
    text, reasoning = split_all(cut(lead + OPEN + r + CLOSE + t, positions))
    assert reasoning == r
    assert text == t.lstrip()


@SETTINGS
@given(
    content=st.one_of(
        tag_biased,
        st.builds(
            lambda ws, k, rest: ws + OPEN[:k] + rest, leading_ws, st.integers(0, 6), tag_biased
        ),
    ),
    positions=cut_points,
)
def test_no_think_block_is_all_text(content, positions):
    if content.lstrip().startswith(OPEN):
        content = "x" + content
    assert split_all(cut(content, positions)) == (content, "")


@SETTINGS
@given(lead=leading_ws, r=tag_biased.filter(lambda s: CLOSE not in s), positions=cut_points)
def test_unclosed_think_is_all_reasoning(lead, r, positions):
    assert split_all(cut(lead + OPEN + r, positions)) == ("", r)


# 3. ChatAssembler: tool calls -------------------------------------------------------------------

json_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=10),
)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
tool_call = st.tuples(
    st.from_regex(r"call_[A-Za-z0-9]{1,12}", fullmatch=True),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True),
    st.dictionaries(st.text(max_size=6), json_value, max_size=4),
    st.booleans(),  # ensure_ascii
)


def chunk_of(tool_deltas: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"tool_calls": tool_deltas}, "finish_reason": finish}],
    }


@settings(max_examples=120, deadline=None)  # each example draws many choices
@given(calls=st.lists(tool_call, min_size=1, max_size=3, unique_by=lambda c: c[0]), data=st.data())
def test_tool_calls_assemble(calls, data):
    per_call: list[list[dict[str, Any]]] = []
    expected: list[ToolCall] = []
    for i, (call_id, name, args, ascii_only) in enumerate(calls):
        text = json.dumps(args, ensure_ascii=ascii_only)
        expected.append(ToolCall(call_id, name, text))
        deltas: list[dict[str, Any]] = [
            {
                "index": i,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
        ]
        positions = data.draw(cut_points, label=f"argument cuts {i}")
        for frag in cut(text, positions):
            delta: dict[str, Any] = {"index": i, "function": {"arguments": frag}}
            quirk = data.draw(st.sampled_from(["plain", "plain", "kimi", "mistral"]), label="quirk")
            if quirk == "kimi":  # id and name sent again in a later delta
                delta.update(id=call_id, type="function")
                delta["function"]["name"] = name
            elif quirk == "mistral":  # continuation delta with an empty name
                delta["function"]["name"] = ""
            deltas.append(delta)
        per_call.append(deltas)

    # Interleave the calls: each call's deltas stay in order, and call i starts before call i+1.
    order: list[dict[str, Any]] = []
    pos = [0] * len(per_call)
    while any(p < len(d) for p, d in zip(pos, per_call, strict=True)):
        started = sum(1 for p in pos if p > 0)
        ready = [j for j in range(min(started + 1, len(per_call))) if pos[j] < len(per_call[j])]
        j = data.draw(st.sampled_from(ready), label="next call")
        order.append(per_call[j][pos[j]])
        pos[j] += 1

    # Group consecutive deltas into chunks of one or more tool_calls entries.
    asm = ChatAssembler()
    asm.feed({"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]})
    k = 0
    while k < len(order):
        n = data.draw(st.integers(1, 3), label="deltas per chunk")
        assert asm.feed(chunk_of(order[k : k + n])) == []
        k += n
    asm.feed(chunk_of([], finish="tool_calls"))
    reply = asm.finish()

    assert reply.tool_calls == expected
    assert [c.parse_arguments() for c in reply.tool_calls] == [c[2] for c in calls]
    assert reply.finish_reason == "tool_calls"
    assert reply.text == "" and reply.reasoning == ""


# 4. ChatAssembler: text and reasoning deltas ----------------------------------------------------


@SETTINGS
@given(
    text=tag_biased,
    reasoning=tag_biased,
    field=st.sampled_from(["reasoning_content", "reasoning"]),
    text_cuts=cut_points,
    reasoning_cuts=cut_points,
    data=st.data(),
)
def test_text_and_reasoning_deltas(text, reasoning, field, text_cuts, reasoning_cuts, data):
    if text.lstrip().startswith(OPEN):
        text = "x" + text  # an inline think block is tested above
    text_parts = cut(text, text_cuts)
    reasoning_parts = cut(reasoning, reasoning_cuts)

    chunks: list[dict[str, Any]] = []
    ti = ri = 0
    while ti < len(text_parts) or ri < len(reasoning_parts):
        delta: dict[str, Any] = {}
        left = {"r": ri < len(reasoning_parts), "t": ti < len(text_parts)}
        kinds = [k for k, more in left.items() if more] + (["both"] if all(left.values()) else [])
        kind = data.draw(st.sampled_from(kinds), label="kind")
        if kind in ("r", "both"):
            delta[field] = reasoning_parts[ri]
            ri += 1
        if kind in ("t", "both"):
            delta["content"] = text_parts[ti]
            ti += 1
        if data.draw(st.booleans(), label="null other field"):
            delta.setdefault("content", None)
        chunks.append({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})

    asm = ChatAssembler()
    events = []
    for chunk in chunks:
        events += asm.feed(chunk)
    events += asm.flush()
    reply = asm.finish()

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == text
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == reasoning
    assert all(e.text for e in events)
    assert reply.text == text.strip()
    assert reply.reasoning == reasoning.strip()
    assert reply.reasoning_field == (field if reasoning else "reasoning_content")
    assert reply.finish_reason == "stop"
    assert reply.tool_calls == []


# --- SSE line framing: any chunking gives the same lines; one line is bounded (section 20) --------

sse_bytes = st.lists(st.binary(max_size=20) | st.sampled_from([b"\n", b"\r\n", b"data: x"]))


@SETTINGS
@given(sse_bytes, st.lists(st.integers(0, 10_000), max_size=12))
def test_sse_lines_do_not_depend_on_the_chunking(pieces, positions):
    from agi.providers.stream import sse_lines

    data = b"".join(pieces)
    points = sorted(p % (len(data) + 1) for p in positions)
    bounds = [0, *points, len(data)]
    chunks = [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    assert list(sse_lines(chunks)) == list(sse_lines([data]))


def test_one_sse_line_over_the_limit_is_a_provider_error():
    import pytest

    from agi.errors import ProviderError
    from agi.providers.stream import SSE_LINE_LIMIT, sse_lines

    piece = b"x" * (1 << 16)
    chunks = (piece for _ in range(SSE_LINE_LIMIT // len(piece) + 2))  # never a newline
    with pytest.raises(ProviderError, match="over 16 MB"):
        for _ in sse_lines(chunks):
            pass
    assert list(sse_lines([b"data: " + b"y" * (SSE_LINE_LIMIT - 16), b"\n"]))  # within: fine
