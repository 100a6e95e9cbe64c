"""OpenAI's request and response shapes for `agi --serve` (docs: serve): a chat-completions or
Responses request becomes a run's fields (the `model` a profile, the messages the conversation
with the last user message the prompt, a JSON schema `--schema`); a run's result and events
become OpenAI's response objects and SSE chunks. The agent's own tool calls stay inside."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from agi.engine.result import RunResult
from agi.frontends.serve.requests import Refused, kind

DEFAULT_MODEL = "agi"  # the server's own options, no profile


def models(profiles: dict[str, Any]) -> dict[str, Any]:
    """`GET /v1/models`: `agi` and each profile, as OpenAI lists models."""
    names = [DEFAULT_MODEL, *sorted(profiles)]
    data = [{"id": n, "object": "model", "created": 0, "owned_by": "agi"} for n in names]
    return {"object": "list", "data": data}


def profile_fields(name: Any, profiles: dict[str, Any]) -> dict[str, Any]:
    """The run's fields a profile gives (Refused 404 for one the server does not have)."""
    if name is None or name == DEFAULT_MODEL:
        return {}
    if not isinstance(name, str) or name not in profiles:
        known = ", ".join([DEFAULT_MODEL, *sorted(profiles)])
        raise Refused(
            f"model {name!r}: no such profile (GET /v1/models lists them: {known})",
            status=404,
            code="model_not_found",
        )
    fields = dict(profiles[name])
    if isinstance(fields.get("tools"), str):
        fields["tools"] = [t.strip() for t in fields["tools"].split(",") if t.strip()]
    if isinstance(fields.get("schema"), dict):
        fields["schema"] = json.dumps(fields["schema"])
    return fields


def content_text(content: Any, where: str) -> str:
    """A message's content: a string, or an array of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                raise Refused(f"{where}: only text content parts are taken")
        return "".join(parts)
    if content is None:
        return ""
    raise Refused(f"{where}: expected a string or an array of parts, got {kind(content)}")


def conversation(messages: list[tuple[str, str]], where: str) -> str:
    """The prompt: the last user message, the ones before it in a conversation block."""
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i][0] == "user"), None)
    if last is None:
        raise Refused(f"{where}: no user message (the last user message is the prompt)")
    prompt = messages[last][1]
    if not prompt.strip():
        raise Refused(f"{where}: the last user message is empty")
    earlier = [f"{r}: {t}" for i, (r, t) in enumerate(messages) if i != last and t.strip()]
    if earlier:
        block = "\n\n".join(earlier)
        return f"<conversation>\n{block}\n</conversation>\n\n{prompt}"
    return prompt


def chat_request(body: dict[str, Any], profiles: dict[str, Any]) -> dict[str, Any]:
    """`POST /v1/chat/completions`'s body as a run's fields."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Refused("messages: expected a non-empty array of messages")
    turns = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise Refused(f"messages[{i}]: expected an object with a role")
        turns.append((m["role"], content_text(m.get("content"), f"messages[{i}].content")))
    fields = profile_fields(body.get("model"), profiles)
    fields["prompt"] = conversation(turns, "messages")
    schema = response_schema(body.get("response_format"), "response_format")
    if schema is not None:
        fields["schema"] = schema
    if body.get("stream") is not None:
        fields["stream"] = bool(body["stream"])
    return fields


def responses_request(body: dict[str, Any], profiles: dict[str, Any]) -> dict[str, Any]:
    """`POST /v1/responses`'s body as a run's fields."""
    given = body.get("input")
    turns: list[tuple[str, str]] = []
    if isinstance(body.get("instructions"), str):
        turns.append(("system", body["instructions"]))
    if isinstance(given, str):
        turns.append(("user", given))
    elif isinstance(given, list) and given:
        for i, item in enumerate(given):
            if not isinstance(item, dict) or not isinstance(item.get("role"), str):
                raise Refused(f"input[{i}]: expected a message with a role")
            turns.append((item["role"], content_text(item.get("content"), f"input[{i}].content")))
    else:
        raise Refused("input: expected a string or a non-empty array of messages")
    fields = profile_fields(body.get("model"), profiles)
    fields["prompt"] = conversation(turns, "input")
    text = body.get("text")
    schema = response_schema(text.get("format") if isinstance(text, dict) else None, "text.format")
    if schema is not None:
        fields["schema"] = schema
    if body.get("stream") is not None:
        fields["stream"] = bool(body["stream"])
    return fields


