"""In a real pseudo-terminal, stderr shows the work; stdout still carries only the answer."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time

from conftest import AGI
from fakeserver import FakeModel, call, text


def run_with_tty_stderr(args, env, cwd, timeout=30):
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [AGI, *args],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    screen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the other side is closed
                break
            if not data:
                break
            screen += data
        elif proc.poll() is not None:
            break
    out = proc.stdout.read()
    proc.wait(timeout=5)
    os.close(master)
    return proc.returncode, out.decode(), screen.decode("utf-8", "replace")


def test_terminal_shows_tool_calls_and_timings(env, tmp_path):
    script = [
        call("Bash", command="echo hello from bash"),
        text("All done.", reasoning="Let me think about this.", delay=0.2),
    ]
    with FakeModel(*script) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="m", TERM="xterm")
        code, out, err = run_with_tty_stderr(["run it"], env, tmp_path)
    assert code == 0
    assert out == "All done.\n"
    plain = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", err)
    assert "Bash(echo hello from bash)" in plain
    assert re.search(r"⎿ hello from bash \(\d+\.\d\ds\)", plain)
    assert "Let me think about this." in plain  # reasoning, dimmed
    assert "\x1b[2m" in err
    assert "session " in plain and str(tmp_path / "agi-home") in plain
    assert re.search(r"thinking \d+\.\ds", plain)  # the spinner with elapsed time


def test_quiet_terminal_shows_nothing(env, tmp_path):
    with FakeModel(call("Bash", command="true"), text("ok")) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="m")
        code, out, err = run_with_tty_stderr(["-q", "go"], env, tmp_path)
    assert (code, out, err) == (0, "ok\n", "")


def test_verbose_in_a_pipe_shows_the_work_without_colour(agi):
    with FakeModel(call("Bash", command="echo hi"), text("ok")) as server:
        r = agi("-v", "go", server=server)
    assert r.stdout == "ok\n"
    assert "Bash(echo hi)" in r.stderr and "\x1b[" not in r.stderr


def test_a_retry_shows_in_a_terminal_but_not_in_a_pipe(agi, env, tmp_path):
    from fakeserver import status

    busy = {"error": {"message": "overloaded"}}
    with FakeModel(status(503, busy), text("fine")) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="m")
        code, out, err = run_with_tty_stderr(["go"], env, tmp_path)
    assert code == 0 and out == "fine\n"
    assert "HTTP 503: overloaded; retrying in" in err and "(2 of 3)" in err
    with FakeModel(status(503, busy), text("fine")) as server:
        r = agi("go", server=server)
    assert r.returncode == 0 and r.stdout == "fine\n" and r.stderr == ""
