"""`agi --acp` answers a first `session/new` before the `acp` library is loaded (docs: acp): the
reply is the one the library writes for a later session/new (but for its sessionId), every
message is valid against the v1 schema, the session's commands are told, and its prompt runs
through the library. A session/new agi does not answer early (a relative cwd) is the library's
to refuse, as before. The real executable, raw JSON-RPC lines; hang guards only."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from acp_client import Schema, agi_argv

from conftest import AGI
from fakeserver import FakeModel, text

pytestmark = pytest.mark.timeout(120)
INITIALIZE = {"protocolVersion": 1, "clientCapabilities": {}}


class Lines:
    """agi --acp over pipes: requests sent, every message read checked against the schema."""

    def __init__(self, env: dict[str, str], cwd: Path, url: str):
        self.schema = Schema()
        self.process = subprocess.Popen(
            agi_argv(AGI, "-v"),
            env={**env, "AGI_BASE_URL": url, "AGI_MODEL": "fake-model"},
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.number = 0
        self.seen: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any]) -> int:
        self.number += 1
        self.schema.asked[self.number] = method
        line = {"jsonrpc": "2.0", "id": self.number, "method": method, "params": params}
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(line).encode() + b"\n")
        self.process.stdin.flush()
        return self.number

    def reply(self, number: int) -> dict[str, Any]:
        """The reply to request `number`; the messages before it are kept in `seen`."""
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            assert line, self.end()
            message = json.loads(line)
            self.schema.check(message)
            if message.get("id") == number and "method" not in message:
                return message
            self.seen.append(message)

    def end(self) -> str:
        assert self.process.stdin is not None and self.process.stderr is not None
        self.process.stdin.close()
        try:
            assert self.process.wait(60) == 0
        finally:
            if self.process.poll() is None:
                self.process.kill()
        return self.process.stderr.read().decode("utf-8", "replace")


def test_the_first_session_is_answered_as_the_library_answers_and_serves(env, tmp_path):
    with FakeModel(text("early and served")) as server:
        agi = Lines(env, tmp_path, server.url)
        agi.reply(agi.send("initialize", INITIALIZE))
        early = agi.reply(agi.send("session/new", {"cwd": str(tmp_path), "mcpServers": []}))
        agi.reply(agi.send("session/list", {}))  # the library answers from here on
        later = agi.reply(agi.send("session/new", {"cwd": str(tmp_path), "mcpServers": []}))
        first, second = early["result"], later["result"]
        assert first["sessionId"] != second["sessionId"]
        assert Path(first["sessionId"]).is_dir()
        assert {**first, "sessionId": ""} == {**second, "sessionId": ""}
        prompt = [{"type": "text", "text": "hello"}]
        answer = agi.reply(
            agi.send("session/prompt", {"sessionId": first["sessionId"], "prompt": prompt})
        )
        assert answer["result"] == {"stopReason": "end_turn"}
        told = [m["params"] for m in agi.seen if m.get("method") == "session/update"]
        ours = [p["update"] for p in told if p["sessionId"] == first["sessionId"]]
        kinds = [u["sessionUpdate"] for u in ours]
        assert "available_commands_update" in kinds
        said = "".join(
            u["content"]["text"] for u in ours if u["sessionUpdate"] == "agent_message_chunk"
        )
        assert said == "early and served"
        stderr = agi.end()
        assert agi.schema.errors == [], agi.schema.errors
        assert "Traceback" not in stderr
        early_log = f"session {first['sessionId']} in {tmp_path} (before the library loaded)"
        assert early_log in stderr  # answered by agi itself, not by the library
        assert f"session {second['sessionId']} in {tmp_path}\n" in stderr


def test_a_first_session_new_agi_does_not_answer_early_is_the_librarys(env, tmp_path):
    agi = Lines(env, tmp_path, "http://127.0.0.1:9/v1")
    agi.reply(agi.send("initialize", INITIALIZE))
    refused = agi.reply(agi.send("session/new", {"cwd": "relative/dir", "mcpServers": []}))
    assert refused["error"]["code"] == -32602
    assert "absolute path" in refused["error"]["message"]
    served = agi.reply(agi.send("session/new", {"cwd": str(tmp_path), "mcpServers": []}))
    assert Path(served["result"]["sessionId"]).is_dir()
    stderr = agi.end()
    assert agi.schema.errors == [], agi.schema.errors
    assert "before the library loaded" not in stderr
