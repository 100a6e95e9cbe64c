"""Request sizes (agi.context.estimate), context windows (agi.context.windows), and the
providers' "too long" errors (agi.providers.errors)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from agi.context.estimate import Estimator, estimate, text_size
from agi.context.windows import (
    CACHE_FILE,
    configured_window,
    forget_window,
    known_window,
    window_for,
)
from agi.providers.errors import is_too_long, provider_error, stated_window

from conftest import FIXTURES
from fakeserver import FakeModel

ERRORS = FIXTURES / "context_errors"
TRANSPORT_ERRORS = [
    "openai_error_400_unsupported_system_role.response.json",
    "openai_error_404_model_not_found.response.json",
    "openrouter_error_429_upstream.response.json",
    "openai_error_400_max_tokens_unsupported.json",
]


def _fixture(path: Path) -> tuple[int, object]:
    data = json.loads(path.read_text())
    return data.get("status", 400), data.get("body", data)


@pytest.mark.parametrize("path", sorted((ERRORS / "too_long").glob("*.json")), ids=lambda p: p.stem)
def test_every_recorded_too_long_error_is_recognised(path):
    status, body = _fixture(path)
    assert is_too_long(status, body)
    assert is_too_long(status, json.dumps(body))  # the raw body text, as the transport reads it


@pytest.mark.parametrize("path", sorted(ERRORS.glob("*/*.json")), ids=lambda p: p.stem)
def test_the_providerror_the_transport_raises_still_tells(path):
    """The loop may classify the exception it catches: its text keeps what tells."""
    status, body = _fixture(path)
    error = provider_error(status, body)
    assert is_too_long(error.status, str(error)) == (path.parent.name == "too_long")


@pytest.mark.parametrize(
    "path",
    sorted((ERRORS / "not_too_long").glob("*.json"))
    + [FIXTURES / "transport" / name for name in TRANSPORT_ERRORS],
    ids=lambda p: p.stem,
)
def test_look_alikes_and_other_errors_are_not(path):
    status, body = _fixture(path)
    assert not is_too_long(status, body)


def test_the_fixtures_cover_every_provider_the_contract_names():
    names = " ".join(p.stem for p in (ERRORS / "too_long").glob("*.json"))
    for provider in ("openai", "vllm", "llamacpp", "ollama", "deepseek", "openrouter", "anthropic"):
        assert provider in names
    sources = (ERRORS / "SOURCES.md").read_text()
    for path in ERRORS.glob("*/*.json"):
        assert f"`{path.parent.name}/{path.name}`" in sources, path.name


def test_an_error_object_inside_a_stream_is_recognised_too():
    # llama.cpp and OpenRouter can send the error as an SSE chunk after a 200
    chunk = {"error": {"code": 400, "message": "the request exceeds the available context size"}}
    assert is_too_long(None, chunk)
    assert not is_too_long(None, {"error": {"message": "Rate limit exceeded: free-models-per-min"}})


def test_a_rate_limit_status_is_never_too_long_whatever_it_says():
    body = {"error": {"message": "This model's maximum context length is 8192 tokens"}}
    assert is_too_long(400, body)
    assert not is_too_long(429, body)


@pytest.mark.parametrize(
    "name, window",
    [
        ("anthropic_prompt_too_long", 200_000),
        ("anthropic_input_and_max_tokens", 200_000),
        ("openai_context_length_exceeded", 4097),
        ("deepseek_chat_131072", 131_072),
        ("vllm_input_length_exceeds", 4096),
        ("llamacpp_exceed_context_size_error", 8192),
        ("gemini_input_token_count", 1_048_576),
        ("openrouter_context_compression_plugin", 262_000),
        ("ollama_native_input_length", None),
    ],
)
def test_the_window_an_error_names(name, window):
    _, body = _fixture(ERRORS / "too_long" / f"{name}.json")
    assert stated_window(body) == window


@pytest.mark.parametrize(
    "model, window",
    [
        ("gpt-4o", 128_000),
        ("gpt-4o-mini", 128_000),
        ("openai/gpt-4.1-mini", 1_047_576),
        ("gpt-5", 400_000),
        ("gpt-5-mini", 400_000),
        ("gpt-5-chat-latest", 128_000),
        ("o3", 200_000),
        ("o4-mini", 200_000),
        ("o1-mini", 128_000),
        ("gpt-4", 8_192),
        ("gpt-3.5-turbo", 16_385),
        ("gpt-oss-120b", 131_072),
        ("deepseek-chat", 131_072),
        ("deepseek-reasoner", 131_072),
        ("deepseek/deepseek-r1", 131_072),
        ("claude-sonnet-4-5-20250929", 200_000),
        ("anthropic/claude-3.5-haiku", 200_000),
        ("us.anthropic.claude-3-7-sonnet-20250219-v1:0", 200_000),
        ("gemini-2.5-pro", 1_048_576),
        ("google/gemini-2.0-flash-001", 1_048_576),
        ("gemini-1.5-pro", 2_097_152),
        ("qwen3-coder-30b-a3b-instruct", 262_144),
        ("qwen/qwen3-235b-a22b-2507", 262_144),
        ("qwen3:8b", 32_768),
        ("qwen2.5-coder:32b", 32_768),
        ("qwen-plus", 131_072),
        ("llama3.1:8b", 131_072),
        ("meta-llama/Llama-3.3-70B-Instruct", 131_072),
        ("accounts/fireworks/models/llama-v3p1-70b-instruct", 131_072),
        ("llama3:8b", 8_192),
        ("meta-llama/Meta-Llama-3-8B-Instruct", 8_192),
        ("mistral-large-latest", 131_072),
        ("codestral-latest", 262_144),
        ("mistral-small-latest", 32_768),
        ("open-mixtral-8x22b", 65_536),
        ("my-finetune", None),
        ("fake-model", None),
    ],
)
def test_the_built_in_table(model, window):
    assert known_window(model) == window


def test_config_comes_first_per_model_before_top_level():
    config = {
        "context_window": 50_000,
        "models": {"openai:gpt-4o": {"context_window": 64_000}, "gpt-4o-mini": {"x": 1}},
    }
    assert configured_window("openai:gpt-4o", "gpt-4o", config) == 64_000
    assert configured_window("openai:gpt-4o-mini", "gpt-4o-mini", config) == 50_000
    by_name = {"models": {"qwen3:8b": {"context_window": 40_960}}}
    assert window_for("ollama:qwen3:8b", "qwen3:8b", by_name) == 40_960
    assert window_for("openai:gpt-4o", "gpt-4o", {"context_window": 1000}) == 1000
    assert window_for("openai:gpt-4o", "gpt-4o", {}) == 128_000  # the table next
    assert window_for("x:my-model", "my-model", {"context_window": True}) is None


def _server(*routes: tuple[str, str, object]) -> FakeModel:
    fake = FakeModel()
    for method, path, body in routes:
        fake.route(method, path, body)
    return fake


def test_vllm_listing_max_model_len_is_read_and_cached(tmp_path):
    listing = {
        "object": "list",
        "data": [{"id": "my-model", "object": "model", "owned_by": "vllm", "max_model_len": 8192}],
    }
    with _server(("GET", "/v1/models", listing)) as fake:
        assert window_for("local:my-model", "my-model", {}, tmp_path, fake.url) == 8192
        assert window_for("local:my-model", "my-model", {}, tmp_path, fake.url) == 8192
        assert [r[:2] for r in fake.routed] == [("GET", "/v1/models")]  # one request, ever
    cache = json.loads((tmp_path / CACHE_FILE).read_text())
    assert cache[f"{fake.url} my-model"]["window"] == 8192
    assert (tmp_path / CACHE_FILE).stat().st_mode & 0o777 == 0o600
    forget_window(tmp_path, fake.url, "my-model")
    assert f"{fake.url} my-model" not in json.loads((tmp_path / CACHE_FILE).read_text())


def test_openrouter_listing_takes_the_smaller_of_model_and_top_provider(tmp_path):
    listing = {
        "data": [
            {"id": "other/model", "context_length": 4096},
            {
                "id": "moonshotai/kimi-dev:free",
                "context_length": 1_048_576,
                "top_provider": {"context_length": 262_000, "max_completion_tokens": 262_000},
            },
        ]
    }
    with _server(("GET", "/v1/models", listing)) as fake:
        model = "moonshotai/kimi-dev:free"
        assert window_for(f"openrouter:{model}", model, None, tmp_path, fake.url) == 262_000


def test_llamacpp_props_after_a_listing_without_a_size(tmp_path):
    listing = {"data": [{"id": "model.gguf", "owned_by": "llamacpp", "meta": {"n_ctx_train": 1}}]}
    props = {"default_generation_settings": {"n_ctx": 4096, "params": {}}, "total_slots": 1}
    with _server(("GET", "/v1/models", listing), ("GET", "/props", props)) as fake:
        assert window_for("local:model.gguf", "model.gguf", None, tmp_path, fake.url) == 4096
        assert [r[1] for r in fake.routed] == ["/v1/models", "/props"]


def test_ollama_show_num_ctx_then_model_info(tmp_path):
    show = {
        "parameters": "temperature 0.6\nnum_ctx 8192",
        "model_info": {"qwen3.context_length": 1},
    }
    with _server(("POST", "/api/show", show)) as fake:
        assert window_for("ollama:custom", "custom", None, tmp_path, fake.url, ollama=True) == 8192
        assert fake.routed[-1] == ("POST", "/api/show", {"model": "custom"})
        assert fake.requests == []  # the chat script was never touched
    info = {"parameters": "stop <|im_end|>", "model_info": {"qwen3.context_length": 40960}}
    with _server(("POST", "/api/show", info)) as fake:
        assert window_for("ollama:custom", "custom", None, tmp_path, fake.url, ollama=True) == 40960


def test_a_server_that_reports_nothing_is_unknown_and_asked_once(tmp_path):
    with _server() as fake:  # every probe answers 404
        assert window_for("x:custom", "custom", None, tmp_path, fake.url) is None
        asked = len(fake.routed)
        assert window_for("x:custom", "custom", None, tmp_path, fake.url) is None
        assert len(fake.routed) == asked


def test_garbage_and_no_server_are_unknown_never_an_error(tmp_path):
    with _server(("GET", "/v1/models", "not a listing"), ("GET", "/props", [1, 2])) as fake:
        assert window_for("x:m", "m", None, tmp_path, fake.url) is None
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there
    url = f"http://127.0.0.1:{port}/v1"
    assert window_for("x:m", "m", None, tmp_path, url, timeout=1) is None
    cache = json.loads((tmp_path / CACHE_FILE).read_text())
    assert f"{url} m" not in cache  # a server that never answered is asked again next time
    assert window_for("x:m", "m", None, tmp_path, "not a url") is None


def test_estimate_counts_text_tool_calls_and_tools():
    small = estimate([{"role": "user", "content": "hi"}])
    call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "function": {"name": "Bash", "arguments": "x" * 3600}}],
    }
    assert estimate([call]) >= 1000 > small
    tools = [{"type": "function", "function": {"name": "Read", "description": "d" * 3600}}]
    assert estimate([], tools) >= 1000
    assert text_size("日本語") == 9  # bytes: a CJK text weighs more than its length


def test_the_estimator_agrees_with_estimate_and_calibrates():
    estimator = Estimator()
    messages = [{"role": "user", "content": "word " * 2000}, {"role": "assistant", "content": "ok"}]
    assert estimator(messages) == estimate(messages)
    estimator.observe(estimator.last * 2)  # the provider counted twice as many tokens
    assert estimator(messages) == 2 * estimate(messages)
    estimator.observe(0)  # a response without usage changes nothing
    assert estimator.calibrator.ratio == 2
    estimator.observe(estimator.last * 1000)  # absurd counts are clamped
    assert estimator.calibrator.ratio == 4
    assert estimator.effective_bytes_per_token == estimator.bytes_per_token / 4


def test_the_per_step_check_agrees_with_a_full_estimate():
    """Step by step, the incremental check counts what a full estimate counts (what it costs per
    step is measured by bench/latency.py)."""
    history = [{"role": "user", "content": f"{i} " + "x" * 2000} for i in range(500)]
    tools = [{"type": "function", "function": {"name": f"t{i}"}} for i in range(20)]
    estimator = Estimator()
    estimator(history, tools)
    for step in range(20):
        history.append({"role": "tool", "tool_call_id": str(step), "content": "y" * 5000})
        system = [{"role": "system", "content": "s" * 8000}]  # rebuilt each step, as the loop does
        assert estimator(system + history, tools) == estimate(system + history, tools)
