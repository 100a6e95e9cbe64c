"""An ACP client for the tests: the `acp` library's own client connection to `agi --acp` running
as a subprocess, recording what it receives and checking every message agi sends against the
official v1 JSON schema (tests/fixtures/acp/schema-v1.json: schema/v1/schema.json of
agentclientprotocol/agent-client-protocol at tag schema-v1.19.0, the schema the installed
library was generated from)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

acp = pytest.importorskip(
    "acp", reason="agent-client-protocol is not installed (pip install -e '.[test]')"
)
jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed")

SCHEMA_FILE = Path(__file__).parent / "fixtures" / "acp" / "schema-v1.json"
RESULTS = {  # the request agi answers -> the type of its result
    "initialize": "InitializeResponse",
    "authenticate": "AuthenticateResponse",
    "session/new": "NewSessionResponse",
    "session/load": "LoadSessionResponse",
    "session/list": "ListSessionsResponse",
    "session/prompt": "PromptResponse",
    "session/set_mode": "SetSessionModeResponse",
    "session/set_config_option": "SetSessionConfigOptionResponse",
}
PARAMS = {  # what agi sends -> the type of its params
    "session/update": "SessionNotification",
    "session/request_permission": "RequestPermissionRequest",
    "fs/read_text_file": "ReadTextFileRequest",
    "fs/write_text_file": "WriteTextFileRequest",
}


class Schema:
    """Checks each message agi sends: the whole message against the schema's `Agent`
    messages, and its params or result against the type the method names."""

    def __init__(self) -> None:
        from jsonschema import Draft202012Validator

        data = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
        self.defs = data["$defs"]
        agent = next(a for a in data["anyOf"] if a.get("title") == "Agent")
        self.validators: dict[str, Any] = {
            "message": Draft202012Validator({**agent, "$defs": self.defs})
        }
        self.asked: dict[Any, str] = {}  # ids of the client's requests -> their methods
        self.checked = 0
        self.errors: list[str] = []

    def validator(self, name: str) -> Any:
        from jsonschema import Draft202012Validator

        if name not in self.validators:
            self.validators[name] = Draft202012Validator(
                {"$ref": f"#/$defs/{name}", "$defs": self.defs}
            )
        return self.validators[name]

    def check(self, message: dict[str, Any]) -> None:
        self._one("message", message, message)
        method = message.get("method")
        if method is not None:
            name = PARAMS.get(method)
            if name is None:
                self.errors.append(f"agi sent an unexpected method {method!r}")
                return
            self._one(name, message.get("params"), message)
        elif "error" in message:
            self._one("Error", message["error"], message)
        else:
            asked = self.asked.get(message.get("id"))
            name = RESULTS.get(asked or "")
            if name is None:
                self.errors.append(f"a response to an unknown request: {message}")
                return
            self._one(name, message.get("result"), message)

    def _one(self, name: str, value: Any, message: dict[str, Any]) -> None:
        found = sorted(self.validator(name).iter_errors(value), key=str)
        self.checked += 1
        for e in found[:3]:
            self.errors.append(f"{name}: {e.message} in {json.dumps(message)[:400]}")


class Recorder:
    """The client's side: what it was told, and its answers to agi's requests."""

    def __init__(self, files: dict[str, str] | None = None, answer: Any = "allow_once"):
        self.updates: list[tuple[str, dict[str, Any], float]] = []  # (session, update, time)
        self.asked: list[dict[str, Any]] = []  # permission requests, as sent
        self.files = files  # the editor's buffers (None: no fs capability)
        self.reads: list[str] = []
        self.writes: list[tuple[str, str]] = []
        self.answer = answer  # an option id, None (never answer), or a function of the request

    async def request_permission(
        self, options: Any, session_id: str, tool_call: Any, **_: Any
    ) -> Any:
        request = {
            "sessionId": session_id,
            "toolCall": tool_call.model_dump(by_alias=True, exclude_none=True),
        }
        request["options"] = [o.model_dump(by_alias=True) for o in options]
        request["time"] = time.monotonic()
        self.asked.append(request)
        answer = self.answer(request) if callable(self.answer) else self.answer
        if answer is None:
            await asyncio.Event().wait()  # a client that never answers
        if answer == "cancelled":
            return acp.schema.RequestPermissionResponse(
                outcome=acp.schema.DeniedOutcome(outcome="cancelled")
            )
        outcome = acp.schema.AllowedOutcome(outcome="selected", option_id=answer)
        return acp.schema.RequestPermissionResponse(outcome=outcome)

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(
            (session_id, update.model_dump(by_alias=True, exclude_none=True), time.monotonic())
        )

    async def read_text_file(self, path: str, session_id: str, **_: Any) -> Any:
        self.reads.append(path)
        if self.files is None or path not in self.files:
            raise acp.RequestError(-32002, f"no such file: {path}")
        return acp.schema.ReadTextFileResponse(content=self.files[path])

    async def write_text_file(self, content: str, path: str, session_id: str, **_: Any) -> Any:
        self.writes.append((path, content))
        if self.files is not None:
            self.files[path] = content
        return acp.schema.WriteTextFileResponse()

    def on_connect(self, conn: Any) -> None:
        pass

    def of(self, session: str, kind: str | None = None) -> list[dict[str, Any]]:
        return [
            u
            for s, u, _ in self.updates
            if s == session and (kind is None or u["sessionUpdate"] == kind)
        ]

    def text(self, session: str, kind: str = "agent_message_chunk") -> str:
        return "".join(u["content"]["text"] for u in self.of(session, kind))


class Agent:
    """`agi --acp` in a subprocess and the library's client connection to it."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, client: Recorder):
        self.argv, self.env, self.cwd, self.client = argv, env, cwd, client
        self.schema = Schema()
        self.conn: Any = None
        self.process: Any = None
        self.stderr = b""

    async def __aenter__(self) -> Agent:
        from acp.client.connection import ClientSideConnection

        self.process = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
            cwd=str(self.cwd),
            limit=50 * 1024 * 1024,
        )
        self.conn = ClientSideConnection(
            self.client, self.process.stdin, self.process.stdout, observers=[self._observe]
        )
        return self

    def _observe(self, event: Any) -> None:
        message = event.message
        if event.direction.value == "incoming":
            self.schema.check(message)
        elif "method" in message and "id" in message:
            self.schema.asked[message["id"]] = message["method"]

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self, timeout: float = 30) -> int:
        """Close stdin (agi exits 0), wait, and return the exit code."""
        if self.process.returncode is None:
            try:
                self.process.stdin.close()
            except Exception:
                pass
            try:
                self.stderr = await asyncio.wait_for(self.process.stderr.read(), timeout)
                await asyncio.wait_for(self.process.wait(), timeout)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        await self.conn.close()
        return self.process.returncode

    async def start(self, fs: bool = False, cwd: Path | None = None, **more: Any) -> str:
        """initialize and session/new; the new session's id."""
        caps = {"fs": {"readTextFile": fs, "writeTextFile": fs}}
        await self.conn.initialize(
            protocol_version=1,
            client_capabilities=acp.schema.ClientCapabilities.model_validate(caps),
        )
        new = await self.conn.new_session(
            cwd=str(cwd or self.cwd), mcp_servers=more.get("mcp_servers", [])
        )
        return new.session_id

    async def prompt(self, session: str, text: str) -> Any:
        return await self.conn.prompt(session_id=session, prompt=[acp.text_block(text)])

    def assert_valid(self) -> None:
        """Every message agi sent matched the schema, and nothing crashed on stderr."""
        assert not self.schema.errors, "\n".join(self.schema.errors[:10])
        assert self.schema.checked > 0
        assert b"Traceback" not in self.stderr, self.stderr.decode(errors="replace")


async def wait_for(check: Callable[[], Any], timeout: float = 30) -> Any:
    """Poll until `check()` is truthy (a hang guard, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        await asyncio.sleep(0.02)
    raise AssertionError("timed out waiting")


def agi_argv(agi: str, *more: str) -> list[str]:
    return [agi, "--acp", *more]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


__all__ = ["Agent", "Recorder", "agi_argv", "alive", "run", "sys", "wait_for"]
