"""Provider caches for many runs sharing a prefix (docs: volume): OpenAI's `prompt_cache_key`
on chat completions and the Responses API, and Anthropic's shared prefix written once by a
batch. Driven through the real executable against the scripted servers, reading the recorded
request bodies."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from fakeresponses import r_text
from fakeserver import FakeModel, anthropic_text, status, text


def jobs_file(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": i, "prompt": f"item {i}"}) + "\n" for i in range(n)))
    return path


def keys(server: FakeModel) -> list[Any]:
    return [body.get("prompt_cache_key") for body in server.requests]


def test_every_job_of_a_batch_carries_the_same_key(agi, tmp_path) -> None:
    with FakeModel(text("ok")) as server:
        r = agi("--batch", str(jobs_file(tmp_path / "j.jsonl", 4)), "--no-tools", server=server)
    assert r.returncode == 0, r.stderr
    found = keys(server)
    assert len(found) == 4 and len(set(found)) == 1
    assert isinstance(found[0], str) and found[0].startswith("agi-") and len(found[0]) <= 64


def test_the_key_follows_the_system_prompt_and_the_tools(agi, tmp_path) -> None:
    other = tmp_path / "other.md"
    other.write_text("You classify mail.\n")
    with FakeModel(text("ok")) as server:
        for args in (("--no-tools",), ("--no-tools",), ("--sys", str(other), "--no-tools"), ()):
            assert agi(*args, "hi", server=server).returncode == 0
    first, same, other_sys, with_tools = keys(server)
    assert first == same
    assert len({first, other_sys, with_tools}) == 3


def test_every_turn_of_a_tool_loop_shares_it(agi) -> None:
    from fakeserver import call

    with FakeModel(call("calculate", expression="6*7"), text("42")) as server:
        r = agi("--tools", "calculate", "what is 6*7", server=server)
    assert r.returncode == 0, r.stderr
    assert len(set(keys(server))) == 1 and keys(server)[0] is not None


def test_config_false_leaves_it_out(agi, env) -> None:
    Path(env["AGI_CONFIG"]).write_text("prompt_cache_key = false\n")
    with FakeModel(text("ok")) as server:
        assert agi("hi", server=server).returncode == 0
    assert "prompt_cache_key" not in server.requests[0]


def test_other_providers_do_not_get_it(agi, tmp_path) -> None:
    with FakeModel(text("ok")) as server:
        r = agi(
            "-m", "deepseek:deepseek-chat", "hi", server=server, extra_env={"DEEPSEEK_API_KEY": "k"}
        )
    assert r.returncode == 0, r.stderr
    assert "prompt_cache_key" not in server.requests[0]


def test_a_server_that_refuses_it_is_asked_again_without(agi) -> None:
    refused = status(400, {"error": {"message": "Unrecognized request argument: prompt_cache_key"}})
    with FakeModel(refused, text("ok")) as server:
        r = agi("hi", server=server)
    assert (r.returncode, r.stdout) == (0, "ok\n"), r.stderr
    assert "prompt_cache_key" in server.requests[0] and "prompt_cache_key" not in server.requests[1]


def test_the_responses_api_carries_it_too(agi) -> None:
    with FakeModel(r_text("ok"), r_text("ok")) as server:
        for _ in range(2):
            r = agi("-m", "openai:gpt-5-mini", "--no-tools", "hi", server=server)
            assert r.returncode == 0, r.stderr
    assert server.paths == ["/v1/responses"] * 2
    found = keys(server)
    assert found[0] is not None and found[0] == found[1]


def test_anthropic_writes_a_batchs_shared_prefix_once(agi, tmp_path) -> None:
    """A long system prompt shared by four jobs run four at once: the first request goes
    alone and the others are sent once its reply has come, each with the breakpoint on the
    system prompt (so they read the prefix the first one wrote)."""
    system = tmp_path / "long.md"
    system.write_text("Classify the item as sales, support or spam. " * 200)
    active, overlapped, lock = [0], [False], threading.Lock()

    def step(body: dict[str, Any]) -> dict[str, Any]:
        with lock:
            active[0] += 1
            overlapped[0] |= active[0] > 1
        try:
            if len(server.requests) == 1:
                time.sleep(0.5)  # the first reply takes a while: the others would come now
        finally:
            with lock:
                active[0] -= 1
        return anthropic_text("sales")

    env = {"ANTHROPIC_API_KEY": "k", "AGI_MODEL": "anthropic:claude-sonnet-4-5"}
    with FakeModel(step) as server:
        r = agi(
            "--batch",
            str(jobs_file(tmp_path / "j.jsonl", 4)),
            "--jobs",
            "4",
            "--no-tools",
            "--sys",
            str(system),
            server=server,
            extra_env={**env, "AGI_BASE_URL": server.url},
        )
    assert r.returncode == 0, r.stderr
    assert len(server.requests) == 4
    assert server.requests[0]["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert all(b["system"] == server.requests[0]["system"] for b in server.requests)
    assert not overlapped[0]  # requests arrive at the server only after the first one's reply


def test_anthropic_short_prefixes_are_not_held_back(agi, tmp_path) -> None:
    """Below what Anthropic caches, the batch's requests go at once (no writer to wait for)."""
    env = {"ANTHROPIC_API_KEY": "k", "AGI_MODEL": "anthropic:claude-sonnet-4-5"}
    arrived = threading.Barrier(2, timeout=30)

    def step(body: dict[str, Any]) -> dict[str, Any]:
        arrived.wait()  # two requests in flight together, or this breaks
        return anthropic_text("ok")

    with FakeModel(step) as server:
        r = agi(
            "--batch",
            str(jobs_file(tmp_path / "j.jsonl", 2)),
            "--jobs",
            "2",
            "--no-tools",
            server=server,
            extra_env={**env, "AGI_BASE_URL": server.url},
        )
    assert r.returncode == 0, r.stderr
    assert [json.loads(line)["exit"] for line in r.stdout.splitlines()] == [0, 0]
