"""Compaction: the session's view, crash safety, what is kept and what the summariser is shown."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agi.context.estimate import Estimator, estimate, text_size
from agi.context.summarize import (
    MIN_TOOL_CAP,
    Compaction,
    SummaryFailed,
    compact,
    mechanical_summary,
    pieces,
    plan,
    reactive_window,
    record,
    summarise,
    text,
)
from agi.errors import Cancelled, ProviderError
from agi.messages import drain, wire_message
from agi.options.config import ModelConfig
from agi.providers.transport import Transport
from agi.sessions.session import Session

from conftest import FIXTURES
from fakeserver import FakeModel, status
from fakeserver import text as reply

PROMPT_FILE = Path(__file__).resolve().parents[2] / "agi" / "prompts" / "compact.md"


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def said(text: str) -> dict:
    return {"role": "assistant", "content": text}


def called(*ids: str, text: str = "") -> dict:
    calls = [
        {"id": i, "type": "function", "function": {"name": "Bash", "arguments": f'{{"c": "{i}"}}'}}
        for i in ids
    ]
    return {"role": "assistant", "content": text, "tool_calls": calls}


def result(call_id: str, text: str = "output") -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def conversation() -> list[dict]:
    return [
        user("Fix the failing test in tests/test_x.py; do not touch setup.py."),
        called("a1", text="Let me look."),
        result("a1", "FAILED tests/test_x.py::test_y - AssertionError\n" * 20),
        called("a2", "a3"),
        result("a2", "def test_y(): ..."),
        result("a3", "x = 1"),
        said("Fixed: x is now 2."),
        user("Now also update the changelog."),
        called("b1"),
        result("b1", "changelog " * 300),
        said("Done."),
    ]


def opened(path: Path, messages: list[dict] = ()) -> Session:
    session = Session.open(path)
    session.lock()
    for m in messages:
        session.append(m)
    return session


# --- the model's view ----------------------------------------------------------------------


def test_the_compaction_field_never_goes_on_the_wire():
    line = record("the summary", "auto", 5, 1000, 100, 2)
    sent = wire_message(line)
    assert sent == {"role": "user", "content": line["content"]}
    assert "compaction" in line  # the stored message is untouched


def test_record_has_the_contract_fields_and_reads_as_a_summary():
    line = record("S", "manual", 7, 5000, 800, kept=3)
    assert line["role"] == "user"
    assert line["compaction"] == {
        "trigger": "manual",
        "summarized": 7,
        "tokens_before": 5000,
        "tokens_after": 800,
        "kept": 3,
    }
    assert line["content"].startswith("[Summary of the earlier part of this conversation (7")
    assert line["content"].endswith("\n\nS")


def test_view_starts_at_the_last_record_and_survives_a_reload(tmp_path):
    session = opened(tmp_path / "s", conversation())
    assert session.view() == session.messages
    kept = conversation()[-4:]
    stored = session.append_compaction(record("first summary", "auto", 7, 900, 300), kept)
    assert stored["compaction"]["kept"] == 4 and len(stored["compaction"]["digests"]) == 4
    session.append(user("go on"))
    view = session.view()
    assert view[0] == stored and view[1:5] == kept and view[-1] == user("go on")
    again = Session.open(tmp_path / "s")
    again.load()
    assert again.view() == view
    assert len(again.messages) == len(conversation()) + 1 + 4 + 1  # nothing rewritten
    second = again.append_compaction(record("second summary", "manual", 6, 500, 100), [])
    assert again.view() == [second]
    third = Session.open(tmp_path / "s")
    third.load()
    assert third.view() == [second] and not third.warnings


def test_a_record_written_by_hand_as_the_contract_shows_it_starts_the_view(tmp_path):
    session = opened(tmp_path / "s", conversation()[:3])
    hand = {"role": "user", "content": "S", "compaction": {"trigger": "auto", "summarized": 3}}
    session.append(hand)
    session.append(said("ok"))
    reread = Session.open(tmp_path / "s")
    reread.load()
    assert reread.view() == [hand, said("ok")]


def test_a_kill_at_any_byte_of_a_compaction_leaves_the_old_view_or_the_new(tmp_path):
    """Every prefix of the compaction's write, then a run that repairs the file and goes on."""
    original = tmp_path / "original"
    session = opened(original, [user("héllo ✓"), called("c1"), result("c1", "ok"), said("done")])
    before = session.messages_file.read_bytes()
    old_view = session.view()
    kept = [user("héllo ✓"), called("c2"), result("c2", "ok ✓")]
    session.append_compaction(record("summary ✓", "auto", 4, 50, 20), kept)
    region = session.messages_file.read_bytes()[len(before) :]
    new_view = session.view()
    assert new_view[1:] == kept
    later = user("after the crash")
    seen = set()
    copy = tmp_path / "cut"
    shutil.copytree(original, copy)
    for cut in range(len(region) + 1):
        (copy / "messages.jsonl").write_bytes(before + region[:cut])
        crashed = Session.open(copy)
        crashed.lock()  # loads, and ends a torn last line
        view = crashed.view()
        assert view in (old_view, new_view), cut
        assert crashed.pending_tool_calls() == []
        crashed.append(later)
        crashed.unlock()
        reread = Session.open(copy)
        reread.load()
        assert reread.view() in (old_view + [later], new_view + [later]), cut
        seen.add("new" if view == new_view else "old")
    assert seen == {"old", "new"}


