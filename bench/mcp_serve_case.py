"""Case: `agi --mcp-serve`, agi as a tool for other agents (issue 28).

- Per call: a `tools/call` through a running server (the `mcp` SDK's own client over stdio) against
  `agi PROMPT` as a process, same loopback model. Target: <= 0.5x.
- Concurrency: 10 calls at once against one call, with the model taking MODEL_DELAY seconds to
  answer (a server answering instantly makes every call pure CPU, and 10 of them on this machine's
  cores can only queue); also reported with the instant model. Target: <= 1.5x.
- Start-up: from spawn to the answer to `initialize` (target <= 150 ms) and to the first
  `tools/call` (target <= 250 ms), raw JSON-RPC lines.
- Memory: the idle server's RSS after `initialize` (target <= 40 MiB), and its growth over 200
  sequential calls, measured from the RSS after the first 10 (target <= 10%).

Ratios are recorded, never asserted. Standalone: `python bench/mcp_serve_case.py [--runs N]
[--calls N]` (its own scripted model); in the suite: `python bench/run.py --cases mcp_serve`.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from cases import ANSWER  # noqa: E402
from measure import alternate, header, ratio, summary  # noqa: E402

from fakeserver import FakeModel, text  # noqa: E402

MODEL_DELAY = 0.5  # seconds a "local model" takes per answer in the concurrency measure
PROMPT = "bench steps=0: answer"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def server_pid() -> int:
    """The `agi --mcp-serve` child of this process (the SDK's client started it)."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == me and b"--mcp-serve" in cmdline:
            return int(entry.name)
    raise RuntimeError("no agi --mcp-serve child found")


async def timed_call(session: Any, prompt: str = PROMPT) -> float:
    began = time.perf_counter()
    result = await session.call_tool("agi", {"prompt": prompt})
    took = time.perf_counter() - began
    if result.is_error or ANSWER not in result.content[0].text:
        raise RuntimeError(f"call failed: {result.content[0].text}")
    return took


async def through_server(agi: Path, env: dict[str, str], work: Path, runs: int, calls: int):
    """Per-call times, 10 at once, and RSS figures, from one server process."""
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=str(agi), args=["--mcp-serve"], env=env, cwd=str(work))
    out: dict[str, Any] = {}
    with open(work / "mcp-serve-stderr", "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            pid = server_pid()
            try:  # answered by the SDK, not before it has loaded (initialize, ping and
                await session.list_prompts()  # tools/list may be answered earlier)
            except Exception:  # no prompts here: "method not found" is an answer too
                pass
            await anyio.sleep(0.5)
            out["idle_rss_mib"] = rss_mib(pid)
            await timed_call(session)  # warm-up: the first call imports the engine
            out["call_s"] = [await timed_call(session) for _ in range(runs)]
            out["concurrent_s"] = [await at_once(session, 10) for _ in range(max(3, runs // 3))]
            done = 1 + runs
            while done < 10:
                await timed_call(session)
                done += 1
            out["rss_after_10_mib"] = rss_mib(pid)
            while done < calls:
                await timed_call(session)
                done += 1
            out["rss_after_n_mib"], out["calls"] = rss_mib(pid), done
    return out


async def at_once(session: Any, n: int) -> float:
    import anyio

    began = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(timed_call, session)
    return time.perf_counter() - began


def served(agi: Path, env: dict[str, str], work: Path, runs: int, calls: int) -> dict[str, Any]:
    import anyio

    return anyio.run(through_server, agi, env, work, runs, calls)


def first_answers(agi: Path, env: dict[str, str], work: Path, runs: int) -> dict[str, list[float]]:
    """Seconds from spawn to the answer to `initialize`, to `tools/list` (the session a client
    such as Claude Code waits for before its model starts) and to the first `tools/call`, each
    request sent as soon as the one before was answered (raw JSON-RPC lines: nothing of a
    client library is timed)."""
    import json
    import subprocess

    def send(process: Any, message: dict[str, Any]) -> None:
        process.stdin.write((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())
        process.stdin.flush()

    def reply(process: Any, number: int) -> float:
        while line := process.stdout.readline():
            if json.loads(line).get("id") == number:
                return time.monotonic()
        raise RuntimeError("agi --mcp-serve closed stdout")

    out: dict[str, list[float]] = {"initialize_s": [], "listed_s": [], "first_call_s": []}
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}}
    hello["clientInfo"] = {"name": "bench", "version": "1"}
    for i in range(runs + 1):
        started = time.monotonic()
        process = subprocess.Popen(
            [str(agi), "--mcp-serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=str(work),
        )
        send(process, {"id": 1, "method": "initialize", "params": hello})
        answered = reply(process, 1)
        send(process, {"method": "notifications/initialized"})
        send(process, {"id": 3, "method": "tools/list"})
        listed = reply(process, 3)
        call = {"name": "agi", "arguments": {"prompt": PROMPT}}
        send(process, {"id": 2, "method": "tools/call", "params": call})
        called = reply(process, 2)
        process.stdin.close()
        process.wait(30)
        if i:  # the first is a warm-up (the page cache)
            out["initialize_s"].append(answered - started)
            out["listed_s"].append(listed - started)
            out["first_call_s"].append(called - started)
    return out


def run_case(b: Any) -> None:
    header("11. MCP server: a call through `agi --mcp-serve` against `agi PROMPT`")
    p = b.programs
    probe = __import__("subprocess").run([p.python, "-c", "import mcp.server.lowlevel"])
    if probe.returncode != 0:
        b.report.note("mcp_serve: skipped; the agi measured lacks the `mcp` package")
        return
    calls = getattr(b, "serve_calls", 200)
    first = first_answers(p.agi, p.agi_env, p.work, b.runs)
    init_ms = statistics.median(first["initialize_s"]) * 1000
    list_ms = statistics.median(first["listed_s"]) * 1000
    call_ms = statistics.median(first["first_call_s"]) * 1000
    b.report.row("mcp_serve", "initialize answered (from exec)", {"wall_ms": round(init_ms, 1)})
    b.report.row("mcp_serve", "tools/list answered (from exec)", {"wall_ms": round(list_ms, 1)})
    b.report.row("mcp_serve", "first tools/call answered (from exec)", {"wall_ms": round(call_ms)})
    b.report.target("initialize after start", round(init_ms, 1), 150, " ms")
    b.report.target("tools/list (the session) after start", round(list_ms, 1), 250, " ms")
    b.report.note(  # no target: a run, as `--serve`'s first run and ACP's first prompt
        f"mcp_serve: the first tools/call, {call_ms:.0f} ms from exec, runs agi's first call "
        "(an instant model) after the mcp SDK's import, which calls wait for"
    )
    variants = {"agi PROMPT (process)": (lambda: p.agi_cmd(PROMPT), p.agi_env, ANSWER)}
    process = summary(alternate(variants, b.runs, b.failures)["agi PROMPT (process)"])
    b.report.row("mcp_serve", "agi PROMPT (process)", process)
    instant = served(p.agi, p.agi_env, p.work, b.runs, calls)
    per_call = statistics.median(instant["call_s"]) * 1000
    b.report.row("mcp_serve", "tools/call via running server", {"wall_ms": round(per_call, 1)})
    b.report.target("server call / process call", ratio(per_call, process["wall_ms"]), 0.5, "x")
    slow = FakeModel(text(ANSWER, delay=MODEL_DELAY / 7))  # 7 SSE frames, each after a pause
    with slow:
        env = {**p.agi_env, "AGI_BASE_URL": slow.url}
        delayed = served(p.agi, env, p.work, 3, 10)
    report_concurrency(b, instant, delayed)
    report_memory(b, instant)
    b.report.raw["mcp_serve"] = {"process": process, "instant": instant, "delayed": delayed}
    b.report.raw["mcp_serve"]["first_answers"] = first


def report_concurrency(b: Any, instant: dict[str, Any], delayed: dict[str, Any]) -> None:
    one = statistics.median(delayed["call_s"])
    ten = statistics.median(delayed["concurrent_s"])
    b.report.row("mcp_serve", f"1 call, model {MODEL_DELAY:g} s", {"wall_ms": round(one * 1000)})
    b.report.row(
        "mcp_serve", f"10 at once, model {MODEL_DELAY:g} s", {"wall_ms": round(ten * 1000)}
    )
    fast = ratio(statistics.median(instant["concurrent_s"]), statistics.median(instant["call_s"]))
    also = f"instant model: {fast}x (pure CPU on {os.cpu_count()} cores)"
    b.report.target("10 concurrent calls / one call", ratio(ten, one), 1.5, "x", also)


def report_memory(b: Any, got: dict[str, Any]) -> None:
    from measure import measure

    sdk = [b.programs.python, "-c", "import mcp.server.lowlevel, mcp.server.stdio"]
    floor = measure(sdk, b.programs.agi_env).rss  # what importing the SDK's server alone costs
    got["sdk_import_rss_mib"] = floor
    also = f"importing the mcp SDK's server alone: {floor:.1f} MiB"
    b.report.target("idle server RSS", round(got["idle_rss_mib"], 1), 40, " MiB", also)
    base, end = got["rss_after_10_mib"], got["rss_after_n_mib"]
    growth = round((end - base) / base * 100, 1)
    also = f"{base:.1f} MiB after 10 calls, {end:.1f} MiB after {got['calls']}"
    b.report.target(f"RSS growth over {got['calls']} calls", growth, 10, " %", also)


def main(argv: list[str] | None = None) -> int:
    """Standalone: this case alone, with its own scripted model and private state."""
    import argparse
    import shutil
    import tempfile

    from cases import Bench, Programs, Script
    from measure import Failures, Report

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args(argv)
    agi = Path(sys.executable).parent / "agi"
    work = Path(tempfile.mkdtemp(prefix="agi-bench-mcp-"))
    report, failures, script = Report(), Failures(), Script()
    try:
        with FakeModel(script) as server:
            script.server = server
            programs = Programs(agi, None, server.url, work)
            bench = Bench(programs, script, report, failures, args.runs, 1, (5, 20), 200, 10)
            bench.serve_calls = args.calls  # type: ignore[attr-defined]
            run_case(bench)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for failure in failures:
        print(f"bench: FAILED {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
