"""`agi --serve` (docs: serve): the real executable on a free loopback port against the scripted
model server, driven by real clients: httpx, the official `openai` SDK (chat completions and
Responses, streaming and not) and curl; a disconnect cancels the run (the `sleep` it started is
gone); a widening request is refused; a wrong token is 401; 50 concurrent runs succeed over one
pool of connections. Hang guards only, never timing assertions."""

from __future__ import annotations

import concurrent.futures
import importlib.util
import json
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import AGI
from fakeserver import FakeModel, call, text

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("starlette") is None or importlib.util.find_spec("uvicorn") is None,
    reason="the serve extra is not installed",
)
GUARD = 60  # seconds: hang guards only


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(env: dict[str, str], cwd: Path, *options: str) -> Iterator[str]:
    """`agi --serve 127.0.0.1:PORT OPTIONS` until the block ends; yields its base URL."""
    port = free_port()
    log = cwd / "serve.err"
    with log.open("wb") as err:
        server = subprocess.Popen(
            [AGI, "--serve", f"127.0.0.1:{port}", *options], env=env, cwd=cwd, stderr=err
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + GUARD
        while True:
            assert server.poll() is None, log.read_text()
            try:
                httpx.get(f"{base}/healthz", timeout=GUARD)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server never answered"
                time.sleep(0.02)
        yield base
    finally:
        server.terminate()
        server.wait(GUARD)


def model_env(env: dict[str, str], fake: FakeModel) -> dict[str, str]:
    return {
        **env,
        "AGI_BASE_URL": fake.url,
        "AGI_MODEL": "fake-model",
        "AGI_API_KEY": "sk-serve-0123456789",
    }


def test_real_clients_runs_api_and_the_openai_front(env, tmp_path):
    openai = pytest.importorskip("openai")
    (tmp_path / "config.toml").write_text('[profiles.terse]\nmax_steps = 3\nsys = "default"\n')
    with FakeModel(text("hello from agi")) as fake, serving(model_env(env, fake), tmp_path) as base:
        whole = httpx.post(f"{base}/v1/runs", json={"prompt": "hi"}, timeout=GUARD)
        assert whole.status_code == 200
        assert whole.json()["answer"] == "hello from agi" and whole.json()["exit_code"] == 0
        assert "sk-serve-0123456789" not in whole.text

        with httpx.stream(
            "POST", f"{base}/v1/runs", json={"prompt": "hi", "stream": True}, timeout=GUARD
        ) as streamed:
            assert streamed.headers["content-type"].startswith("text/event-stream")
            events = [
                json.loads(line[6:]) for line in streamed.iter_lines() if line.startswith("data: ")
            ]
        assert [e["type"] for e in events][0] == "step"
        assert "".join(e["text"] for e in events if e["type"] == "text") == "hello from agi"
        assert events[-1]["type"] == "result" and events[-1]["answer"] == "hello from agi"

        client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused")
        assert {m.id for m in client.models.list()} == {"agi", "terse"}
        chat = client.chat.completions.create(
            model="terse",
            messages=[
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "first"},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "say hello"},
            ],
        )
        assert chat.choices[0].message.content == "hello from agi"
        assert chat.usage is not None and chat.usage.total_tokens == 15
        sent = fake.requests[-1]["messages"][-1]["content"]
        assert "<conversation>" in str(sent) and "say hello" in str(sent)
        pieces = client.chat.completions.create(
            model="agi",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(pieces)
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
            "hello from agi"
        )
        assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == 10

        response = client.responses.create(model="agi", input="hi")
        assert response.output_text == "hello from agi" and response.status == "completed"
        kinds, deltas = [], []
        with client.responses.stream(model="agi", input="hi") as stream:
            for event in stream:
                kinds.append(event.type)
                if event.type == "response.output_text.delta":
                    deltas.append(event.delta)
            final = stream.get_final_response()
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
        assert "".join(deltas) == "hello from agi" and final.output_text == "hello from agi"

        with pytest.raises(openai.NotFoundError) as missing:
            client.chat.completions.create(
                model="nope", messages=[{"role": "user", "content": "x"}]
            )
        assert "no such profile" in str(missing.value)

        if shutil.which("curl"):
            asked = {"model": "agi", "messages": [{"role": "user", "content": "hi"}]}
            out = subprocess.run(
                ["curl", "-sS", f"{base}/v1/chat/completions", "-H",
                 "Content-Type: application/json", "-d", json.dumps(asked)],
                capture_output=True, text=True, timeout=GUARD, check=True,
            )  # fmt: skip
            assert json.loads(out.stdout)["choices"][0]["message"]["content"] == "hello from agi"
        metrics = httpx.get(f"{base}/metrics", timeout=GUARD).text
        assert "agi_runs_total 7" in metrics and 'agi_tokens_total{kind="input"} 70' in metrics


