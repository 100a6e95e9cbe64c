"""`agi --mcp-serve` against docs: mcp-server and issue 28, point by point, where
tests/frontends/mcp/test_mcp_serve.py leaves a point unproven: the server's options as the calls'
defaults, `exit_code` criteria, a call's `timeout` and `max_cost` as its own, every result valid
under the tool's `outputSchema` (exit 5 included), a cancelled call's model request closed, the
model connection shared by calls, a call's `cwd` in its hooks, and `-v`. Through the SDK's client
over stdio; time limits are hang guards only."""

from __future__ import annotations

import importlib.util
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from test_mcp_serve import connect, model_env, one_line, run

from fakeserver import FakeModel, call, hang, text

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mcp") is None, reason="the mcp package is not installed"
)


def priced(tmp_path: Path) -> None:
    """A call of the fake (10 input, 5 output tokens) costs $0.015."""
    (tmp_path / "config.toml").write_text('[prices."fake-model"]\ninput = 1000\noutput = 1000\n')


def test_the_server_options_are_every_calls_defaults(env, tmp_path):
    """A call that leaves `schema`, `sys` and `exit_code` out gets the server's; one that gives
    them replaces them (`exit_code: false` turns the server's judge off)."""
    terse = tmp_path / "terse.md"
    terse.write_text("Be terse.")
    script = [
        text("Ann."),
        text('{"name": "Ann"}'),  # the server's schema's ghost exchange
        text(json.dumps({"success": True, "reason": "named"})),  # the server's judge
        text("Bo."),
        text('{"age": 4}'),  # the call's own schema
    ]
    options = ("--schema", "name: str", "--sys", str(terse), "--exit-code")
    with FakeModel(*script) as fake:
        found: dict[str, Any] = {}

        async def body() -> None:
            async with connect(model_env(env, fake), tmp_path, *options) as s:
                found["default"] = await s.call_tool("agi", {"prompt": "who?"})
                found["own"] = await s.call_tool(
                    "agi", {"prompt": "age?", "schema": "age: int", "exit_code": False}
                )

        run(body)
        assert fake.requests[0]["messages"][0] == {"role": "system", "content": "Be terse."}
        assert len(fake.requests) == 5  # no judge for the second call
    default, own = found["default"].structured_content, found["own"].structured_content
    assert default["answer"] == {"name": "Ann"} and default["exit"] == 0
    assert default["verdict"] == {"success": True, "reason": "named"}
    assert own["answer"] == {"age": 4} and "verdict" not in own


def test_exit_code_criteria_reach_the_judge(env, tmp_path):
    verdict = text(json.dumps({"success": True, "reason": "all three named"}))
    with FakeModel(text("red, green, blue"), verdict) as fake:
        found: dict[str, Any] = {}

        async def body() -> None:
            async with connect(model_env(env, fake), tmp_path) as s:
                found["r"] = await s.call_tool(
                    "agi", {"prompt": "colours?", "exit_code": "names exactly three colours"}
                )

        run(body)
        assert "names exactly three colours" in json.dumps(fake.requests[1]["messages"])
    r = found["r"]
    assert not r.is_error and r.structured_content["exit"] == 0
    assert r.structured_content["verdict"]["success"] is True


def test_a_calls_timeout_ends_its_run_and_keeps_the_session(env, tmp_path):
    with FakeModel(hang(), text("later")) as fake:
        found: dict[str, Any] = {}

        async def body() -> None:
            session = str(tmp_path / "conv")
            async with connect(model_env(env, fake), tmp_path, "--timeout", "60") as s:
                found["slow"] = await s.call_tool(
                    "agi", {"prompt": "wait", "session": session, "timeout": 1}
                )
                found["next"] = await s.call_tool("agi", {"prompt": "again", "session": session})

        run(body)
    slow = found["slow"]
    assert "time limit reached" in one_line(slow) and slow.structured_content["exit"] == 4
    assert slow.structured_content["session"] == str(tmp_path / "conv")
    assert found["next"].structured_content["answer"] == "later"


def test_each_call_has_its_own_cost_meter(env, tmp_path):
    """Server --max-cost 0.02, a call costing $0.015: every call may spend it (a meter shared
    by the calls would stop the second); a call's own lower max_cost is its own too."""
    priced(tmp_path)
    script = [text("one"), text("two"), call("calculate", expression="1+1"), text("never")]
    with FakeModel(*script) as fake:
        found: list[Any] = []

        async def body() -> None:
            async with connect(model_env(env, fake), tmp_path, "--max-cost", "0.02") as s:
                for prompt in ("a", "b"):
                    found.append(await s.call_tool("agi", {"prompt": prompt}))
                found.append(await s.call_tool("agi", {"prompt": "c", "max_cost": 0.01}))

        run(body)
        assert len(fake.requests) == 3
    assert [r.structured_content["answer"] for r in found[:2]] == ["one", "two"]
    assert all(r.structured_content["usage"]["cost"] == pytest.approx(0.015) for r in found[:2])
    assert "cost limit reached" in one_line(found[2]) and "$0.01" in one_line(found[2])


