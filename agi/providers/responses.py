"""OpenAI's Responses API, the wire protocol beside chat completions for the models that need it
(docs: responses): the endpoint, the request body built from an OpenAI-format conversation
(input items: messages, `function_call` and `function_call_output`, the reasoning items sent
back in place), the stream decoder and the error map, gathered in `Responses`, the protocol
object (`agi.providers.wire.Wire`) an exchange speaks. Requests are stateless (`store: false`):
the model's reasoning comes back encrypted and is stored with the session, never on the server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from agi.errors import ProviderError
from agi.messages import REASONING_ITEMS, ReasoningDelta, Reply, TextDelta
from agi.providers.chat import prompt_cache_key, read_events, request_headers, sends_cache_key
from agi.providers.errors import RETRYABLE_STATUS, error_message, provider_error
from agi.providers.stream import CallBuilder, StreamAssembler, as_text
from agi.providers.usage import messages_usage

if TYPE_CHECKING:
    from agi.options.config import ModelConfig
    from agi.providers.wire import Event, Received

INCLUDE = ["reasoning.encrypted_content"]
FILE_FIELDS = ("filename", "file_data", "file_id")  # a chat `file` part's, for input_file
LIMITS = ("max_tokens", "max_completion_tokens")  # chat's names for max_output_tokens
# chat-completions parameters the Responses API has no place for (or takes under another name)
CHAT_ONLY = {"stream_options", "stop", "response_format", "reasoning_effort", "n", "logprobs"}
FINISH = {"max_output_tokens": "length", "content_filter": "content_filter"}
# the error codes of a failed response (`response.error.code`) and the status each stands for
CODES = {"rate_limit_exceeded": 429, "server_error": 500, "vector_store_timeout": 504}


def url(config: ModelConfig) -> str:
    return config.base_url.rstrip("/") + "/responses"


# ---- the request side ----


def text_of(content: Any) -> str:
    """A message's text, whatever its shape (a string, or a list of parts)."""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "\n".join(str(p.get("text") or "") for p in parts if isinstance(p, dict) and "text" in p)


def input_parts(content: Any) -> str | list[dict[str, Any]]:
    """A user message's content as input parts: text, images (`input_image`) and files
    (`input_file`, a PDF as a data URL), from the chat-completions parts agi keeps."""
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in ("text", "input_text"):
            parts.append({"type": "input_text", "text": str(part.get("text") or "")})
        elif kind == "image_url":
            image = part.get("image_url")
            link = image.get("url") if isinstance(image, dict) else image
            if isinstance(link, str) and link:
                parts.append({"type": "input_image", "image_url": link})
        elif kind == "file":
            file = _table(part.get("file"))
            sent: dict[str, Any] = {k: file[k] for k in FILE_FIELDS if k in file}
            if sent:
                parts.append({"type": "input_file", **sent})
        elif kind in ("input_image", "input_file"):
            parts.append(dict(part))
        elif kind == "attachment":  # a file the session keeps, not read for this request
            parts.append({"type": "input_text", "text": f"[attached: {part.get('name', '')}]"})
    return parts


def assistant_items(msg: dict[str, Any], model: str) -> list[dict[str, Any]]:
    """An assistant message as output items sent back: its text as an assistant message, its
    tool calls as `function_call` items, and, to the model that made them, its reasoning items
    where they stood among those (a reasoning item goes before the item it led to)."""
    items: list[dict[str, Any]] = []
    text = text_of(msg.get("content"))
    if text:
        items.append({"role": "assistant", "content": text})
    for call in msg.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        fn = _table(call.get("function"))
        items.append(
            {
                "type": "function_call",
                "call_id": str(call.get("id") or ""),
                "name": str(fn.get("name") or ""),
                "arguments": str(fn.get("arguments") or "{}"),
            }
        )
    kept = msg.get(REASONING_ITEMS)
    if not isinstance(kept, dict) or kept.get("model") != model:
        return items  # another model's reasoning (or another provider's reply): none to give
    placed = [r for r in kept.get("items") or [] if isinstance(r, dict)]
    for entry in sorted(placed, key=lambda r: -int(r.get("at") or 0)):  # from the end
        item = entry.get("item")
        if isinstance(item, dict) and item.get("type") == "reasoning":
            items.insert(min(int(entry.get("at") or 0), len(items)), item)
    return items


