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


def text(content: str, reasoning: str = "", delay: float = 0.0, pieces: int = 3) -> Step:
    frames = [_chunk({"role": "assistant", "content": ""})]
    if reasoning:
        frames.append(_chunk({"reasoning_content": reasoning}))
    size = max(1, len(content) // pieces + 1)
    frames += [_chunk({"content": content[i : i + size]}) for i in range(0, len(content), size)]
    frames.append(_chunk({}, "stop"))
    frames.append(b"data: " + json.dumps({"choices": [], "usage": USAGE}).encode() + b"\n\n")
    frames.append(b"data: [DONE]\n\n")
    return {"kind": "sse", "frames": frames, "delay": delay}


def calls(*specs: tuple[str, dict[str, Any]], content: str = "") -> Step:
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
    frames.append(_chunk({}, "tool_calls", usage=USAGE))
    frames.append(b"data: [DONE]\n\n")
    return {"kind": "sse", "frames": frames, "delay": 0.0}


def call(name: str, **args: Any) -> Step:
    return calls((name, args))


def status(code: int, body: Any = None, headers: dict[str, str] | None = None) -> Step:
    body = body if body is not None else {"error": {"message": f"fake error {code}"}}
    return {"kind": "status", "code": code, "body": body, "headers": headers or {}}


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


class FakeModel:
    """The server. Use as a context manager; `url` is the base URL ending in /v1."""

    def __init__(self, *script: Step | Callable[[dict[str, Any]], Step]):
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
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

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake.lock:
                    fake.headers.append(dict(self.headers))
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
                    data = json.dumps(step["body"]).encode()
                    self.send_response(step["code"])
                    self.send_header("content-type", "application/json")
                    for k, v in step["headers"].items():
                        self.send_header(k, v)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_response(200)
                self.send_header("content-type", step.get("content_type", "text/event-stream"))
                self.send_header("connection", "close")
                self.end_headers()
                for frame in step["frames"]:
                    if step["delay"]:
                        time.sleep(step["delay"])
                    self.wfile.write(frame)
                    self.wfile.flush()
                self.close_connection = True

        return Handler
