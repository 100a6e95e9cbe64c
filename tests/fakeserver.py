"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 that records its requests.

Each request takes the next step of the script (a step may be a function of the request body);
when the script runs out, the last step repeats. Steps:

    text("answer")                      a streamed text reply (SSE, several chunks, usage, [DONE])
    call("Bash", command="ls")          a streamed reply with one tool call
    calls(("Bash", {...}), ...)         several tool calls in one reply
    status(500, {"error": ...})         an HTTP error
    hang()                              accept the request and never answer
    reset(raw_bytes) / reset(frames=[…])  write bytes (or a 200 and SSE frames), then send RST
    keepalive()                         a 200 event stream of `: keep-alive` comments, forever
    raw(b"...", content_type)           bytes as they are
    completion("a + b") / infill(...)   fill-in-the-middle replies: /v1/completions, llama.cpp
    fim("a + b")                        whichever of those (or text()) the request's body asks for
"""

from __future__ import annotations

import itertools
import json
import socket
import struct
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Step = dict[str, Any]
_ids = itertools.count(1)


def _chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> bytes:
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode() + b"\n\n"


USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def text(
    content: str, reasoning: str = "", delay: float = 0.0, pieces: int = 3, usage: Any = USAGE
) -> Step:
    """`usage`: the object of the trailing usage chunk (any provider's shape); None: no chunk."""
    frames = [_chunk({"role": "assistant", "content": ""})]
    if reasoning:
        frames.append(_chunk({"reasoning_content": reasoning}))
    size = max(1, len(content) // pieces + 1)
    frames += [_chunk({"content": content[i : i + size]}) for i in range(0, len(content), size)]
    frames.append(_chunk({}, "stop"))
    if usage is not None:
        frames.append(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n")
    frames.append(b"data: [DONE]\n\n")
    return {"kind": "sse", "frames": frames, "delay": delay}


def calls(*specs: tuple[str, dict[str, Any]], content: str = "", usage: Any = USAGE) -> Step:
    frames = [_chunk({"role": "assistant", "content": content or None})]
    for index, (name, args) in enumerate(specs):
        call_id = f"call_{next(_ids)}"
        arguments = json.dumps(args)
        half = len(arguments) // 2
        frames.append(
            _chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        for part in (arguments[:half], arguments[half:]):
            frames.append(
                _chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
            )
    frames.append(_chunk({}, "tool_calls", usage=usage))
    frames.append(b"data: [DONE]\n\n")
    return {"kind": "sse", "frames": frames, "delay": 0.0}


def call(name: str, **args: Any) -> Step:
    return calls((name, args))


def status(code: int, body: Any = None, headers: dict[str, str] | None = None) -> Step:
    body = body if body is not None else {"error": {"message": f"fake error {code}"}}
    return {"kind": "status", "code": code, "body": body, "headers": headers or {}}


def status_raw(code: int, data: bytes | str, content_type: str = "text/plain") -> Step:
    """An HTTP error whose body is sent as it is (an HTML page, a traceback, plain text)."""
    data = data.encode() if isinstance(data, str) else data
    return {"kind": "status", "code": code, "data": data, "content_type": content_type}


def hang() -> Step:
    return {"kind": "hang"}


def reset(raw_bytes: bytes = b"", frames: list[bytes] | None = None) -> Step:
    """Write `raw_bytes` as they are (e.g. half the headers), or a 200 with `frames`, then RST."""
    return {"kind": "reset", "raw": raw_bytes, "frames": frames}


def keepalive(interval: float = 0.2) -> Step:
    """A 200 event stream that sends only `: keep-alive` comments, forever."""
    return {"kind": "keepalive", "interval": interval}


def raw(data: bytes, content_type: str = "text/event-stream", delay: float = 0.0) -> Step:
    return {"kind": "sse", "frames": [data], "delay": delay, "content_type": content_type}


def with_headers(step: Step, **headers: str) -> Step:
    """A step whose 200 response carries extra headers (`x_litellm_response_cost="0.01"`)."""
    return {**step, "headers": {k.replace("_", "-"): v for k, v in headers.items()}}


# Fill-in-the-middle steps (inline suggestions). The script answers every POST path, and the
# request is recorded like any other (`requests`, `paths`): `POST /v1/completions` (OpenAI's
# completions with `prompt` and `suffix`: Ollama, DeepSeek's beta) streams `choices[].text`;
# llama.cpp's `POST /infill` streams `{"content", "stop"}` objects and no [DONE]; Mistral's
# `POST /v1/fim/completions` streams chat chunks, as text() does.


def _pieces(content: str, pieces: int) -> list[str]:
    size = max(1, len(content) // pieces + 1)
    return [content[i : i + size] for i in range(0, len(content), size)]


def completion(content: str, delay: float = 0.0, pieces: int = 3, usage: Any = USAGE) -> Step:
    """A streamed `/v1/completions` reply."""

    def frame(text: str, finish: str | None = None, **more: Any) -> bytes:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        body = {"id": "cmpl-fake", "object": "text_completion", "choices": [choice], **more}
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    frames = [frame(piece) for piece in _pieces(content, pieces)]
    frames.append(frame("", "stop", usage=usage))
    frames.append(b"data: [DONE]\n\n")
    return {"kind": "sse", "frames": frames, "delay": delay}


def infill(content: str, delay: float = 0.0, pieces: int = 3) -> Step:
    """A streamed llama.cpp `/infill` reply."""

    def frame(text: str, stop: bool = False) -> bytes:
        body: dict[str, Any] = {"content": text, "stop": stop, "id_slot": 0, "index": 0}
        if stop:
            body.update(tokens_predicted=5, tokens_evaluated=10, stop_type="eos")
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    frames = [frame(piece) for piece in _pieces(content, pieces)] + [frame("", stop=True)]
    return {"kind": "sse", "frames": frames, "delay": delay}


def fim(content: str, delay: float = 0.0, pieces: int = 3) -> Callable[[dict[str, Any]], Step]:
    """A reply in the shape the request asks for: infill, completion, or chat (text())."""

    def answer(body: dict[str, Any]) -> Step:
        if "input_prefix" in body:
            return infill(content, delay, pieces)
        if "messages" in body:
            return text(content, delay=delay, pieces=pieces)
        return completion(content, delay, pieces)

    return answer


# Anthropic Messages API steps (`POST /v1/messages`): SSE events with `event:` lines, as the API
# sends them. `FakeModel.paths` records the path of each request.

A_USAGE = {"input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def _event(data: dict[str, Any]) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


def anthropic_events(events: list[dict[str, Any]], delay: float = 0.0) -> Step:
    """Messages API events as they are (dicts with a `type`)."""
    return {"kind": "sse", "frames": [_event(e) for e in events], "delay": delay}


def _a_start(usage: dict[str, Any] | None) -> dict[str, Any]:
    message = {
        "id": f"msg_fake{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "model": "claude-fake",
        "content": [],
        "stop_reason": None,
        "usage": {**A_USAGE, "output_tokens": 1, **(usage or {})},
    }
    return {"type": "message_start", "message": message}


def _a_end(reason: str, output: int = 5) -> list[dict[str, Any]]:
    return [
        {
            "type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": None},
            "usage": {"output_tokens": output},
        },
        {"type": "message_stop"},
    ]


def _a_thinking(index: int, thinking: str, signature: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "thinking_delta", "thinking": thinking},
        },
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "signature_delta", "signature": signature},
        },
        {"type": "content_block_stop", "index": index},
    ]


def anthropic_text(
    content: str,
    thinking: str = "",
    signature: str = "sig-fake",
    usage: dict[str, Any] | None = None,
    delay: float = 0.0,
    reason: str = "end_turn",
) -> Step:
    """A streamed Messages API text reply (after a signed thinking block when `thinking`)."""
    events = [_a_start(usage), {"type": "ping"}]
    index = 0
    if thinking:
        events += _a_thinking(0, thinking, signature)
        index = 1
    events.append(
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "text", "text": ""},
        }
    )
    half = len(content) // 2
    for piece in (content[:half], content[half:]):
        if piece:
            events.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": piece},
                }
            )
    events.append({"type": "content_block_stop", "index": index})
    return anthropic_events(events + _a_end(reason), delay)


