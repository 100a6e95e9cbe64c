"""Provider errors and retries, through the real executable against the scripted server.

Contract (section 2): connection failures, 408, 409, 429 and 5xx are retried, 3 attempts in all,
honouring `retry-after-ms` / `retry-after` up to 60 s and never past `--timeout`; a longer wait
is not waited for (exit 3 with the provider's message); a stream that already delivered content
is not retried.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from fakeserver import USAGE, FakeModel, _chunk, raw, status, text

Step = dict[str, Any]


def timed(arrivals: list[float], step: Step) -> Callable[[dict[str, Any]], Step]:
    """A script step that records when its request arrived."""

    def play(body: dict[str, Any]) -> Step:
        arrivals.append(time.monotonic())
        return step

    return play


def one_line_error(r) -> str:
    assert r.stdout == ""
    assert r.stderr.startswith("agi: ") and r.stderr.count("\n") == 1, r.stderr
    return r.stderr


def test_retry_after_ms_is_honoured(agi):
    arrivals: list[float] = []
    busy = status(429, {"error": {"message": "slow down"}}, {"retry-after-ms": "300"})
    with FakeModel(timed(arrivals, busy), timed(arrivals, text("made it"))) as server:
        r = agi("hi", server=server)
    assert (r.returncode, r.stdout, r.stderr) == (0, "made it\n", "")
    assert len(arrivals) == 2
    gap = arrivals[1] - arrivals[0]
    assert 0.3 <= gap < 15, gap  # honoured; the upper bound is a hang guard


def test_retry_after_seconds_is_honoured(agi):
    arrivals: list[float] = []
    busy = status(429, {"error": {"message": "slow down"}}, {"retry-after": "1"})
    with FakeModel(timed(arrivals, busy), timed(arrivals, text("made it"))) as server:
        r = agi("hi", server=server)
    assert (r.returncode, r.stdout) == (0, "made it\n"), r.stderr
    assert len(arrivals) == 2
    gap = arrivals[1] - arrivals[0]
    assert 1.0 <= gap < 15, gap  # honoured; the upper bound is a hang guard


def test_retry_after_over_the_cap_is_not_waited_for(agi):
    busy = status(
        429,
        {"error": {"message": "Rate limit reached for requests per day"}},
        {"retry-after": "120"},
    )
    with FakeModel(busy, text("never")) as server:
        r = agi("hi", server=server, timeout=30)  # a hang guard, far short of the 120 s
    assert r.returncode == 3, r.stderr
    message = one_line_error(r)
    assert "Rate limit reached for requests per day" in message
    assert "429" in message
    assert len(server.requests) == 1


def test_503_twice_then_success(agi):
    unavailable = status(503, {"error": {"message": "overloaded"}})
    with FakeModel(unavailable, unavailable, text("third time")) as server:
        r = agi("hi", server=server)
    assert (r.returncode, r.stdout, r.stderr) == (0, "third time\n", "")
    assert len(server.requests) == 3
    assert server.requests[0] == server.requests[2]  # the same request, resent


def test_500_forever_gives_up_after_three_attempts(agi):
    with FakeModel(status(500, {"error": {"message": "upstream exploded"}})) as server:
        r = agi("hi", server=server)
    assert r.returncode == 3
    assert "upstream exploded" in one_line_error(r)
    assert len(server.requests) == 3


def test_400_is_not_retried(agi):
    bad = status(400, {"error": {"message": "Invalid parameter: messages"}})
    with FakeModel(bad, text("never")) as server:
        r = agi("hi", server=server)
    assert r.returncode == 3
    assert "Invalid parameter: messages" in one_line_error(r)
    assert len(server.requests) == 1


def test_a_stream_cut_after_some_text_is_not_retried(agi, tmp_path):
    """Text arrives, then the server closes the connection: no finish_reason, no [DONE].

    The answer is incomplete: exit 3, nothing on stdout; the session keeps the partial text once,
    and the request is not sent again.
    """
    cut = (
        _chunk({"role": "assistant", "content": ""})
        + _chunk({"content": "Hello, "})
        + _chunk({"content": "wor"})
    )
    session = tmp_path / "s"
    with FakeModel(raw(cut), text("a second answer")) as server:
        r = agi("--session", str(session), "hi", server=server)
    assert len(server.requests) == 1
    assert r.returncode == 3, r.stderr
    assert r.stderr == (
        "agi: the stream ended early (the connection closed before a finish_reason or [DONE])\n"
    )
    assert r.stdout == ""
    stored = [json.loads(line) for line in (session / "messages.jsonl").read_text().splitlines()]
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[1]["content"] == "Hello, wor"


def test_an_error_event_after_some_text_is_not_retried(agi):
    """A retryable error (503) reported inside a stream that already delivered text."""
    broken = (
        _chunk({"role": "assistant", "content": ""})
        + _chunk({"content": "Partial "})
        + b'data: {"error": {"message": "overloaded mid-stream", "code": 503}}\n\n'
    )
    with FakeModel(raw(broken), text("a second answer")) as server:
        r = agi("hi", server=server)
    assert r.returncode == 3
    assert "overloaded mid-stream" in one_line_error(r)  # and the partial text is not the answer
    assert len(server.requests) == 1


def test_a_stream_cut_before_any_text_is_retried(agi):
    """Nothing delivered yet (only the role chunk), then the server errors: safe to retry."""
    nothing = _chunk({"role": "assistant", "content": ""}) + (
        b'data: {"error": {"message": "overloaded", "code": 503}}\n\n'
    )
    with FakeModel(raw(nothing), text("recovered")) as server:
        r = agi("hi", server=server)
    assert (r.returncode, r.stdout, r.stderr) == (0, "recovered\n", "")
    assert len(server.requests) == 2


def test_retry_after_past_the_timeout_is_not_waited_for(agi):
    busy = status(429, {"error": {"message": "slow down"}}, {"retry-after": "50"})
    with FakeModel(busy, text("never")) as server:
        started = time.monotonic()
        r = agi("--timeout", "30", "hi", server=server, timeout=60)
        elapsed = time.monotonic() - started
    assert r.returncode in (3, 4), r.stderr
    message = one_line_error(r)
    assert "timeout" in message or "time limit" in message or "retry" in message, message
    assert len(server.requests) == 1
    assert elapsed < 10, elapsed  # a hang guard: waiting would take the whole 30 s


def test_usage_of_a_retried_run_counts_only_the_answer(agi):
    """`--output json` after a retry: one model call (steps), one usage record."""
    unavailable = status(503, {"error": {"message": "overloaded"}}, {"retry-after-ms": "50"})
    with FakeModel(unavailable, text("ok")) as server:
        r = agi("--output", "json", "hi", server=server)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["answer"] == "ok"
    assert result["steps"] == 1
    assert result["usage"]["input"] == USAGE["prompt_tokens"]
    assert result["usage"]["output"] == USAGE["completion_tokens"]
    assert len(server.requests) == 2
