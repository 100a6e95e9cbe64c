"""`agi --batch FILE --batch-api openai|anthropic` (docs: batch), driven through the real
executable against the scripted provider-batch server (batch_server.py): the requests as the
providers' batch APIs take them, splitting at the limits, section 19's lines at the batch
price, --schema validated on arrival, jobs that cannot go refused before anything is sent,
resume from OUT.batches.json after Ctrl-C or a kill without submitting a job twice, a corrupt
record reported and kept, a second Ctrl-C cancelling the batches, the progress line in a
terminal."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from batch_server import BatchServer

from conftest import AGI, start_agi

KEYS = {"id", "answer", "exit", "error", "session", "steps", "usage"}
KEY = "sk-batch-test-0123456789abcdef"


def write_jobs(path: Path, n: int, **fields: Any) -> list[str]:
    prompts = [f"p{i}" for i in range(n)]
    path.write_text("".join(json.dumps({"id": p, "prompt": p, **fields}) + "\n" for p in prompts))
    return prompts


def lines_of(out: str) -> list[dict[str, Any]]:
    assert out == "" or out.endswith("\n")
    results = [json.loads(line) for line in out.splitlines()]
    for result in results:
        assert set(result) == KEYS, result
    return results


def openai_env(env: dict[str, str], server: BatchServer, **more: str) -> dict[str, str]:
    return {
        **env,
        "AGI_BASE_URL": server.url,
        "AGI_MODEL": "openai:gpt-4o-mini",
        "OPENAI_API_KEY": KEY,
        "AGI_BATCH_POLL": "0.05",
        **more,
    }


def anthropic_env(env: dict[str, str], server: BatchServer, **more: str) -> dict[str, str]:
    return {
        **env,
        "AGI_BASE_URL": server.root,
        "AGI_MODEL": "anthropic:claude-haiku-4-5",
        "ANTHROPIC_API_KEY": KEY,
        "AGI_BATCH_POLL": "0.05",
        **more,
    }


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AGI, *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*")] if path.exists() else []


def test_openai_batch_lines_and_requests(env: dict[str, str], tmp_path: Path) -> None:
    """The jobs as one uploaded JSONL file of chat-completions requests (no tools, no
    streaming, the system prompt and the prompt), one batch polled to `completed`; a line per
    job at half the live price; nothing under $AGI_HOME; the key never in the output."""
    jobs = tmp_path / "jobs.jsonl"
    prompts = write_jobs(jobs, 5)
    with BatchServer() as server:
        r = run(["--batch", str(jobs), "--batch-api", "openai"], openai_env(env, server), tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    results = lines_of(r.stdout)
    assert sorted(res["id"] for res in results) == prompts
    live = (10 * 0.15 + 5 * 0.60) / 1e6  # gpt-4o-mini's price, the server's usage
    for res in results:
        assert res["answer"] == f"echo: {res['id']}" and res["exit"] == 0
        assert res["session"] is None and res["steps"] == 1 and res["error"] is None
        assert res["usage"]["input"] == 10 and res["usage"]["cost"] == pytest.approx(live / 2)
    assert len(server.uploads) == 1 and len(server.created) == 1
    lines = server.uploads[0]
    assert len({line["custom_id"] for line in lines}) == 5
    for line in lines:
        assert line["method"] == "POST" and line["url"] == "/v1/chat/completions"
        body = line["body"]
        assert body["model"] == "gpt-4o-mini"
        assert "tools" not in body and "stream" not in body and "stream_options" not in body
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert sorted(m["body"]["messages"][1]["content"] for m in lines) == prompts
    assert server.created[0]["completion_window"] == "24h"
    assert all(h.get("authorization") == f"Bearer {KEY}" for h in server.headers)
    assert server.polls() >= 4  # validating, in_progress, finalizing, completed
    assert files_under(Path(env["AGI_HOME"])) == []
    assert KEY not in r.stdout


def test_split_at_the_limits(env: dict[str, str], tmp_path: Path) -> None:
    """AGI_BATCH_SIZE and AGI_BATCH_BYTES lower the provider's limits: 7 jobs in batches of 3
    requests, then batches of at most ~2 requests' bytes; every job sent once, answered once."""
    jobs = tmp_path / "jobs.jsonl"
    prompts = write_jobs(jobs, 7)
    with BatchServer() as server:
        args = ["--batch", str(jobs), "--batch-api", "openai"]
        r = run(args, openai_env(env, server, AGI_BATCH_SIZE="3"), tmp_path)
        assert r.returncode == 0, r.stderr
        assert [len(u) for u in server.uploads] == [3, 3, 1]
        one = len(json.dumps(server.uploads[0][0]).encode()) + 1
        r2 = run(args, openai_env(env, server, AGI_BATCH_BYTES=str(2 * one + 10)), tmp_path)
    assert r2.returncode == 0, r2.stderr
    assert [len(u) for u in server.uploads[3:]] == [2, 2, 2, 1]
    for out in (r.stdout, r2.stdout):
        assert sorted(res["id"] for res in lines_of(out)) == prompts
    assert Counter(server.answered) == Counter({f"agi-{i}": 2 for i in range(7)})