def test_limits_narrow_only_and_the_token_is_checked(env, tmp_path):
    with FakeModel(text("fine")) as fake, serving(
        model_env(env, fake), tmp_path, "--serve-token", "s3cret-token", "--max-steps", "5",
        "--timeout", "60", "--tools", "Read,Grep",
    ) as base:  # fmt: skip
        good = {"authorization": "Bearer s3cret-token"}
        wrong = httpx.post(f"{base}/v1/runs", json={"prompt": "hi"}, timeout=GUARD,
                           headers={"authorization": "Bearer s3cret-tokeN"})  # fmt: skip
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_api_key"
        assert httpx.get(f"{base}/v1/models", timeout=GUARD).status_code == 401
        for field, value, limit in (
            ("max_steps", 6, "--max-steps"),
            ("timeout", 61, "--timeout"),
            ("tools", ["Read", "Bash"], "--tools"),
            ("permission_mode", "bypassPermissions", "--permission-mode"),
        ):
            refused = httpx.post(f"{base}/v1/runs", json={"prompt": "hi", field: value},
                                 headers=good, timeout=GUARD)  # fmt: skip
            assert refused.status_code == 403, refused.text
            error = refused.json()["error"]
            assert error["type"] == "invalid_request_error" and limit in error["message"]
        assert len(fake.requests) == 0  # nothing was run for them
        later = httpx.post(f"{base}/v1/runs", json={"prompt": "hi", "background": True},
                           headers=good, timeout=GUARD).json()  # fmt: skip
        deadline = time.monotonic() + GUARD
        while (state := httpx.get(f"{base}/v1/runs/{later['id']}", headers=good,
                                  timeout=GUARD).json())["status"] == "running":  # fmt: skip
            assert time.monotonic() < deadline, "the background run never ended"
            time.sleep(0.05)
        assert state["status"] == "done" and state["result"]["answer"] == "fine"
        narrowed = httpx.post(f"{base}/v1/runs", headers=good, timeout=GUARD,
                              json={"prompt": "hi", "max_steps": 2, "tools": ["Read"]})  # fmt: skip
        assert narrowed.status_code == 200 and narrowed.json()["answer"] == "fine"
        assert [t["function"]["name"] for t in fake.requests[-1]["tools"]] == ["Read"]
        bad = httpx.post(f"{base}/v1/runs", json={"prompt": "hi", "nope": 1}, headers=good,
                         timeout=GUARD)  # fmt: skip
        assert bad.status_code == 400 and "unknown field 'nope'" in bad.json()["error"]["message"]


def test_binding_beyond_loopback_needs_a_token(env, tmp_path):
    out = subprocess.run([AGI, "--serve", "0.0.0.0:0"], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=GUARD)  # fmt: skip
    assert out.returncode == 2 and "needs a token" in out.stderr


def sleeps(marker: str) -> list[str]:
    """The processes whose command line holds `sleep MARKER`."""
    found = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True)
    return found.stdout.split()


def test_a_disconnect_cancels_the_run_and_its_command(env, tmp_path):
    n = uuid.uuid4().int  # unique to this test run: no other command line matches it
    marker = f"9{n % 1000:03d}.{n // 1000 % 10**6}"
    with (
        FakeModel(call("Bash", command=f"sleep {marker}")) as fake,
        serving(model_env(env, fake), tmp_path, "--permission-mode", "bypassPermissions") as base,
    ):
        with httpx.stream("POST", f"{base}/v1/runs", json={"prompt": "wait", "stream": True},
                          timeout=GUARD) as streamed:  # fmt: skip
            # kept: an iterator left to the collector closes the connection (httpcore closes it
            # on GeneratorExit), a disconnect that would cancel the run before its command
            lines = streamed.iter_lines()
            for line in lines:
                if '"tool_start"' in line:
                    break
            deadline = time.monotonic() + GUARD
            while not sleeps(marker):
                assert time.monotonic() < deadline, "the command never started"
                time.sleep(0.05)
        deadline = time.monotonic() + GUARD  # the client has gone: the run is cancelled
        while sleeps(marker):
            assert time.monotonic() < deadline, "the sleep outlived the disconnect"
            time.sleep(0.05)
        assert len(fake.requests) == 1  # no model call after the cancel

        started = httpx.post(f"{base}/v1/runs", json={"prompt": "wait", "background": True},
                             timeout=GUARD).json()  # fmt: skip
        assert started["status"] == "running" and started["id"]
        deadline = time.monotonic() + GUARD
        while not sleeps(marker):  # the script's first step again: the same sleep
            assert time.monotonic() < deadline, "the background run's command never started"
            time.sleep(0.05)
        state = httpx.get(f"{base}/v1/runs/{started['id']}", timeout=GUARD).json()
        assert state == {"id": started["id"], "status": "running", "result": None}
        ended = httpx.delete(f"{base}/v1/runs/{started['id']}", timeout=GUARD).json()
        assert ended == {"id": started["id"], "status": "cancelled"}
        assert not sleeps(marker)  # the cancel waited for the run's end, its command's too
        missing = httpx.get(f"{base}/v1/runs/run_nope", timeout=GUARD)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


class KeepAlive(BaseHTTPRequestHandler):
    """A model that keeps connections alive (whole JSON completions), noting each peer port."""

    protocol_version = "HTTP/1.1"
    peers: list[int] = []
    body = json.dumps(
        {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1},
        }
    ).encode()  # fmt: skip

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.peers.append(self.client_address[1])
        time.sleep(0.01)
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)


def test_fifty_concurrent_runs_over_one_pool(env, tmp_path):
    model = ThreadingHTTPServer(("127.0.0.1", 0), KeepAlive)
    model.daemon_threads = True
    threading.Thread(target=model.serve_forever, args=(0.05,), daemon=True).start()
    url = f"http://127.0.0.1:{model.server_address[1]}/v1"
    try:
        with (
            serving(
                {**env, "AGI_BASE_URL": url, "AGI_MODEL": "m"}, tmp_path, "--jobs", "8"
            ) as base,
            httpx.Client(timeout=GUARD, limits=httpx.Limits(max_connections=64)) as client,
        ):

            def one(i: int) -> dict:
                return client.post(f"{base}/v1/runs", json={"prompt": f"job {i}"}).json()

            with concurrent.futures.ThreadPoolExecutor(50) as pool:
                results = list(pool.map(one, range(50)))
    finally:
        model.shutdown()
        model.server_close()
    assert [r["exit_code"] for r in results] == [0] * 50
    assert {r["answer"] for r in results} == {"ok"}
    assert len(KeepAlive.peers) == 50
    assert len(set(KeepAlive.peers)) <= 8  # the runs' model connections kept and lent: one pool
