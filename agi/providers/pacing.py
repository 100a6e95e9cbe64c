"""Pacing (docs: volume): requests held back before they are sent, so that a provider's quota
is kept rather than learnt from its 429s. Per provider: `rpm` (requests a minute), `tpm`
(tokens a minute, each request's estimated from its body and corrected by the usage its reply
reports) and `max_concurrent` (requests in flight at once), from `[providers.NAME]` in the config
file or `--rpm`/`--tpm`.

One `Pacer` per provider for the whole process (`pacer_for`), so every run in it — a batch's
workers, the MCP server's calls, HTTP and API runs, concurrent subagents — shares the budget.
The minute is a sliding window; the clock and the wait are injectable for tests."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

WINDOW = 60.0  # seconds: rpm and tpm are per minute
BYTES_PER_TOKEN = 3.6  # as agi.context.estimate: a request's size in tokens, estimated


class Pacer:
    """The requests of one provider: `acquire` before sending (it waits while a limit would
    be passed), `release` when the reply has been read (with its real token count, if known)."""

    def __init__(
        self,
        rpm: float | None = None,
        tpm: float | None = None,
        max_concurrent: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.rpm, self.tpm, self.max_concurrent = rpm, tpm, max_concurrent
        self.clock = clock
        self.sent: deque[list[float]] = deque()  # [time, tokens] of each request in the window
        self.in_flight = 0
        self.changed = threading.Condition()

    def limit(self, rpm: float | None, tpm: float | None, max_concurrent: int | None) -> None:
        """The limits from now on (the latest run's settings for this provider)."""
        with self.changed:
            self.rpm, self.tpm, self.max_concurrent = rpm, tpm, max_concurrent
            self.changed.notify_all()

    def wait_for(self, tokens: float) -> float:
        """Seconds until a request of `tokens` may go (0: now); call holding `changed`."""
        now = self.clock()
        while self.sent and self.sent[0][0] <= now - WINDOW:
            self.sent.popleft()
        if self.max_concurrent and self.in_flight >= self.max_concurrent:
            return WINDOW  # until a request in flight ends (release notifies)
        waits = [0.0]
        if self.rpm and len(self.sent) >= self.rpm:
            waits.append(self.sent[len(self.sent) - int(self.rpm)][0] + WINDOW - now)
        if self.tpm and self.sent:
            used, budget = sum(t for _, t in self.sent), self.tpm - min(tokens, self.tpm)
            for start, spent in self.sent:  # the oldest requests leave the window first
                if used <= budget:
                    break
                used -= spent
                waits.append(start + WINDOW - now)
        return max(waits)

    def acquire(
        self,
        tokens: float,
        deadline: float | None = None,
        cancelled: threading.Event | None = None,
        sleep: Callable[[threading.Condition, float], object] | None = None,
    ) -> list[float] | None:
        """Wait until the request may go, then count it: its record, for `release`. None when
        the deadline came or the run was cancelled first (nothing counted: not sent)."""
        pause = sleep or (lambda cond, seconds: cond.wait(seconds))
        with self.changed:
            while True:
                if cancelled is not None and cancelled.is_set():
                    return None
                wait = self.wait_for(tokens)
                if wait <= 0:
                    record = [self.clock(), float(tokens)]
                    self.sent.append(record)
                    self.in_flight += 1
                    return record
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return None
                    wait = min(wait, left)
                pause(self.changed, min(wait, 0.25 if cancelled is not None else wait))

    def release(self, record: list[float], tokens: float | None = None) -> None:
        """The request is over: no longer in flight; its tokens the reply's count when known."""
        with self.changed:
            self.in_flight = max(0, self.in_flight - 1)
            if tokens is not None:
                record[1] = float(tokens)
            self.changed.notify_all()


_pacers: dict[str, Pacer] = {}
_lock = threading.Lock()


def pacer_for(
    provider: str, rpm: float | None, tpm: float | None, max_concurrent: int | None
) -> Pacer | None:
    """The process's pacer of `provider` with these limits (the latest given), or None when the
    provider has none and never had."""
    with _lock:
        pacer = _pacers.get(provider)
        if pacer is None:
            if not (rpm or tpm or max_concurrent):
                return None
            pacer = _pacers[provider] = Pacer(rpm, tpm, max_concurrent)
            return pacer
    if (pacer.rpm, pacer.tpm, pacer.max_concurrent) != (rpm, tpm, max_concurrent):
        pacer.limit(rpm, tpm, max_concurrent)
    return pacer


def request_tokens(body: dict[str, Any]) -> float:
    """A request's tokens as the quota counts them, estimated: its body's size, and the reply's
    limit when it gives one."""
    size = len(json.dumps(body, ensure_ascii=False, default=str).encode("utf-8", "replace"))
    limit = next(
        (v for k in ("max_tokens", "max_completion_tokens", "max_output_tokens")
         if isinstance(v := body.get(k), int)),
        0,
    )  # fmt: skip
    return size / BYTES_PER_TOKEN + limit


CACHE_LIFE = 300.0  # seconds Anthropic keeps an ephemeral cache entry after its last use
WARM_WAIT = 60.0  # the longest a request waits for another to write the prefix it shares


class Warmup:
    """A prompt prefix several runs share (a batch's system prompt and tools on Anthropic's
    Messages API) written to the provider's cache once: the first request with it goes alone,
    the others wait until its reply has come (the cache then holds the prefix), then read it
    (docs: volume). A request that failed lets the next one try; a prefix unused for
    CACHE_LIFE is written again."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.written: dict[str, float | None] = {}  # prefix -> when last used; None: writing
        self.changed = threading.Condition()

    def enter(
        self, key: str, deadline: float | None = None, cancelled: threading.Event | None = None
    ) -> bool:
        """True when this request writes the prefix (it must call `done`); False when it may
        go and read it (or waited WARM_WAIT for a writer that did not finish)."""
        started = time.monotonic()
        with self.changed:
            while True:
                now = self.clock()
                if key not in self.written:
                    self.written[key] = None
                    return True
                last = self.written[key]
                if last is not None:
                    if now - last > CACHE_LIFE:  # expired: this one writes it again
                        self.written[key] = None
                        return True
                    self.written[key] = now  # a read keeps the entry alive
                    return False
                left = WARM_WAIT - (time.monotonic() - started)
                if deadline is not None:
                    left = min(left, deadline - time.monotonic())
                if left <= 0 or cancelled is not None and cancelled.is_set():
                    return False
                self.changed.wait(min(left, 0.25))

    def done(self, key: str, written: bool) -> None:
        """The writer's reply came (`written`), or it failed (the next request writes)."""
        with self.changed:
            if written:
                self.written[key] = self.clock()
            else:
                self.written.pop(key, None)
            self.changed.notify_all()


_warmup = Warmup()


def warmup() -> Warmup:
    """The process's prefixes being written or written (one for every run)."""
    return _warmup