def test_schema_is_in_the_request_and_checked_on_arrival(
    env: dict[str, str], tmp_path: Path
) -> None:
    """--schema: each request carries json_schema structured output; a valid answer is the
    parsed JSON, an invalid one that job's line with exit 5 (the batch exits 1)."""
    jobs = tmp_path / "jobs.jsonl"
    write_jobs(jobs, 3)
    answers = {"p0": '{"kind": "sales"}', "p1": '{"kind": "weather"}', "p2": '{"kind": "spam"}'}
    with BatchServer(lambda prompt, body: answers[prompt]) as server:
        args = ["--batch", str(jobs), "--batch-api", "openai"]
        args += ["--schema", "kind: enum(sales|support|spam)"]
        r = run(args, openai_env(env, server), tmp_path)
    assert r.returncode == 1, r.stderr
    assert r.stderr == "agi: 1 of 3 jobs failed\n"
    by_id = {res["id"]: res for res in lines_of(r.stdout)}
    assert by_id["p0"]["answer"] == {"kind": "sales"} and by_id["p0"]["exit"] == 0
    assert by_id["p2"]["answer"] == {"kind": "spam"}
    assert by_id["p1"]["exit"] == 5 and by_id["p1"]["answer"] is None
    assert "kind" in by_id["p1"]["error"] and by_id["p1"]["steps"] == 1
    for line in server.uploads[0]:
        form = line["body"]["response_format"]
        assert form["type"] == "json_schema"
        assert form["json_schema"]["schema"]["properties"]["kind"]["enum"] == [
            "sales",
            "support",
            "spam",
        ]


def test_batch_prices_from_the_config(env: dict[str, str], tmp_path: Path) -> None:
    """`batch_input`/`batch_output` in a [prices."..."] table are the batch's prices; without
    them a model costs half its price."""
    config = Path(env["AGI_CONFIG"])
    config.write_text(
        '[prices."openai:gpt-4o-mini"]\ninput = 1.0\noutput = 2.0\n'
        "batch_input = 0.1\nbatch_output = 0.3\n"
        '[prices."openai:mine"]\ninput = 4.0\noutput = 8.0\n'
    )
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text('{"id": 1, "prompt": "a"}\n{"id": 2, "prompt": "b", "model": "openai:mine"}\n')
    with BatchServer() as server:
        r = run(["--batch", str(jobs), "--batch-api", "openai"], openai_env(env, server), tmp_path)
    assert r.returncode == 0, r.stderr
    cost = {res["id"]: res["usage"]["cost"] for res in lines_of(r.stdout)}
    assert cost[1] == pytest.approx((10 * 0.1 + 5 * 0.3) / 1e6)
    assert cost[2] == pytest.approx((10 * 2.0 + 5 * 4.0) / 1e6)
    assert sorted(len(u) for u in server.uploads) == [1, 1]  # one model a batch
    assert {u[0]["body"]["model"] for u in server.uploads} == {"gpt-4o-mini", "mine"}


