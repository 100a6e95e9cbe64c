"""Error replies to bad lines wait for the client to read them (bounded input, docs: security):
`agi --acp` and `agi --mcp-serve` fed four million lines that are not JSON by a client that
reads nothing stop reading their input once their output pipe is full, so their memory stays
bounded instead of piling up a reply per line; once the client reads, the replies come, one per
line, and the server goes on. The real executables; hang guards only."""

from __future__ import annotations

import fcntl
import json
import os
import select
import subprocess
import time

import pytest

from conftest import AGI

LINES = 4_000_000  # bad lines (8 MB): their replies would take hundreds of MB if they piled up
GUARD = 60  # seconds: hang guards only
MOST = 200 << 20  # bytes of resident memory the server may reach


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        line = next(x for x in f if x.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


@pytest.mark.parametrize("mode", ["--acp", "--mcp-serve"])
def test_replies_to_bad_lines_wait_for_a_client_that_does_not_read(env, tmp_path, mode):
    proc = subprocess.Popen(
        [AGI, mode],
        env={**env, "AGI_BASE_URL": "http://127.0.0.1:9/v1", "AGI_MODEL": "fake-model"},
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    fd = proc.stdin.fileno()
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
    data = b"x\n" * LINES
    sent = 0
    try:
        deadline = time.monotonic() + GUARD
        while sent < len(data) and time.monotonic() < deadline:
            _, ready, _ = select.select([], [fd], [], 2.0)
            if not ready:
                break  # the server stopped reading: it waits for its replies to be read
            try:
                sent += os.write(fd, data[sent : sent + (1 << 16)])
            except BlockingIOError:
                continue
        assert proc.poll() is None, "the server ended"
        assert rss(proc.pid) < MOST, f"{rss(proc.pid) >> 20} MB resident"
        assert sent < len(data), "the server read every line with no one reading its replies"
        first = json.loads(proc.stdout.readline())  # the client reads: replies come
        assert first["error"]["code"] == -32700, first
    finally:
        proc.kill()
        proc.communicate(timeout=GUARD)
