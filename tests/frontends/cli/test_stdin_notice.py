"""The stdin notice (docs: volume): with a PROMPT and a pipe on stdin that stays silent, agi
says once on stderr that it waits, and keeps waiting within --timeout. Driven through the real
executable with the test holding the pipe's other end."""

from __future__ import annotations

import subprocess

from conftest import AGI
from fakeserver import FakeModel, text

NOTICE = "agi: waiting for standard input (--no-stdin skips it)\n"


def started(env: dict[str, str], server: FakeModel, *args: str) -> subprocess.Popen[str]:
    e = dict(env, AGI_BASE_URL=server.url, AGI_MODEL="fake-model")
    return subprocess.Popen(
        [AGI, *args],
        env=e,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def held_open(agi: subprocess.Popen[str]) -> tuple[str, str]:
    """Its stdout and stderr once it exits, stdin left as the test left it (communicate()
    would close it)."""
    assert agi.stdout is not None and agi.stderr is not None
    try:
        agi.wait(timeout=60)
    finally:
        agi.kill()
        if agi.stdin is not None and not agi.stdin.closed:
            agi.stdin.close()
    return agi.stdout.read(), agi.stderr.read()


def test_a_silent_pipe_gets_the_notice_once_then_its_bytes_are_read(env) -> None:
    with FakeModel(text("read it")) as server:
        agi = started(env, server, "summarise this")
        assert agi.stdin is not None and agi.stderr is not None
        assert agi.stderr.readline() == NOTICE  # blocks until agi says it (after its silence)
        agi.stdin.write("late data\n")
        agi.stdin.close()
        out, err = held_open(agi)
    assert agi.returncode == 0, err
    assert out == "read it\n" and err == ""  # the notice was the only line
    (body,) = server.requests
    user = [m["content"] for m in body["messages"] if m["role"] == "user"][0]
    assert user == "summarise this\n\n<stdin>\nlate data\n</stdin>"


def test_a_pipe_that_brings_its_bytes_gets_no_notice(agi) -> None:
    with FakeModel(text("ok")) as server:
        r = agi("summarise this", input="prompt data\n", server=server)
    assert (r.returncode, r.stdout, r.stderr) == (0, "ok\n", "")


def test_without_a_prompt_stdin_is_the_prompt_and_no_notice_is_given(env) -> None:
    with FakeModel(text("ok")) as server:
        agi = started(env, server)
        assert agi.stdin is not None
        out, err = agi.communicate("the prompt\n", timeout=60)
    assert (agi.returncode, out, err) == (0, "ok\n", "")


def test_the_wait_ends_at_the_timeout(env) -> None:
    """A pipe never closed: the notice, then --timeout's exit 4, its one line."""
    with FakeModel(text("never")) as server:
        agi = started(env, server, "--timeout", "6", "summarise this")
        out, err = held_open(agi)
    assert agi.returncode == 4
    assert err.startswith(NOTICE)
    assert err.count("\n") == 2 and err.splitlines()[1].startswith("agi: ")
    assert out == "" and server.requests == []


def test_no_stdin_skips_it(env) -> None:
    with FakeModel(text("ok")) as server:
        agi = started(env, server, "--no-stdin", "hello")
        out, err = held_open(agi)
    assert (agi.returncode, out, err) == (0, "ok\n", "")