def test_every_result_is_valid_under_the_output_schema(env, tmp_path):
    """Answers, a judged failure, a refused call, a provider failure and exit 5 (no valid JSON
    under `schema`): `structuredContent` always matches the declared `outputSchema`."""
    jsonschema = pytest.importorskip("jsonschema")
    script = [
        text("fine"),
        text("done"),
        text(json.dumps({"success": False, "reason": "no"})),
        text("not json"),  # every later request, the schema's retries included
    ]
    with FakeModel(*script) as fake:
        found: dict[str, Any] = {}

        async def body() -> None:
            async with connect(model_env(env, fake), tmp_path) as s:
                [tool] = (await s.list_tools()).tools
                found["schema"] = tool.output_schema
                found["plain"] = await s.call_tool("agi", {"prompt": "x"})
                found["judged"] = await s.call_tool("agi", {"prompt": "x", "exit_code": True})
                found["refused"] = await s.call_tool("agi", {"prompt": "x", "tools": "Bash"})
                found["no json"] = await s.call_tool("agi", {"prompt": "x", "schema": "n: int"})

        run(body)
    schema = found.pop("schema")
    for name, result in found.items():
        jsonschema.validate(result.structured_content, schema)  # raises, naming the problem
        assert result.content[0].text, name
    assert found["judged"].structured_content["exit"] == 1 and not found["judged"].is_error
    failed = found["no json"]
    assert "no valid JSON" in one_line(failed) and failed.structured_content["exit"] == 5


class Streaming:
    """A model that streams keep-alive comments and never answers: `closed` is set when the
    client's connection is gone (a write fails), `peers` the client ports of its requests."""

    def __init__(self, answer: bool = False):
        self.closed = threading.Event()
        self.peers: list[int] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                outer.peers.append(self.client_address[1])
                if answer:
                    return self.complete()
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                try:
                    for _ in range(600):  # at most 60 s: a hang guard
                        self.wfile.write(b": keep-alive\n\n")
                        self.wfile.flush()
                        threading.Event().wait(0.1)
                except OSError:
                    outer.closed.set()

            def complete(self) -> None:
                message = {"role": "assistant", "content": "hi"}
                data = json.dumps(
                    {
                        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True

    def __enter__(self) -> Streaming:
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"


def test_a_cancelled_call_closes_its_model_request(env, tmp_path):
    """notifications/cancelled while the model streams: the server sees the connection go
    (within the hang guard, 5x the contract's second); with -v, stderr tells of it."""
    with Streaming() as model:
        given = {**env, "AGI_BASE_URL": model.url, "AGI_MODEL": "m"}
        found: dict[str, Any] = {}

        async def body() -> None:
            import anyio

            async with connect(given, tmp_path, "-v") as s:
                with anyio.CancelScope() as scope:

                    async def cancel_when_streaming() -> None:
                        while not model.peers:
                            await anyio.sleep(0.05)
                        await anyio.sleep(0.3)
                        scope.cancel()

                    async with anyio.create_task_group() as tg:
                        tg.start_soon(cancel_when_streaming)
                        await s.call_tool("agi", {"prompt": "go on"})
                found["closed"] = await anyio.to_thread.run_sync(model.closed.wait, 5)

        run(body)
    assert found["closed"]
    log = (tmp_path / "server-stderr").read_text()
    assert "agi: call 1: started" in log and "agi: call 1: model call 1" in log
    assert "agi: call 1: cancelled" in log


def test_calls_share_the_model_connection(env, tmp_path):
    """Sequential calls reuse one kept-alive connection to the model (one pool per server)."""
    with Streaming(answer=True) as model:
        given = {**env, "AGI_BASE_URL": model.url, "AGI_MODEL": "m"}

        async def body() -> None:
            async with connect(given, tmp_path) as s:
                for i in range(5):
                    got = await s.call_tool("agi", {"prompt": f"call {i}"})
                    assert got.structured_content["answer"] == "hi"

        run(body)
    assert len(model.peers) == 5 and len(set(model.peers)) == 1


def test_a_calls_cwd_reaches_its_hooks(env, tmp_path):
    """Hooks get the call's `cwd` in their input, as the run's tools do; -v logs each call."""
    log = tmp_path / "hook.log"
    record = f"cat >> {log}; echo >> {log}"
    entry = [{"hooks": [{"type": "command", "command": record}]}]
    hooks = tmp_path / "hooks.json"
    hooks.write_text(json.dumps({"hooks": {"UserPromptSubmit": entry}}))
    sub = tmp_path / "sub"
    sub.mkdir()
    with FakeModel(text("one"), text("two")) as fake:

        async def body() -> None:
            async with connect(model_env(env, fake), tmp_path, "--hooks", str(hooks), "-v") as s:
                await s.call_tool("agi", {"prompt": "here", "cwd": str(sub)})
                await s.call_tool("agi", {"prompt": "there"})
                await s.call_tool("agi", {"prompt": "x", "max_steps": 0})

        run(body)
    payloads = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    seen = {p["prompt"]: p["cwd"] for p in payloads}
    assert seen == {"here": str(sub), "there": str(tmp_path)}
    stderr = (tmp_path / "server-stderr").read_text()
    assert "agi: call 1: exit 0, 1 step\n" in stderr and "agi: call 2: exit 0" in stderr
    assert "agi: call 3: refused: max_steps: must be a positive number" in stderr


def test_under_a_server_budget_a_model_without_a_price_is_refused(env, tmp_path):
    priced(tmp_path)
    with FakeModel(text("priced")) as fake:
        found: dict[str, Any] = {}

        async def body() -> None:
            async with connect(model_env(env, fake), tmp_path, "--max-cost", "1") as s:
                found["unpriced"] = await s.call_tool("agi", {"prompt": "x", "model": "free-m"})
                found["priced"] = await s.call_tool("agi", {"prompt": "x"})

        run(body)
        assert [r["model"] for r in fake.requests] == ["fake-model"]
    line = one_line(found["unpriced"])
    assert "free-m" in line and found["unpriced"].structured_content["exit"] == 2
    assert found["priced"].structured_content["answer"] == "priced"
