"""Case: `agi --acp`, agi driven by an editor over the Agent Client Protocol (issue 26).

- Start-up: `initialize` answered, from the moment the process is started (target <= 150 ms),
  and the first `session/new` (target <= 250 ms from the start: 100 ms after `initialize`);
  the idle process's RSS once it serves (after `initialize` and `session/list`; target <= 40
  MiB), and after a session and a prompt.
- Streaming: from the model server's first streamed content byte to the first
  `agent_message_chunk` line on agi's stdout (target <= 5 ms, median).
- Per tool step: the time between two model requests of one conversation (a `calculate` call
  between them), in prompts sent to a running `agi --acp` (a new session each) and in one-shot
  `agi PROMPT` processes, against the same model (target ACP / one-shot <= 1.2x, medians).

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
from measure import header, ratio  # noqa: E402

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
    out["first_session_s"] = []  # spawn -> session/new answered, asked once initialize was
    for i in range(runs + 1):
        client = Client(agi, env, work)
        client.initialize()
        at, _, _ = client.call("session/new", {"cwd": str(work), "mcpServers": []})
        if i:
            out["first_session_s"].append(at - client.started)
        client.close()
    for i in range(runs + 1):
        client = Client(agi, env, work)
        took = client.initialize()
        client.call("session/list", {})  # the library is loaded and serving: idle from here
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


STEPPER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from fakeserver import FakeModel, call, text
log = open(sys.argv[2], "a", buffering=1)
def step(body):
    done = sum(1 for m in body["messages"] if m["role"] == "tool")
    log.write(f"{done} {time.monotonic()}\\n")
    return call("calculate", expression="1+2") if done < int(sys.argv[3]) else text(sys.argv[4])
with FakeModel(step) as server:
    print(server.url, flush=True)
    sys.stdin.read()
"""


class Stepper:
    """A model, in a process of its own (so that reading agi's output here takes nothing from
    it), that asks for `calculate` STEPS times, then answers. It records when each request
    arrives: a tool step is the time between two requests of one conversation, the same
    measure for a one-shot process and for a prompt inside `agi --acp`."""

    def __init__(self, work: Path) -> None:
        self.log = work / "stepper.log"
        self.log.write_text("")
        tests = str(HERE.parent / "tests")
        argv = [sys.executable, "-c", STEPPER, tests, str(self.log), str(STEPS), ANSWER]
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        self.read = 0

    def intervals(self) -> list[float]:
        """Seconds from each request to the next one of the same conversation, since the
        last call."""
        lines = self.log.read_text().splitlines()[self.read :]
        self.read += len(lines)
        arrivals = [(int(n), float(t)) for n, t in (line.split() for line in lines)]
        return [u - t for (n, t), (m, u) in zip(arrivals, arrivals[1:], strict=False) if m == n + 1]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(30)


def step_times(agi: Path, env: dict[str, str], work: Path, runs: int) -> dict[str, list[float]]:
    """Tool-step intervals of one-shot runs and of prompts in a running `agi --acp`."""
    stepper = Stepper(work)
    out: dict[str, list[float]] = {"oneshot": [], "acp": []}
    prompt = f"bench steps={STEPS}: use the calculate tool, then answer"
    env = {**env, "AGI_BASE_URL": stepper.url}
    client = Client(agi, env, work)
    client.initialize()
    try:
        for i in range(runs + 1):
            argv = [str(agi), "--max-steps", str(STEPS + 1), prompt]
            done = subprocess.run(argv, env=env, cwd=str(work), capture_output=True, text=True)
            if ANSWER not in done.stdout:
                raise RuntimeError(f"one-shot run failed: {done.stderr}")
            oneshot = stepper.intervals()
            _, new, _ = client.call("session/new", {"cwd": str(work), "mcpServers": []})
            params = {"sessionId": new["sessionId"], "prompt": [{"type": "text", "text": prompt}]}
            _, result, _ = client.call("session/prompt", params)
            if result.get("stopReason") != "end_turn":
                raise RuntimeError(f"bad ACP answer: {result}")
            acp = stepper.intervals()
            if i:  # the first of each is a warm-up
                out["oneshot"] += oneshot
                out["acp"] += acp
    finally:
        client.close()
        stepper.close()
    return out


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
    header("13. ACP: `agi --acp` driven by an editor's protocol")
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
    first_ms = statistics.median(started["first_session_s"]) * 1000
    b.report.row("acp", "first session/new answered (from exec)", {"wall_ms": round(first_ms, 1)})
    b.report.target("first session/new after start", round(first_ms, 1), 250, " ms")
    idle = max(started["idle_rss_mib"])
    also = f"{started['served_rss_mib'][0]:.1f} MiB after a session and a prompt"
    b.report.target("idle agi --acp RSS", round(idle, 1), 40, " MiB", also)
    added = [s * 1000 for s in first_chunk(p.agi, p.agi_env, p.work, runs)]
    b.report.target("first byte -> first chunk", round(statistics.median(added), 2), 5, " ms")
    steps = step_times(p.agi, p.agi_env, p.work, runs)
    per_acp = statistics.median(steps["acp"]) * 1000
    per_one = statistics.median(steps["oneshot"]) * 1000
    n = len(steps["acp"])
    b.report.row("acp", "per tool step, in agi --acp", {"wall_ms": round(per_acp, 2), "n": n})
    b.report.row("acp", "per tool step, one-shot agi", {"wall_ms": round(per_one, 2), "n": n})
    b.report.target("per tool step, ACP / one-shot", ratio(per_acp, per_one), 1.2, "x")
    b.report.raw["acp"] = {"startup": started, "first_chunk_ms": added, "steps_s": steps}


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
