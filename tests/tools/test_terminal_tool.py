"""The Terminal tool driving real programs in real pseudo-terminals: REPLs, editors, shells.

The first part calls the tool directly; the last part goes through the real executable and the
scripted model.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agi.errors import ToolError
from agi.tools import ToolContext
from agi.tools.keys import encode_keys
from agi.tools.terminal import Terminal

from conftest import AGI
from fakeserver import FakeModel, call, hang, text

_markers = itertools.count(1)
QUIET_BASH = "HISTFILE= PS1='$ ' bash --norc --noprofile"


TOOL = [Terminal()]  # the tool instance term() calls; each test gets a fresh one


@pytest.fixture(autouse=True)
def no_terminal_outlives_a_test():
    TOOL[0] = Terminal()
    yield
    TOOL[0].close()


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(cwd=str(tmp_path))


def marker() -> str:
    """A `sleep` argument no other process has: its command line finds it in the process table."""
    return f"987.{os.getpid()}{next(_markers):03d}"


def running(pattern: str) -> bool:
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode == 0


def zombie_children() -> list[int]:
    """Our children that ended and were never reaped."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] == "Z" and int(fields[1]) == os.getpid():
            found.append(int(name))
    return found


def screen(result: str) -> list[str]:
    """The screen lines of a result: what follows the header (and the scrollback, if any)."""
    lines = result.splitlines()[1:]
    if "[screen:]" in lines:
        lines = lines[lines.index("[screen:]") + 1 :]
    return lines


def header(result: str) -> str:
    return result.splitlines()[0]


def term(ctx: ToolContext, **input) -> str:
    return TOOL[0].run(input, ctx)


# --- the tool, called directly ---------------------------------------------------------------


def test_python_repl_computes_on_the_rendered_screen(ctx):
    started = term(ctx, action="start", command=f"{sys.executable} -q")
    assert header(started).startswith("[terminal t") and header(started).endswith(", running]")
    tid = header(started).split()[1].rstrip(":")
    assert screen(started) == [">>>"]
    sent = term(ctx, action="send", id=tid, keys="print(6*7)<Enter>")
    assert screen(sent) == [">>> print(6*7)", "42", ">>>"]
    assert header(sent) == f"[terminal {tid}: 24x80, cursor at row 3 col 5, running]"
    closed = term(ctx, action="close", id=tid)
    assert "closed" in header(closed) and screen(closed)[1] == "42"
    with pytest.raises(ToolError, match="no terminal"):
        term(ctx, action="read", id=tid)


@pytest.mark.skipif(not shutil.which("vi"), reason="no vi")
def test_vi_shows_the_file_as_a_screen_and_quits(ctx, tmp_path):
    (tmp_path / "notes.txt").write_text("".join(f"note number {i}\n" for i in range(1, 41)))
    shown = term(ctx, action="start", id="ed", command="vi -u NONE -N notes.txt", rows=12)
    assert header(shown).startswith("[terminal ed: 12x80, cursor at row 1 col 1,")
    lines = screen(shown)
    assert lines[:11] == [f"note number {i}" for i in range(1, 12)]
    assert len(lines) == 12 and "notes.txt" in lines[11]
    assert "\x1b" not in shown
    moved = term(ctx, action="send", id="ed", keys="G")
    assert "note number 40" in screen(moved)
    quit = term(ctx, action="send", id="ed", keys=":q<Enter>")
    assert header(quit).endswith("exited with status 0]")


@pytest.mark.skipif(not shutil.which("less"), reason="no less")
def test_less_pages_through_a_file_and_q_ends_it(ctx, tmp_path):
    (tmp_path / "long.txt").write_text("".join(f"row {i}\n" for i in range(1, 101)))
    shown = term(ctx, action="start", id="pager", command="less long.txt")
    assert screen(shown)[:23] == [f"row {i}" for i in range(1, 24)]
    paged = term(ctx, action="send", id="pager", keys="<Space>")
    assert "row 24" in screen(paged) and "row 1" not in screen(paged)
    assert "[screen:]" not in paged  # a full-screen program scrolls nothing off
    ended = term(ctx, action="send", id="pager", keys="q")
    assert header(ended).endswith("exited with status 0]")


def test_a_program_that_prints_forever_returns_within_wait_ms(ctx):
    mark = f"yes-{marker()}"
    started = time.monotonic()
    shown = term(ctx, action="start", id="y", command=f"yes {mark}", wait_ms=500)
    assert time.monotonic() - started < 10  # a hang guard: the program never ends
    assert mark in screen(shown)
    assert "lines scrolled off the top since the last look" in shown
    started = time.monotonic()
    term(ctx, action="read", id="y", wait_ms=300)
    assert time.monotonic() - started < 10  # a hang guard
    closed = term(ctx, action="close", id="y")
    assert "closed" in header(closed)
    assert not running(mark)


