"""Case: `agi --serve`, agi over HTTP (issue 38). Standalone, against its own scripted model:

    python bench/serve_case.py [--runs N] [--spawns N] [--agi PATH]

- Per run: `POST /v1/runs` to a running server (httpx, one kept-alive connection) against the
  same run through the Python API in one process (`agi.run`, warm), target <= 1.2x; and against
  `agi PROMPT` as a process per request, target <= 0.1x.
- Idle memory: the server's RSS after its first answer and after the runs.
- Start-up: time from spawn to the first HTTP answer (`GET /healthz`), target 150 ms on a quiet
  machine, and to the first run's answer (100 ms more), medians over `--spawns` start-ups;
  `--agi` names another checkout's executable, to compare two in one sitting.

Ratios are recorded, never asserted (bench/results/serve.md keeps a run with its command).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import httpx  # noqa: E402

from fakeserver import FakeModel, text  # noqa: E402

PROMPT = "bench: answer"
AGI = str(Path(sys.executable).parent / "agi")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


@contextmanager
def running(env: dict[str, str], home: Path) -> Iterator[tuple[httpx.Client, int]]:
    """`agi --serve` on a free port, a client of it and its pid once `/healthz` answers. The
    client is made before the spawn: its set-up (about 25 ms of httpx's) is not the server's."""
    port = free_port()
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
        server = subprocess.Popen(
            [AGI, "--serve", f"127.0.0.1:{port}"], env=env, cwd=home, stderr=subprocess.DEVNULL
        )
        try:
            wait_listening(port, server)
            client.get("/healthz").raise_for_status()
            yield client, server.pid
        finally:
            server.terminate()
            server.wait(30)


def wait_listening(port: int, server: subprocess.Popen[bytes]) -> None:
    """Until the server accepts a connection, tried with a plain connect every millisecond."""
    while server.poll() is None:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.001)
    raise SystemExit(f"agi --serve ended with {server.returncode}")


def spawned_server(env: dict[str, str], home: Path) -> tuple[float, float, float]:
    """Seconds from spawn to the first answer (`/healthz`) and to the first run's, and the
    server's RSS at its first answer (MiB)."""
    spawned = time.monotonic()
    with running(env, home) as (client, pid):
        first_answer = time.monotonic() - spawned
        rss = rss_mib(pid)
        r = client.post("/v1/runs", json={"prompt": PROMPT})
        first_run = time.monotonic() - spawned
        assert r.json()["answer"] == "ok", r.text
    return first_answer, first_run, rss


def main() -> None:
    global AGI
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--spawns", type=int, default=7, help="start-ups measured (median)")
    parser.add_argument("--agi", default=AGI, help="the agi executable (another checkout's)")
    options = parser.parse_args()
    AGI = options.agi
    runs, spawns = options.runs, options.spawns
    home = Path(tempfile.mkdtemp(prefix="agi-bench-serve-"))
    (home / "config.toml").write_text("")
    with FakeModel(text("ok")) as fake:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGI_", "OPENAI_"))}
        env.update(AGI_HOME=str(home / "state"), AGI_CONFIG=str(home / "config.toml"))
        env.update(AGI_BASE_URL=fake.url, AGI_MODEL="fake-model")
        os.environ.update(env)
        starts = [spawned_server(env, home) for _ in range(spawns)]
        first_answer = statistics.median(first for first, _, _ in starts)
        first_run = statistics.median(run for _, run, _ in starts)
        idle_rss = statistics.median(rss for _, _, rss in starts)
        with running(env, home) as (client, pid):
            assert client.post("/v1/runs", json={"prompt": PROMPT}).json()["answer"] == "ok"
            http = []
            for _ in range(runs):
                t = time.monotonic()
                assert client.post("/v1/runs", json={"prompt": PROMPT}).json()["exit_code"] == 0
                http.append(time.monotonic() - t)
            after_rss = rss_mib(pid)
        import agi

        agi.run(PROMPT)  # warm: imports and the pool, as a server's are
        api = []
        for _ in range(runs):
            t = time.monotonic()
            agi.run(PROMPT)
            api.append(time.monotonic() - t)
        process = []
        for _ in range(max(3, runs // 4)):
            t = time.monotonic()
            subprocess.run([AGI, PROMPT], env=env, cwd=home, capture_output=True, check=True)
            process.append(time.monotonic() - t)
    h, a, p = median_ms(http), median_ms(api), median_ms(process)
    print(f"start-ups: {spawns} (medians)")
    print(f"runs: {runs} over HTTP and the API, {len(process)} as processes (medians)")
    print(f"HTTP run            {h:8.1f} ms")
    print(f"Python API run      {a:8.1f} ms   HTTP/API     {h / a:5.2f}x (target <= 1.2x)")
    print(f"process per request {p:8.1f} ms   HTTP/process {h / p:5.3f}x (target <= 0.1x)")
    print(f"first HTTP answer   {first_answer * 1000:8.1f} ms after spawn (target 150 ms)")
    print(f"first run answered  {first_run * 1000:8.1f} ms after spawn (target: 100 ms more)")
    print(f"idle RSS            {idle_rss:8.1f} MiB at the first answer, {after_rss:.1f} after")


if __name__ == "__main__":
    main()