def test_anthropic_message_batches(env: dict[str, str], tmp_path: Path) -> None:
    """Anthropic: one POST /v1/messages/batches with a request per job (custom ids the API
    takes, Messages API params with max_tokens, the schema as the forced answer tool), polled
    to `ended`, the results_url read: succeeded, errored and expired results as lines."""
    jobs = tmp_path / "jobs.jsonl"
    write_jobs(jobs, 4)

    def answer(prompt: str, body: dict[str, Any]) -> Any:
        if prompt == "p1":
            return {"error": {"type": "invalid_request_error", "message": "prompt is too long"}}
        if prompt == "p2":
            return {"expired": True}
        return '{"kind": "support"}'

    with BatchServer(answer) as server:
        args = ["--batch", str(jobs), "--batch-api", "anthropic", "--schema", "kind: str"]
        (tmp_path / "sys.md").write_text("Classify.")  # no built-in prompt under --schema
        r = run([*args, "--sys", "sys.md"], anthropic_env(env, server), tmp_path)
    assert r.returncode == 1, r.stderr
    by_id = {res["id"]: res for res in lines_of(r.stdout)}
    half = (10 * 1.00 + 5 * 5.00) / 1e6 / 2  # claude-haiku-4-5, half price
    for good in ("p0", "p3"):
        assert by_id[good]["answer"] == {"kind": "support"} and by_id[good]["exit"] == 0
        assert by_id[good]["usage"]["cost"] == pytest.approx(half)
    assert by_id["p1"]["exit"] == 3 and "prompt is too long" in by_id["p1"]["error"]
    assert by_id["p2"]["exit"] == 3 and "expired" in by_id["p2"]["error"]
    (created,) = server.created
    for request in created["requests"]:
        params = request["params"]
        assert params["model"] == "claude-haiku-4-5" and params["max_tokens"] > 0
        assert "stream" not in params
        assert params["tool_choice"] == {"type": "tool", "name": "answer"}
        assert [t["name"] for t in params["tools"]] == ["answer"]
        # the shared prefix is cached once; a job's own prompt is not written to the cache
        assert params["system"][-1] == {**params["system"][-1], "text": "Classify."}
        assert params["system"][-1]["cache_control"] == {"type": "ephemeral"}
        assert all("cache_control" not in b for m in params["messages"] for b in m["content"])
    assert all(h.get("x-api-key") == KEY for h in server.headers)
    assert all(h.get("anthropic-version") for h in server.headers)
    assert ("GET", f"/v1/messages/batches/{next(iter(server.batches))}/results") in server.log


