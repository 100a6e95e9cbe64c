"""`agi --batch` (docs: batch), driven through the real executable against the scripted
server: output lines valid and complete, every prompt sent once (also across a SIGKILL and a
resume), shards that partition the input, the shared budget and backoff in the recorded
requests, Ctrl-C, and bad input named by its line number."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from conftest import AGI, start_agi
from fakeserver import FakeModel, call, hang, status, text

KEYS = {"id", "answer", "exit", "error", "session", "steps", "usage"}


def prompt_of(body: dict[str, Any]) -> str:
    """The job's prompt: the first user message of the request."""
    first = next(m for m in body["messages"] if m["role"] == "user")
    content = first["content"]
    return content if isinstance(content, str) else content[0]["text"]


def answered(**by_prompt: Any) -> Any:
    """A script step answering each prompt as given (a step or a function of the body), and
    every other one with `echo: PROMPT`; the requests' times are recorded in `.log`."""
    log: list[tuple[float, str]] = []

    def step(body: dict[str, Any]) -> dict[str, Any]:
        prompt = prompt_of(body)
        log.append((time.monotonic(), prompt))
        found = by_prompt.get(prompt)
        if callable(found):
            found = found(body)
        return found or text(f"echo: {prompt}")

    step.log = log  # type: ignore[attr-defined]
    return step


def write_jobs(path: Path, n: int, prefix: str = "p") -> list[str]:
    prompts = [f"{prefix}{i}" for i in range(n)]
    path.write_text("".join(json.dumps({"id": p, "prompt": p}) + "\n" for p in prompts))
    return prompts


def lines_of(out: str) -> list[dict[str, Any]]:
    """Every line a complete result object (a torn or foreign line fails here)."""
    assert out == "" or out.endswith("\n")
    results = [json.loads(line) for line in out.splitlines()]
    for result in results:
        assert set(result) == KEYS, result
    return results


def sent(server: FakeModel) -> Counter[str]:
    return Counter(prompt_of(body) for body in server.requests)


def test_jobs_in_and_lines_out(agi, tmp_path: Path) -> None:
    """Objects, a plain line (its line number is its id), blank lines skipped; each job its
    own session; every prompt sent once; one valid line per job."""
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(
        '{"id": "a", "prompt": "first"}\n\nsecond, a plain line\n{"id": 9, "prompt": "third"}\n'
    )
    with FakeModel(answered()) as server:
        r = agi("--batch", str(jobs), server=server)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    results = {res["id"]: res for res in lines_of(r.stdout)}
    assert set(results) == {"a", 3, 9}
    assert results[3]["answer"] == "echo: second, a plain line"
    assert all(res["exit"] == 0 and res["error"] is None for res in results.values())
    assert all(res["steps"] == 1 and res["usage"]["input"] == 10 for res in results.values())
    sessions = {res["session"] for res in results.values()}
    assert len(sessions) == 3 and all((Path(s) / "meta.json").exists() for s in sessions)
    assert sent(server) == Counter(["first", "second, a plain line", "third"])


def test_stdin_and_job_fields(agi, tmp_path: Path) -> None:
    """`-` reads stdin; a job's schema, exit_code and session are its own."""
    session = tmp_path / "mine"
    lines = [
        {"id": "s", "prompt": "json please", "schema": "n: int"},
        {"id": "j", "prompt": "judge me", "exit_code": True},
        {"id": "k", "prompt": "keep", "session": str(session)},
    ]
    verdict = text('{"success": false, "reason": "not done"}')
    script = answered(**{"json please": text('{"n": 7}'), "judge me": text("did it")})

    def step(body: dict[str, Any]) -> dict[str, Any]:
        if "judge me" in prompt_of(body) and len(body["messages"]) > 3:
            return verdict  # the judge's ghost exchange
        return script(body)

    with FakeModel(step) as server:
        r = agi("--batch", "-", server=server, input="".join(json.dumps(j) + "\n" for j in lines))
    results = {res["id"]: res for res in lines_of(r.stdout)}
    assert r.returncode == 1, r.stderr
    assert "1 of 3 jobs failed" in r.stderr
    assert results["s"]["answer"] == {"n": 7} and results["s"]["exit"] == 0
    assert results["j"]["exit"] == 1 and "not done" in results["j"]["error"]
    assert results["k"]["session"] == str(session) and (session / "meta.json").exists()


