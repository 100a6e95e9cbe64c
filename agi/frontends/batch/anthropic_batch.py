"""Anthropic's Message Batches for `agi --batch FILE --batch-api anthropic` (docs: batch): the
jobs' Messages API requests sent with `POST /v1/messages/batches`, polled with `GET
/v1/messages/batches/ID` until `processing_status` is `ended`, their results read from the
batch's `results_url` (one JSON line a request: succeeded, errored, canceled or expired),
cancelled with `POST /v1/messages/batches/ID/cancel`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from agi.errors import ProviderError
from agi.frontends.batch.batch_http import (
    LISTED,
    SKEW,
    Answer,
    Http,
    Polled,
    Spool,
    table,
)
from agi.frontends.batch.openai_batch import messages_for, schema_format
from agi.providers.anthropic import ANSWER, AnthropicMessages, anthropic_error
from agi.providers.endpoint import root
from agi.providers.usage import messages_usage

if TYPE_CHECKING:
    from agi.options.config import ModelConfig
    from agi.options.settings import Settings

UNANSWERED = {"canceled": ("canceled at the provider before it was answered", 130)}
UNANSWERED["expired"] = ("expired at the provider before it was answered", 3)


class AnthropicBatches:
    """The Message Batches API of one endpoint and key."""

    name = "anthropic"
    max_requests = 100_000
    max_bytes = 256 * 1024 * 1024

    def __init__(self, config: ModelConfig):
        self.config = config
        self.wire = AnthropicMessages(config)
        self.url = root(config.base_url) + "/v1/messages/batches"
        headers = {**self.wire.headers(), "Accept": "application/json"}
        self.http = Http(headers, lambda status, body: anthropic_error(body, status))

    def item(self, custom_id: str, settings: Settings, prompt: str) -> bytes:
        # --schema: the forced `answer` tool, as a live run asks (agi.providers.anthropic)
        params = self.wire.body(messages_for(settings, prompt), [], **schema_format(settings))
        params.pop("stream", None)  # a batch's requests are answered whole
        for turn in params["messages"]:  # a job's own prompt is asked once: not worth a cache
            # write; the breakpoints on the system prompt and the tools (the prefix every job of
            # the batch shares) stay
            turn["content"] = [
                {k: v for k, v in block.items() if k != "cache_control"}
                for block in turn["content"]
            ]
        entry = {"custom_id": custom_id, "params": params}
        return json.dumps(entry, ensure_ascii=False).encode("utf-8") + b","

    def submit(self, requests: Spool, token: str) -> str:
        data = requests.body(b'{"requests":[', b"]}", trim=1)  # each item ends in a comma
        body = self.http.json(
            "POST",
            self.url,
            "anthropic batch: creating the batch",
            content=data,
            headers={"content-type": "application/json", "content-length": str(data.length)},
        )
        batch_id = body.get("id")
        if not isinstance(batch_id, str):
            raise ProviderError(f"anthropic batch: malformed response: {str(body)[:200]}")
        return batch_id

    def find(self, token: str, count: int, since: float) -> list[str]:
        """`GET /v1/messages/batches`, newest first, back to `since`: Message Batches keep no
        mark, so every batch created since then with `count` requests."""
        found: list[str] = []
        after = None
        while True:
            params: dict[str, Any] = {"limit": LISTED, **({"after_id": after} if after else {})}
            page = self.http.json(
                "GET", self.url, "anthropic batch: listing batches", params=params
            )
            listed = [table(b) for b in page.get("data") or [] if isinstance(b, dict)]
            older = False
            for batch in listed:
                created = seconds_of(batch.get("created_at"))
                if created is not None and created < since - SKEW:
                    older = True
                    continue
                counts = table(batch.get("request_counts")).values()
                if sum(n for n in counts if isinstance(n, int)) == count:
                    found.append(str(batch.get("id")))
            if older or not page.get("has_more") or not listed:
                break
            after = listed[-1].get("id")
        return found

    def poll(self, batch_id: str) -> Polled:
        body = self.http.json("GET", f"{self.url}/{batch_id}", "anthropic batch: polling")
        status = str(body.get("processing_status") or "unknown")
        return Polled(status, status == "ended", table(body.get("request_counts")), body)

    def results(self, polled: Polled) -> Iterator[tuple[str, Answer]]:
        url = polled.raw.get("results_url")
        if not isinstance(url, str) or not url:
            return
        for line in self.http.lines(url, "anthropic batch: reading results"):
            custom_id = line.get("custom_id")
            if isinstance(custom_id, str):
                yield custom_id, answer_of(line.get("result"))

    def cancel(self, batch_id: str) -> None:
        self.http.json("POST", f"{self.url}/{batch_id}/cancel", "anthropic batch: cancelling")

    def close(self) -> None:
        self.http.close()


def seconds_of(stamp: Any) -> float | None:
    """An RFC 3339 time (`2026-12-02T10:00:00Z`) in seconds since the epoch."""
    from datetime import datetime

    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def answer_of(result: Any) -> Answer:
    """A result line's `result` as the job's answer: a succeeded message's text (or the forced
    `answer` tool's input, as JSON), or what went wrong."""
    result = table(result)
    kind = result.get("type")
    if kind in UNANSWERED:
        why, code = UNANSWERED[str(kind)]
        return Answer(error=why, code=code)
    if kind != "succeeded":
        return Answer(error=str(anthropic_error(table(result.get("error")))), code=3)
    message = table(result.get("message"))
    usage = messages_usage(table(message.get("usage"))) if message.get("usage") else None
    content = message.get("content")
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    for block in blocks:
        if block.get("type") == "tool_use" and block.get("name") == ANSWER:  # --schema's
            return Answer(text=json.dumps(block.get("input"), ensure_ascii=False), usage=usage)
    text = "".join(str(b.get("text") or "") for b in blocks if b.get("type") == "text")
    return Answer(text=text, usage=usage)