def test_close_leaves_no_process_and_no_zombie(ctx):
    lone, detached = marker(), marker()
    term(ctx, action="start", id="s", command=f"sleep {lone}", wait_ms=0)
    term(ctx, action="start", id="sh", command=QUIET_BASH)
    # a job that ignores hangups, in its own process group: the whole session must end
    term(ctx, action="send", id="sh", keys=f"nohup sleep {detached} >/dev/null 2>&1 &<Enter>")
    assert running(lone) and running(detached)
    closed = term(ctx, action="close", id="s")
    assert header(closed).endswith("closed, killed by SIGHUP]")
    term(ctx, action="close", id="sh")
    assert not running(lone) and not running(detached)
    assert zombie_children() == []


def test_several_terminals_at_once(ctx):
    first, second = marker(), marker()
    a = term(ctx, action="start", command=f"{sys.executable} -q -i -c pass {first}")
    b = term(ctx, action="start", command=f"{QUIET_BASH} -i -s {second}")
    ida, idb = header(a).split()[1].rstrip(":"), header(b).split()[1].rstrip(":")
    assert ida != idb
    assert "12" in screen(term(ctx, action="send", id=ida, keys="3*4<Enter>"))
    assert "bash-says-hi" in screen(
        term(ctx, action="send", id=idb, keys="echo bash-says-hi<Enter>")
    )
    assert running(first) and running(second)
    TOOL[0].close()
    assert not running(first) and not running(second)
    assert zombie_children() == []
    TOOL[0].close()  # again: nothing left to do


def test_each_terminal_tool_owns_its_terminals(ctx):
    mine, theirs = marker(), marker()
    term(ctx, action="start", id="a", command=f"sleep {mine}")
    other = Terminal()
    other.run({"action": "start", "id": "a", "command": f"sleep {theirs}"}, ctx)
    with pytest.raises(ToolError, match="no terminal 'b'"):
        other.run({"action": "read", "id": "b"}, ctx)
    other.close()
    assert running(mine) and not running(theirs)


def test_hook_exported_variables_reach_the_program(tmp_path):
    ctx = ToolContext(cwd=str(tmp_path), env={"AGI_T_EXPORTED": "from-a-hook"})
    shown = term(ctx, action="start", command="echo $AGI_T_EXPORTED; echo $TERM")
    assert screen(shown)[:2] == ["from-a-hook", "xterm-256color"]


def test_ctrl_c_interrupts_and_up_recalls_history_in_bash(ctx):
    term(ctx, action="start", id="b", command=QUIET_BASH)
    term(ctx, action="send", id="b", keys="sleep 100<Enter>")
    started = time.monotonic()
    term(ctx, action="send", id="b", keys="<C-c>")
    after = term(ctx, action="send", id="b", keys="echo ok-$((40+2))<Enter>")
    assert time.monotonic() - started < 30  # a hang guard: the sleep was 100 s
    assert "ok-42" in screen(after)
    term(ctx, action="send", id="b", keys="echo first-$((1+1))<Enter>")
    again = term(ctx, action="send", id="b", keys="<Up><Enter>")
    assert screen(again).count("first-2") == 2
    assert screen(again)[-1] == "$"


def test_the_screen_is_readable_after_the_program_exits(ctx):
    shown = term(ctx, action="start", id="e", command="echo goodbye; exit 3")
    assert header(shown).endswith("exited with status 3]")
    assert screen(shown) == ["goodbye"]
    assert screen(term(ctx, action="read", id="e")) == ["goodbye"]
    with pytest.raises(ToolError, match="has ended"):
        term(ctx, action="send", id="e", keys="more")
    assert header(term(ctx, action="close", id="e")).endswith("closed, exited with status 3]")


def test_a_read_sees_the_lines_that_scrolled_off(ctx):
    first = term(ctx, action="start", id="n", command="sleep 0.5; seq 1 200", wait_ms=50)
    assert screen(first) == ["[the screen is blank]"]
    later = term(ctx, action="read", id="n", wait_ms=5000)
    lines = later.splitlines()
    assert lines[1] == "[177 lines scrolled off the top since the last look:]"
    numbers = [line for line in lines[2:] if line != "[screen:]"]
    assert numbers == [str(i) for i in range(1, 201)]
    assert screen(later) == [str(i) for i in range(178, 201)]
    assert "scrolled off" not in term(ctx, action="read", id="n", wait_ms=0)  # seen already


