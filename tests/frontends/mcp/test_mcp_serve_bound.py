"""`agi --mcp-serve` keeps the operator's choices (docs: mcp-server, security): the key is redacted
from `structuredContent` value by value as from the text, a call's `model` may only use a
provider the operator configured (the key goes to no other endpoint), relative path rules stay
anchored where the server resolved them whatever `cwd` a call names, and the server's permission
mode binds every call. The real executable, the `mcp` SDK's client, the scripted model."""

from __future__ import annotations

import json
import socket
import threading
import uuid
from pathlib import Path
from typing import Any

from test_mcp_serve import connect, one_line, run

from fakeserver import FakeModel, call, text


def key_env(env: dict[str, str], fake: FakeModel, key: str) -> dict[str, str]:
    return {**env, "AGI_BASE_URL": fake.url, "AGI_MODEL": "fake-model", "AGI_API_KEY": key}


def test_structured_content_is_redacted_value_by_value(env, tmp_path):
    key = 'sk-q"uo\\te-' + uuid.uuid4().hex  # JSON escapes `"` and `\`: the text would hide it
    nested = {"name": key, "notes": [f"see {key} here", {"deep": key}]}
    script = [text(f"the key is {key}."), text(json.dumps(nested))]
    with FakeModel(*script) as fake:
        found: dict[str, Any] = {}

        async def body() -> None:
            async with connect(key_env(env, fake, key), tmp_path) as s:
                found["plain"] = await s.call_tool("agi", {"prompt": "what key?"})
                found["json"] = await s.call_tool(
                    "agi",
                    {
                        "prompt": "as JSON",
                        "schema": {
                            "type": "object",
                            "properties": {"name": {"type": "string"}, "notes": {}},
                        },
                    },
                )

        run(body)
    plain, shaped = found["plain"], found["json"]
    assert plain.structured_content["answer"] == "the key is [REDACTED]."
    assert plain.content[0].text == "the key is [REDACTED]."
    assert shaped.structured_content["answer"] == {
        "name": "[REDACTED]",
        "notes": ["see [REDACTED] here", {"deep": "[REDACTED]"}],
    }
    assert key not in shaped.content[0].text
    assert json.dumps(key)[1:-1] not in shaped.content[0].text  # not even in its escaped form
    assert json.loads(shaped.content[0].text) == shaped.structured_content["answer"]


class Listener:
    """Whatever listens on a port: it records the head of each request it gets (headers)."""

    def __init__(self, port: int):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(8)
        self.heads: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    self.heads.append(conn.recv(65536))
                    conn.sendall(b"HTTP/1.1 500 no\r\ncontent-length: 0\r\n\r\n")
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


def listener(port: int) -> Listener | None:
    try:
        return Listener(port)
    except OSError:  # taken (a real Ollama here): the refusal below is still checked
        return None


def test_a_call_model_may_only_use_providers_the_operator_configured(env, tmp_path):
    """The operator serves openai at its own URL with AGI_API_KEY; `ollama:x` would send that key
    to whatever listens on port 11434 of this machine, `litellm:x` to port 4000."""
    key = "sk-operator-" + uuid.uuid4().hex
    ears = [listener(11434), listener(4000)]
    try:
        with FakeModel(text("fine")) as fake:
            server_env = {
                **env,
                "OPENAI_BASE_URL": fake.url,
                "AGI_MODEL": "openai:fake-model",
                "AGI_API_KEY": key,
            }
            found: dict[str, Any] = {}

            async def body() -> None:
                async with connect(server_env, tmp_path) as s:
                    for spec in ("ollama:x", "litellm:x", "gemini:x", "fake-model"):
                        found[spec] = await s.call_tool("agi", {"prompt": "hi", "model": spec})

            run(body)
            assert len(fake.requests) == 1  # the operator's own provider answered
            assert fake.headers[0]["Authorization"] == f"Bearer {key}"
    finally:
        for ear in ears:
            if ear is not None:
                ear.close()
    assert found["fake-model"].structured_content["answer"] == "fine"
    for spec in ("ollama:x", "litellm:x", "gemini:x"):
        line = one_line(found[spec])
        assert line.startswith("agi: model: "), line
        assert spec.split(":")[0] in line, line
        assert found[spec].structured_content["exit"] == 2
    for ear in ears:
        if ear is not None:
            assert not any(key.encode() in head for head in ear.heads)
            assert ear.heads == []