# --- what is kept verbatim -------------------------------------------------------------------


def size(messages: list[dict]) -> int:
    return estimate(messages)


def test_plan_keeps_recent_turns_and_never_splits_a_call_from_its_results():
    view = conversation()
    to_summarise, kept = plan(view, size(view[-4:]), size)
    assert kept == view[-4:] and to_summarise == view[:-4]
    # a budget that would cut between a call and its results starts the kept part earlier
    to_summarise, kept = plan(view, size(view[4:]), size)
    assert kept[0]["role"] != "tool"
    assert kept == view[6:] and to_summarise == view[:6]


def test_the_prompt_of_the_current_turn_is_kept_ahead_of_a_turn_too_long_to_keep():
    turn = [user("The task: rename foo to bar everywhere, keep the tests green.")]
    for i in range(10):
        turn += [called(f"t{i}"), result(f"t{i}", "z" * 4000)]
    view = [user("earlier"), said("ok"), *turn]
    to_summarise, kept = plan(view, size(turn[:1]) + size(turn[-2:]) + 5, size)
    assert kept == [turn[0], *turn[-2:]]
    assert to_summarise == view[:-2]  # the summariser still sees the prompt in context
    # a prompt bigger than the whole budget is summarised like the rest
    to_summarise, kept = plan(view, size(turn[:1]) - 1, size)
    assert turn[0] not in kept


def test_an_earlier_summary_is_merged_never_kept():
    earlier = record("old summary", "auto", 9, 1, 1)
    view = [earlier, user("next"), said("answer")]
    to_summarise, kept = plan(view, 10**9, size)
    assert to_summarise == [earlier] and kept == view[1:]


turns = st.lists(
    st.one_of(
        st.tuples(st.just("user"), st.integers(1, 400)),
        st.tuples(st.just("said"), st.integers(1, 400)),
        st.tuples(st.just("calls"), st.lists(st.integers(1, 2000), min_size=1, max_size=4)),
    ),
    max_size=25,
)


def build(spec: list) -> list[dict]:
    view, n = [], 0
    for kind, arg in spec:
        if kind == "user":
            view.append(user("u" * arg))
        elif kind == "said":
            view.append(said("a" * arg))
        else:
            ids = [f"c{n + i}" for i in range(len(arg))]
            n += len(arg)
            view.append(called(*ids))
            view += [result(i, "r" * s) for i, s in zip(ids, arg, strict=True)]
    return view


@settings(max_examples=300, deadline=None)
@given(turns, st.integers(0, 3000), st.booleans())
def test_plan_never_splits_a_call_from_its_results(spec, budget, summary_first):
    view = build(spec)
    if summary_first:
        view.insert(0, record("s", "auto", 3, 1, 1))
    to_summarise, kept = plan(view, budget, size)
    assert view[: len(to_summarise)] == to_summarise
    tail = view[len(to_summarise) :]
    if kept != tail:  # the current turn's prompt, kept ahead of the stretch that fits
        assert kept[1:] == tail and kept[0]["role"] == "user" and kept[0] in to_summarise
    assert sum(size([m]) for m in kept) <= budget
    assert all("compaction" not in m for m in kept)
    if kept:
        assert kept[0]["role"] != "tool"
    if tail:
        assert tail[0]["role"] != "tool"
    calls = {c["id"] for m in kept for c in m.get("tool_calls") or ()}
    results = {m["tool_call_id"] for m in kept if m["role"] == "tool"}
    assert calls == results