def test_jobs_run_at_once(agi, tmp_path: Path) -> None:
    """--jobs 3: the server sees three requests in progress at the same time."""
    jobs = tmp_path / "jobs.jsonl"
    write_jobs(jobs, 6)
    active, most, lock = [0], [0], threading.Lock()

    def slow(body: dict[str, Any]) -> dict[str, Any]:
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
        time.sleep(0.4)
        with lock:
            active[0] -= 1
        return text("done")

    with FakeModel(slow) as server:
        r = agi("--batch", str(jobs), "--jobs", "3", server=server)
    assert r.returncode == 0, r.stderr
    assert len(lines_of(r.stdout)) == 6
    assert most[0] == 3


@pytest.mark.parametrize(
    "content, line, message",
    [
        ('{"prompt": "ok"}\n{"prompt": "bad"\n', 2, "not valid JSON"),
        ('{"prompt": "ok"}\n\n{"promt": "typo"}\n', 3, "unknown field 'promt'"),
        ('{"id": "x"}\n', 1, "no prompt"),
        ('{"id": "a", "prompt": "1"}\n{"id": "a", "prompt": "2"}\n', 2, "already used on line 1"),
        ('{"prompt": "x", "max_steps": 0}\n', 1, "max_steps must be a positive integer"),
        ('{"prompt": "x"}\n{"prompt": "y", "schema": "n: nope"}\n', 2, "schema"),
        ('{"prompt": "x", "sys": "/nonexistent/sys.md"}\n', 1, "/nonexistent/sys.md"),
        (b"ok\n\xff\xfe\n", 2, "not UTF-8"),
    ],
)
def test_bad_input_names_its_line(agi, tmp_path: Path, content: Any, line: int, message: str):
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_bytes(content if isinstance(content, bytes) else content.encode())
    with FakeModel(text("never")) as server:
        r = agi("--batch", str(jobs), server=server)
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""
    first = r.stderr.splitlines()[0]  # a bad schema is shown below, with a caret
    assert first.startswith("agi: ") and f"batch line {line}: " in first, r.stderr
    assert message in first
    assert server.requests == []


@pytest.mark.parametrize(
    "args, message",
    [
        (["--jobs", "2"], "--jobs needs --batch FILE"),
        (["--batch", "f", "hello"], "--batch takes no PROMPT words"),
        (["--batch", "f", "--shard", "3/3"], "--shard must be K/N"),
        (["--batch", "f", "--jobs", "0"], "--jobs"),
        (["--batch", "/nonexistent/jobs"], "cannot read --batch file"),
    ],
)
def test_bad_options(agi, args: list[str], message: str) -> None:
    with FakeModel(text("never")) as server:
        r = agi(*args, server=server)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert server.requests == []


def test_shards_partition_the_input(agi, tmp_path: Path) -> None:
    """Three shards run every job exactly once between them; their outputs concatenate."""
    jobs = tmp_path / "jobs.jsonl"
    prompts = write_jobs(jobs, 10)
    outputs = []
    with FakeModel(answered()) as server:
        for k in range(3):
            r = agi("--batch", str(jobs), "--shard", f"{k}/3", server=server)
            assert r.returncode == 0, r.stderr
            outputs.append([res["id"] for res in lines_of(r.stdout)])
    assert [sorted(o) for o in outputs] == [
        sorted(p for i, p in enumerate(prompts) if i % 3 == k) for k in range(3)
    ]
    assert sent(server) == Counter(prompts)


