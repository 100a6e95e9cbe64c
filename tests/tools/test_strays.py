"""Commands a run started do not outlive it, even when they clear their environment and leave
their group and session (docs: security): `(setsid env -i sleep N &)` carries no environment mark,
yet is found by a mark its process keeps through `env -i`, `setsid` and double forks. The real
`agi` against the scripted server; each sleep has a duration no other process has."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from conftest import unique_seconds
from fakeserver import FakeModel, call, calls, text


def alive(pattern: str) -> list[int]:
    """The pids of the processes whose command line is exactly `sleep PATTERN` (not zombies)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{name}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if argv[:2] == [b"sleep", pattern.encode()] and state != b"Z":
            found.append(int(name))
    return found


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


FORMS = {
    "setsid env -i": "(setsid env -i sleep {s} &)",
    "env -i then setsid": "(env -i setsid sleep {s} > /dev/null 2>&1 < /dev/null &)",
    "nohup setsid env -i, fds closed": "nohup setsid env -i sleep {s} </dev/null >/dev/null 2>&1 &",
    "double fork in a new session": "setsid bash -c 'env -i sleep {s} & disown' &",
    "env -i python daemon": (
        "env -i python3 -c 'import os,sys\n"
        "if os.fork(): sys.exit()\n"
        "os.setsid()\n"
        "if os.fork(): sys.exit()\n"
        "os.closerange(0, 1000)\n"
        'os.execvp("sleep", ["sleep", "{s}"])\''
    ),
}


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
@pytest.mark.parametrize("form", list(FORMS))
def test_commands_that_clear_their_environment_do_not_outlive_the_run(agi, tmp_path, form):
    seconds = unique_seconds(60)
    command = FORMS[form].format(s=seconds)
    # the same command waits until the stray is running (a hang guard of 5 s)
    wait = f"for i in $(seq 100); do pgrep -fx 'sleep {seconds}' && break; sleep 0.05; done"
    try:
        with FakeModel(calls(("Bash", {"command": f"{command}\n{wait}"})), text("done")) as server:
            r = agi("go", server=server)
        assert r.returncode == 0, r.stderr
        (seen,) = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
        assert seen.strip().isdigit(), seen  # it was running during the run
        deadline = time.monotonic() + 10  # a hang guard: the kill is at the run's end
        while alive(seconds) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alive(seconds) == [], form
    finally:
        kill_all(alive(seconds))


def test_the_mark_does_not_change_what_a_command_sees(agi, tmp_path):
    """$0, the arguments, the exit code and the output are the command's own."""
    steps = [
        ("Bash", {"command": 'echo "$0|$#|$BASH_EXECUTION_STRING"; exit 7'}),
        ("Bash", {"command": "ulimit -S -t; echo $(( 1 + 2 ))"}),
    ]
    with FakeModel(calls(*steps), text("done")) as server:
        r = agi("go", server=server)
    assert r.returncode == 0, r.stderr
    first, second = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert first == 'bash|0|echo "$0|$#|$BASH_EXECUTION_STRING"; exit 7\nexit code 7', first
    assert second == "unlimited\n3", second
    assert subprocess.run(["true"]).returncode == 0


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_a_terminal_program_that_clears_its_environment_does_not_outlive_the_run(agi, tmp_path):
    seconds = unique_seconds(60)
    command = f"(setsid env -i sleep {seconds} &); sleep 30"
    wait = f"pgrep -fx 'sleep {seconds}' && break"
    script = [
        call("Terminal", action="start", id="t", command=command, wait_ms=300),
        call("Bash", command=f"for i in $(seq 100); do {wait}; sleep 0.05; done"),
        text("done"),
    ]
    try:
        with FakeModel(*script) as server:
            r = agi("go", server=server)
        assert r.returncode == 0, r.stderr
        seen = [m["content"] for m in server.requests[2]["messages"] if m["role"] == "tool"][-1]
        assert seen.strip().isdigit(), seen
        deadline = time.monotonic() + 10
        while alive(seconds) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alive(seconds) == []
    finally:
        kill_all(alive(seconds))
