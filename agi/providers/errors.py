"""What a provider's error means, decided in one place: its message as one line (the provider's
own words, never a traceback or a page of HTML), its status, whether to retry it, whether the
request was refused for its length (then the caller compacts and resends), how long the provider
asked to wait, whether it refused a `response_format`, and what to start when a local server
cannot be reached. The protocol modules map their error bodies to a ProviderError
(`provider_error` here for chat completions and Ollama, `anthropic_error` for the Messages API);
`http_error` then decides the rest for every protocol alike."""

from __future__ import annotations

import json
import re
import time
from functools import cache
from typing import TYPE_CHECKING, Any

from agi.errors import ProviderError
from agi.providers.endpoint import start_hint

if TYPE_CHECKING:
    from agi.options.config import ModelConfig

RETRYABLE_STATUS = {408, 409, 429} | set(range(500, 600))
MAX_RETRY_WAIT = 60.0  # seconds: a longer retry-after is not waited out, the request fails
MESSAGE_LIMIT = 300  # characters of a provider's message in agi's one line
NOISE = re.compile(r"^(Traceback \(most recent call last\)|[\^~ ]+$|For further information visit)")
FRAME = re.compile(r'^File "[^"]*", line \d+')  # a traceback's frame (llama-cpp-python's 500s)


def one_line(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """A message as one line of at most `limit` characters: an HTML page by its title (or its
    text), a traceback by its last line, every other line kept and joined with spaces."""
    text = str(text).strip()
    if re.match(r"(?is)\s*(<!doctype|<html|<head|<body|<\?xml)", text):
        title = re.search(r"(?is)<title[^>]*>(.*?)</title>", text)
        body = re.sub(r"(?s)<(script|style).*?</\1>|<[^>]+>", " ", text)
        text = title.group(1) if title else body
        import html  # only for an HTML page: not at every start

        text = html.unescape(text)
    lines = [line.strip() for line in text.splitlines()]
    if lines and lines[0].startswith("Traceback (most recent call last)"):
        lines = [next((x for x in reversed(lines) if x), "")]  # the exception, not the frames
    kept: list[str] = []
    for i, line in enumerate(lines):
        frame = FRAME.match(line) or (i and FRAME.match(lines[i - 1]))  # a frame and its code
        if line and not frame and not NOISE.match(line):
            kept.append(_pydantic_repr(line))
    text = re.sub(r"\s+", " ", " ".join(kept)).strip()
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _pydantic_repr(line: str) -> str:
    """A pydantic error printed as a dict (`{'type': …, 'loc': (…), 'msg': …}`, as FastAPI's
    RequestValidationError shows it) as `loc: msg (got input)`; any other line as it is."""
    if not (line.startswith("{'type':") and "'msg':" in line):
        return line
    import ast

    try:
        error = ast.literal_eval(line)
        where = ".".join(str(x) for x in error.get("loc") or () if x != "body")
        got = error.get("input")
        shown = f" (got {got!r})" if isinstance(got, str | int | float) else ""
        return f"{where}: {error['msg']}{shown}" if where else f"{error['msg']}{shown}"
    except (ValueError, SyntaxError, TypeError, KeyError, AttributeError, MemoryError):
        return line


def error_message(body: Any) -> str:
    """The human part of a provider's error body, whatever shape it has, as one line."""
    return one_line(_message(body))


def _message(body: Any) -> str:
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, str):
            return err
        if isinstance(err, dict):
            msg = err.get("message") or err.get("detail") or err.get("type") or ""
            raw = (
                (err.get("metadata") or {}).get("raw")
                if isinstance(err.get("metadata"), dict)
                else None
            )
            if raw and isinstance(raw, str):
                msg = f"{msg}: {raw}" if msg else raw
            return str(msg) if msg else json.dumps(err)
        if "detail" in body:
            return _detail(body["detail"])
    if isinstance(body, list) and body and isinstance(body[0], dict):  # Gemini wraps it in a list
        return _message(body[0])
    return str(body)


def _detail(detail: Any) -> str:
    """FastAPI's `detail`: a string, or a list of pydantic errors ({loc, msg})."""
    if isinstance(detail, list):
        parts = []
        for item in detail:
            if isinstance(item, dict) and "msg" in item:
                loc = ".".join(str(x) for x in item.get("loc") or () if x != "body")
                parts.append(f"{loc}: {item['msg']}" if loc else str(item["msg"]))
            else:
                parts.append(str(item))
        return "; ".join(parts)
    return str(detail)


