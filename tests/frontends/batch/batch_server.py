"""A scripted provider-batch server on 127.0.0.1 that records its requests: OpenAI's Files and
Batch API and Anthropic's Message Batches, as their public references describe them.

OpenAI: `POST /v1/files` (multipart, purpose `batch`, a JSONL file of requests), `POST
/v1/batches` (input_file_id, endpoint, completion_window), `GET /v1/batches/ID`, `POST
/v1/batches/ID/cancel`, `GET /v1/files/ID/content` (the output file: one line a request,
`{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}`; failed,
expired and cancelled requests go to the error file). Statuses: validating, in_progress,
finalizing, completed (or failed, expired), cancelling, cancelled.

Anthropic: `POST /v1/messages/batches` ({"requests": [{"custom_id", "params"}]}), `GET
/v1/messages/batches/ID` (processing_status in_progress, canceling, ended; request_counts;
results_url once ended), `POST .../cancel`, `GET .../results` (one line a request, `result`
of type succeeded, errored, canceled or expired).

Listing: `GET /v1/batches` (newest first, `limit`, `after`; `data`, `has_more`, `last_id`;
each batch with the `metadata` it was created with) and `GET /v1/messages/batches` (newest
first, `limit`, `after_id`). A POST to a path in `holding` (`/v1/batches`, `/v1/files`, ...)
is carried out but its answer waits until `release` is set (a client killed meanwhile never
learns what it made).

Each GET of a batch advances it one status along its script (`statuses` / `anthropic_statuses`;
the last repeats, so a script ending in `in_progress` never ends until `finish()`). Each request
is answered by `answer(prompt, body)`: a text, or a dict `{"text", "usage"}`, `{"error":
{...}, "status_code": 400}` (an errored request) or `{"expired": True}`."""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
A_USAGE = {"input_tokens": 10, "output_tokens": 5}
ENDED = ("completed", "failed", "expired", "cancelled")
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_ids = itertools.count(1)


def prompt_of(messages: list[dict[str, Any]]) -> str:
    """The last user message's text (a string, or text blocks)."""
    last = next(m for m in reversed(messages) if m.get("role") == "user")
    content = last["content"]
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))


