"""Pacing (docs: volume): `rpm`, `tpm` and `max_concurrent` per provider. The arithmetic of the
sliding minute with a fake clock (no test waits for real time); `max_concurrent` end to end: a
batch of four workers against the scripted server, which never sees two requests at once; the
settings' checks through the real executable."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agi.providers.pacing import CACHE_LIFE, Pacer, Warmup, request_tokens

from fakeserver import FakeModel, text


class Clock:
    """A fake monotonic clock; `sleep` (the pacer's wait) moves it instead of waiting."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, condition: threading.Condition, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


def test_rpm_holds_the_request_past_the_window() -> None:
    clock = Clock()
    pacer = Pacer(rpm=2, clock=clock)
    for _ in range(2):
        pacer.release(pacer.acquire(10, sleep=clock.sleep))
    assert clock.waits == []  # two a minute: both at once
    clock.now += 15
    pacer.acquire(10, sleep=clock.sleep)
    assert sum(clock.waits) == pytest.approx(45)  # until the first one leaves the minute
    assert clock.now == pytest.approx(1060)


def test_tpm_counts_estimated_tokens_then_the_real_ones() -> None:
    clock = Clock()
    pacer = Pacer(tpm=1000, clock=clock)
    first = pacer.acquire(600, sleep=clock.sleep)
    pacer.release(first, tokens=200)  # the reply said: 200 tokens in all
    second = pacer.acquire(700, sleep=clock.sleep)
    assert clock.waits == []  # 200 + 700 fit in 1000
    pacer.release(second)
    clock.now += 10
    pacer.acquire(500, sleep=clock.sleep)  # 900 + 500 do not: wait for the first to leave
    assert sum(clock.waits) == pytest.approx(50)


def test_a_request_bigger_than_tpm_goes_alone() -> None:
    clock = Clock()
    pacer = Pacer(tpm=100, clock=clock)
    pacer.release(pacer.acquire(5000, sleep=clock.sleep))
    assert clock.waits == []
    pacer.acquire(10, sleep=clock.sleep)
    assert sum(clock.waits) == pytest.approx(60)


def test_max_concurrent_waits_for_a_release() -> None:
    pacer = Pacer(max_concurrent=1)
    held = pacer.acquire(1)
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(pacer.acquire(1)))
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive() and got == []  # held back while one is in flight
    pacer.release(held)
    waiter.join(30)
    assert got and got[0] is not None


def test_a_cancel_or_the_deadline_ends_the_wait_unsent() -> None:
    pacer = Pacer(max_concurrent=1)
    pacer.acquire(1)
    cancelled = threading.Event()
    cancelled.set()
    assert pacer.acquire(1, cancelled=cancelled) is None
    assert pacer.acquire(1, deadline=time.monotonic() - 1) is None
    assert pacer.in_flight == 1


def test_request_tokens_estimates_the_body_and_the_reply_limit() -> None:
    body = {"messages": [{"role": "user", "content": "x" * 3600}], "max_tokens": 100}
    assert 1000 + 100 <= request_tokens(body) <= 1100 + 100


def test_warmup_one_writer_then_readers_until_the_cache_expires() -> None:
    clock = Clock()
    warm = Warmup(clock=clock)
    assert warm.enter("prefix") is True
    waiting: list[bool] = []
    reader = threading.Thread(target=lambda: waiting.append(warm.enter("prefix")))
    reader.start()
    reader.join(0.3)
    assert reader.is_alive()  # waits for the writer's reply
    warm.done("prefix", written=True)
    reader.join(30)
    assert waiting == [False]
    clock.now += CACHE_LIFE + 1
    assert warm.enter("prefix") is True  # expired: written again
    warm.done("prefix", written=False)  # that writer failed: the next one writes
    assert warm.enter("prefix") is True


def jobs(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": i, "prompt": f"job {i}"}) + "\n" for i in range(n)))
    return path


def test_max_concurrent_one_serialises_a_batchs_workers(agi, env, tmp_path) -> None:
    """Four workers, `max_concurrent = 1` for the provider: the server never has two requests
    at once; without it, it does (the comparison that makes the first mean something)."""
    active, most, lock = [0], [0], threading.Lock()

    def step(body: dict[str, Any]) -> dict[str, Any]:
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
        try:
            time.sleep(0.5)  # a reply that takes a moment: other workers would send now
        finally:
            with lock:
                active[0] -= 1
        return text("ok")

    config = Path(env["AGI_CONFIG"])
    for limit, expected in (("max_concurrent = 1", 1), ("", None)):
        config.write_text(f"[providers.openai]\n{limit}\n")
        most[0] = 0
        with FakeModel(step) as server:
            r = agi("--batch", str(jobs(tmp_path / "j.jsonl", 4)), "--jobs", "4", server=server)
        assert r.returncode == 0, r.stderr
        assert len(server.requests) == 4
        if expected is not None:
            assert most[0] == expected
        else:
            assert most[0] > 1


def test_rpm_and_tpm_flags_run(agi) -> None:
    with FakeModel(text("ok")) as server:
        r = agi("--rpm", "600", "--tpm", "100000", "hi", server=server)
    assert (r.returncode, r.stdout) == (0, "ok\n"), r.stderr


@pytest.mark.parametrize(
    "args, config, named",
    [
        (("--rpm", "0"), "", "--rpm"),
        (("--tpm", "many"), "", "--tpm"),
        ((), "[providers.openai]\nmax_concurrent = 0\n", "max_concurrent"),
        ((), '[providers.openai]\nrpm = "fast"\n', "rpm"),
    ],
)
def test_bad_pacing_settings_are_usage_errors(agi, env, args, config, named) -> None:
    Path(env["AGI_CONFIG"]).write_text(config)
    with FakeModel(text("never")) as server:
        r = agi(*args, "hi", server=server)
    assert r.returncode == 2 and r.stderr.startswith("agi: ") and r.stderr.count("\n") == 1
    assert named in r.stderr and server.requests == []