# --- what the summariser is shown --------------------------------------------------------------


def test_everything_in_one_piece_when_it_fits_nothing_cut():
    view = conversation()
    parts = pieces(view, 10**6)
    assert len(parts) == 1
    assert "changelog " * 300 in parts[0] and "characters cut" not in parts[0]
    assert parts[0].index("USER:\nFix the failing") < parts[0].index("RESULT OF Bash:")


def test_tool_outputs_are_cut_only_as_far_as_needed_and_users_stay_whole():
    view = [user("first " * 50)]
    for i in range(6):
        view += [called(f"x{i}"), result(f"x{i}", f"start{i} " + "o" * 20000 + f" end{i}")]
    view.append(user("last words " * 20))
    whole = sum(text_size(m["content"]) for m in view)
    budget = whole // 2
    parts = pieces(view, budget)
    assert len(parts) == 1  # cutting the outputs made it fit
    assert text_size(parts[0]) <= budget
    assert "first " * 50 in parts[0] and "last words " * 20 in parts[0]
    for i in range(6):  # head and tail of every output, with a note of what was cut
        assert f"start{i} " in parts[0] and f" end{i}" in parts[0]
    assert parts[0].count("characters cut") == 6


def test_a_history_larger_than_the_window_goes_in_pieces_with_every_user_message_whole():
    view = []
    for i in range(60):
        view += [user(f"request {i}: " + "u" * 3000), called(f"k{i}"), result(f"k{i}", "o" * 40000)]
    assert text_size(json.dumps(view)) > 2_000_000
    budget = 30_000
    parts = pieces(view, budget)
    assert len(parts) > 1
    assert all(text_size(p) <= budget for p in parts)
    shown = "\n".join(parts)
    for i in range(60):
        assert f"request {i}: " + "u" * 3000 in shown
    assert shown.index("request 0:") < shown.index("request 59:")


def test_a_single_message_larger_than_a_piece_is_cut_too():
    parts = pieces([user("head " + "m" * 50_000 + " tail")], 8000)
    assert len(parts) == 1 and text_size(parts[0]) <= 8000
    assert "head " in parts[0] and " tail" in parts[0] and "characters cut" in parts[0]
    assert MIN_TOOL_CAP < 8000


def test_summarise_carries_each_summary_into_the_next_request():
    asked: list[list[dict]] = []

    def ask(messages: list[dict]) -> str:
        asked.append(messages)
        return f"summary {len(asked)}"

    assert summarise(ask, ["part one", "part two"], focus="the API") == "summary 2"
    first, second = (m[0]["content"] for m in asked)
    assert "part one" in first and "summary 1" not in first
    assert "summary 1" in second and "part two" in second and "part one" not in second
    assert "(part 2 of 2)" in second and "focus on: the API" in second
    assert all(len(m) == 1 and m[0]["role"] == "user" for m in asked)


def test_summary_failures_are_typed_and_interruptions_pass():
    with pytest.raises(SummaryFailed):
        summarise(lambda m: "  ", ["p"])

    def boom(messages):
        raise ProviderError("HTTP 400: prompt is too long: 9 tokens > 8 maximum", 400)

    with pytest.raises(SummaryFailed) as failed:
        summarise(boom, ["p"])
    assert failed.value.too_long

    def cancelled(messages):
        raise Cancelled()

    with pytest.raises(Cancelled):
        summarise(cancelled, ["p"])


def test_the_compaction_prompt_stays_under_1500_characters():
    assert len(PROMPT_FILE.read_text(encoding="utf-8")) < 1500
    instruction = text("instruction")
    for asked_for in ("constraint", "decided", "why", "file", "failed", "open", "exact words"):
        assert asked_for in instruction.lower()


def test_mechanical_summary_keeps_the_users_words_and_elides_tool_outputs():
    view = conversation() + [user("huge " + "h" * 100_000)]
    summary = mechanical_summary(view)
    assert "Fix the failing test in tests/test_x.py; do not touch setup.py." in summary
    assert "Now also update the changelog." in summary
    assert "changelog changelog" not in summary and "characters elided" in summary
    assert "characters cut" in summary and text_size(summary) < 30_000


# --- the driver ------------------------------------------------------------------------------


