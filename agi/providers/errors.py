"""What a provider's error response says: its message as one line (the provider's own words,
never a traceback or a page of HTML), its status, and whether to retry it."""

from __future__ import annotations

import html
import json
import re
from typing import Any

from agi.errors import ProviderError

RETRYABLE_STATUS = {408, 409, 429} | set(range(500, 600))
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
    error = ProviderError(prefix + message, status, retryable=status in RETRYABLE_STATUS)
    error.body = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    return error


def error_status(err: Any, default: int | None) -> int | None:
    if isinstance(err, dict):
        for key in ("status_code", "code", "status"):
            value = err.get(key)
            if isinstance(value, int):
                return value
            if isinstance(value, str) and value.isdigit():
                return int(value)
    return default
