"""The `result` message's accounting, as the SDKs document it (docs: claude-agent-sdk): `usage`
is the turn's own model calls, `total_cost_usd` the session's running total (across the turns
of one process, and continued from what the session had spent when it is resumed). The Python
SDK's ClaudeSDKClient is the client, against the scripted model server."""

from __future__ import annotations

import asyncio

import pytest
from claude_agent_sdk import ClaudeSDKClient, ResultMessage
from test_sdk_python import options

from fakeserver import FakeModel, text

pytestmark = pytest.mark.timeout(120)

PRICES = '[prices."fake-model"]\ninput = 1000\noutput = 1000\n'  # USD per million tokens
ONE_CALL = (10 * 1000 + 5 * 1000) / 1e6  # the scripted usage: 10 tokens in, 5 out


async def turns(opts, *prompts: str) -> list[ResultMessage]:
    results = []
    async with ClaudeSDKClient(options=opts) as client:
        for prompt in prompts:
            await client.query(prompt)
            async for m in client.receive_response():
                if isinstance(m, ResultMessage):
                    results.append(m)
    return results


def test_usage_is_the_turns_and_the_cost_the_sessions_running_total(env, tmp_path):
    (tmp_path / "config.toml").write_text(PRICES)
    with FakeModel(text("one"), text("two"), text("three")) as server:
        first, second = asyncio.run(turns(options(env, server, tmp_path), "a", "b"))
        opts = options(env, server, tmp_path, resume=first.session_id)
        (again,) = asyncio.run(turns(opts, "c"))
    for result in (first, second, again):
        assert result.usage["input_tokens"] == 10 and result.usage["output_tokens"] == 5
    assert first.total_cost_usd == pytest.approx(ONE_CALL)
    assert second.total_cost_usd == pytest.approx(2 * ONE_CALL)
    assert again.total_cost_usd == pytest.approx(3 * ONE_CALL)  # the resumed session's too


def test_model_usage_is_each_models_calls_in_this_process(env, tmp_path):
    (tmp_path / "config.toml").write_text("max_tokens = 777\n" + PRICES)
    with FakeModel(text("one"), text("two")) as server:
        first, second = asyncio.run(turns(options(env, server, tmp_path), "a", "b"))
    assert list(first.model_usage) == ["fake-model"]
    assert first.model_usage["fake-model"] == {
        "inputTokens": 10,
        "outputTokens": 5,
        "cacheReadInputTokens": 0,
        "cacheCreationInputTokens": 0,
        "webSearchRequests": 0,
        "costUSD": pytest.approx(ONE_CALL),
        "contextWindow": 0,  # not configured, not in agi's table
        "maxOutputTokens": 777,
    }
    counted = second.model_usage["fake-model"]  # as total_cost_usd: the running total
    assert (counted["inputTokens"], counted["outputTokens"]) == (20, 10)
    assert counted["costUSD"] == pytest.approx(2 * ONE_CALL) == second.total_cost_usd
