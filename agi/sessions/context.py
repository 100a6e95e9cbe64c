"""How big a request is, how big the model's context window is, and whether a provider said
"too long" (CONTRACT section 10).

Sizes are estimated, not tokenised: UTF-8 bytes over a ratio, calibrated against the prompt
tokens the provider reports, so the check before each request costs next to nothing.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from agi.messages import REASONING_FIELDS

BYTES_PER_TOKEN = 3.6  # English prose is ~4, code and JSON ~3; calibration does the rest
MESSAGE_OVERHEAD = 12  # role and framing, in bytes (~3-4 tokens per message)
PART_BYTES = 3000  # an image or other non-text content part (~850 tokens)
CACHE_FILE = "context-cache.json"
CACHE_DAYS = 7  # a server's listing is asked again after this, in case it was restarted


def text_size(text: str) -> int:
    """Size in UTF-8 bytes; O(1) for ASCII text (CPython knows it), so CJK weighs more."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def message_size(message: Mapping[str, Any]) -> int:
    """Bytes of what a message sends: its text, tool calls and ids, and the reasoning that goes
    back with tool calls."""
    size = MESSAGE_OVERHEAD
    content = message.get("content")
    if isinstance(content, str):
        size += text_size(content)
    elif isinstance(content, list):
        for part in content:
            text = part.get("text") if isinstance(part, dict) else None
            size += text_size(text) if isinstance(text, str) else PART_BYTES
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        size += 24 + text_size(str(fn.get("name") or ""))
        size += text_size(str(fn.get("arguments") or ""))
    if message.get("tool_calls"):  # reasoning goes back on tool-call turns (wire_message)
        for key in REASONING_FIELDS:
            if isinstance(message.get(key), str):
                size += text_size(message[key])
    if message.get("tool_call_id"):
        size += len(str(message["tool_call_id"]))
    return size


def estimate(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    bytes_per_token: float = BYTES_PER_TOKEN,
) -> int:
    """Estimated prompt tokens of a request (uncalibrated)."""
    size = sum(message_size(m) for m in messages)
    if tools:
        size += text_size(json.dumps(tools, ensure_ascii=False))
    return int(size / bytes_per_token)


class Calibrator:
    """Real tokens per estimated token, learnt from the prompt_tokens each response reports."""

    def __init__(self) -> None:
        self.ratio = 1.0

    def observe(self, estimated: int, actual: int) -> None:
        if estimated > 0 and actual > 0:
            # clamped: a provider that counts only uncached input must not talk us into 0
            self.ratio = min(4.0, max(0.25, actual / estimated))

    def apply(self, estimated: int) -> int:
        return int(estimated * self.ratio)