def test_a_provider_the_operator_configured_is_allowed(env, tmp_path):
    """A provider of the config file's (`[providers.local]`) is the operator's: calls may use it."""
    with FakeModel(text("from local")) as other, FakeModel(text("main")) as fake:
        Path(env["AGI_CONFIG"]).write_text(f'[providers.local]\nbase_url = "{other.url}"\n')
        server_env = {**env, "OPENAI_BASE_URL": fake.url, "AGI_MODEL": "openai:fake-model"}
        found: dict[str, Any] = {}

        async def body() -> None:
            async with connect(server_env, tmp_path) as s:
                found["local"] = await s.call_tool("agi", {"prompt": "hi", "model": "local:m"})

        run(body)
    assert found["local"].structured_content["answer"] == "from local", found["local"]
    assert other.requests[0]["model"] == "m"


def test_relative_path_rules_stay_anchored_where_the_server_resolved_them(env, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "secrets").mkdir()
    target = tmp_path / "secrets" / "key.txt"
    script = [
        call("Write", file_path="../secrets/key.txt", content="pwned"),
        text("tried"),
        call("Write", file_path=str(target), content="pwned"),
        text("tried again"),
    ]
    with FakeModel(*script) as fake:

        async def body() -> None:
            options = ("--deny", "Write(secrets/**)")
            async with connect(
                {**env, "AGI_BASE_URL": fake.url, "AGI_MODEL": "fake-model"}, tmp_path, *options
            ) as s:
                await s.call_tool("agi", {"prompt": "write it", "cwd": "src"})
                await s.call_tool("agi", {"prompt": "again", "cwd": str(tmp_path / "src")})

        run(body)
        results = [
            m["content"]
            for r in (fake.requests[1], fake.requests[3])
            for m in r["messages"]
            if m["role"] == "tool"
        ]
    assert not target.exists()
    assert len(results) == 2 and all("denied by permission rule" in r for r in results), results


def test_the_servers_permission_mode_binds_every_call(env, tmp_path):
    marker = tmp_path / "ran"
    with FakeModel(call("Bash", command=f"touch {marker}"), text("done")) as fake:
        found: dict[str, Any] = {}

        async def body() -> None:
            async with connect(
                {**env, "AGI_BASE_URL": fake.url, "AGI_MODEL": "fake-model"},
                tmp_path,
                "--permission-mode",
                "dontAsk",
            ) as s:
                found["r"] = await s.call_tool("agi", {"prompt": "touch", "cwd": str(tmp_path)})
                found["mode"] = await s.call_tool(
                    "agi", {"prompt": "x", "permission_mode": "default"}
                )

        run(body)
        (result,) = [m["content"] for m in fake.requests[1]["messages"] if m["role"] == "tool"]
    assert not marker.exists()
    assert "permission mode dontAsk" in result, result
    assert "cannot change the permission rules" in one_line(found["mode"])


def test_the_key_leaves_the_servers_environment_block(env, tmp_path):
    """The server keeps serving calls with the key it read, yet its own /proc/PID/environ (the
    block it started with, which root reads) no longer holds it (docs: security)."""
    from test_environ_block import SWEEP

    key = "sk-mcpblock-" + uuid.uuid4().hex
    half = len(key) // 2
    command = f"K={key[:half]}; K=${{K}}{key[half:]}; {SWEEP}"
    with FakeModel(call("Bash", command=command), text("swept"), text("again")) as fake:
        found: dict[str, Any] = {}

        async def body() -> None:
            async with connect(key_env(env, fake, key) | {"PLAIN": "seen"}, tmp_path) as s:
                found["first"] = await s.call_tool("agi", {"prompt": "sweep"})
                found["second"] = await s.call_tool("agi", {"prompt": "again"})

        run(body)
        (result,) = [m["content"] for m in fake.requests[1]["messages"] if m["role"] == "tool"]
        assert all(h["Authorization"] == f"Bearer {key}" for h in fake.headers)
    assert found["second"].structured_content["answer"] == "again"
    assert "swept" in result and "PLAIN=seen" in result, result
    assert "hit " not in result, result
