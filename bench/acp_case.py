"""Case: `agi --acp`, agi driven by an editor over the Agent Client Protocol (issue 26).

- Start-up: `initialize` answered, from the moment the process is started (target <= 150 ms);
  the idle process's RSS after `initialize` (target <= 40 MiB), and after a session and a prompt.
- Streaming: from the model server's first streamed content byte to the first
  `agent_message_chunk` line on agi's stdout (target <= 5 ms, median).
- Per tool step: `bench steps=N` prompts in a running `agi --acp` (a new session each) against
  the same prompts as one-shot `agi PROMPT` processes; (time at N - time at 0) / N for each
  (target ACP / one-shot <= 1.2x).

The client speaks raw JSON-RPC lines over the pipes (nothing of a client library is timed).
Ratios are recorded, never asserted. Standalone: `python bench/acp_case.py [--runs N]`; in the
suite: `python bench/run.py --cases acp`.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from queue import Empty, Queue
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from cases import ANSWER  # noqa: E402
from measure import alternate, header, ratio, summary  # noqa: E402

STEPS = 20


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Client:
    """`agi --acp` and raw JSON-RPC over its pipes; each line agi writes is timestamped."""

    def __init__(self, agi: Path, env: dict[str, str], cwd: Path):
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [str(agi), "--acp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=str(cwd),
        )
        self.lines: Queue[tuple[float, dict[str, Any]]] = Queue()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put((time.monotonic(), json.loads(line)))

    def send(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        line = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps(line) + "\n").encode())
        self.process.stdin.flush()
        return self.next_id

    def wait(self, request: int, timeout: float = 120) -> tuple[float, Any, list[Any]]:
        """(arrival time, result, the notifications before it); answers permission requests."""
        seen: list[tuple[float, dict[str, Any]]] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                at, message = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except Empty:
                raise RuntimeError(f"no answer to request {request}") from None
            if message.get("id") == request and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"agi --acp: {message['error']}")
                return at, message.get("result"), seen
            if message.get("method") == "session/request_permission":
                self.answer(message["id"])
            seen.append((at, message))

    def answer(self, request: int) -> None:
        outcome = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
        line = {"jsonrpc": "2.0", "id": request, "result": outcome}
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps(line) + "\n").encode())
        self.process.stdin.flush()

    def call(self, method: str, params: dict[str, Any]) -> tuple[float, Any, list[Any]]:
        return self.wait(self.send(method, params))

    def initialize(self) -> float:
        """Seconds from the process's start to the answer."""
        at, _, _ = self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        return at - self.started

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def startup(agi: Path, env: dict[str, str], work: Path, runs: int) -> dict[str, Any]:
    out: dict[str, Any] = {"initialize_s": [], "idle_rss_mib": [], "served_rss_mib": []}
    for i in range(runs + 1):
        client = Client(agi, env, work)
        took = client.initialize()
        time.sleep(0.3)
        rss = rss_mib(client.process.pid)
        if i:  # the first run is a warm-up (the page cache)
            out["initialize_s"].append(took)
            out["idle_rss_mib"].append(rss)
        if i == runs:
            _, new, _ = client.call("session/new", {"cwd": str(work), "mcpServers": []})
            prompt = [{"type": "text", "text": "bench steps=0: answer"}]
            client.call("session/prompt", {"sessionId": new["sessionId"], "prompt": prompt})
            out["served_rss_mib"].append(rss_mib(client.process.pid))
        client.close()
    return out


def acp_steps(agi: Path, env: dict[str, str], work: Path, runs: int) -> dict[str, list[float]]:
    """Seconds per prompt at 0 and STEPS tool steps, each prompt in a new session."""
    client = Client(agi, {**env}, work)
    client.initialize()
    times: dict[str, list[float]] = {"0": [], str(STEPS): []}
    for i in range(runs + 1):
        for steps in (0, STEPS):
            _, new, _ = client.call("session/new", {"cwd": str(work), "mcpServers": []})
            text = f"bench steps={steps}: use the calculate tool, then answer"
            params = {"sessionId": new["sessionId"], "prompt": [{"type": "text", "text": text}]}
            began = time.monotonic()
            at, result, seen = client.call("session/prompt", params)
            chunks = "".join(
                m["params"]["update"]["content"]["text"]
                for _, m in seen
                if m.get("method") == "session/update"
                and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            )
            if result.get("stopReason") != "end_turn" or ANSWER not in chunks:
                raise RuntimeError(f"bad ACP answer: {result} {chunks!r}")
            if i:
                times[str(steps)].append(at - began)
    client.close()
    return times