def to_input(messages: list[dict[str, Any]], model: str) -> tuple[str, list[dict[str, Any]]]:
    """(instructions, input items) for an OpenAI-format conversation: the leading system
    messages are the instructions, later ones developer messages."""
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    for msg in messages:
        role = msg.get("role")
        if role in ("system", "developer"):
            text = text_of(msg.get("content"))
            if not items:
                instructions.append(text)
            else:
                items.append({"role": "developer", "content": text})
        elif role == "assistant":
            items += assistant_items(msg, model)
        elif role == "tool":
            output = text_of(msg.get("content"))
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": str(msg.get("tool_call_id") or ""),
                    "output": output,
                }
            )
        else:
            items.append({"role": "user", "content": input_parts(msg.get("content"))})
    return "\n\n".join(t for t in instructions if t), items


def to_tool(spec: dict[str, Any]) -> dict[str, Any]:
    """A chat-completions tool as the Responses API takes it, flat."""
    fn = spec.get("function") if spec.get("type") == "function" else spec
    fn = fn if isinstance(fn, dict) else {}
    return {
        "type": "function",
        "name": fn.get("name") or "",
        "description": fn.get("description") or "",
        "parameters": fn.get("parameters") or {"type": "object", "properties": {}},
    }


def text_format(response_format: Any) -> dict[str, Any] | None:
    """`--schema`'s response_format as `text.format`: a JSON schema, strict, or JSON mode."""
    if not isinstance(response_format, dict):
        return None
    if response_format.get("type") == "json_schema":
        given = response_format.get("json_schema") or {}
        return {
            "type": "json_schema",
            "name": str(given.get("name") or "answer"),
            "schema": given.get("schema") or {},
            "strict": True,
        }
    if response_format.get("type") == "json_object":
        return {"type": "json_object"}
    return None


def tool_choice(choice: Any) -> Any:
    """Chat's `{"type": "function", "function": {"name"}}` flat; the others as they are."""
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        return {"type": "function", "name": choice["function"].get("name") or ""}
    return choice


def request_body(
    config: ModelConfig, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **extra: Any
) -> dict[str, Any]:
    """The streaming, stateless request for a conversation: input items, flat tools, the
    config's params and the call's extras (which win) in the Responses API's names."""
    instructions, items = to_input(messages, config.model)
    body: dict[str, Any] = {
        "model": config.model,
        "input": items,
        "stream": True,
        "store": False,
        "include": list(INCLUDE),
    }
    if instructions:
        body["instructions"] = instructions
    if tools:
        body["tools"] = [to_tool(t) for t in tools]
    params = {**config.params, **extra}
    if sends_cache_key(config):  # docs: volume
        body["prompt_cache_key"] = prompt_cache_key(messages, tools)
    tier = getattr(config, "service_tier", None)
    if tier and "service_tier" not in params:
        params["service_tier"] = tier
    limit = next((params[k] for k in LIMITS if params.get(k)), None) or config.max_tokens
    if limit and "max_output_tokens" not in params:
        body["max_output_tokens"] = int(limit)
    fmt = text_format(params.get("response_format"))
    if fmt is not None:
        body["text"] = {**(params.get("text") or {}), "format": fmt}
    effort = params.get("reasoning_effort")
    if effort and "reasoning" not in params:
        body["reasoning"] = {"effort": effort}
    if "tool_choice" in params:
        body["tool_choice"] = tool_choice(params["tool_choice"])
    body.update(
        {
            k: v
            for k, v in params.items()
            if k not in CHAT_ONLY and k not in LIMITS and k not in body
        }
    )
    return body