def test_size_working_directory_and_terminal_type(ctx, tmp_path):
    shown = term(ctx, action="start", command="stty size; pwd; echo $TERM", rows=10, cols=40)
    assert "10x40" in header(shown)
    lines = screen(shown)
    assert lines[0] == "10 40" and lines[-1] == "xterm-256color"
    assert all(len(line) <= 40 for line in lines)
    assert "".join(lines[1:-1]) == str(tmp_path)  # wrapped at 40 columns


def test_waiting_never_passes_the_run_s_deadline(tmp_path):
    ctx = ToolContext(cwd=str(tmp_path), deadline=time.monotonic() + 0.4)
    started = time.monotonic()
    term(ctx, action="start", command=f"sleep {marker()}", wait_ms=120_000)
    assert time.monotonic() - started < 10  # a hang guard, far short of wait_ms


def test_mistakes_are_errors_the_model_reads(ctx):
    with pytest.raises(ToolError, match="no terminal 'nope'"):
        term(ctx, action="send", id="nope", keys="x")
    with pytest.raises(ToolError, match="action"):
        term(ctx, action="type", id="x")
    with pytest.raises(ToolError, match="command"):
        term(ctx, action="start")
    term(ctx, action="start", id="dup", command="cat", wait_ms=0)
    with pytest.raises(ToolError, match="in use"):
        term(ctx, action="start", id="dup", command="cat", wait_ms=0)
    with pytest.raises(ToolError, match="keys"):
        term(ctx, action="send", id="dup")
    with pytest.raises(ToolError, match="rows"):
        term(ctx, action="start", command="cat", rows=0)


def test_named_keys_as_a_terminal_sends_them():
    assert encode_keys("ls -l<Enter>") == b"ls -l\r"
    assert encode_keys("<Esc>:wq<CR>") == b"\x1b:wq\r"
    assert encode_keys("<C-c><C-d><c-A><C-z>") == b"\x03\x04\x01\x1a"
    assert encode_keys("<Tab><BS><Space><Del>") == b"\t\x7f \x1b[3~"
    assert encode_keys("<Up><Down><Right><Left>") == b"\x1b[A\x1b[B\x1b[C\x1b[D"
    assert encode_keys("<Up><Home>", application=True) == b"\x1bOA\x1bOH"
    assert encode_keys("<F1><F5><F12><PageUp><PageDown>") == b"\x1bOP\x1b[15~\x1b[24~\x1b[5~\x1b[6~"
    assert encode_keys("<M-x><esc><ENTER>") == b"\x1bx\x1b\r"
    assert encode_keys("<lt>Enter> a<b c>d <Unknown>") == b"<Enter> a<b c>d <Unknown>"
    assert encode_keys("x < y and z > w") == b"x < y and z > w"
    assert encode_keys("é<Enter>") == "é\r".encode()


# --- through the real executable and the scripted model --------------------------------------


def tool_results(server: FakeModel, request: int) -> list[str]:
    return [m["content"] for m in server.requests[request]["messages"] if m["role"] == "tool"]


def test_the_model_drives_a_python_repl(agi):
    script = [
        call("Terminal", action="start", command=f"{sys.executable} -q"),
        call("Terminal", action="send", id="t1", keys="print(6*7)<Enter>"),
        call("Terminal", action="close", id="t1"),
        text("done"),
    ]
    with FakeModel(*script) as server:
        r = agi("compute", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"
    started, sent, closed = tool_results(server, 3)
    assert started.startswith("[terminal t1: 24x80,") and started.endswith(">>>")
    assert screen(sent) == [">>> print(6*7)", "42", ">>>"]
    assert "closed" in header(closed)
    assert "Terminal" in {t["function"]["name"] for t in server.requests[0]["tools"]}


def test_close_through_the_model_leaves_no_process(agi):
    mark = marker()
    script = [
        call("Terminal", action="start", id="job", command=f"sleep {mark}", wait_ms=100),
        call("Terminal", action="close", id="job"),
        text("done"),
    ]
    with FakeModel(*script) as server:
        r = agi("go", server=server)
    assert r.returncode == 0, r.stderr
    assert "closed, killed by SIGHUP" in tool_results(server, 2)[1]
    assert not running(mark)


def test_a_run_interrupted_with_sigint_leaves_no_process(env, tmp_path):
    mark = marker()
    # a job that ignores the hangup the kernel sends when agi's end closes the terminal:
    # only agi closing its terminals ends it
    command = f"trap '' HUP; sleep {mark}; true"
    script = [call("Terminal", action="start", command=command, wait_ms=100), hang()]
    with FakeModel(*script) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="m")
        proc = subprocess.Popen(
            [AGI, "wait for it"],
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 15
        while len(server.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert running(mark)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 130, err
    assert not running(mark)