def provider_error(status: int | None, body: Any) -> ProviderError:
    """The error an HTTP status and body (JSON, or text) stand for, its message one line."""
    message = error_message(body) or "(no message)"
    prefix = f"HTTP {status}: " if status else ""
    raw = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    return ProviderError(prefix + message, status, status in RETRYABLE_STATUS, body=raw)


def error_status(err: Any, default: int | None) -> int | None:
    if isinstance(err, dict):
        for key in ("status_code", "code", "status"):
            value = err.get(key)
            if isinstance(value, int):
                return value
            if isinstance(value, str) and value.isdigit():
                return int(value)
    return default


# ---- what an HTTP error response means, whatever the protocol ----

# A 5xx whose body blames the request, not the server: llama-cpp-python answers a request its
# pydantic model rejects with a 500 carrying the validation error; llama.cpp's server reports a
# schema it cannot turn into a grammar as a 500 in older versions.
INVALID_REQUEST = re.compile(
    r"validation errors?( for|:)|\bInput should be\b|\bField required\b|response_format|"
    r"Extra inputs are not permitted|invalid_request_error|RequestValidationError|"
    r"\bnot supported\b|\bunsupported (param|parameter|value|type)|failed to parse grammar|"
    r"JSON schema",
    re.I,
)


def invalid_request(body: str) -> bool:
    """Whether an error body says the request itself is invalid (so retrying cannot help)."""
    return bool(INVALID_REQUEST.search(body))


def retry_after(headers: Any) -> float | None:
    """Seconds the server asks us to wait: `retry-after-ms`, then `retry-after` (secs or date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        import email.utils

        when = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, when.timestamp() - time.time()) if when else None


def http_error(error: ProviderError, raw: str, headers: Any) -> ProviderError:
    """An HTTP error response's ProviderError (as its protocol's map made it) with what the
    response means besides: its whole body, the wait asked for, refused for its length (llama.cpp
    may say so with a 500: no retry), or a 5xx that blames the request (no retry either)."""
    error.body = raw  # the whole of it goes to the trace; the message is one line
    error.retry_after = retry_after(headers)
    if is_too_long(error.status, raw):
        error.too_long, error.retryable = True, False
    elif (error.status or 0) >= 500 and invalid_request(raw):
        error.retryable = False  # the same request would fail the same way
    return error


MEANINGS = {401: "auth", 403: "auth", 404: "not_found", 408: "timeout", 429: "rate_limit"}


def meaning(error: ProviderError) -> str:
    """What an error means, in one word a front end can act on: `too_long` (compact and resend),
    `auth` (401, 403: the key), `not_found` (404: the model or the URL), `rate_limit` (429),
    `timeout` (408), `invalid` (another 4xx: the request itself), `server` (5xx), `unreachable`
    (no HTTP answer: no server, a dropped connection, a stalled stream)."""
    if too_long(error):
        return "too_long"
    status = error.status
    if status is None:
        return "unreachable"
    return MEANINGS.get(status) or ("server" if status >= 500 else "invalid")


def too_long(error: ProviderError) -> bool:
    """Whether the provider refused the request for its length."""
    return error.too_long or is_too_long(error.status, str(error))


FORMAT_REFUSAL = re.compile(r"response_format|response format|json_schema|json_object", re.I)


def refuses_format(error: ProviderError) -> bool:
    """Whether the provider refused the request's `response_format` (400, 422, or a 500 with a
    validation error in its body, as llama-cpp-python sends), rather than failing otherwise."""
    if error.status not in (400, 422, 500, 501) or error.too_long:
        return False
    return bool(FORMAT_REFUSAL.search(f"{error} {error.body}"))


# ---- "too long" as providers really say it (tests/fixtures/context_errors/SOURCES.md) ----

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


# ---- a server that cannot be reached ----


def unreachable(url: str, reason: str, model: ModelConfig) -> ProviderError:
    """`cannot reach URL: REASON`, and for a local server what to start (retried: a server may
    be starting)."""
    hint = start_hint(model) if _refused(reason) else None
    message = f"cannot reach {url}: {reason}" + (f" ({hint})" if hint else "")
    return ProviderError(message, None, retryable=True)


def _refused(reason: str) -> bool:
    return bool(re.search(r"connection refused|errno 111|errno 61\b|connecterror", reason, re.I))
