"""How big a model's context window is: the config, else a built-in table of well-known models,
else what the server's listing says (asked once, cached under $AGI_HOME for CACHE_DAYS), else
unknown (docs: long-sessions)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agi.providers.cache import read_cache, read_cache_entry, write_cache_entry
from agi.providers.endpoint import bearer, root

CACHE_FILE = "context-cache.json"


# Context windows of well-known models, by family (first match wins; matched against the model
# name's last path segment, lower case). Sources, as published by each vendor:
#   OpenAI     platform.openai.com/docs/models (gpt-5 400K, gpt-4.1 1,047,576, gpt-4o 128K,
#              o1/o3/o4 200K)
#   DeepSeek   api-docs.deepseek.com/quick_start/pricing (128K; the API's errors say 131072)
#   Anthropic  docs.anthropic.com/en/docs/about-claude/models (200K; 1M only in beta, opt-in)
#   Gemini     ai.google.dev/gemini-api/docs/models (1,048,576 input; 1.5 Pro 2,097,152)
#   Qwen       the Qwen model cards on huggingface.co and Alibaba Model Studio's model list
#   Llama      llama.com model cards (3.1-3.3: 128K; 3: 8K; 2: 4K)
#   Mistral    docs.mistral.ai/getting-started/models
WINDOWS: list[tuple[str, int]] = [
    (r"^gpt-5(\.\d+)?-chat", 128_000),
    (r"^gpt-5", 400_000),
    (r"^gpt-4\.1", 1_047_576),
    (r"^gpt-4o|^chatgpt-4o", 128_000),
    (r"^gpt-4-turbo|^gpt-4-\d{4}-preview", 128_000),
    (r"^gpt-4-32k", 32_768),
    (r"^gpt-4(-0613|-0314)?$", 8_192),
    (r"^gpt-3\.5-turbo", 16_385),
    (r"^gpt-oss", 131_072),
    (r"^o1-mini", 128_000),
    (r"^o[134](-|$)|^codex-mini", 200_000),
    (r"^deepseek-(chat|reasoner|v3|r1)", 131_072),
    (r"claude-2|claude-instant", 100_000),
    (r"claude", 200_000),
    (r"^gemini-1\.5-pro", 2_097_152),
    (r"^gemini-(1\.0-)?pro$", 32_760),
    (r"^gemini", 1_048_576),
    (r"^qwen3-coder|^qwen3-.*2507", 262_144),
    (r"^qwen-turbo|^qwen2\.5-.*-1m", 1_000_000),
    (r"^qwen-plus|^qwq", 131_072),
    (r"^qwen", 32_768),
    (r"llama-?3[._-]?[123]\b|llama-v3p[123]|llama3\.[123]", 131_072),
    (r"llama-?3\b|llama-v3-", 8_192),
    (r"codellama", 16_384),
    (r"llama-?2", 4_096),
    (r"^codestral", 262_144),
    (r"^(mistral-large|mistral-medium|devstral|ministral|pixtral|open-mistral-nemo)", 131_072),
    (r"^mistral-nemo", 131_072),
    (r"^mixtral-8x22b|^open-mixtral-8x22b", 65_536),
    (r"^(mistral-small|mixtral|open-mixtral|mistral-7b|open-mistral-7b)", 32_768),
]


def known_window(model: str) -> int | None:
    """The built-in table's window for a model name (`openai/gpt-4o`, `llama3.1:8b` ...)."""
    name = model.lower().rsplit("/", 1)[-1]
    for pattern, window in WINDOWS:
        if re.search(pattern, name):
            return window
    return None


def configured_window(label: str, model: str, config: Mapping[str, Any] | None) -> int | None:
    """`[models."LABEL"]` or `[models."MODEL"]` context_window, else the top-level one."""
    config = config or {}
    models = config.get("models") or {}
    for name in (label, model):
        table = models.get(name)
        if isinstance(table, Mapping) and _tokens(table.get("context_window")):
            return _tokens(table["context_window"])
    return _tokens(config.get("context_window"))