# ---- the response side ----


def failure(error: Any, where: str = "") -> ProviderError:
    """A failed response's `error` (`{code, message}`) or an `error` event, as the error of the
    status its code stands for: a rate limit or a server error is retried."""
    err = _table(error)
    inner = _table(err.get("error")) or err
    code = inner.get("code") or inner.get("type")
    code = code if isinstance(code, str) else ""
    status = CODES.get(code) or (429 if "rate_limit" in code else None)
    if status is None:
        status = 400 if code.startswith("invalid") or "policy" in code else 500
    message = error_message({"error": inner}) if inner else "the response failed"
    if code and code not in message:
        message = f"{code}: {message}"
    return ProviderError(
        f"HTTP {status}: {message}{where}",
        status,
        retryable=status in RETRYABLE_STATUS,
        body=json.dumps(error, ensure_ascii=False),
    )


class ResponsesAssembler(StreamAssembler):
    """The Responses API's stream events (`response.output_text.delta`,
    `response.reasoning_summary_text.delta`, `response.function_call_arguments.delta`,
    `response.output_item.added|done`, `response.completed|incomplete|failed`, `error`), or one
    whole `response` object from a server that did not stream. The reasoning items (with their
    `encrypted_content`) are kept with where they stood, to go back in the next requests."""

    def __init__(self, model: str = "") -> None:
        super().__init__()
        self.model = model
        self.items: list[dict[str, Any]] = []  # reasoning items, each with its place ("at")
        self.placed = 0  # output items so far that go back as something else (text, calls)
        self.text_item: Any = None  # the message item whose text is streaming
        self.streamed: set[Any] = set()  # message items whose text came in deltas
        self.summary_part: Any = None  # the reasoning summary part streaming

    PROTOCOL = "a Responses API stream (no response.* event)"

    def recognised(self, chunk: dict[str, Any]) -> bool:
        kind = str(chunk.get("type") or "")
        return kind.startswith("response.") or kind == "error" or chunk.get("object") == "response"

    def decode(self, chunk: dict[str, Any], event: str) -> list[TextDelta | ReasoningDelta]:
        kind = chunk.get("type") or event
        if kind == "error":
            raise failure(chunk, " (an error event in the stream)")
        if kind == "response.failed":
            response = _table(chunk.get("response"))
            self._usage(response)
            raise failure(response.get("error"), " (the response failed)")
        if kind == "response.output_text.delta":
            return self._text(chunk.get("item_id"), as_text(chunk.get("delta")))
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            piece = as_text(chunk.get("delta"))
            part = (chunk.get("item_id"), chunk.get("summary_index"))
            if self.summary_part is not None and part != self.summary_part and self.reasoning:
                piece = "\n\n" + piece
            self.summary_part = part
            return [self._add_reasoning(piece)] if piece else []
        if kind == "response.output_item.added":
            self._added(chunk.get("output_index"), _table(chunk.get("item")))
        elif kind == "response.function_call_arguments.delta":
            call = self.by_index.get(chunk.get("output_index")) or self.by_index.get(
                chunk.get("item_id")
            )
            if call is not None:
                call.arguments += as_text(chunk.get("delta"))
        elif kind == "response.output_item.done":
            return self._done(chunk.get("output_index"), _table(chunk.get("item")))
        elif kind in ("response.completed", "response.incomplete") or (
            chunk.get("object") == "response" and "output" in chunk
        ):
            return self._finished(_table(chunk.get("response")) if "response" in chunk else chunk)
        return []

    def _text(self, item: Any, piece: str) -> list[TextDelta | ReasoningDelta]:
        if not piece:
            return []
        if item != self.text_item and self.text:  # a second message: a paragraph break
            piece = "\n\n" + piece
        self.text_item = item
        self.streamed.add(item)
        return self._emit(piece, "")

    def _added(self, index: Any, item: dict[str, Any]) -> None:
        if item.get("type") == "function_call" and index not in self.by_index:
            call = CallBuilder(item.get("call_id"), item.get("name"))
            call.arguments = as_text(item.get("arguments"))
            self.calls.append(call)
            self.by_index[index] = call
            if item.get("id"):
                self.by_index[item["id"]] = call

    def _done(self, index: Any, item: dict[str, Any]) -> list[TextDelta | ReasoningDelta]:
        kind = item.get("type")
        if kind == "reasoning":
            kept = {k: v for k, v in item.items() if k != "status"}
            kept.setdefault("summary", [])
            self.items.append({"at": self.placed, "item": kept})
            if not self.reasoning:  # a summary that came whole, not in deltas
                summary = [
                    str(s.get("text") or "")
                    for s in item.get("summary") or []
                    if isinstance(s, dict)
                ]
                if any(summary):
                    return [self._add_reasoning("\n\n".join(s for s in summary if s))]
            return []
        if kind == "function_call":
            call = self.by_index.get(index) or self.by_index.get(item.get("id"))
            if call is None:
                self._added(index if index is not None else item.get("id"), item)
            elif isinstance(item.get("arguments"), str) and item["arguments"]:
                call.arguments = item["arguments"]  # the whole, which the deltas made up
            self.placed += 1
            return []
        if kind == "message":
            self.placed += 1
            if item.get("id") in self.streamed and item.get("id") is not None:
                return []
            text = "".join(
                str(p.get("text") or "")
                for p in item.get("content") or []
                if isinstance(p, dict) and p.get("type") == "output_text"
            )
            refusal = "".join(
                str(p.get("refusal") or "")
                for p in item.get("content") or []
                if isinstance(p, dict) and p.get("type") == "refusal"
            )
            return self._text(item.get("id"), text or refusal)
        return []

    def _finished(self, response: dict[str, Any]) -> list[TextDelta | ReasoningDelta]:
        out: list[TextDelta | ReasoningDelta] = []
        if not self.text and not self.calls and not self.items:  # one whole response
            for pos, item in enumerate(response.get("output") or []):
                if isinstance(item, dict):
                    self._added(("r", pos), item)
                    out += self._done(("r", pos), item)
        self._usage(response)
        status = response.get("status")
        if status == "failed":
            raise failure(response.get("error"), " (the response failed)")
        if status == "incomplete":
            reason = as_text(_table(response.get("incomplete_details")).get("reason"))
            self.finish_reason = FINISH.get(reason, reason or "length")
        else:
            self.finish_reason = "tool_calls" if self.calls else "stop"
        return out

    def _usage(self, response: dict[str, Any]) -> None:
        usage = response.get("usage")
        if isinstance(usage, dict):
            self.usage = messages_usage(usage)

    def finish(self) -> Reply:
        reply = super().finish()
        if self.items:
            reply.reasoning_items = {"model": self.model, "items": self.items}
        return reply


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class Responses:
    """`POST {base}/responses` with a bearer key, streamed as server-sent events, stateless."""

    conversation = "input"

    def __init__(self, config: ModelConfig):
        self.config = config

    @property
    def url(self) -> str:
        return url(self.config)

    def headers(self) -> dict[str, str]:
        return request_headers(self.config)

    def body(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **extra: Any
    ) -> dict[str, Any]:
        return request_body(self.config, messages, tools, **extra)

    def decoder(self) -> StreamAssembler:
        return ResponsesAssembler(self.config.model)

    def read(self, response: Received, decoder: StreamAssembler) -> Iterator[Event]:
        return read_events(response, decoder)

    def error(self, status: int, body: Any) -> ProviderError:
        return provider_error(status, body)

    def amend(self, body: dict[str, Any], error: ProviderError) -> dict[str, Any] | None:
        return None

    def reply(self, reply: Reply, body: dict[str, Any]) -> Reply:
        return reply
