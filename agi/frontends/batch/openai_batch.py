"""OpenAI's Batch API for `agi --batch FILE --batch-api openai` (docs: batch): the jobs as a
JSONL file of chat-completions requests uploaded with `POST /v1/files` (purpose `batch`), the
batch created with `POST /v1/batches`, polled with `GET /v1/batches/ID`, its results read from
`output_file_id` and `error_file_id` (`GET /v1/files/ID/content`), cancelled with
`POST /v1/batches/ID/cancel`."""

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
from agi.messages import user
from agi.prompts import tool_less_system
from agi.providers.capabilities import request_format
from agi.providers.chat import request_body, request_headers
from agi.providers.errors import error_message, provider_error
from agi.providers.usage import parse_usage

if TYPE_CHECKING:
    from agi.options.config import ModelConfig
    from agi.options.settings import Settings

ENDPOINT = "/v1/chat/completions"
ENDED = {"completed", "failed", "expired", "cancelled"}
# a request the batch did not answer: the exit code of its line (130: cancelled by agi's user)
UNANSWERED = {"batch_cancelled": 130, "batch_expired": 3}


def messages_for(settings: Settings, prompt: str) -> list[dict[str, Any]]:
    """What `agi --no-tools PROMPT` sends first: the system prompt (the built-in one in its
    lean form, none under --schema: docs: prompts), then the prompt."""
    text = tool_less_system(settings.system, enforced=settings.schema is not None)
    system = [{"role": "system", "content": text}] if text else []
    return [*system, user(prompt)]


def schema_format(settings: Settings) -> dict[str, Any]:
    """--schema's structured output in the request (json_schema, as a live run first asks)."""
    if settings.schema is None:
        return {}
    return request_format("json_schema", settings.schema)


class OpenAIBatches:
    """The Batch API of one endpoint, key and model."""

    name = "openai"
    max_requests = 50_000
    max_bytes = 200 * 1024 * 1024

    def __init__(self, config: ModelConfig):
        self.config = config
        self.base = config.base_url.rstrip("/")
        headers = {**request_headers(config), "Accept": "application/json"}
        self.http = Http(headers, provider_error)

    def item(self, custom_id: str, settings: Settings, prompt: str) -> bytes:
        extra = schema_format(settings)
        body = request_body(self.config, messages_for(settings, prompt), [], **extra)
        for key in ("stream", "stream_options"):  # a batch's requests are answered whole
            body.pop(key, None)
        entry = {"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body}
        return json.dumps(entry, ensure_ascii=False).encode("utf-8") + b"\n"

    def submit(self, requests: Spool, token: str) -> str:
        requests.file.flush()  # the JSONL file, streamed from the spool (httpx seeks it to 0)
        uploaded = self.http.json(
            "POST",
            f"{self.base}/files",
            "openai batch: uploading the requests",
            data={"purpose": "batch"},
            files={"file": ("agi-batch.jsonl", requests.file, "application/jsonl")},
        )
        file_id = uploaded.get("id")
        if not isinstance(file_id, str):
            raise_malformed("uploading the requests", uploaded)
        created = self.http.json(
            "POST",
            f"{self.base}/batches",
            "openai batch: creating the batch",
            json={
                "input_file_id": file_id,
                "endpoint": ENDPOINT,
                "completion_window": "24h",
                "metadata": {"agi_batch": token},  # how a rerun after a kill finds it
            },
        )
        batch_id = created.get("id")
        if not isinstance(batch_id, str):
            raise_malformed("creating the batch", created)
        return str(batch_id)

    def find(self, token: str, count: int, since: float) -> list[str]:
        """`GET /v1/batches`, newest first, page by page back to `since`: the one whose
        metadata holds `token`."""
        after = None
        while True:
            params: dict[str, Any] = {"limit": LISTED, **({"after": after} if after else {})}
            page = self.http.json(
                "GET", f"{self.base}/batches", "openai batch: listing batches", params=params
            )
            data = page.get("data")
            listed = [table(b) for b in data] if isinstance(data, list) else []
            for batch in listed:
                if table(batch.get("metadata")).get("agi_batch") == token:
                    return [str(batch.get("id"))]
            created = [b.get("created_at") for b in listed]
            older = [c for c in created if isinstance(c, (int, float)) and c < since - SKEW]
            if older or not page.get("has_more") or not listed:
                return []
            after = listed[-1].get("id")

    def poll(self, batch_id: str) -> Polled:
        body = self.http.json("GET", f"{self.base}/batches/{batch_id}", "openai batch: polling")
        status = str(body.get("status") or "unknown")
        counts = table(body.get("request_counts"))
        problem = None
        if status == "failed":
            errors = table(body.get("errors")).get("data")
            listed = errors if isinstance(errors, list) else []
            found = [error_message(e) for e in listed if isinstance(e, dict)]
            problem = "; ".join(found) or "the batch failed"
        return Polled(status, status in ENDED, dict(counts or {}), body, problem)

    def results(self, polled: Polled) -> Iterator[tuple[str, Answer]]:
        for key in ("output_file_id", "error_file_id"):
            file_id = polled.raw.get(key)
            if not isinstance(file_id, str) or not file_id:
                continue
            url = f"{self.base}/files/{file_id}/content"
            for line in self.http.lines(url, "openai batch: reading results"):
                custom_id = line.get("custom_id")
                if isinstance(custom_id, str):
                    yield custom_id, answer_of(line)

    def cancel(self, batch_id: str) -> None:
        self.http.json("POST", f"{self.base}/batches/{batch_id}/cancel", "openai batch: cancelling")

    def close(self) -> None:
        self.http.close()


def raise_malformed(what: str, body: Any) -> None:
    raise ProviderError(f"openai batch: {what}: malformed response: {str(body)[:200]}")


def answer_of(line: dict[str, Any]) -> Answer:
    """A line of an output or error file as the job's answer."""
    response = table(line.get("response"))
    body = table(response.get("body"))
    status = response.get("status_code")
    error = table(line.get("error"))
    if error.get("code") or error.get("message"):
        code = UNANSWERED.get(str(error.get("code")), 3)
        return Answer(error=f"{error.get('code') or 'error'}: {error_message(error)}", code=code)
    if status != 200:
        problem = str(provider_error(status if isinstance(status, int) else None, body))
        return Answer(error=problem, code=3, usage=parse_usage(body.get("usage")))
    choices = body.get("choices") if isinstance(body.get("choices"), list) else []
    message = table(table(choices[0] if choices else None).get("message"))
    usage = parse_usage(body.get("usage")) or None
    content = message.get("content")
    if not isinstance(content, str):
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal:
            return Answer(error=f"the model refused: {refusal}", code=3, usage=usage)
        content = ""
    return Answer(text=content, usage=usage)
