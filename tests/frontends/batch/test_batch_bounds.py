"""`agi --batch` reads its input within bounds (docs: batch): a line over `stdin_limit`, an
input that waits past --timeout is one `agi:` line naming it, in little memory; an input of
any length streams (jobs start as their lines come, in bounded memory; the child runs under an
address-space limit); JSON nested too deep is a bad line, not a traceback; two batches on one
`--batch-out` file never both run (the file is locked: the second says so, exit 2). The real
executable and the scripted model."""

from __future__ import annotations

import json
import os
import resource
import select
import subprocess
import time
from pathlib import Path

from conftest import AGI
from fakeserver import FakeModel, hang, text

MEMORY = 1 << 30  # bytes of address space agi may use
GUARD = 60  # seconds: hang guards only


def small() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def model_env(env: dict[str, str], url: str = "http://127.0.0.1:9/v1") -> dict[str, str]:
    return {**env, "AGI_BASE_URL": url, "AGI_MODEL": "fake-model"}


def batch(env: dict[str, str], cwd: Path, *args: str, stdin: object = subprocess.DEVNULL):
    return subprocess.run(
        [AGI, "--batch", *args],
        env=model_env(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=GUARD,
        stdin=stdin,
        preexec_fn=small,
    )


def one_line(result: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agi: "), result.stderr
    for word in words:
        assert word in lines[0]
    return lines[0]


def test_an_endless_line_is_refused_in_little_memory(env, tmp_path):
    one_line(batch(env, tmp_path, "/dev/zero", "--timeout", "3"), 2, "batch line 1", "longer")


def test_the_line_bound_is_stdin_limit(env, tmp_path):
    Path(env["AGI_CONFIG"]).write_text("stdin_limit = 1000\n")
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text('{"prompt": "short"}\n{"prompt": "' + "x" * 2000 + '"}\n')
    one_line(batch(env, tmp_path, str(jobs)), 2, "batch line 2", "longer than 1000 bytes")


def test_an_input_that_never_ends_runs_its_jobs_and_stops_at_the_bound(env, tmp_path):
    """`yes '{"prompt": "x"}' | agi --batch -`: jobs are taken as the lines come (this shard's
    one job runs and is written), in little memory (the child runs under an address-space
    limit), and the input ends at the bound in all (100,000 lines), exit 2 naming it."""
    yes = subprocess.Popen(["yes", '{"prompt": "x"}'], stdout=subprocess.PIPE)
    try:
        with FakeModel(text("ran")) as server:
            proc = subprocess.run(
                [AGI, "--batch", "-", "--shard", "0/1000000000"],
                env=model_env(env, server.url),
                cwd=tmp_path,
                stdin=yes.stdout,
                capture_output=True,
                preexec_fn=small,
                timeout=GUARD,
            )
    finally:
        yes.kill()
        yes.wait()
    assert proc.returncode == 2, proc.stderr.decode()
    assert [json.loads(x)["answer"] for x in proc.stdout.decode().splitlines()] == ["ran"]
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agi: ") and "100000 lines" in lines[0]
    assert len(server.requests) == 1


def test_jobs_start_before_the_input_ends_and_a_bad_line_ends_the_batch(env, tmp_path):
    """A pipe held open: each job runs as its line comes; a bad line later is exit 2 naming it,
    with the lines of the jobs before it written."""
    with FakeModel(text("one"), text("two")) as server:
        proc = subprocess.Popen(
            [AGI, "--batch", "-"],
            env=model_env(env, server.url),
            cwd=tmp_path,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdin is not None and proc.stdout is not None
        answers = []
        for prompt in ("first", "second"):
            proc.stdin.write(json.dumps({"id": prompt, "prompt": prompt}) + "\n")
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], GUARD)  # a hang guard
            assert ready, "no result line before the input ended"
            answers.append(json.loads(proc.stdout.readline()))
        proc.stdin.write('{"id": "first", "prompt": "again"}\n')
        proc.stdin.flush()
        proc.stdin.close()
        assert proc.stderr is not None
        rest, err = proc.stdout.read(), proc.stderr.read()
        proc.wait(GUARD)
    assert [(a["id"], a["answer"]) for a in answers] == [("first", "one"), ("second", "two")]
    assert rest == ""
    assert proc.returncode == 2, err
    assert err.startswith('agi: batch line 3: id "first" is already used on line 1'), err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_ids_are_checked_across_a_streamed_input(env, tmp_path):
    """An id given on a later line equal to an earlier line's number (its id) is refused."""
    jobs = '{"prompt": "a"}\n\n{"prompt": "b"}\n{"id": 3, "prompt": "c"}\n'
    proc = subprocess.run(
        [AGI, "--batch", "-"], env=model_env(env), cwd=tmp_path, input=jobs, text=True,
        capture_output=True, timeout=GUARD,
    )  # fmt: skip
    one_line(proc, 2, "batch line 4", "id 3 is already used on line 3")


def test_an_input_that_waits_ends_at_the_timeout(env, tmp_path):
    fifo = tmp_path / "jobs"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # open, and never writes
    try:
        result = batch(env, tmp_path, str(fifo), "--timeout", "2")
    finally:
        os.close(writer)
    one_line(result, 4, "time limit")


def test_json_nested_too_deep_is_a_bad_line(env, tmp_path):
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text('{"prompt": "a"}\n{"prompt": ' + "[" * 100_000 + "\n")
    one_line(batch(env, tmp_path, str(jobs)), 2, "batch line 2", "nested too deep")


def test_a_second_batch_on_the_same_out_file_is_refused(env, tmp_path):
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text('{"id": "a", "prompt": "one"}\n')
    out = tmp_path / "out.jsonl"
    with FakeModel(hang(), text("late")) as server:
        first = subprocess.Popen(
            [AGI, "--batch", str(jobs), "--batch-out", str(out), "--timeout", "30"],
            env=model_env(env, server.url),
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + GUARD
            while not server.requests and time.monotonic() < deadline:
                time.sleep(0.05)
            assert server.requests, "the first batch never asked the model"
            second = subprocess.run(
                [AGI, "--batch", str(jobs), "--batch-out", str(out)],
                env=model_env(env, server.url),
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=GUARD,
                stdin=subprocess.DEVNULL,
            )
            one_line(second, 2, str(out), "in use")
            assert len(server.requests) == 1  # the job ran once
        finally:
            first.kill()
            first.communicate(timeout=GUARD)
