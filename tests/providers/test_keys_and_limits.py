"""A new user's first hour with the providers, through the real executable: a missing API key is
caught before anything is sent, `max_tokens` from the config reaches every protocol, a local
server that is not running says what to start, and a failed call's cost is unknown, not 0."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from conftest import FIXTURES
from fakeserver import USAGE, FakeModel, anthropic_text, ollama_chat, status, text

PRICED = '[prices."fake-model"]\ninput = 1000\noutput = 1000\n'  # fakeserver's USAGE: $0.015


def write_config(tmp_path: Path, body: str) -> None:
    (tmp_path / "config.toml").write_text(body)


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then closed at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# 1. a missing API key: exit 2 naming the variable, before any session or request


@pytest.mark.parametrize(
    ("model", "variable"),
    [
        ("openai:gpt-4o-mini", "OPENAI_API_KEY"),
        ("deepseek:deepseek-chat", "DEEPSEEK_API_KEY"),
        ("openrouter:openai/gpt-4o", "OPENROUTER_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("gemini:gemini-2.5-flash", "GEMINI_API_KEY"),
    ],
)
def test_a_missing_key_is_exit_2_naming_the_variable(agi, tmp_path, model, variable):
    r = agi("-m", model, "hi")
    assert r.returncode == 2, r.stderr
    assert r.stderr == f"agi: no API key for {model.partition(':')[0]}: set {variable} " + (
        "(or AGI_API_KEY)\n"
    )
    assert r.stdout == ""
    assert not (tmp_path / "agi-home" / "sessions").exists()  # no session was begun


def test_a_preset_with_its_own_key_variable_names_that_one(agi, tmp_path):
    write_config(tmp_path, '[providers.openai]\napi_key_env = "MY_OPENAI_KEY"\n')
    r = agi("-m", "openai:gpt-4o-mini", "hi")
    assert (r.returncode, r.stderr) == (
        2,
        "agi: no API key for openai: set MY_OPENAI_KEY (or AGI_API_KEY)\n",
    )


def test_local_presets_and_servers_need_no_key(agi):
    with FakeModel(text("local")) as server:
        r = agi("-m", "openai:some-model", "--base-url", server.url, "hi")
    assert (r.returncode, r.stdout) == (0, "local\n"), r.stderr
    with FakeModel(text("proxy")) as server:
        r = agi("-m", "litellm:gpt-4o", "--base-url", server.url, "hi")
    assert (r.returncode, r.stdout) == (0, "proxy\n"), r.stderr


# 2. max_tokens from the config goes to every provider


def test_max_tokens_is_sent_to_an_openai_compatible_server(agi, tmp_path):
    write_config(tmp_path, "max_tokens = 77\n")
    with FakeModel(text("ok")) as server:
        r = agi("hi", server=server)
    assert r.returncode == 0, r.stderr
    assert server.requests[0]["max_tokens"] == 77
    assert "max_completion_tokens" not in server.requests[0]


def test_a_limit_given_in_params_is_not_doubled(agi, tmp_path):
    write_config(tmp_path, "max_tokens = 77\n[params]\nmax_completion_tokens = 12\n")
    with FakeModel(text("ok")) as server:
        r = agi("hi", server=server)
    assert r.returncode == 0, r.stderr
    assert server.requests[0]["max_completion_tokens"] == 12
    assert "max_tokens" not in server.requests[0]


def test_a_model_that_takes_only_max_completion_tokens_gets_it(agi, tmp_path):
    """OpenAI's reasoning models refuse `max_tokens` (a recorded 400): the request is sent again
    at once with `max_completion_tokens`."""
    refusal = json.loads(
        (FIXTURES / "transport/openai_error_400_max_tokens_unsupported.json").read_text()
    )
    write_config(tmp_path, "max_tokens = 77\n")
    with FakeModel(status(400, refusal), text("ok")) as server:
        r = agi("hi", server=server)
    assert (r.returncode, r.stdout) == (0, "ok\n"), r.stderr
    first, second = server.requests
    assert first["max_tokens"] == 77
    assert second["max_completion_tokens"] == 77 and "max_tokens" not in second


def test_max_tokens_is_num_predict_for_ollama(agi, tmp_path):
    write_config(tmp_path, "max_tokens = 77\n")
    server = FakeModel(ollama_chat("ok"))
    server.route("POST", "/api/show", {"parameters": "num_ctx 8192"})
    server.route("GET", "/api/ps", {"models": []})
    with server:
        r = agi("-m", "ollama:tinyllm", "--base-url", server.url, "--no-tools", "hi")
    assert (r.returncode, r.stdout) == (0, "ok\n"), r.stderr
    assert server.paths == ["/api/chat"]
    assert server.requests[0]["options"]["num_predict"] == 77
    assert "max_tokens" not in server.requests[0]


def test_max_tokens_is_sent_to_anthropic(agi, tmp_path):
    write_config(tmp_path, "max_tokens = 77\n")
    with FakeModel(anthropic_text("ok")) as server:
        base = server.url.removesuffix("/v1")
        r = agi("-m", "anthropic:claude-sonnet-4-5", "--base-url", base, "--no-tools", "hi",
                extra_env={"ANTHROPIC_API_KEY": "sk-ant-test"})  # fmt: skip
    assert (r.returncode, r.stdout) == (0, "ok\n"), r.stderr
    assert server.requests[0]["max_tokens"] == 77


# 3. a local server that is not running: what to start


@pytest.mark.parametrize(
    ("model", "hint"),
    [
        ("ollama:qwen3", "(is Ollama running? start it with 'ollama serve')"),
        (
            "litellm:gpt-4o",
            "(is the LiteLLM proxy running? start it with 'litellm --model gpt-4o')",
        ),
        ("openai:local-model", "(is a server listening at http://127.0.0.1:{port}? start it, "),
    ],
)
def test_connection_refused_says_what_to_start(agi, model, hint):
    port = closed_port()
    r = agi("-m", model, "--base-url", f"http://127.0.0.1:{port}/v1", "--no-tools", "hi")
    assert r.returncode == 3, r.stderr
    assert r.stderr.startswith(f"agi: cannot reach http://127.0.0.1:{port}/")
    assert "Connection refused" in r.stderr and hint.format(port=port) in r.stderr
    assert r.stderr.count("\n") == 1


# 4. a failed call's cost is unknown (null), not 0


def test_a_failed_call_has_an_unknown_cost(agi, tmp_path):
    write_config(tmp_path, PRICED)
    session = tmp_path / "s"
    with FakeModel(status(400, {"error": {"message": "bad request"}})) as server:
        r = agi("--output", "json", "-s", str(session), "hi", server=server)
    assert r.returncode == 3, r.stderr
    result = json.loads(r.stdout)
    assert result["exit_code"] == 3 and result["usage"]["cost"] is None
    assert json.loads((session / "meta.json").read_text())["usage"]["cost"] is None


def test_a_call_retried_to_success_keeps_its_known_cost(agi, tmp_path):
    write_config(tmp_path, PRICED)
    unavailable = status(503, {"error": {"message": "overloaded"}}, {"retry-after-ms": "10"})
    with FakeModel(unavailable, text("ok", usage=USAGE)) as server:
        r = agi("--output", "json", "hi", server=server)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["usage"]["cost"] == pytest.approx(0.015)
