"""Files the options name are read up to a bound, and only when they are regular files (docs:
security): a device, a FIFO, a file over the bound or JSON nested too deep is one `agi:` line
and exit 2, at once and in little memory (the child runs under an address-space limit); a FIFO
named on the command line is read within --timeout; --timeout also covers a tool's --describe
and an MCP server's start; whole-number options take ASCII digits only. The real executable,
with the scripted model where a run gets that far."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import AGI
from fakeserver import FakeModel, text

MEMORY = 1 << 30  # bytes of address space the child may use (reading /dev/zero whole: more)
GUARD = 60  # seconds: a hang guard only


def small() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def agi_small(
    env: dict[str, str], cwd: Path, *args: str, timeout: float = GUARD
) -> subprocess.CompletedProcess[str]:
    e = {**env, "AGI_BASE_URL": "http://127.0.0.1:9/v1", "AGI_MODEL": "fake-model"}
    return subprocess.run(
        [AGI, *args],
        env=e,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
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


def sparse(path: Path, size: int = 6 << 30) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)  # gigabytes on paper, nothing on disk
    return path


OPTIONS = {  # an option that names a file -> how its argument is written
    "--sys": "{}",
    "--schema": "@{}",
    "--mcp": "{}",
    "--hooks": "{}",
    "--settings": "{}",
}


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_a_device_is_refused_unread(env, tmp_path, option):
    named = OPTIONS[option].format("/dev/zero")
    result = agi_small(env, tmp_path, option, named, "--no-stdin", "hi")
    one_line(result, 2, "/dev/zero")


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_a_fifo_nobody_writes_is_refused_or_read_within_timeout(env, tmp_path, option):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    holder = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a writer that never writes
    try:
        args = [option, OPTIONS[option].format(fifo), "--timeout", "2", "--no-stdin", "hi"]
        result = agi_small(env, tmp_path, *args)
    finally:
        os.close(holder)
    if option == "--sys":  # the command line may give a pipe (`--sys <(...)`): within --timeout
        one_line(result, 4, "time limit")
    else:
        one_line(result, 2, "not a regular file")


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_a_file_over_the_bound_is_one_line_naming_it(env, tmp_path, option):
    big = sparse(tmp_path / "big")
    result = agi_small(env, tmp_path, option, OPTIONS[option].format(big), "--no-stdin", "hi")
    one_line(result, 2, str(big), "larger than")


def test_the_config_file_agents_and_skills_are_bounded_too(env, tmp_path):
    sparse(Path(env["AGI_CONFIG"]))
    one_line(agi_small(env, tmp_path, "--no-stdin", "hi"), 2, env["AGI_CONFIG"], "larger than")
    Path(env["AGI_CONFIG"]).write_text("")
    agents = tmp_path / "my-agents"
    agents.mkdir()
    sparse(agents / "big.md")
    result = agi_small(env, tmp_path, "--agents", str(agents), "--no-stdin", "hi")
    one_line(result, 2, "big.md", "larger than")
    skills = tmp_path / "my-skills"
    (skills / "huge").mkdir(parents=True)
    sparse(skills / "huge" / "SKILL.md")
    result = agi_small(env, tmp_path, "--skills", str(skills), "--list-extensions")
    assert result.returncode == 0 and "Traceback" not in result.stderr  # a bad skill: skipped
    assert "skills: none" in result.stdout


DEEP = "[" * 100_000


@pytest.mark.parametrize(
    ("option", "content"),
    [
        ("--mcp", '{"mcpServers": ' + DEEP),
        ("--hooks", '{"hooks":\n' + DEEP),
        ("--settings", '{"permissions":\n\n' + DEEP),
        ("--schema", '{"type": "object", "properties": ' + DEEP),
    ],
)
def test_json_nested_too_deep_is_an_error_at_its_place(env, tmp_path, option, content):
    path = tmp_path / "deep.json"
    path.write_text(content)
    argument = ("@" if option == "--schema" else "") + str(path)
    result = agi_small(env, tmp_path, option, argument, "--no-stdin", "hi")
    if option == "--schema":  # a schema's error shows the line under it, with a caret
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert "nested too deep" in result.stderr.splitlines()[0]
        return
    line = one_line(result, 2, "nested too deep")
    assert f"line {content.count(chr(10)) + 1}" in line


def test_a_sys_pipe_is_read_when_its_writer_writes(agi, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "w") as f:
            f.write("You answer in French.")

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    with FakeModel(text("bonjour")) as server:
        result = agi("--sys", str(fifo), "--no-stdin", "hi", server=server, timeout=GUARD)
    writer.join(5)
    assert result.returncode == 0, result.stderr
    assert server.requests[0]["messages"][0]["content"] == "You answer in French."


@pytest.mark.parametrize(
    "args",
    [
        ["--max-steps", "1_0", "hi"],
        ["--max-steps", "١٠", "hi"],
        ["--timeout", "1_0", "hi"],
        ["--timeout", "٣", "hi"],
        ["--jobs", "٣", "--batch", "-"],
        ["--shard", "1_0/2_0", "--batch", "-"],
        ["--shard", "١/٢", "--batch", "-"],
        ["--shard", "+0/2", "--batch", "-"],
    ],
)
def test_whole_numbers_are_ascii_digits(env, tmp_path, args):
    result = agi_small(env, tmp_path, *args)  # each would be accepted as a number by int()
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("agi: ")
    assert args[1] in result.stderr


def test_rewind_takes_ascii_turn_numbers(env, tmp_path):
    result = agi_small(env, tmp_path, "--rewind", "²", "-s", str(tmp_path / "s"))
    one_line(result, 2, "turn number")


def test_timeout_ends_a_describe_that_hangs(env, tmp_path):
    tool = tmp_path / "slow-tool"
    tool.write_text("#!/bin/sh\nexec sleep 600\n")
    tool.chmod(0o755)
    # a --describe waits 10 s by itself; --timeout 1 ends it (hang guard: 5 times what it takes)
    result = agi_small(env, tmp_path, "--tool", str(tool), "--timeout", "1", "hi", timeout=8)
    one_line(result, 4, "time limit")


HANGING = """
import os, signal, sys, time
mark = sys.argv[1]
signal.signal(signal.SIGTERM, lambda *a: open(mark + ".term", "w").close())
open(mark + ".started", "w").close()
while sys.stdin.buffer.read(65536):
    pass  # never answers `initialize`
open(mark + ".eof", "w").close()
time.sleep(600)
"""


def test_timeout_kills_an_mcp_server_that_never_starts_at_once(env, tmp_path):
    script = tmp_path / "hang.py"
    script.write_text(HANGING)
    mark = tmp_path / "mark"
    server = {"command": sys.executable, "args": [str(script), str(mark)]}
    servers = {"mcpServers": {"hang": server}}
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps(servers))
    result = agi_small(env, tmp_path, "--mcp", str(config), "--timeout", "6", "hi", timeout=40)
    one_line(result, 4, "time limit")
    assert Path(f"{mark}.started").exists()
    # killed, not asked: it neither saw its stdin close nor a SIGTERM before it died
    assert not Path(f"{mark}.eof").exists() and not Path(f"{mark}.term").exists()