class BatchServer:
    """Use as a context manager; `url` is the OpenAI base (ending in /v1), `root` Anthropic's."""

    def __init__(
        self,
        answer: Callable[[str, dict[str, Any]], Any] | None = None,
        statuses: list[str] | None = None,
        anthropic_statuses: list[str] | None = None,
        errors: list[dict[str, Any]] | None = None,
    ):
        self.answer = answer or (lambda prompt, body: f"echo: {prompt}")
        self.statuses = statuses or ["validating", "in_progress", "finalizing", "completed"]
        self.anthropic_statuses = anthropic_statuses or ["in_progress", "in_progress", "ended"]
        self.errors = errors or []  # a failed batch's `errors.data`
        self.files: dict[str, bytes] = {}
        self.uploads: list[list[dict[str, Any]]] = []  # each uploaded file's lines
        self.batches: dict[str, dict[str, Any]] = {}  # id -> the batch (and its requests)
        self.created: list[dict[str, Any]] = []  # each create request's body
        self.log: list[tuple[str, str]] = []  # (method, path) of every request
        self.headers: list[dict[str, str]] = []
        self.cancels: list[str] = []
        self.answered: list[str] = []  # custom_ids answered, in every batch
        self.lock = threading.Lock()
        self.holding: set[str] = set()
        self.release = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def url(self) -> str:
        return self.root + "/v1"

    def __enter__(self) -> BatchServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def finish(self, openai: str = "completed", anthropic: str = "ended") -> None:
        """From now on, every batch ends at its next poll."""
        with self.lock:
            self.statuses, self.anthropic_statuses = [openai], [anthropic]
            for batch in self.batches.values():
                batch["polls"] = 0

    def polls(self) -> int:
        with self.lock:
            return sum(1 for method, path in self.log if method == "GET" and "batches/" in path)

    # ---- the answers ----

    def _reply(self, prompt: str, body: dict[str, Any]) -> dict[str, Any]:
        got = self.answer(prompt, body)
        return {"text": got} if isinstance(got, str) else dict(got)

    def _openai_line(self, request: dict[str, Any], status: str) -> tuple[str, dict[str, Any]]:
        """('output'|'error', the result line) of one request of a batch that ended."""
        custom_id = request["custom_id"]
        line: dict[str, Any] = {"id": f"batch_req_{next(_ids)}", "custom_id": custom_id}
        if status in ("expired", "cancelled"):
            code = "batch_expired" if status == "expired" else "batch_cancelled"
            line.update(response=None, error={"code": code, "message": f"request {status}"})
            return "error", line
        reply = self._reply(prompt_of(request["body"]["messages"]), request["body"])
        self.answered.append(custom_id)
        if reply.get("expired"):
            line.update(response=None, error={"code": "batch_expired", "message": "expired"})
            return "error", line
        if "error" in reply:
            body = {"error": reply["error"]}
            response = {
                "status_code": reply.get("status_code", 400),
                "request_id": "r",
                "body": body,
            }
            line.update(response=response, error=None)
            return "error", line
        message = {"role": "assistant", "content": reply["text"], "refusal": None}
        body = {
            "id": f"chatcmpl-{next(_ids)}",
            "object": "chat.completion",
            "model": request["body"].get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": reply.get("usage", USAGE),
        }
        line.update(response={"status_code": 200, "request_id": "r", "body": body}, error=None)
        return "output", line

    def _anthropic_line(self, request: dict[str, Any], cancelled: bool) -> dict[str, Any]:
        custom_id, params = request["custom_id"], request["params"]
        if cancelled:
            return {"custom_id": custom_id, "result": {"type": "canceled"}}
        reply = self._reply(prompt_of(params["messages"]), params)
        self.answered.append(custom_id)
        if reply.get("expired"):
            return {"custom_id": custom_id, "result": {"type": "expired"}}
        if "error" in reply:
            error = {"type": "error", "error": reply["error"]}
            return {"custom_id": custom_id, "result": {"type": "errored", "error": error}}
        choice = params.get("tool_choice") or {}
        content: list[dict[str, Any]] = [{"type": "text", "text": reply["text"]}]
        if choice.get("type") == "tool":
            try:
                content = [
                    {
                        "type": "tool_use",
                        "id": f"toolu_{next(_ids)}",
                        "name": choice["name"],
                        "input": json.loads(reply["text"]),
                    }
                ]
            except ValueError:
                pass
        message = {
            "id": f"msg_{next(_ids)}",
            "type": "message",
            "role": "assistant",
            "model": params.get("model"),
            "content": content,
            "stop_reason": "tool_use" if content[0]["type"] == "tool_use" else "end_turn",
            "usage": reply.get("usage", A_USAGE),
        }
        return {"custom_id": custom_id, "result": {"type": "succeeded", "message": message}}

    # ---- the batches ----

    def _openai_create(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.created.append(body)
        if body.get("endpoint") != "/v1/chat/completions" or body.get("completion_window") != "24h":
            return 400, {"error": {"message": "endpoint or completion_window not supported"}}
        data = self.files.get(str(body.get("input_file_id")))
        if data is None:
            return 404, {"error": {"message": "no such file"}}
        requests = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
        ids = [r.get("custom_id") for r in requests]
        if len(set(ids)) != len(ids) or any(r.get("url") != body["endpoint"] for r in requests):
            return 400, {"error": {"message": "duplicate custom_id or a request for another url"}}
        batch_id = f"batch_{next(_ids)}"
        self.batches[batch_id] = {
            "kind": "openai",
            "requests": requests,
            "polls": 0,
            "metadata": body.get("metadata"),
            "created_at": int(time.time()),
        }
        return 200, self._openai_view(batch_id, "validating")

    def _openai_view(self, batch_id: str, status: str) -> dict[str, Any]:
        batch = self.batches[batch_id]
        total = len(batch["requests"])
        done = status in ENDED
        return {
            "id": batch_id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "errors": {"object": "list", "data": self.errors} if status == "failed" else None,
            "input_file_id": "file",
            "completion_window": "24h",
            "status": status,
            "output_file_id": batch.get("output"),
            "error_file_id": batch.get("error"),
            "created_at": batch["created_at"],
            "metadata": batch["metadata"],
            "request_counts": {
                "total": total,
                "completed": total if done else 0,
                "failed": len(batch.get("error_lines", [])),
            },
        }

    def _openai_poll(self, batch_id: str) -> dict[str, Any]:
        batch = self.batches[batch_id]
        batch["polls"] += 1
        if "cancelled" in batch:
            status = "cancelling" if batch["polls"] - batch["cancelled"] < 2 else "cancelled"
        else:
            status = self.statuses[min(batch["polls"], len(self.statuses)) - 1]
        if status in ENDED and "status" not in batch:
            batch["status"] = status
            if status != "failed":
                files: dict[str, list[dict[str, Any]]] = {"output": [], "error": []}
                for request in batch["requests"]:
                    which, line = self._openai_line(request, status)
                    files[which].append(line)
                for which, lines in files.items():
                    if lines:
                        file_id = f"file-{which}-{next(_ids)}"
                        self.files[file_id] = "".join(json.dumps(x) + "\n" for x in lines).encode()
                        batch[which] = file_id
                batch["error_lines"] = files["error"]
        return self._openai_view(batch_id, batch.get("status", status))

    def _anthropic_create(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.created.append(body)
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            return 400, {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": "requests"},
            }
        ids = [r.get("custom_id") for r in requests]
        bad = [i for i in ids if not isinstance(i, str) or not CUSTOM_ID.match(i)]
        missing = [
            r for r in requests if not {"model", "max_tokens", "messages"} <= set(r["params"])
        ]
        if bad or missing or len(set(ids)) != len(ids):
            message = (
                "custom_id must match ^[a-zA-Z0-9_-]{1,64}$ and be unique; "
                "params need model, max_tokens and messages"
            )
            return 400, {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": message},
            }
        batch_id = f"msgbatch_{next(_ids)}"
        self.batches[batch_id] = {
            "kind": "anthropic",
            "requests": requests,
            "polls": 0,
            "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        }
        return 200, self._anthropic_view(batch_id, "in_progress")

    def _anthropic_view(self, batch_id: str, status: str) -> dict[str, Any]:
        batch = self.batches[batch_id]
        lines = batch.get("lines") or []
        counts = {"processing": 0 if lines else len(batch["requests"])}
        for kind in ("succeeded", "errored", "canceled", "expired"):
            counts[kind] = sum(1 for x in lines if x["result"]["type"] == kind)
        ended = status == "ended"
        return {
            "id": batch_id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": counts,
            "ended_at": "2026-12-02T00:00:00Z" if ended else None,
            "created_at": batch["created_at"],
            "expires_at": "2026-12-03T00:00:00Z",
            "cancel_initiated_at": "2026-12-02T00:00:01Z" if "cancelled" in batch else None,
            "results_url": f"{self.root}/v1/messages/batches/{batch_id}/results" if ended else None,
        }

    def _anthropic_poll(self, batch_id: str) -> dict[str, Any]:
        batch = self.batches[batch_id]
        batch["polls"] += 1
        if "cancelled" in batch:
            status = "canceling" if batch["polls"] - batch["cancelled"] < 2 else "ended"
        else:
            status = self.anthropic_statuses[min(batch["polls"], len(self.anthropic_statuses)) - 1]
        if status == "ended" and "lines" not in batch:
            cancelled = "cancelled" in batch
            batch["lines"] = [self._anthropic_line(r, cancelled) for r in batch["requests"]]
        return self._anthropic_view(batch_id, status)

    # ---- HTTP ----

    def handle(
        self, method: str, path: str, headers: dict[str, str], data: bytes
    ) -> tuple[int, Any]:
        with self.lock:
            self.log.append((method, path))
            self.headers.append(headers)
            return self._route(method, path, headers, data)

    def _route(
        self, method: str, path: str, headers: dict[str, str], data: bytes
    ) -> tuple[int, Any]:
        parts = path.split("?")[0].strip("/").split("/")
        if method == "POST" and parts == ["v1", "files"]:
            return self._upload(headers, data)
        if method == "GET" and parts[:2] == ["v1", "files"] and parts[3:] == ["content"]:
            found = self.files.get(parts[2])
            return (200, found) if found is not None else (404, {"error": {"message": "no file"}})
        if parts[:3] == ["v1", "messages", "batches"]:
            rest = parts[3:]
            if method == "POST" and not rest:
                return self._anthropic_create(json.loads(data or b"{}"))
            if method == "GET" and not rest:
                return 200, self._listing("anthropic", path, "after_id")
            batch = self.batches.get(rest[0]) if rest else None
            if batch is None or batch["kind"] != "anthropic":
                return 404, {
                    "type": "error",
                    "error": {"type": "not_found_error", "message": "no batch"},
                }
            if method == "GET" and rest[1:] == []:
                return 200, self._anthropic_poll(rest[0])
            if method == "GET" and rest[1:] == ["results"]:
                lines = batch.get("lines") or []
                return 200, "".join(json.dumps(x) + "\n" for x in lines).encode()
            if method == "POST" and rest[1:] == ["cancel"]:
                self.cancels.append(rest[0])
                batch.setdefault("cancelled", batch["polls"])
                return 200, self._anthropic_view(rest[0], "canceling")
        if parts[:2] == ["v1", "batches"]:
            rest = parts[2:]
            if method == "POST" and not rest:
                return self._openai_create(json.loads(data or b"{}"))
            if method == "GET" and not rest:
                return 200, self._listing("openai", path, "after")
            batch = self.batches.get(rest[0]) if rest else None
            if batch is None or batch["kind"] != "openai":
                return 404, {"error": {"message": "no such batch"}}
            if method == "GET" and rest[1:] == []:
                return 200, self._openai_poll(rest[0])
            if method == "POST" and rest[1:] == ["cancel"]:
                self.cancels.append(rest[0])
                batch.setdefault("cancelled", batch["polls"])
                return 200, self._openai_view(rest[0], "cancelling")
        return 404, {"error": {"message": f"no route {method} {path}"}}

    def _listing(self, kind: str, path: str, after_name: str) -> dict[str, Any]:
        """A page of the batches of `kind`, newest first, as the list endpoints give them."""
        query = dict(q.split("=", 1) for q in path.partition("?")[2].split("&") if "=" in q)
        ids = [i for i, b in reversed(self.batches.items()) if b["kind"] == kind]
        if query.get(after_name) in ids:
            ids = ids[ids.index(query[after_name]) + 1 :]
        limit = int(query.get("limit", 20))
        page = ids[:limit]
        view = self._openai_view if kind == "openai" else self._anthropic_view
        status = {"openai": "in_progress", "anthropic": "in_progress"}[kind]
        data = [view(i, self.batches[i].get("status", status)) for i in page]
        return {
            "data": data,
            "has_more": len(ids) > limit,
            "first_id": page[0] if page else None,
            "last_id": page[-1] if page else None,
        }

    def _upload(self, headers: dict[str, str], data: bytes) -> tuple[int, Any]:
        kind = headers.get("content-type", "")
        raw = f"Content-Type: {kind}\r\n\r\n".encode() + data
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(raw)
        fields: dict[str, bytes] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            fields[str(name)] = part.get_payload(decode=True) or b""
        if fields.get("purpose") != b"batch" or "file" not in fields:
            return 400, {"error": {"message": "purpose must be batch, with a file"}}
        file_id = f"file-{next(_ids)}"
        self.files[file_id] = fields["file"]
        self.uploads.append([json.loads(x) for x in fields["file"].decode().splitlines() if x])
        return 200, {
            "id": file_id,
            "object": "file",
            "bytes": len(fields["file"]),
            "created_at": 1,
            "filename": "batch.jsonl",
            "purpose": "batch",
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("content-length") or 0)
                data = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                code, body = server.handle(method, self.path, headers, data)
                if method == "POST" and self.path.split("?")[0] in server.holding:
                    server.release.wait(30)  # a hang guard: the test releases it
                raw = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(code)
                kind = "application/binary" if isinstance(body, bytes) else "application/json"
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

        return Handler