class Estimator:
    """The per-step check: each message is measured once, then looked up by identity."""

    def __init__(self, bytes_per_token: float = BYTES_PER_TOKEN):
        self.bytes_per_token = bytes_per_token
        self.calibrator = Calibrator()
        self.last = 0  # the uncalibrated estimate of the latest request, for observe()
        self._sizes: dict[int, tuple[Any, int]] = {}  # id -> (the object, kept alive; size)
        self._prefix: tuple[int, tuple[Any, Any, int]] = (0, (None, None, 0))  # the last list

    def _size(self, obj: Any, measure: Any) -> int:
        hit = self._sizes.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        size = measure(obj)
        self._sizes[id(obj)] = (obj, size)
        return size

    def raw(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
        size = self._messages_size(messages)
        if tools:
            size += self._size(tools, lambda t: text_size(json.dumps(t, ensure_ascii=False)))
        return int(size / self.bytes_per_token)

    def _messages_size(self, messages: list[dict[str, Any]]) -> int:
        """The size of `messages`; when they start with the ones of the last call (the same
        objects: a conversation only grows between two steps), only the new ones are measured."""
        n, (head, tail, total) = self._prefix
        if n and len(messages) >= n and messages[0] is head and messages[n - 1] is tail:
            total += sum(self._size(m, message_size) for m in messages[n:])
        else:
            total = sum(self._size(m, message_size) for m in messages)
        if messages:
            self._prefix = (len(messages), (messages[0], messages[-1], total))
        return total

    def __call__(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> int:
        """Calibrated estimate of the request about to be sent; observe() will compare the
        provider's count with it."""
        self.last = self.raw(messages, tools)
        if len(self._sizes) > 2 * len(messages) + 64:  # a compaction dropped most of them
            keep = {id(m) for m in messages} | {id(tools)}
            self._sizes = {k: v for k, v in self._sizes.items() if k in keep}
        return self.calibrator.apply(self.last)

    def measure(self, messages: list[dict[str, Any]]) -> int:
        """Calibrated estimate of some messages (not a request: observe() ignores it)."""
        return self.calibrator.apply(self.raw(messages))

    def observe(self, prompt_tokens: int) -> None:
        """The provider's count for the request last estimated (usage `input`, cached included)."""
        self.calibrator.observe(self.last, prompt_tokens)

    @property
    def effective_bytes_per_token(self) -> float:
        return self.bytes_per_token / self.calibrator.ratio


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
    cached = _read_cache(home).get(key) if home else None
    if isinstance(cached, dict) and time.time() - cached.get("checked", 0) < CACHE_DAYS * 86400:
        return _tokens(cached.get("window"))
    window, answered = listed_window(base_url, model, api_key, timeout, ollama)
    if home and answered:
        _write_cache(home, key, window)
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

    base = base_url.rstrip("/")
    root = re.sub(r"/v1$", "", base)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    answered = False
    probes = (
        ("GET", f"{base}/models", None, _from_listing),
        ("GET", f"{root}/props", None, _from_props),
        ("POST", f"{root}/api/show", {"model": model}, _from_ollama),
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


def _read_cache(home: Path, name: str = CACHE_FILE) -> dict[str, Any]:
    try:
        data = json.loads((home / name).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(home: Path, key: str, window: int | None) -> None:
    write_cache_entry(home, CACHE_FILE, key, {"window": window})


def write_cache_entry(home: Path, name: str, key: str, entry: dict[str, Any]) -> None:
    """One entry of a JSON cache under `home`, stamped `checked`; written atomically, 0600.
    Losing a race with another run only costs that run's entry."""
    data = _read_cache(home, name)
    data[key] = {**entry, "checked": round(time.time())}
    try:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = home / f".{name}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, home / name)
    except OSError:
        pass


def read_cache_entry(home: Path, name: str, key: str) -> dict[str, Any] | None:
    """A cache entry younger than CACHE_DAYS (a server may have been upgraded since), or None."""
    entry = _read_cache(home, name).get(key)
    fresh = isinstance(entry, dict) and time.time() - entry.get("checked", 0) < CACHE_DAYS * 86400
    return entry if fresh else None


def forget_window(home: Path, base_url: str, model: str) -> None:
    """Drop a cached listing (e.g. after the server rejected a request it said would fit)."""
    data = _read_cache(home)
    if data.pop(f"{base_url.rstrip('/')} {model}", None) is not None:
        try:
            (home / CACHE_FILE).write_text(json.dumps(data, indent=1))
        except OSError:
            pass


# "Too long" as providers really say it (recorded in tests/fixtures/context_errors/SOURCES.md).
TOO_LONG = [
    r"context_length_exceeded",  # OpenAI's code
    r"exceed_context_size_error",  # llama.cpp server's type
    r"model_context_window_exceeded",
    r"maximum context length",  # OpenAI, DeepSeek, vLLM, OpenRouter ("This endpoint's")
    r"prompt is too long",  # Anthropic, and others through OpenRouter
    r"input is too long",
    r"exceeds? (the )?(available )?context (size|limit|window|length)",  # llama.cpp,
    # Anthropic ("input length and `max_tokens` exceed context limit"), OpenAI Responses
    r"context size has been exceeded",  # llama.cpp, LM Studio MLX
    r"longer than the context length",  # Ollama
    r"input length exceeds",  # Ollama
    r"exceeds the maximum number of tokens allowed",  # Gemini
    r"requested tokens \(\d+\) exceed context window",  # llama-cpp-python
    r"too large for model with \d+ maximum context length",  # Mistral
    r"max_tokens must be at least 1, got -\d+",  # older vLLM: the prompt filled the window
    r"must be less than max_seq_len",
    r"exceeded model token limit",  # Moonshot
]
NOT_LENGTH = r"rate.?limit|per min|\bTPM\b|quota"


@cache
def _matcher(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """Compiled on first use: most runs never see an error."""
    return re.compile("|".join(patterns), re.I)


def is_too_long(status: int | None, body: Any) -> bool:
    """Whether a provider rejected a request for its length (HTTP status, body as text or JSON).

    A rate limit that counts tokens (429, Groq's 413 "tokens per minute") is not one.
    """
    if status in (401, 403, 429):
        return False
    text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    return bool(_matcher(tuple(TOO_LONG)).search(text)) and not _matcher((NOT_LENGTH,)).search(text)


STATED = [
    r"maximum context length is (\d+)",
    r"maximum context length \((\d+)\)",
    r"exceed context limit: \d+ \+ \d+ > (\d+)",
    r"tokens > (\d+) maximum",
    r"\\?\"n_ctx\\?\"\s*:\s*(\d+)",
    r"context size \((\d+) tokens\)",
    r"maximum number of tokens allowed \((\d+)\)",
    r"context window of (\d+)",
    r"context length of only (\d+)",
    r"max_seq_len \((\d+)\)",
]


def stated_window(body: Any) -> int | None:
    """The window a "too long" error names, if it names one."""
    text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    for pattern in STATED:
        found = re.search(pattern, text, re.I)
        if found:
            return int(found.group(1))
    return None