def response_schema(spec: Any, where: str) -> str | None:
    """A `json_schema` response format's schema as `--schema` takes it (None: free text)."""
    if not isinstance(spec, dict) or spec.get("type") in (None, "text", "json_object"):
        return None
    if spec.get("type") != "json_schema":
        raise Refused(f"{where}: type {spec.get('type')!r} is not taken (json_schema, text)")
    inner = spec.get("json_schema", spec)  # chat nests it; Responses does not
    schema = inner.get("schema") if isinstance(inner, dict) else None
    if not isinstance(schema, dict):
        raise Refused(f"{where}: a json_schema format needs its schema object")
    return json.dumps(schema)


def answer_text(result: RunResult) -> str:
    answer = result.answer
    if answer is None:
        return result.error or ""
    return answer if isinstance(answer, str) else json.dumps(answer)


def chat_usage(result: RunResult) -> dict[str, Any]:
    u = result.usage
    return {
        "prompt_tokens": u.input,
        "completion_tokens": u.output,
        "total_tokens": u.input + u.output,
        "prompt_tokens_details": {"cached_tokens": u.cached},
        "completion_tokens_details": {"reasoning_tokens": u.reasoning},
    }


def responses_usage(result: RunResult) -> dict[str, Any]:
    u = result.usage
    return {
        "input_tokens": u.input,
        "output_tokens": u.output,
        "total_tokens": u.input + u.output,
        "input_tokens_details": {"cached_tokens": u.cached},
        "output_tokens_details": {"reasoning_tokens": u.reasoning},
    }


def finish(result: RunResult) -> str:
    return "length" if result.exit_code == 4 else "stop"


class Chat:
    """One chat completion's response, whole or as chunks."""

    def __init__(self, model: str):
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.model, self.created = model, int(time.time())

    def whole(self, result: RunResult) -> dict[str, Any]:
        message = {"role": "assistant", "content": answer_text(result), "refusal": None}
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": finish(result), "logprobs": None}
            ],
            "usage": chat_usage(result),
            "agi": result.to_json(),
        }

    def chunk(self, delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": reason, "logprobs": None}],
        }

    def usage_chunk(self, result: RunResult) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": chat_usage(result),
        }


class Response:
    """One Responses API response, whole or as its stream's events."""

    def __init__(self, model: str):
        self.id = f"resp_{uuid.uuid4().hex}"
        self.item = f"msg_{uuid.uuid4().hex}"
        self.model, self.created = model, int(time.time())
        self.sequence = 0

    def body(self, status: str, result: RunResult | None) -> dict[str, Any]:
        output = [] if result is None else [self.message(result, "completed")]
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "model": self.model,
            "output": output,
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "metadata": {},
            "usage": None if result is None else responses_usage(result),
        }

    def message(self, result: RunResult | None, status: str) -> dict[str, Any]:
        content = [] if result is None else [self.part(answer_text(result))]
        return {
            "type": "message",
            "id": self.item,
            "status": status,
            "role": "assistant",
            "content": content,
        }

    @staticmethod
    def part(text: str) -> dict[str, Any]:
        return {"type": "output_text", "text": text, "annotations": []}

    def whole(self, result: RunResult) -> dict[str, Any]:
        status = "incomplete" if result.exit_code == 4 else "completed"
        return {**self.body(status, result), "agi": result.to_json()}

    def event(self, kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
        data = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return kind, data

    def opening(self) -> list[tuple[str, dict[str, Any]]]:
        return [
            self.event("response.created", response=self.body("in_progress", None)),
            self.event("response.in_progress", response=self.body("in_progress", None)),
            self.event(
                "response.output_item.added",
                output_index=0,
                item=self.message(None, "in_progress"),
            ),
            self.event(
                "response.content_part.added",
                item_id=self.item,
                output_index=0,
                content_index=0,
                part=self.part(""),
            ),
        ]

    def delta(self, text: str) -> tuple[str, dict[str, Any]]:
        return self.event(
            "response.output_text.delta",
            item_id=self.item,
            output_index=0,
            content_index=0,
            delta=text,
            logprobs=[],
        )

    def closing(self, result: RunResult) -> list[tuple[str, dict[str, Any]]]:
        text = answer_text(result)
        place = {"item_id": self.item, "output_index": 0, "content_index": 0}
        return [
            self.event("response.output_text.done", **place, text=text, logprobs=[]),
            self.event("response.content_part.done", **place, part=self.part(text)),
            self.event(
                "response.output_item.done", output_index=0, item=self.message(result, "completed")
            ),
            self.event("response.completed", response=self.whole(result)),
        ]