def test_compact_summarises_and_keeps_the_recent_turns():
    asked: list[str] = []

    def ask(messages):
        asked.append(messages[0]["content"])
        return "The user wants the test fixed."

    view = conversation()
    done = compact(view, ask, trigger="auto", window=2000, estimate=size)
    assert isinstance(done, Compaction) and not done.mechanical and done.requests == 1
    line = done.record
    assert line["content"].endswith("The user wants the test fixed.")
    info = line["compaction"]
    assert info["trigger"] == "auto" and info["kept"] == len(done.kept)
    assert info["summarized"] + len(done.kept) >= len(view)
    assert info["tokens_before"] == size(view) > info["tokens_after"] == size([line, *done.kept])
    assert "do not touch setup.py" in asked[0]


def test_compact_falls_back_to_a_mechanical_summary_with_a_warning():
    def ask(messages):
        raise ProviderError("HTTP 500: boom", 500)

    done = compact(conversation(), ask, trigger="manual", window=2000, estimate=size)
    assert done.mechanical and "boom" in done.warning
    assert done.record["compaction"]["mechanical"] is True
    assert "Fix the failing test" in done.record["content"]


def test_a_piece_the_provider_finds_too_long_is_sent_again_in_halves():
    sizes: list[int] = []

    def ask(messages):
        sizes.append(len(messages[0]["content"]))
        if len(sizes) == 1:
            raise ProviderError("HTTP 400: This model's maximum context length is 10 tokens", 400)
        return "ok"

    view = [user("u" * 9000), said("a" * 9000), user("v" * 9000), said("b")]
    done = compact(view, ask, trigger="auto", window=10_000, estimate=size, keep_tokens=0)
    assert not done.mechanical and len(sizes) > 2 and max(sizes[1:]) < sizes[0]


def test_manual_compaction_of_a_short_session_summarises_all_of_it():
    done = compact([user("hi"), said("hello")], lambda m: "greetings", trigger="manual")
    assert done.kept == [] and done.record["compaction"]["summarized"] == 2
    assert compact([], lambda m: "x") is None


def test_every_user_message_reaches_the_summariser_in_full_across_the_requests():
    view = []
    for i in range(40):
        view += [
            user(f"instruction {i} " + "w" * 2000),
            called(f"q{i}"),
            result(f"q{i}", "o" * 60000),
        ]
    shown: list[str] = []

    def ask(messages):
        shown.append(messages[0]["content"])
        return f"summary after {len(shown)} parts"

    done = compact(view, ask, trigger="auto", window=16_000, estimate=size, keep_tokens=0)
    assert done.requests == len(shown) > 1
    everything = "\n".join(shown)
    for i in range(40):
        assert f"instruction {i} " + "w" * 2000 in everything
    assert all(estimate([user(s)]) < 16_000 for s in shown)


def test_the_window_to_compact_for_after_a_too_long_error():
    body = {"error": {"message": "This model's maximum context length is 8192 tokens."}}
    assert reactive_window(128_000, body, 9000) == 8192
    assert reactive_window(None, "no number here", 9000) == 9000
    assert reactive_window(None, "", 0) == 32_768


def test_the_ghost_exchange_through_the_real_transport_and_a_real_too_long_error(tmp_path):
    """How the lead's `ask` looks: a ghost stream; the provider's real error shape on the first
    piece makes the driver send the conversation again in smaller pieces."""
    error = json.loads((FIXTURES / "context_errors/too_long/vllm_input_tokens.json").read_text())
    view = [user("keep these words " + "k" * 4000), said("a" * 9000), user("later " * 900)]
    with FakeModel(status(error["status"], error["body"]), reply("The summary.")) as fake:
        transport = Transport(ModelConfig("openai", "fake-model", fake.url))
        traced: list[dict] = []
        transport.trace = traced.append

        def ask(messages):
            return drain(transport.stream(messages, [], mark={"ghost": True})).text

        done = compact(view, ask, trigger="auto", window=6000, estimate=size, keep_tokens=0)
    assert done.summary == "The summary." and not done.mechanical
    assert len(fake.requests) >= 3  # the rejected piece, then the halves
    assert all(r.get("ghost") for r in traced)
    shown = "".join(r["messages"][0]["content"] for r in fake.requests[1:])
    assert "keep these words " + "k" * 4000 in shown


def test_the_estimators_own_measure_leaves_the_request_estimate_alone():
    meter = Estimator()
    request = conversation()
    meter(request)
    last = meter.last
    done = compact(request, lambda m: "s", window=2000, estimate=meter.measure)
    assert meter.last == last and done is not None
    meter.observe(last * 2)
    assert meter.calibrator.ratio == 2