@pytest.mark.parametrize(
    "line,args,message",
    [
        ({"session": "s"}, [], "batch line 2: --batch-api answers in one call: no session"),
        ({"exit_code": True}, [], "batch line 2: --batch-api answers in one call: exit_code"),
        ({"model": "anthropic:claude-haiku-4-5"}, [], "batch line 2: --batch-api openai sends"),
        ({}, ["--tool", "x.sh"], "--batch-api takes no --tool"),
        ({}, ["--tools", "Bash"], "--batch-api takes no --tools"),
        ({}, ["--exit-code"], "--batch-api takes no --exit-code"),
        ({}, ["--max-cost", "1"], "--batch-api takes no --max-cost"),
    ],
)
def test_jobs_that_need_more_than_one_call_are_refused(
    env: dict[str, str], tmp_path: Path, line: dict[str, Any], args: list[str], message: str
) -> None:
    """Exit 2 with one line naming the job's line (or the flag); nothing is sent, no output
    file is made."""
    jobs, out = tmp_path / "jobs.jsonl", tmp_path / "out.jsonl"
    jobs.write_text(json.dumps({"prompt": "fine"}) + "\n" + json.dumps({"prompt": "x", **line}))
    with BatchServer() as server:
        argv = ["--batch", str(jobs), "--batch-api", "openai", "--batch-out", str(out), *args]
        r = run(argv, openai_env(env, server), tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(f"agi: {message}") and r.stderr.count("\n") == 1, r.stderr
    assert server.log == [] and r.stdout == ""
    assert not out.exists()


def test_batch_api_needs_batch(agi) -> None:
    r = agi("--batch-api", "openai", "hello")
    assert r.returncode == 2 and r.stderr == "agi: --batch-api needs --batch FILE\n"


def started(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return start_agi([AGI, *argv], env)


def wait_until(check: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert check()


def test_ctrl_c_then_resume_submits_nothing_twice(env: dict[str, str], tmp_path: Path) -> None:
    """Batches that do not end: Ctrl-C stops waiting (130) and says how to resume; the
    batches are in OUT.batches.json; the rerun polls the same batches, submits nothing and
    writes every line once; the record goes once they are collected."""
    jobs, out = tmp_path / "jobs.jsonl", tmp_path / "out.jsonl"
    prompts = write_jobs(jobs, 5)
    record = tmp_path / "out.jsonl.batches.json"
    argv = ["--batch", str(jobs), "--batch-api", "openai", "--batch-out", str(out)]
    with BatchServer(statuses=["validating", "in_progress"]) as server:
        e = openai_env(env, server, AGI_BATCH_SIZE="2")
        proc = started(argv, e)
        wait_until(lambda: len(server.created) == 3 and server.polls() >= 6)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
        assert proc.returncode == 130, stderr
        assert stdout == "" and out.read_text() == ""
        assert "stopped waiting for 3 openai batches" in stderr
        assert "rerun the same command" in stderr and "Ctrl-C again within 2 s" in stderr
        kept = json.loads(record.read_text())
        assert sorted(b["id"] for b in kept["batches"]) == sorted(server.batches)
        assert server.cancels == []
        server.finish()
        r = run(argv, e, tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(server.uploads) == 3 and len(server.created) == 3  # nothing submitted again
    assert sorted(res["id"] for res in lines_of(out.read_text())) == prompts
    assert out.read_text() == r.stdout
    assert not record.exists()


def test_kill_then_resume(env: dict[str, str], tmp_path: Path) -> None:
    """SIGKILL while waiting: the rerun collects the same batches; a rerun after that finds
    every job done and sends nothing."""
    jobs, out = tmp_path / "jobs.jsonl", tmp_path / "out.jsonl"
    prompts = write_jobs(jobs, 4)
    argv = ["--batch", str(jobs), "--batch-api", "anthropic", "--batch-out", str(out)]
    with BatchServer(anthropic_statuses=["in_progress"]) as server:
        e = anthropic_env(env, server)
        proc = started(argv, e)
        wait_until(lambda: server.polls() >= 2)
        proc.kill()
        proc.communicate(timeout=30)
        server.finish()
        r = run(argv, e, tmp_path)
        assert r.returncode == 0, r.stderr
        assert len(server.created) == 1
        assert sorted(res["id"] for res in lines_of(out.read_text())) == prompts
        before = list(server.log)
        again = run(argv, e, tmp_path)
    assert again.returncode == 0 and again.stdout == ""
    assert server.log == before


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_kill_while_a_batch_is_created_never_sends_it_twice(
    env: dict[str, str], tmp_path: Path, api: str
) -> None:
    """SIGKILL once the provider has created the batch but before agi has its id: the record
    already holds it (no id yet, a token); the rerun finds it among the provider's batches
    (OpenAI: by the token in its metadata; Anthropic: by its time and size), collects it and
    creates nothing."""
    jobs, out = tmp_path / "jobs.jsonl", tmp_path / "out.jsonl"
    prompts = write_jobs(jobs, 3)
    record = tmp_path / "out.jsonl.batches.json"
    argv = ["--batch", str(jobs), "--batch-api", api, "--batch-out", str(out)]
    with BatchServer() as server:
        e = (openai_env if api == "openai" else anthropic_env)(env, server)
        server.holding = {"/v1/batches", "/v1/messages/batches"}
        proc = started(argv, e)
        wait_until(lambda: len(server.batches) == 1)
        (kept,) = json.loads(record.read_text())["batches"]
        proc.kill()
        proc.communicate(timeout=30)
        server.release.set()
        assert kept["id"] == "" and kept["token"] and len(kept["jobs"]) == 3
        r = run(argv, e, tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(server.created) == len(server.batches) == 1  # nothing sent twice
    assert sorted(res["id"] for res in lines_of(out.read_text())) == prompts
    assert not record.exists()
    if api == "openai":
        assert server.created[0]["metadata"] == {"agi_batch": kept["token"]}


def test_a_kill_before_the_batch_is_created_sends_it_on_the_rerun(
    env: dict[str, str], tmp_path: Path
) -> None:
    """SIGKILL while the requests are uploaded: no batch was created, so the rerun finds none
    of the token's and sends the jobs, once."""
    jobs, out = tmp_path / "jobs.jsonl", tmp_path / "out.jsonl"
    prompts = write_jobs(jobs, 3)
    record = tmp_path / "out.jsonl.batches.json"
    argv = ["--batch", str(jobs), "--batch-api", "openai", "--batch-out", str(out)]
    with BatchServer() as server:
        e = openai_env(env, server)
        server.holding = {"/v1/files"}
        proc = started(argv, e)
        wait_until(lambda: len(server.uploads) == 1)
        assert [b["id"] for b in json.loads(record.read_text())["batches"]] == [""]
        proc.kill()
        proc.communicate(timeout=30)
        server.holding = set()
        server.release.set()
        r = run(argv, e, tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(server.created) == 1 and ("GET", "/v1/batches?limit=100") in server.log
    assert sorted(res["id"] for res in lines_of(out.read_text())) == prompts
    assert not record.exists()


def test_a_failed_job_is_sent_again_by_a_rerun(env: dict[str, str], tmp_path: Path) -> None:
    """Like the live batch, a rerun sends again only what did not succeed."""
    jobs, out = tmp_path / "jobs.jsonl", tmp_path / "out.jsonl"
    write_jobs(jobs, 3)
    failing = {"p1"}

    def answer(prompt: str, body: dict[str, Any]) -> Any:
        if prompt in failing:
            return {"error": {"message": "server busy"}, "status_code": 500}
        return f"echo: {prompt}"

    argv = ["--batch", str(jobs), "--batch-api", "openai", "--batch-out", str(out)]
    with BatchServer(answer) as server:
        r = run(argv, openai_env(env, server), tmp_path)
        assert r.returncode == 1
        failing.clear()
        r2 = run(argv, openai_env(env, server), tmp_path)
    assert r2.returncode == 0, r2.stderr
    assert [len(u) for u in server.uploads] == [3, 1]
    assert [res["id"] for res in lines_of(r2.stdout)] == ["p1"]


def test_a_corrupt_record_is_reported_and_kept(env: dict[str, str], tmp_path: Path) -> None:
    jobs, out = tmp_path / "jobs.jsonl", tmp_path / "out.jsonl"
    write_jobs(jobs, 2)
    record = tmp_path / "out.jsonl.batches.json"
    for content in ('{"version": 1, "batches": [{"id": 3}]}', "{not json", "[]"):
        record.write_text(content)
        with BatchServer() as server:
            argv = ["--batch", str(jobs), "--batch-api", "openai", "--batch-out", str(out)]
            r = run(argv, openai_env(env, server), tmp_path)
        assert r.returncode == 2, r.stderr
        assert r.stderr.startswith(f"agi: {record} is not a record of provider batches")
        assert r.stderr.count("\n") == 1
        assert record.read_text() == content and server.log == []


def test_second_ctrl_c_cancels_the_batches(env: dict[str, str], tmp_path: Path) -> None:
    """Ctrl-C, then Ctrl-C again while agi says so: every batch is cancelled at the provider
    before agi exits 130; a rerun collects what the cancelled batch says (canceled: 130)."""
    jobs, out = tmp_path / "jobs.jsonl", tmp_path / "out.jsonl"
    write_jobs(jobs, 3)
    argv = ["--batch", str(jobs), "--batch-api", "anthropic", "--batch-out", str(out)]
    with BatchServer(anthropic_statuses=["in_progress"]) as server:
        e = anthropic_env(env, server)
        proc = started(argv, e)
        wait_until(lambda: server.polls() >= 2)
        proc.send_signal(signal.SIGINT)
        assert proc.stderr is not None
        seen = ""
        while "Ctrl-C again" not in seen:
            line = proc.stderr.readline()
            assert line, seen
            seen += line
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
        assert proc.returncode == 130, seen + stderr
        assert server.cancels == list(server.batches)
        assert "asked anthropic to cancel 1 batches" in stderr
        r = run(argv, e, tmp_path)
    assert r.returncode == 1
    results = lines_of(r.stdout)
    assert len(results) == 3 and all(res["exit"] == 130 for res in results)
    assert all("canceled" in res["error"] for res in results)


def test_a_failed_batch_fails_its_jobs(env: dict[str, str], tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.jsonl"
    write_jobs(jobs, 2)
    errors = [{"code": "invalid_json", "message": "line 2 is not valid JSON", "line": 2}]
    with BatchServer(statuses=["validating", "failed"], errors=errors) as server:
        r = run(["--batch", str(jobs), "--batch-api", "openai"], openai_env(env, server), tmp_path)
    assert r.returncode == 1
    results = lines_of(r.stdout)
    assert all(res["exit"] == 3 and "line 2 is not valid JSON" in res["error"] for res in results)


def test_provider_errors_are_one_line(env: dict[str, str], tmp_path: Path) -> None:
    """A key the provider refuses: exit 3, one line in its words, the key not in it."""
    jobs = tmp_path / "jobs.jsonl"
    write_jobs(jobs, 1)
    r = run(
        ["--batch", str(jobs), "--batch-api", "openai"],
        {**env, "AGI_BASE_URL": "http://127.0.0.1:9/v1", "AGI_MODEL": "gpt-4o-mini",
         "OPENAI_API_KEY": KEY},
        tmp_path,
    )  # fmt: skip
    assert r.returncode == 3, r.stderr
    assert r.stderr.startswith("agi: openai batch: uploading the requests: ConnectError")
    assert r.stderr.count("\n") == 1 and KEY not in r.stderr


def test_progress_line_in_a_terminal(env: dict[str, str], tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.jsonl"
    write_jobs(jobs, 3)
    statuses = ["validating"] * 4 + ["in_progress"] * 6 + ["completed"]
    with BatchServer(statuses=statuses) as server:
        leader, follower = pty.openpty()
        proc = subprocess.Popen(
            [AGI, "--batch", str(jobs), "--batch-api", "openai"],
            env=openai_env(env, server, AGI_BATCH_POLL="0.2"),
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
        stdout, _ = proc.communicate(timeout=30)
        os.close(leader)
    assert proc.returncode == 0, seen
    assert len(lines_of(stdout.decode())) == 3
    assert b"agi batch: 1 batch submitted (3 jobs), 0 done, 0 failed, validating" in seen
    assert b"in_progress" in seen
    assert b"agi batch: 1 batch submitted (3 jobs), 3 done, 0 failed, ended" in seen
