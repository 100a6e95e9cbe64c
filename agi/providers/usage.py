"""Reading usage: every provider's shape of token counts and cost, as one `Usage`.

OpenAI and the servers that copy it (DeepSeek, OpenRouter, LiteLLM, vLLM, llama.cpp, Ollama,
Mistral, Together, Gemini's OpenAI endpoint) report `prompt_tokens`/`completion_tokens` with
details in varying places; Anthropic reports `input_tokens` without the cache reads and writes.
Pure functions: `agi.providers.stream` feeds them chunks, `agi.providers.transport` response
headers.
"""

from __future__ import annotations

from typing import Any

from agi.messages import Usage


def _count(value: Any) -> int:
    """A token count; anything else (null, text, negative, NaN) counts as none."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return int(value) if number and 0 <= value < 1e15 else 0


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _cost(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1e9
    return float(value) if ok else None


def parse_usage(u: Any, timings: Any = None) -> Usage | None:
    """One call's usage from any provider's shape, or None when the chunk carries none.

    Cached tokens are reported under several names (OpenAI `prompt_tokens_details.cached_tokens`,
    DeepSeek `prompt_cache_hit_tokens`, Together and Moonshot `cached_tokens`, LiteLLM
    `cache_read_input_tokens`, llama.cpp `timings.cache_n`), often more than one at once for
    the same tokens: they are alternatives, so the largest is taken, never their sum.
    """
    if not isinstance(u, dict):
        return _from_timings(timings)
    if "prompt_tokens" not in u and "completion_tokens" not in u:
        if "input_tokens" in u or "output_tokens" in u:
            return messages_usage(u)
        return _from_timings(timings)
    prompt = _table(u.get("prompt_tokens_details"))
    details = _table(u.get("completion_tokens_details"))
    cached = max(
        _count(prompt.get("cached_tokens")),
        _count(u.get("prompt_cache_hit_tokens")),
        _count(u.get("cached_tokens")),
        _count(u.get("cache_read_input_tokens")),
        _count(_table(timings).get("cache_n")),
    )
    written = max(
        _count(prompt.get("cache_write_tokens")),
        _count(prompt.get("cache_creation_input_tokens")),
        _count(u.get("cache_creation_input_tokens")),
    )
    inputs, output = _count(u.get("prompt_tokens")), _count(u.get("completion_tokens"))
    if cached + written > inputs:  # a gateway that counts only the uncached part as the prompt
        inputs += cached + written
    reasoning = _count(details.get("reasoning_tokens"))
    # Gemini's OpenAI endpoint (and xAI) leave thinking out of completion_tokens but count it
    # in total_tokens; it is billed as output
    hidden = _count(u.get("total_tokens")) - inputs - output
    if hidden > 0:
        output += hidden
        reasoning = max(reasoning, hidden)
    if reasoning > output:  # thinking reported beside completion_tokens, not within them
        output += reasoning
    return Usage(inputs, output, cached, written, reasoning, _provider_cost(u), calls=1)


def _provider_cost(u: dict[str, Any]) -> float | None:
    """OpenRouter's `usage.cost` (and LiteLLM's, when it puts it in the stream). With BYOK,
    `cost` is OpenRouter's fee and the provider bills `upstream_inference_cost` besides."""
    cost = _cost(u.get("cost"))
    upstream = _cost(_table(u.get("cost_details")).get("upstream_inference_cost"))
    if cost is not None and u.get("is_byok") is True and upstream is not None:
        cost += upstream
    return cost


def messages_usage(u: dict[str, Any]) -> Usage:
    """Anthropic's shape: `input_tokens` leaves out the cache reads and writes, reported beside
    it. (The OpenAI Responses shape, `input_tokens_details`, includes them.)"""
    details = _table(u.get("input_tokens_details"))
    read = _count(u.get("cache_read_input_tokens"))
    written = _count(u.get("cache_creation_input_tokens"))
    inputs = _count(u.get("input_tokens")) + read + written
    read = max(read, _count(details.get("cached_tokens")))
    written = max(written, _count(details.get("cache_write_tokens")))
    inputs = max(inputs, read + written)
    out = _table(u.get("output_tokens_details"))
    reasoning = max(_count(out.get("reasoning_tokens")), _count(out.get("thinking_tokens")))
    output = max(_count(u.get("output_tokens")), reasoning)
    return Usage(inputs, output, read, written, reasoning, _provider_cost(u), calls=1)


def _from_timings(timings: Any) -> Usage | None:
    """llama.cpp's `timings` when no usage came: prompt_n tokens evaluated, cache_n reused."""
    t = _table(timings)
    if "prompt_n" not in t and "predicted_n" not in t:
        return None
    cached = _count(t.get("cache_n"))
    return Usage(_count(t.get("prompt_n")) + cached, _count(t.get("predicted_n")), cached, calls=1)


def header_cost(headers: Any) -> float | None:
    """LiteLLM's `x-litellm-response-cost` header (USD). It is computed before a stream's body,
    so on a streamed response a zero there means "not known", not "free"."""
    raw = headers.get("x-litellm-response-cost") if headers is not None else None
    try:
        value = _cost(float(raw)) if raw else None
    except ValueError:
        return None
    streamed = "event-stream" in str(headers.get("content-type", ""))
    return None if value is None or (streamed and value == 0) else value
