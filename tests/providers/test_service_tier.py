"""`--service-tier` (docs: responses): sent to OpenAI on both protocols, flex's long wait for the
first byte, its 429 "resource unavailable" retried, and the tier's prices in the cost; driven
through the real `agi` executable against the scripted server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakeresponses import r_text
from fakeserver import FakeModel, status, text

UNAVAILABLE = {
    "error": {
        "message": "Resource unavailable, please try again later.",
        "type": "resource_unavailable",
        "code": "resource_unavailable",
    }
}


@pytest.mark.parametrize(
    ("model", "step"),
    [("openai:gpt-5.1", r_text("ok")), ("openai:gpt-4.1", text("ok"))],
)
def test_the_tier_is_sent_to_openai(agi, model, step) -> None:
    with FakeModel(step) as server:
        done = agi("-m", model, "--service-tier", "flex", "--no-tools", "hi", server=server)
    assert done.returncode == 0, done.stderr
    assert server.requests[0]["service_tier"] == "flex"


def test_the_config_key_and_a_provider_that_does_not_take_it(agi, tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('service_tier = "priority"\n')
    with FakeModel(text("ok")) as server:
        assert agi("-m", "openai:gpt-4.1", "--no-tools", "hi", server=server).returncode == 0
        assert server.requests[0]["service_tier"] == "priority"
        done = agi("-m", "deepseek:deepseek-chat", "--no-tools", "hi", server=server)
    assert done.returncode == 0, done.stderr
    assert "service_tier" not in server.requests[1]


def test_a_bad_tier_is_a_usage_error(agi) -> None:
    with FakeModel(text("ok")) as server:
        done = agi("--service-tier", "slow", "hi", server=server)
    assert done.returncode == 2 and "--service-tier" in done.stderr
    assert server.requests == []


def test_flex_waits_past_the_idle_limit_for_its_first_byte(agi, tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("idle_timeout = 0.5\n")
    slow = text("late but here", delay=1.5, pieces=1)
    with FakeModel(slow) as server:
        done = agi("-m", "openai:gpt-4.1", "--service-tier", "flex", "--no-tools", "hi",
                   server=server)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "late but here"
    with FakeModel(slow) as server:
        done = agi("-m", "openai:gpt-4.1", "--no-tools", "hi", server=server)
    assert done.returncode == 3
    assert done.stderr.startswith("agi: ")


def test_flex_resource_unavailable_is_retried(agi) -> None:
    with FakeModel(status(429, UNAVAILABLE), r_text("served")) as server:
        done = agi("-m", "openai:gpt-5.1", "--service-tier", "flex", "--no-tools", "hi",
                   server=server)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "served"
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("tier", "expected"),
    [
        ("flex", (40 * 0.625 + 12 * 5.00) / 1e6),
        ("priority", (40 * 2.50 + 12 * 20.00) / 1e6),
        ("default", (40 * 1.25 + 12 * 10.00) / 1e6),
    ],
)
def test_the_cost_uses_the_tiers_price(agi, tier, expected) -> None:
    with FakeModel(r_text("ok")) as server:
        done = agi("-m", "openai:gpt-5.1", "--service-tier", tier, "--no-tools", "--output",
                   "json", "hi", server=server)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["usage"]["cost"] == pytest.approx(expected)


def test_a_configured_price_wins_over_the_tiers(agi, tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[prices."gpt-5.1"]\ninput = 1.0\noutput = 1.0\n')
    with FakeModel(r_text("ok")) as server:
        done = agi("-m", "openai:gpt-5.1", "--service-tier", "flex", "--no-tools", "--output",
                   "json", "hi", server=server)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["usage"]["cost"] == pytest.approx(52 / 1e6)