def anthropic_calls(
    *specs: tuple[str, dict[str, Any]],
    text: str = "",
    thinking: str = "",
    signature: str = "sig-fake",
    usage: dict[str, Any] | None = None,
) -> Step:
    """A streamed Messages API reply with tool_use blocks, each input split across deltas."""
    events = [_a_start(usage)]
    index = 0
    if thinking:
        events += _a_thinking(index, thinking, signature)
        index += 1
    if text:
        events += [
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            },
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": text},
            },
            {"type": "content_block_stop", "index": index},
        ]
        index += 1
    for name, args in specs:
        arguments = json.dumps(args)
        half = len(arguments) // 2
        events.append(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {
                    "type": "tool_use",
                    "id": f"toolu_{next(_ids):04d}",
                    "name": name,
                    "input": {},
                },
            }
        )
        for part in ("", arguments[:half], arguments[half:]):
            events.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": part},
                }
            )
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    return anthropic_events(events + _a_end("tool_use"))


def anthropic_call(name: str, **args: Any) -> Step:
    return anthropic_calls((name, args))


# Ollama's native chat API (`POST /api/chat`, docs/api.md "Generate a chat completion"): one
# JSON object a line (application/x-ndjson), the last with `done: true`, `done_reason` and the
# counts; tool calls come whole, their arguments as objects.