def _tokens(value: Any) -> int | None:
    """A positive number as an int; anything else None."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    return int(value) if ok else None


def window_for(
    label: str,
    model: str,
    config: Mapping[str, Any] | None = None,
    home: Path | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = 3.0,
    ollama: bool = False,
) -> int | None:
    """The model's context window: config, else the table, else the server's listing (cached
    under `home`), else None. Never raises: a server that cannot tell means unknown. Ollama's
    `POST /api/show` is asked only of an Ollama server (`ollama`)."""
    window = configured_window(label, model, config) or known_window(model)
    if window or not base_url:
        return window
    key = f"{base_url.rstrip('/')} {model}"
    cached = read_cache_entry(home, CACHE_FILE, key) if home else None
    if cached is not None:
        return _tokens(cached.get("window"))
    window, answered = listed_window(base_url, model, api_key, timeout, ollama)
    if home and answered:
        write_cache_entry(home, CACHE_FILE, key, {"window": window})
    return window


def listed_window(
    base_url: str,
    model: str,
    api_key: str | None = None,
    timeout: float = 3.0,
    ollama: bool = False,
) -> tuple[int | None, bool]:
    """Ask the server: (window or None, whether it answered at all).

    `GET {base}/models` (OpenRouter `context_length` and `top_provider.context_length`, vLLM
    `max_model_len`, Groq `context_window`, LM Studio `max_context_length`), then llama.cpp's
    `GET /props` (`default_generation_settings.n_ctx`, the per-slot size it enforces), then
    Ollama's `POST /api/show` (`num_ctx` in parameters, else model_info's `*.context_length`).
    """
    import httpx

    base, server = base_url.rstrip("/"), root(base_url)
    headers = bearer(api_key)
    answered = False
    probes = (
        ("GET", f"{base}/models", None, _from_listing),
        ("GET", f"{server}/props", None, _from_props),
        ("POST", f"{server}/api/show", {"model": model}, _from_ollama),
    )[: 3 if ollama else 2]
    try:
        with httpx.Client(timeout=timeout, headers=headers, follow_redirects=True) as client:
            for method, url, body, read in probes:
                try:
                    resp = client.request(method, url, json=body)
                except httpx.HTTPError:
                    continue
                answered = True
                if resp.status_code != 200:
                    continue
                try:
                    window = read(resp.json(), model)
                except (ValueError, AttributeError, TypeError):
                    continue
                if window:
                    return window, True
    except Exception:  # an unknown window is never an error (bad URL, TLS setup, ...)
        pass
    return None, answered


LISTING_KEYS = ("context_length", "max_model_len", "context_window", "max_context_length")


def _from_listing(data: Any, model: str) -> int | None:
    entries = data.get("data") if isinstance(data, dict) else data
    for entry in entries or ():
        if not isinstance(entry, dict) or entry.get("id") not in (model, f"{model}:latest"):
            continue
        top = entry.get("top_provider")
        sizes = [entry.get(k) for k in LISTING_KEYS]
        sizes.append(top.get("context_length") if isinstance(top, dict) else None)
        found = [n for n in map(_tokens, sizes) if n]
        if found:
            return min(found)  # OpenRouter: the route actually used may be smaller
    return None


def _from_props(data: Any, model: str) -> int | None:
    return _tokens((data.get("default_generation_settings") or {}).get("n_ctx"))


def _from_ollama(data: Any, model: str) -> int | None:
    found = re.search(r"^num_ctx\s+(\d+)", data.get("parameters") or "", re.M)
    if found:
        return int(found.group(1))
    for key, value in (data.get("model_info") or {}).items():
        if key.endswith(".context_length") and _tokens(value):
            return _tokens(value)
    return None


def forget_window(home: Path, base_url: str, model: str) -> None:
    """Drop a cached listing (e.g. after the server rejected a request it said would fit)."""
    data = read_cache(home, CACHE_FILE)
    if data.pop(f"{base_url.rstrip('/')} {model}", None) is not None:
        try:
            (home / CACHE_FILE).write_text(json.dumps(data, indent=1))
        except OSError:
            pass
