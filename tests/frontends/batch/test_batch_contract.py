"""`agi --batch` against docs: batch point by point, where
tests/frontends/batch/test_batch.py leaves a point unproven: each per-job field, completion order,
the default of 4 workers, the shared backoff after a 429 that its job does not retry, Ctrl-C within
--timeout, and a --batch-out write that fails half way. The real executable against
tests/fakeserver.py; time limits are hang guards only."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from test_batch import answered, lines_of, prompt_of, sent, write_jobs

from conftest import AGI
from fakeserver import FakeModel, call, hang, status, text


def fake_env(env: dict[str, str], server: FakeModel) -> dict[str, str]:
    return {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}


def test_each_job_field_is_its_own(agi, tmp_path: Path) -> None:
    """model, sys, max_steps and timeout given on a line apply to that job alone."""
    terse = tmp_path / "terse.md"
    terse.write_text("Be terse.")
    jobs = tmp_path / "jobs.jsonl"
    lines = [
        {"id": "model", "prompt": "m", "model": "other-model"},
        {"id": "sys", "prompt": "s", "sys": str(terse)},
        {"id": "steps", "prompt": "loop", "max_steps": 1},
        {"id": "slow", "prompt": "wait", "timeout": 1},
        {"id": "plain", "prompt": "p"},
    ]
    jobs.write_text("".join(json.dumps(line) + "\n" for line in lines))
    script = answered(loop=call("calculate", expression="1+1"), wait=hang())
    with FakeModel(script) as server:
        r = agi("--batch", str(jobs), "--jobs", "5", server=server, timeout=60)
    results = {res["id"]: res for res in lines_of(r.stdout)}
    assert r.returncode == 1, r.stderr
    by_prompt = {prompt_of(body): body for body in server.requests}
    assert by_prompt["m"]["model"] == "other-model"
    assert by_prompt["p"]["model"] == "fake-model"
    assert by_prompt["s"]["messages"][0] == {"role": "system", "content": "Be terse."}
    assert by_prompt["p"]["messages"][0]["content"] != "Be terse."
    assert results["steps"]["exit"] == 4 and "step limit" in results["steps"]["error"]
    assert results["slow"]["exit"] == 4 and "time limit" in results["slow"]["error"]
    assert all(results[k]["exit"] == 0 for k in ("model", "sys", "plain"))


def test_lines_come_in_completion_order_and_four_run_by_default(agi, tmp_path: Path) -> None:
    """Without --jobs, four jobs are in flight at once; a job that finishes first is written
    first, whatever its place in the input."""
    jobs = tmp_path / "jobs.jsonl"
    write_jobs(jobs, 8)
    active, most, lock = [0], [0], threading.Lock()
    release = threading.Event()

    def step(body: dict[str, Any]) -> dict[str, Any]:
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
            if active[0] == 4:
                release.set()
        release.wait(30)  # hang guard: every job waits until four are in flight
        if prompt_of(body) == "p0":
            time.sleep(0.5)  # p0 answers last of its wave
        with lock:
            active[0] -= 1
        return text(f"echo: {prompt_of(body)}")

    with FakeModel(step) as server:
        r = agi("--batch", str(jobs), server=server)
    assert r.returncode == 0, r.stderr
    ids = [res["id"] for res in lines_of(r.stdout)]
    assert most[0] == 4
    assert sorted(ids) == sorted(f"p{i}" for i in range(8))
    assert ids.index("p0") > ids.index("p1")  # not input order: completion order


def test_a_429_on_the_last_attempt_still_pauses_the_next_job(agi, tmp_path: Path) -> None:
    """p0 gets 429 three times (its last asks for 1.5 s) and fails; p1 (the only worker is
    free at once) is not sent until that pause is over."""
    jobs = tmp_path / "jobs.jsonl"
    write_jobs(jobs, 2)
    limited = {"n": 0}

    def p0(body: dict[str, Any]) -> dict[str, Any]:
        limited["n"] += 1
        wait = "1.5" if limited["n"] == 3 else "0.1"
        return status(429, {"error": {"message": "slow down"}}, {"retry-after": wait})

    script = answered(p0=p0)
    with FakeModel(script) as server:
        r = agi("--batch", str(jobs), "--jobs", "1", server=server)
    results = {res["id"]: res for res in lines_of(r.stdout)}
    assert r.returncode == 1, r.stderr
    assert results["p0"]["exit"] == 3 and results["p1"]["exit"] == 0
    assert sent(server) == Counter({"p0": 3, "p1": 1})
    last_429 = [t for t, p in script.log if p == "p0"][-1]
    [p1_sent] = [t for t, p in script.log if p == "p1"]
    assert p1_sent - last_429 >= 1.4  # the recorded requests: the pause was kept


def test_a_429_asking_for_long_stops_every_job_unsent(agi, tmp_path: Path) -> None:
    """retry-after 3600 (beyond the 60 s any run waits): p0 fails at once, and so does every
    job after it, without a request: the endpoint asked for the pause."""
    jobs = tmp_path / "jobs.jsonl"
    write_jobs(jobs, 3)
    long = status(429, {"error": {"message": "quota"}}, {"retry-after": "3600"})
    with FakeModel(answered(p0=long)) as server:
        r = agi("--batch", str(jobs), "--jobs", "1", server=server)
    results = {res["id"]: res for res in lines_of(r.stdout)}
    assert r.returncode == 1, r.stderr
    assert sent(server) == Counter(["p0"])
    assert all(res["exit"] == 3 for res in results.values())
    assert "3600" in results["p0"]["error"]
    for later in ("p1", "p2"):
        assert "not sent" in results[later]["error"] and "retry-after" in results[later]["error"]


def test_ctrl_c_waits_for_running_jobs_only_until_their_timeout(
    env: dict[str, str], tmp_path: Path
) -> None:
    """After the first Ctrl-C, jobs that would never end are ended by --timeout (exit 4,
    written), no other job starts, and the batch exits 130."""
    jobs, out = tmp_path / "jobs.jsonl", tmp_path / "out.jsonl"
    write_jobs(jobs, 6)
    with FakeModel(answered(p0=hang(), p1=hang())) as server:
        argv = [AGI, "--batch", str(jobs), "--jobs", "2", "--timeout", "2"]
        proc = subprocess.Popen(
            [*argv, "--batch-out", str(out)],
            env=fake_env(env, server),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while len(server.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)  # hang guard, >= 5x the 2 s timeout
    assert proc.returncode == 130, stderr
    results = {res["id"]: res for res in lines_of(stdout)}
    assert set(results) == {"p0", "p1"}
    assert all(res["exit"] == 4 and "time limit" in res["error"] for res in results.values())
    assert sent(server) == Counter(["p0", "p1"])
    assert out.read_text() == stdout


def limit_file_size(size: int) -> Any:
    def limit() -> None:  # in the child: a write past `size` bytes is cut short, then EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return limit


def test_a_failed_batch_out_write_leaves_whole_lines_and_stops(
    env: dict[str, str], tmp_path: Path
) -> None:
    """A write that the system cuts short (here a file size limit; a full disk alike) is cut
    back to the line's start: FILE holds whole lines only, no job starts after it, exit 1;
    the rerun runs exactly the jobs FILE does not hold."""
    jobs, out = tmp_path / "jobs.jsonl", tmp_path / "out.jsonl"
    prompts = [f"p{i}" for i in range(5)]
    pad = "x" * 3000  # long ids: each output line is about 3.2 KB, the sessions' files small
    ids = {p: f"{p}-{pad}" for p in prompts}
    jobs.write_text("".join(json.dumps({"id": ids[p], "prompt": p}) + "\n" for p in prompts))
    with FakeModel(answered()) as server:
        proc = subprocess.run(
            [AGI, "--batch", str(jobs), "--jobs", "1", "--batch-out", str(out)],
            env=fake_env(env, server),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=limit_file_size(8000),  # the limit falls inside the third line
        )
    assert proc.returncode == 1, proc.stderr
    assert "cannot write --batch-out file" in proc.stderr
    held = lines_of(out.read_text())
    assert [res["id"] for res in held] == [ids["p0"], ids["p1"]]
    assert [res["id"] for res in lines_of(proc.stdout)] == [ids[p] for p in prompts[:3]]
    assert sent(server) == Counter(["p0", "p1", "p2"])  # nothing started after the failure
    with FakeModel(answered()) as again:
        env2 = fake_env(env, again)
        rerun = subprocess.run(
            [AGI, "--batch", str(jobs), "--batch-out", str(out)],
            env=env2,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert rerun.returncode == 0, rerun.stderr
    assert sent(again) == Counter(prompts[2:])
    assert sorted(res["id"] for res in lines_of(out.read_text())) == sorted(ids.values())


def test_the_progress_line_tells_cost_rate_and_eta(env: dict[str, str], tmp_path: Path) -> None:
    """In a terminal: done/failed/running, the cost so far, the rate and, while jobs remain,
    an ETA; drawn on stderr only (stdout keeps the result lines)."""
    import os
    import pty

    (tmp_path / "config.toml").write_text('[prices."fake-model"]\ninput = 500.0\noutput = 1000.0\n')
    jobs = tmp_path / "jobs.jsonl"
    prompts = write_jobs(jobs, 3)
    slow = {p: text("done", delay=0.3, pieces=3) for p in prompts}  # about 1 s a job
    with FakeModel(answered(**slow)) as server:
        leader, follower = pty.openpty()
        proc = subprocess.Popen(
            [AGI, "--batch", str(jobs), "--jobs", "1"],
            env=fake_env(env, server),
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
        stdout, _ = proc.communicate(timeout=60)
        os.close(leader)
    assert proc.returncode == 0
    assert len(lines_of(stdout.decode())) == 3
    drawn = seen.decode()
    assert "1/3 done, 0 failed, 1 running, $0.01" in drawn
    assert "jobs/s, ETA " in drawn
    assert "3/3 done, 0 failed, 0 running, $0.03" in drawn