def ollama_chat(
    content: str = "",
    thinking: str = "",
    tool_calls: list[tuple[str, dict[str, Any]]] | None = None,
    prompt_eval_count: int | None = 26,
    eval_count: int = 10,
    done_reason: str = "stop",
    pieces: int = 3,
) -> Step:
    def line(message: dict[str, Any], **more: Any) -> bytes:
        body = {"model": "fake", "created_at": "2025-07-07T20:22:19.184789Z"}
        body |= {"message": {"role": "assistant", "content": "", **message}, "done": False}
        return json.dumps({**body, **more}).encode() + b"\n"

    frames = [line({"thinking": piece}) for piece in _pieces(thinking, pieces)] if thinking else []
    frames += [line({"content": piece}) for piece in _pieces(content, pieces)] if content else []
    if tool_calls:
        wire = [{"function": {"name": n, "arguments": a}} for n, a in tool_calls]
        frames.append(line({"tool_calls": wire}))
    counts = {"total_duration": 4883583458, "load_duration": 1334875, "eval_count": eval_count}
    if prompt_eval_count is not None:
        counts["prompt_eval_count"] = prompt_eval_count
    frames.append(line({}, done=True, done_reason=done_reason, **counts))
    return {"kind": "sse", "frames": frames, "delay": 0.0, "content_type": "application/x-ndjson"}


class Server(ThreadingHTTPServer):
    # 50 clients connecting at once on a busy machine overflow the default backlog of 5
    request_queue_size = 128


class FakeModel:
    """The server. Use as a context manager; `url` is the base URL ending in /v1."""

    def __init__(self, *script: Step | Callable[[dict[str, Any]], Step]):
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []  # the path of each request (/v1/messages, ...)
        self.routes: dict[tuple[str, str], Step] = {}  # fixed answers besides the script: route()
        self.routed: list[tuple[str, str, Any]] = []  # (method, path, body) of each routed request
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.server = Server(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    def route(self, method: str, path: str, body: Any, code: int = 200) -> FakeModel:
        """Answer `method path` (e.g. GET /v1/models, GET /props, POST /api/show) with a fixed
        JSON body instead of a step of the script; such requests go to `routed`."""
        self.routes[(method, path)] = status(code, body)
        return self

    def routed_step(self, method: str, path: str, body: Any) -> Step | None:
        with self.lock:
            step = self.routes.get((method, path.split("?")[0]))
            if step is not None or method == "GET":
                self.routed.append((method, path, body))
        return step if step is not None or method == "POST" else status(404, {"error": "no route"})

    def next_step(self, body: dict[str, Any]) -> Step:
        with self.lock:
            self.requests.append(body)
            n = len(self.requests) - 1
            step = self.script[min(n, len(self.script) - 1)] if self.script else text("ok")
        return step(body) if callable(step) else step

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                step = fake.routed_step("GET", self.path, None)
                if step is not None:
                    self.play(step)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                routed = fake.routed_step("POST", self.path, body)
                if routed is not None:
                    self.play(routed)
                    return
                with fake.lock:
                    fake.headers.append(dict(self.headers))
                    fake.paths.append(self.path)
                step = fake.next_step(body)
                try:
                    self.play(step)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def play(self, step: Step) -> None:
                if step["kind"] == "hang":
                    fake.stopping.wait(120)
                    return
                if step["kind"] == "reset":
                    if step["frames"] is not None:
                        self.send_response(200)
                        self.send_header("content-type", "text/event-stream")
                        self.end_headers()
                        for frame in step["frames"]:
                            self.wfile.write(frame)
                    else:
                        self.wfile.write(step["raw"])
                    self.wfile.flush()
                    time.sleep(0.05)
                    linger = struct.pack("ii", 1, 0)  # close with RST, not FIN
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                    self.connection.close()
                    self.close_connection = True
                    return
                if step["kind"] == "keepalive":
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.end_headers()
                    while not fake.stopping.wait(step["interval"]):
                        self.wfile.write(b": keep-alive\n\n")
                        self.wfile.flush()
                    return
                if step["kind"] == "status":
                    data = step.get("data") or json.dumps(step["body"]).encode()
                    self.send_response(step["code"])
                    self.send_header("content-type", step.get("content_type", "application/json"))
                    for k, v in step.get("headers", {}).items():
                        self.send_header(k, v)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_response(200)
                self.send_header("content-type", step.get("content_type", "text/event-stream"))
                for k, v in step.get("headers", {}).items():
                    self.send_header(k, v)
                self.send_header("connection", "close")
                self.end_headers()
                for frame in step["frames"]:
                    if step["delay"]:
                        time.sleep(step["delay"])
                    self.wfile.write(frame)
                    self.wfile.flush()
                self.close_connection = True

        return Handler