def test_resume_skips_what_succeeded(agi, tmp_path: Path) -> None:
    """--batch-out: a rerun runs only the jobs without an exit-0 line; lines are appended."""
    jobs, out = tmp_path / "jobs.jsonl", tmp_path / "out.jsonl"
    prompts = write_jobs(jobs, 5)
    bad = status(400, {"error": {"message": "bad request"}})
    with FakeModel(answered(p1=bad, p3=bad)) as server:
        r = agi("--batch", str(jobs), "--batch-out", str(out), server=server)
        assert r.returncode == 1
        assert sorted(res["exit"] for res in lines_of(out.read_text())) == [0, 0, 0, 3, 3]
        assert out.read_text() == r.stdout
    with FakeModel(answered()) as again:
        r = agi("--batch", str(jobs), "--batch-out", str(out), server=again)
    assert r.returncode == 0, r.stderr
    assert sent(again) == Counter(["p1", "p3"])
    assert [res["id"] for res in lines_of(r.stdout)] in (["p1", "p3"], ["p3", "p1"])
    ok = {res["id"] for res in lines_of(out.read_text()) if res["exit"] == 0}
    assert ok == set(prompts)


def test_sigkill_then_resume(agi, env: dict[str, str], tmp_path: Path) -> None:
    """Killed with SIGKILL: no torn line in --batch-out; the rerun sends only the jobs not
    written, so every prompt is answered exactly once in all."""
    jobs, out = tmp_path / "jobs.jsonl", tmp_path / "out.jsonl"
    prompts = write_jobs(jobs, 8)
    with FakeModel(answered(p5=hang())) as server:
        proc = start_agi(
            [AGI, "--batch", str(jobs), "--batch-out", str(out), "--jobs", "1"],
            {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"},
        )
        deadline = time.monotonic() + 30
        while "p5" not in sent(server) and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.kill()
        proc.wait(10)
        first = sent(server)
    written = [res["id"] for res in lines_of(out.read_text())]
    assert written == prompts[:5]
    with FakeModel(answered()) as again:
        r = agi("--batch", str(jobs), "--batch-out", str(out), "--jobs", "3", server=again)
    assert r.returncode == 0, r.stderr
    assert sent(again) == Counter(prompts[5:])  # p5 was in flight, never answered
    answered_once = first - Counter(["p5"]) + sent(again)
    assert answered_once == Counter(prompts)
    assert sorted(res["id"] for res in lines_of(out.read_text())) == sorted(prompts)


def test_resume_cuts_a_torn_last_line(agi, tmp_path: Path) -> None:
    jobs, out = tmp_path / "jobs.jsonl", tmp_path / "out.jsonl"
    write_jobs(jobs, 2)
    out.write_text(json.dumps({"id": "p0", "exit": 0}) + '\n{"id": "p1", "ex')
    with FakeModel(answered()) as server:
        r = agi("--batch", str(jobs), "--batch-out", str(out), server=server)
    assert r.returncode == 0, r.stderr
    assert sent(server) == Counter(["p1"])
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["p0", "p1"]


def priced(tmp_path: Path) -> None:
    """10 input and 5 output tokens a call (the fake's usage) cost $0.01."""
    (tmp_path / "config.toml").write_text('[prices."fake-model"]\ninput = 500.0\noutput = 1000.0\n')


def test_one_budget_for_the_batch(agi, tmp_path: Path) -> None:
    """--max-cost 0.03 for the batch: three calls are made, the other jobs are reported with
    exit 4 and never sent; the batch exits 4."""
    priced(tmp_path)
    jobs = tmp_path / "jobs.jsonl"
    write_jobs(jobs, 6)
    with FakeModel(answered()) as server:
        r = agi("--batch", str(jobs), "--max-cost", "0.03", "--jobs", "1", server=server)
    assert r.returncode == 4, r.stderr
    assert "cost limit reached ($0.03 of $0.03)" in r.stderr
    results = lines_of(r.stdout)
    assert len(server.requests) == 3
    assert [res["exit"] for res in results] == [0, 0, 0, 4, 4, 4]
    assert all("cost limit reached" in res["error"] for res in results[3:])
    assert sum(res["usage"]["cost"] for res in results) == pytest.approx(0.03)


def test_a_budget_needs_prices(agi, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.jsonl"
    write_jobs(jobs, 2)
    with FakeModel(text("never")) as server:
        r = agi("--batch", str(jobs), "--max-cost", "1", server=server)
    assert r.returncode == 2 and "--max-cost needs a price for" in r.stderr, r.stderr
    assert server.requests == [] and r.stdout == ""


def test_a_job_max_cost_is_its_own(agi, tmp_path: Path) -> None:
    """A job's max_cost limits that job; the batch without --max-cost has no budget."""
    priced(tmp_path)
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(
        '{"id": 1, "prompt": "tool", "max_cost": 0.005}\n{"id": 2, "prompt": "plain"}\n'
    )
    with FakeModel(answered(tool=call("calculate", expression="1+1"))) as server:
        r = agi("--batch", str(jobs), server=server)
    results = {res["id"]: res for res in lines_of(r.stdout)}
    assert results[1]["exit"] == 4 and results[2]["exit"] == 0
    assert r.returncode == 1


def test_backoff_is_shared(agi, tmp_path: Path) -> None:
    """A 429 with retry-after 1.5 s to one worker: no worker sends to that endpoint until the
    pause is over. p1-p3 are in flight meanwhile (answered slowly, so that the jobs after them
    start once the 429 has come); p0's retry and every later job wait out the pause."""
    jobs = tmp_path / "jobs.jsonl"
    write_jobs(jobs, 8)
    limited = {"count": 0}

    def first_limited(body: dict[str, Any]) -> dict[str, Any] | None:
        limited["count"] += 1
        if limited["count"] == 1:
            return status(429, {"error": {"message": "slow down"}}, {"retry-after": "1.5"})
        return None

    slow = {f"p{i}": text("slow", delay=0.1, pieces=5) for i in (1, 2, 3)}
    script = answered(p0=first_limited, **slow)
    with FakeModel(script) as server:
        r = agi("--batch", str(jobs), "--jobs", "4", server=server)
    assert r.returncode == 0, r.stderr
    assert all(res["exit"] == 0 for res in lines_of(r.stdout))
    assert sent(server) == Counter({"p0": 2, **{f"p{i}": 1 for i in range(1, 8)}})
    when_limited = next(t for t, p in script.log if p == "p0")
    later = [t - when_limited for t, p in script.log if p not in slow][1:]  # after the 429
    assert len(later) == 5
    assert min(later) >= 1.4


def test_timeout_per_job(agi, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.jsonl"
    write_jobs(jobs, 3)
    with FakeModel(answered(p1=hang())) as server:
        r = agi("--batch", str(jobs), "--timeout", "3", server=server, timeout=30)
    results = {res["id"]: res for res in lines_of(r.stdout)}
    assert results["p1"]["exit"] == 4 and "time limit" in results["p1"]["error"]
    assert results["p0"]["exit"] == results["p2"]["exit"] == 0
    assert r.returncode == 1


def started_batch(env: dict[str, str], server: FakeModel, *args: str) -> subprocess.Popen[str]:
    return start_agi([AGI, *args], {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"})


def wait_until(check: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert check()


def test_ctrl_c_lets_running_jobs_finish(env: dict[str, str], tmp_path: Path) -> None:
    """The first SIGINT: no job starts, the two running ones finish and are written; 130."""
    jobs, out = tmp_path / "jobs.jsonl", tmp_path / "out.jsonl"
    write_jobs(jobs, 10)
    with FakeModel(answered(**{f"p{i}": text("slow", delay=0.3) for i in range(10)})) as server:
        proc = started_batch(
            env, server, "--batch", str(jobs), "--jobs", "2", "--batch-out", str(out)
        )
        wait_until(lambda: len(server.requests) >= 2)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    results = lines_of(stdout)
    assert len(results) == len(server.requests) >= 2
    assert all(res["exit"] == 0 for res in results)
    assert out.read_text() == stdout
    assert "interrupted by SIGINT" in stderr


def test_second_ctrl_c_stops_at_once(env: dict[str, str], tmp_path: Path) -> None:
    """Jobs that never get an answer: a second SIGINT ends the batch at once, with 130 and
    only whole lines (of the jobs that had finished)."""
    jobs, out = tmp_path / "jobs.jsonl", tmp_path / "out.jsonl"
    write_jobs(jobs, 6)
    with FakeModel(answered(p2=hang(), p3=hang())) as server:
        proc = started_batch(
            env, server, "--batch", str(jobs), "--jobs", "2", "--batch-out", str(out)
        )
        wait_until(lambda: {"p2", "p3"} <= set(sent(server)))
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        assert proc.poll() is None  # still waiting for the running jobs
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=15)
    assert proc.returncode == 130, stderr
    assert sorted(res["id"] for res in lines_of(stdout)) == ["p0", "p1"]
    assert out.read_text().endswith("\n") and len(lines_of(out.read_text())) == 2


def test_sigterm_stops_at_once(env: dict[str, str], tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.jsonl"
    write_jobs(jobs, 4)
    with FakeModel(answered(p1=hang(), p2=hang())) as server:
        proc = started_batch(env, server, "--batch", str(jobs), "--jobs", "2")
        wait_until(lambda: {"p1", "p2"} <= set(sent(server)))
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=15)
    assert proc.returncode == 143, stderr
    assert [res["id"] for res in lines_of(stdout)] == ["p0"]
    assert "interrupted by SIGTERM" in stderr


def test_progress_line_only_in_a_terminal(agi, env: dict[str, str], tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.jsonl"
    write_jobs(jobs, 3)
    with FakeModel(answered(p0=text("a", delay=0.4))) as server:
        piped = agi("--batch", str(jobs), server=server)
        assert piped.returncode == 0 and piped.stderr == ""
        leader, follower = pty.openpty()
        proc = subprocess.Popen(
            [AGI, "--batch", str(jobs)],
            env={**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=follower,
        )
        os.close(follower)
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        proc.communicate(timeout=30)
        os.close(leader)
    assert proc.returncode == 0
    assert b"3/3 done, 0 failed, 0 running" in seen


def test_each_job_is_a_whole_run(agi, tmp_path: Path) -> None:
    """Every job as `agi PROMPT` runs it: its tools (a real Bash call), its hooks
    (UserPromptSubmit with its own prompt, SessionEnd once per job), its own session."""
    log = tmp_path / "hooks.log"
    record = (
        f"{sys.executable} -c 'import json,sys; p=json.load(sys.stdin); "
        f'open("{log}", "a").write(p["hook_event_name"] + " " + p.get("prompt", "") + "\\n")\''
    )
    entry = [{"matcher": "", "hooks": [{"type": "command", "command": record}]}]
    hooks = tmp_path / "hooks.json"
    hooks.write_text(json.dumps({"hooks": {"UserPromptSubmit": entry, "SessionEnd": entry}}))
    jobs = tmp_path / "jobs.jsonl"
    prompts = write_jobs(jobs, 4)

    def step(body: dict[str, Any]) -> dict[str, Any]:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return text(f"the tool said {last['content'].strip()}")
        return call("Bash", command="echo $((6*7))")

    with FakeModel(step) as server:
        r = agi("--batch", str(jobs), "--jobs", "2", "--hooks", str(hooks), server=server)
    assert r.returncode == 0, r.stderr
    results = lines_of(r.stdout)
    assert all("the tool said 42" in res["answer"] and res["steps"] == 2 for res in results)
    events = Counter(log.read_text().splitlines())
    assert events == Counter([f"UserPromptSubmit {p}" for p in prompts] + ["SessionEnd "] * 4)
    assert len({res["session"] for res in results}) == 4


def test_connections_are_shared(agi, tmp_path: Path) -> None:
    """One connection pool for the batch: against a server that keeps connections alive
    (whole JSON completions), 20 jobs on 4 workers use no more connections than workers."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    peers: list[int] = []
    answer = {"role": "assistant", "content": "hi"}
    body = json.dumps(
        {
            "choices": [{"index": 0, "message": answer, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1},
        }
    ).encode()

    class KeepAlive(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            peers.append(self.client_address[1])
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), KeepAlive)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    jobs = tmp_path / "jobs.jsonl"
    write_jobs(jobs, 20)
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        r = agi("--batch", str(jobs), extra_env={"AGI_BASE_URL": url, "AGI_MODEL": "m"})
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 0, r.stderr
    assert len(lines_of(r.stdout)) == 20 and len(peers) == 20
    assert len(set(peers)) <= 4
