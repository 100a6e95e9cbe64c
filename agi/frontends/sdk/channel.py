"""The two directions of the SDK's NDJSON protocol: lines to stdout (one writer, keys redacted
value by value), control requests agi puts to the SDK (`can_use_tool`, `hook_callback`,
`mcp_message`) waiting for their `control_response`, and the relay's socket through which
agi's hook commands and MCP client reach the SDK's callbacks and in-process servers."""

from __future__ import annotations

import itertools
import json
import os
import socket
import sys
import threading
from pathlib import Path
from typing import Any

from agi.errors import AgiError
from agi.policy.environment import in_use
from agi.policy.redaction import redact_values

RELAY = Path(__file__).with_name("relay.py")


class Closed(AgiError):
    """The SDK went away (stdin ended) before it answered a request."""


class Channel:
    """stdout and the requests waiting for the SDK's answers; used from any thread."""

    def __init__(self, out: Any = None):
        self.out = out if out is not None else sys.stdout
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        self.waiting: dict[str, tuple[threading.Event, list[dict[str, Any]]]] = {}
        self.closed = False

    def send(self, message: dict[str, Any]) -> None:
        line = json.dumps(redact_values(message, in_use()), ensure_ascii=False) + "\n"
        with self.lock:
            try:
                self.out.write(line)
                self.out.flush()
            except (BrokenPipeError, ValueError):
                self.closed = True

    def answer(self, request_id: str, response: dict[str, Any] | None, error: str = "") -> None:
        """A `control_response` to one of the SDK's requests: success, or the error's text."""
        body: dict[str, Any] = {"request_id": request_id}
        if error:
            body.update(subtype="error", error=error)
        else:
            body.update(subtype="success", response=response or {})
        self.send({"type": "control_response", "response": body})

    def request(self, body: dict[str, Any]) -> dict[str, Any]:
        """Put a control request to the SDK and wait for its answer (Closed when stdin ends
        first; an AgiError with the SDK's text when it answers with an error)."""
        request_id = f"agi_{next(self.ids)}"
        done, slot = threading.Event(), list[dict[str, Any]]()
        with self.lock:
            if self.closed:
                raise Closed("the SDK closed stdin")
            self.waiting[request_id] = (done, slot)
        self.send({"type": "control_request", "request_id": request_id, "request": body})
        done.wait()
        with self.lock:
            self.waiting.pop(request_id, None)
        if not slot:
            raise Closed("the SDK closed stdin before it answered")
        response = slot[0]
        if response.get("subtype") == "error":
            raise AgiError(
                f"the SDK answered {body['subtype']} with an error: "
                f"{response.get('error') or 'no reason given'}"
            )
        got = response.get("response")
        return got if isinstance(got, dict) else {}

    def resolve(self, response: dict[str, Any]) -> None:
        """The SDK's `control_response` to one of agi's requests."""
        with self.lock:
            found = self.waiting.get(str(response.get("request_id")))
        if found is not None:
            found[1].append(response)
            found[0].set()

    def close(self) -> None:
        """stdin ended: every request still waiting fails (Closed)."""
        with self.lock:
            self.closed = True
            waiting = list(self.waiting.values())
        for done, _ in waiting:
            done.set()


class Relay:
    """A UNIX socket in the process's private directory: agi's hook commands and MCP servers
    (relay.py) connect to it, and each of their messages becomes a control request."""

    def __init__(self, channel: Channel, directory: Path, mcp_tools: Any = None):
        self.channel = channel
        self.path = directory / "relay.sock"
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(self.path))
        os.chmod(self.path, 0o600)
        self.server.listen(16)
        threading.Thread(target=self.accept, name="agi-sdk-relay", daemon=True).start()

    def command(self, kind: str, name: str) -> list[str]:
        return [sys.executable, "-I", "-S", str(RELAY), str(self.path), kind, name]

    def accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as reader:
            for line in reader:
                try:
                    message = json.loads(line)
                    answer = self.forward(message)
                except (AgiError, ValueError, TypeError) as e:
                    answer = {"error": str(e)}
                try:
                    conn.sendall((json.dumps(answer) + "\n").encode())
                except OSError:
                    return

    def forward(self, message: dict[str, Any]) -> dict[str, Any]:
        if message.get("kind") == "hook":
            payload = message.get("input") or {}
            body = {"subtype": "hook_callback", "callback_id": message.get("id")}
            body.update(input=payload, tool_use_id=payload.get("tool_use_id"))
            return {"output": self.channel.request(body)}
        body = {"subtype": "mcp_message", "server_name": message.get("server")}
        body["message"] = message.get("message")
        return self.channel.request(body)

    def close(self) -> None:
        try:
            self.server.close()
        except OSError:
            pass