class FirstByte:
    """A model server that records when it writes the first content byte of each answer."""

    def __init__(self) -> None:
        self.written: list[float] = []
        bench = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                bench.play(self.wfile)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def play(self, out: Any) -> None:
        def frame(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return b"data: " + json.dumps({"choices": [choice]}).encode() + b"\n\n"

        out.write(frame({"role": "assistant", "content": ""}))
        out.flush()
        time.sleep(0.05)
        self.written.append(time.monotonic())
        out.write(frame({"content": "first"}))
        out.flush()
        time.sleep(0.05)
        out.write(frame({"content": " words"}) + frame({}, "stop") + b"data: [DONE]\n\n")
        out.flush()

    def close(self) -> None:
        self.server.shutdown()


def first_chunk(agi: Path, env: dict[str, str], work: Path, runs: int) -> list[float]:
    """Seconds from the server's first content byte to the first agent_message_chunk."""
    server = FirstByte()
    client = Client(agi, {**env, "AGI_BASE_URL": server.url}, work)
    client.initialize()
    _, new, _ = client.call("session/new", {"cwd": str(work), "mcpServers": []})
    added = []
    try:
        for i in range(runs + 1):
            params = {"sessionId": new["sessionId"], "prompt": [{"type": "text", "text": "hi"}]}
            _, _, seen = client.call("session/prompt", params)
            arrived = next(
                at
                for at, m in seen
                if m.get("method") == "session/update"
                and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            )
            if i:
                added.append(arrived - server.written[-1])
    finally:
        client.close()
        server.close()
    return added


def run_case(b: Any) -> None:
    header("12. ACP: `agi --acp` driven by an editor's protocol")
    p = b.programs
    probe = subprocess.run([p.python, "-c", "import acp"], capture_output=True)
    if probe.returncode != 0:
        b.report.note("acp: skipped; the agi measured lacks the agent-client-protocol package")
        return
    runs = b.runs
    started = startup(p.agi, p.agi_env, p.work, runs)
    init_ms = statistics.median(started["initialize_s"]) * 1000
    b.report.row(
        "acp", "initialize answered (from exec)", {"wall_ms": round(init_ms, 1), "n": runs}
    )
    b.report.target("initialize after start", round(init_ms, 1), 150, " ms")
    idle = max(started["idle_rss_mib"])
    also = f"{started['served_rss_mib'][0]:.1f} MiB after a session and a prompt"
    b.report.target("idle agi --acp RSS", round(idle, 1), 40, " MiB", also)
    added = [s * 1000 for s in first_chunk(p.agi, p.agi_env, p.work, runs)]
    b.report.target("first byte -> first chunk", round(statistics.median(added), 2), 5, " ms")
    oneshot = one_shot_steps(b)
    acp = acp_steps(p.agi, p.agi_env, p.work, runs)
    per_acp = (statistics.median(acp[str(STEPS)]) - statistics.median(acp["0"])) / STEPS * 1000
    per_one = (oneshot[STEPS] - oneshot[0]) / STEPS
    b.report.row("acp", f"per tool step, ACP ({STEPS} steps)", {"wall_ms": round(per_acp, 2)})
    b.report.row("acp", f"per tool step, one-shot ({STEPS} steps)", {"wall_ms": round(per_one, 2)})
    b.report.target("per tool step, ACP / one-shot", ratio(per_acp, per_one), 1.2, "x")
    b.report.raw["acp"] = {"startup": started, "first_chunk_ms": added, "acp_steps_s": acp}


def one_shot_steps(b: Any) -> dict[int, float]:
    """Median wall ms of one-shot `agi PROMPT` at 0 and STEPS tool steps."""
    out = {}
    for steps in (0, STEPS):
        variants = {k: v for k, v in b.variants(steps, peer=False).items() if k.startswith("agi")}
        name = next(iter(variants))
        out[steps] = summary(alternate(variants, b.runs, b.failures)[name])["wall_ms"]
    return out


def main(argv: list[str] | None = None) -> int:
    """Standalone: this case alone, with its own scripted model and private state."""
    import argparse
    import shutil
    import tempfile

    from cases import Bench, Programs, Script
    from measure import Failures, Report

    from fakeserver import FakeModel

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args(argv)
    agi = Path(sys.executable).parent / "agi"
    work = Path(tempfile.mkdtemp(prefix="agi-bench-acp-"))
    report, failures, script = Report(), Failures(), Script()
    try:
        with FakeModel(script) as server:
            script.server = server
            programs = Programs(agi, None, server.url, work)
            bench = Bench(programs, script, report, failures, args.runs, 1, (5, 20), 200, 10)
            run_case(bench)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for failure in failures:
        print(f"bench: FAILED {failure}")
    print(json.dumps({"targets": report.targets}, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
