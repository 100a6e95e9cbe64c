"""`agi --batch` reads its input within bounds (docs: batch): a line over `stdin_limit`, an
input of more lines than a batch holds, or one that never ends (--timeout) is one `agi:` line
naming it, in little memory (the child runs under an address-space limit); JSON nested too
deep is a bad line, not a traceback; two batches on one `--batch-out` file never both run (the
file is locked: the second says so, exit 2). The real executable and the scripted model."""

from __future__ import annotations

import os
import resource
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


def test_an_input_that_never_ends_stops_at_the_bound(env, tmp_path):
    yes = subprocess.Popen(["yes", '{"prompt": "x"}'], stdout=subprocess.PIPE)
    try:
        result = batch(env, tmp_path, "-", stdin=yes.stdout)
    finally:
        yes.kill()
        yes.wait()
    one_line(result, 2, "stdin", "lines")


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
