"""The Terminal tool judges a line as a Bash line only when a shell reads it (docs: permissions):
a line typed into an interpreter, a database shell or a debugger in the foreground — or after a
line of the same send that starts one — is that program's code, opaque to the Bash rules, and
denied by the first Bash deny rule. The real `agi` against the scripted server; the file the
typed code aims at must survive, and lines a shell reads are still judged as before."""

from __future__ import annotations

import shutil

import pytest

from fakeserver import FakeModel, call, text

DENIAL = 'Error: denied by permission rule "Bash(rm:*)" (command line)'


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def terminal(*steps: tuple[str, dict]) -> list:
    return [call("Terminal", action=action, id="t", **args) for action, args in steps]


@pytest.mark.parametrize(
    ("program", "start", "keys"),
    [
        ("sqlite3", "sqlite3", ".shell rm -f {victim}<Enter>"),
        ("perl", "perl", 'system "rm -f {victim}";<Enter>'),
        ("python3", "python3 -q", "exec('import os') or rm -f {victim}<Enter>"),
    ],
)
def test_a_line_typed_into_a_running_interpreter_is_its_code(agi, tmp_path, program, start, keys):
    if shutil.which(program) is None:
        pytest.skip(f"{program} is not installed")
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    steps = terminal(
        ("start", {"command": start, "wait_ms": 3000}),
        ("send", {"keys": keys.format(victim=victim), "wait_ms": 1000}),
        ("send", {"keys": "<C-d>", "wait_ms": 1000}),
    )
    with FakeModel(*steps, text("done")) as server:
        r = agi("--deny", "Bash(rm:*)", "go", server=server)
    assert r.returncode == 0, r.stderr
    results = tool_results(server.requests[-1])
    assert not results[0].startswith("Error"), results[0]  # starting it is allowed
    assert results[1] == DENIAL
    assert victim.exists()


def test_a_line_after_one_that_starts_an_interpreter_in_the_same_send_is_its_code(agi, tmp_path):
    if shutil.which("sqlite3") is None:
        pytest.skip("sqlite3 is not installed")
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    steps = terminal(
        ("start", {"command": "bash --norc"}),
        ("send", {"keys": f"sqlite3<Enter>.shell rm -f {victim}<Enter>", "wait_ms": 1000}),
    )
    with FakeModel(*steps, text("done")) as server:
        r = agi("--deny", "Bash(rm:*)", "go", server=server)
    assert r.returncode == 0, r.stderr
    assert tool_results(server.requests[-1])[-1] == DENIAL
    assert victim.exists()


def test_the_shell_reads_again_once_the_interpreter_has_ended(agi, tmp_path):
    if shutil.which("sqlite3") is None:
        pytest.skip("sqlite3 is not installed")
    steps = terminal(
        ("start", {"command": "bash --norc"}),
        ("send", {"keys": "sqlite3<Enter>", "wait_ms": 2000}),
        ("send", {"keys": "select 40 + 2;<Enter>", "wait_ms": 1000}),
        ("send", {"keys": "<C-d>", "wait_ms": 1000}),  # no line: not judged
        ("send", {"keys": "echo back-in-bash<Enter>", "wait_ms": 1000}),
    )
    with FakeModel(*steps, text("done")) as server:
        r = agi("--deny", "Bash(rm:*)", "go", server=server)
    assert r.returncode == 0, r.stderr
    results = tool_results(server.requests[-1])
    assert results[2] == DENIAL  # SQL is not a Bash line: opaque to the rules
    assert "back-in-bash" in results[-1] and not results[-1].startswith("Error")


def test_without_bash_rules_typing_into_an_interpreter_works(agi, tmp_path):
    if shutil.which("sqlite3") is None:
        pytest.skip("sqlite3 is not installed")
    steps = terminal(
        ("start", {"command": "sqlite3", "wait_ms": 3000}),
        ("send", {"keys": "select 40 + 2;<Enter>", "wait_ms": 2000}),
    )
    with FakeModel(*steps, text("done")) as server:
        r = agi("--deny", "Write(secrets/**)", "go", server=server)
    assert r.returncode == 0, r.stderr
    assert "42" in tool_results(server.requests[-1])[-1]
