"""Hostile files, odd bytes, signals and closed pipes (issue 22), each the way a user meets it:
the real `agi` against the scripted server, real links, FIFOs, sparse files and signals.

Nothing is written where it should not be, nothing is lost, nothing hangs; every failure is one
`agi:` line and a documented exit code. Memory bounds are measured as the child's peak RSS
(os.wait4), not timed. The permission cases run as a non-root user: as root, the child runs
with every capability dropped (setpriv), which makes root's permission checks an ordinary
user's.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import AGI, peak_rss, start_agi, unique_seconds, wait_for_file
from fakeserver import FakeModel, _chunk, call, calls, status, text

ROOT = os.geteuid() == 0
SETPRIV = shutil.which("setpriv")
MIB = 1 << 20


def one_line(r) -> str:
    err = r.stderr if isinstance(r.stderr, str) else r.stderr.decode("utf-8", "replace")
    assert err.startswith("agi: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def sse(*frames: bytes) -> dict:
    return {"kind": "sse", "frames": list(frames), "delay": 0.0}


def stored(session: Path) -> list[dict]:
    return [json.loads(line) for line in (session / "messages.jsonl").read_bytes().splitlines()]


def tool_results(session: Path) -> list[str]:
    return [m["content"] for m in stored(session) if m["role"] == "tool"]


def assert_valid_session(session: Path) -> None:
    """Every file agi wrote is UTF-8 (strictly) and each JSON line parses; no temp file left."""
    for path in session.rglob("*"):
        assert not path.name.endswith(".tmp"), path
        if path.is_file() and path.name != "lock":
            text = path.read_bytes().decode("utf-8")  # raises on invalid UTF-8 or surrogates
            if path.suffix == ".jsonl":
                for line in text.split("\n")[:-1]:  # not splitlines(): U+2028 is no newline
                    json.loads(line)
                assert text.endswith("\n") or not text, path
            elif path.suffix == ".json":
                assert isinstance(json.loads(text), dict)


def run_bytes(argv: list[bytes | str], env: dict, cwd: Path, input: bytes | None = None):
    stdin = None if input is not None else subprocess.DEVNULL
    return subprocess.run(
        [AGI, *argv], env=env, cwd=cwd, capture_output=True, timeout=60, input=input, stdin=stdin
    )


@pytest.fixture
def served(env):
    """`served(server)`: the environment, pointed at a fake server."""

    def point(server: FakeModel) -> dict[str, str]:
        return {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}

    return point


@pytest.fixture
def unprivileged(env, tmp_path):
    """Run agi as a user without root's powers over files: unchanged when not root; as root,
    through setpriv with no capabilities (uid 0 then passes only the checks its owner bits
    allow, like any user)."""
    if ROOT and not SETPRIV:
        pytest.skip("running as root without setpriv: cannot drop root's powers")
    prefix = [SETPRIV, "--bounding-set=-all", "--inh-caps=-all"] if ROOT else []

    def run(*args: str, server: FakeModel | None = None) -> subprocess.CompletedProcess[str]:
        e = dict(env)
        if server is not None:
            e.update(AGI_BASE_URL=server.url, AGI_MODEL="fake-model")
        return subprocess.run(
            [*prefix, AGI, *args],
            env=e,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )

    return run


def agi_peak(argv: list[str], env: dict, cwd: Path, timeout: float = 60) -> tuple[int, str, int]:
    """Run agi; (exit code, stdout, its own peak resident memory in bytes)."""
    code, out, peak = peak_rss([AGI, *argv], env, cwd, timeout * 5)
    return code, out.decode(), peak


def no_process(pattern: str) -> bool:
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode == 1


# 1. Session files are never followed through links


@pytest.mark.parametrize("name", ["messages.jsonl", "trace.jsonl", "lock", "meta.json"])
def test_a_session_file_that_is_a_link_is_refused_and_its_target_untouched(agi, tmp_path, name):
    s = tmp_path / "s"
    with FakeModel(text("one"), text("never")) as server:
        assert agi("-s", str(s), "first", server=server).returncode == 0
        target = tmp_path / f"elsewhere-{name}"
        if name == "meta.json":
            target.write_text('{"agi_session": 1}\n')
        before = {p: p.read_bytes() for p in s.iterdir()}
        os.replace(s / name, tmp_path / f"moved-{name}")
        os.symlink(target, s / name)
        r = agi("-s", str(s), "hello", server=server)
    assert r.returncode == 2 and "symbolic link" in one_line(r)
    assert len(server.requests) == 1  # nothing was sent
    if name == "meta.json":
        assert target.read_text() == '{"agi_session": 1}\n'
    else:
        assert not target.exists()  # neither written through nor created
    assert {p: p.read_bytes() for p in s.iterdir() if p.name != name} == {
        p: v for p, v in before.items() if p.name != name
    }


def test_a_session_directory_that_is_a_link_is_refused(agi, tmp_path):
    real = tmp_path / "real"
    with FakeModel(text("one")) as server:
        assert agi("-s", str(real), "first", server=server).returncode == 0
        (tmp_path / "link").symlink_to(real)
        before = (real / "messages.jsonl").read_bytes()
        r = agi("-s", str(tmp_path / "link"), "again", server=server)
    assert r.returncode == 2 and "symbolic link" in one_line(r)
    assert (real / "messages.jsonl").read_bytes() == before


def test_a_subagents_directory_that_is_a_link_is_refused(agi, tmp_path):
    s, elsewhere = tmp_path / "s", tmp_path / "elsewhere"
    elsewhere.mkdir()
    with FakeModel(text("one"), text("never")) as server:
        assert agi("-s", str(s), "first", server=server).returncode == 0
        (s / "subagents").symlink_to(elsewhere)
        r = agi("-s", str(s), "again", server=server)
    assert r.returncode == 2 and "subagents" in one_line(r)
    assert list(elsewhere.iterdir()) == []


def test_a_fifo_planted_as_a_session_file_is_refused_at_once(agi, tmp_path):
    s = tmp_path / "s"
    with FakeModel(text("one")) as server:
        assert agi("-s", str(s), "first", server=server).returncode == 0
        (s / "trace.jsonl").unlink()
        os.mkfifo(s / "trace.jsonl")
        r = agi("-s", str(s), "again", server=server, timeout=20)
    assert r.returncode == 2 and "not a regular file" in one_line(r)


# 2. Edit on a file that is not UTF-8


def test_edit_of_a_latin1_file_changes_only_the_edited_bytes(agi, tmp_path):
    conf = tmp_path / "app.conf"
    conf.write_bytes(b"# caf\xe9 cr\xe8me\nname = old\nna\xefve = yes\n")
    script = [
        call("Edit", file_path=str(conf), old_string="name = old", new_string="name = new"),
        call("Edit", file_path=str(conf), old_string="caf\ufffd", new_string="cafe"),
        text("done"),
    ]
    s = tmp_path / "s"
    with FakeModel(*script) as server:
        r = agi("-s", str(s), "rename it", server=server)
    assert r.returncode == 0, r.stderr
    assert conf.read_bytes() == b"# caf\xe9 cr\xe8me\nname = new\nna\xefve = yes\n"
    edited, refused = tool_results(s)
    assert edited.startswith("Edited")
    assert refused.startswith("Error: old_string was not found") and "not valid UTF-8" in refused


# 3. Lone surrogates: argv, paths, escape pairs split across chunks


def test_a_prompt_and_a_session_path_that_are_not_utf8(served, tmp_path):
    s = os.fsencode(tmp_path) + b"/s-caf\xe9"
    with FakeModel(text("one"), text("two")) as server:
        first = run_bytes([b"-s", s, b"caf\xe9 cr\xe8me"], served(server), tmp_path)
        second = run_bytes([b"-s", s, b"again"], served(server), tmp_path)
        listed = run_bytes([b"--list-sessions"], served(server), tmp_path)
    assert (first.returncode, first.stdout, first.stderr) == (0, b"one\n", b"")
    assert (second.returncode, second.stdout, second.stderr) == (0, b"two\n", b"")
    assert server.requests[0]["messages"][-1]["content"] == "caf\ufffd cr\ufffdme"
    assert listed.returncode == 0 and listed.stdout.startswith(s + b"\t")  # the path's own bytes
    session = Path(os.fsdecode(s))
    assert_valid_session(session)
    contents = [m["content"] for m in stored(session)]
    assert contents == ["caf\ufffd cr\ufffdme", "one", "again", "two"]


def test_an_escape_pair_split_across_stream_chunks_is_joined(agi, tmp_path):
    frames = [
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"content": "smile \ud83d"}),  # json.dumps writes the escape \ud83d
        _chunk({"content": "\ude00, lone \ud83d"}),
        _chunk({"content": "!"}),
        _chunk({}, "stop"),
        b"data: [DONE]\n\n",
    ]
    s = tmp_path / "s"
    with FakeModel(sse(*frames), text("next")) as server:
        r = agi("-s", str(s), "hi", server=server)
        again = agi("-s", str(s), "more", server=server)
    assert r.returncode == 0 and r.stdout == "smile \U0001f600, lone \ufffd!\n", r.stderr
    assert again.returncode == 0 and again.stdout == "next\n"
    assert_valid_session(s)
    assert server.requests[1]["messages"][-2]["content"] == "smile \U0001f600, lone \ufffd!"


def test_a_session_poisoned_by_invalid_utf8_still_continues(agi, tmp_path):
    s = tmp_path / "s"
    with FakeModel(text("one"), text("two")) as server:
        assert agi("-s", str(s), "first", server=server).returncode == 0
        with open(s / "messages.jsonl", "ab") as f:  # what an older agi wrote: a surrogate
            f.write(b'{"role": "user", "content": "caf\xed\xb3\xa9"}\n')
            f.write(b'{"role": "assistant", "content": "x \\ud83d y"}\n')
        r = agi("-s", str(s), "second", server=server)
    assert r.returncode == 0 and r.stdout == "two\n", r.stderr
    sent = [m["content"] for m in server.requests[1]["messages"][-3:]]
    assert sent == ["caf\ufffd\ufffd\ufffd", "x \ufffd y", "second"]


# 4. Ownership and modes agi did not set


@pytest.mark.skipif(not ROOT, reason="root continuing another user's session")
def test_root_continuing_another_users_session_keeps_it_theirs(agi, tmp_path, unprivileged):
    s = tmp_path / "s"
    with FakeModel(text("one"), text("two"), text("three")) as server:
        assert agi("-s", str(s), "first", server=server).returncode == 0
        (s / "trace.jsonl").unlink()  # root will create this one
        for path in [s, *s.iterdir()]:
            os.chown(path, 65534, 65534)
        assert agi("-s", str(s), "second", server=server).returncode == 0
        owners = {p.name: (p.stat().st_uid, p.stat().st_gid) for p in [s, *s.iterdir()]}
        assert set(owners.values()) == {(65534, 65534)}, owners
        # and the owner (no longer root) can go on with it
        for path in [s, *s.iterdir()]:
            os.chown(path, 0, 0)  # uid 0 without capabilities stands for the owner here
        r = unprivileged("-s", str(s), "third", server=server)
    assert r.returncode == 0 and r.stdout == "three\n", r.stderr


@pytest.mark.parametrize("where", ["-s", "AGI_HOME"])
def test_an_existing_sticky_world_writable_directory_keeps_its_mode(agi, tmp_path, where):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    args, extra = (["-s", str(shared)], {}) if where == "-s" else ([], {"AGI_HOME": str(shared)})
    with FakeModel(text("ok")) as server:
        r = agi(*args, "hi", server=server, extra_env=extra)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr
    assert shared.stat().st_mode & 0o7777 == 0o1777
    if where == "-s":
        assert "writable by other users" in one_line(r)


def test_a_world_writable_session_is_warned_about_not_silently_changed(agi, tmp_path):
    s = tmp_path / "s"
    with FakeModel(text("one"), text("two")) as server:
        assert agi("-s", str(s), "first", server=server).returncode == 0
        s.chmod(0o777)
        for name in ("messages.jsonl", "meta.json"):
            (s / name).chmod(0o666)
        r = agi("-s", str(s), "second", server=server)
    assert r.returncode == 0 and r.stdout == "two\n"
    warnings = r.stderr.splitlines()
    assert len(warnings) == 3 and all("writable by other users" in w for w in warnings), warnings
    assert s.stat().st_mode & 0o777 == 0o777  # not chmodded behind the user's back
    assert (s / "messages.jsonl").stat().st_mode & 0o777 == 0o666


# 5, 6. Read: bounded memory, no device, FIFO or socket, the deadline honoured

RSS_BOUND = 200 * MIB  # agi itself takes ~60 MiB; the old Read took the file's size and more


def test_read_of_dev_zero_is_refused_at_once_in_bounded_memory(served, tmp_path):
    with FakeModel(call("Read", file_path="/dev/zero"), text("ok")) as server:
        code, out, rss = agi_peak(["-s", str(tmp_path / "s"), "read it"], served(server), tmp_path)
    assert (code, out) == (0, "ok\n")
    assert rss < RSS_BOUND, rss
    (result,) = tool_results(tmp_path / "s")
    assert result.startswith("Error: /dev/zero is a character device, not a regular file")


def test_read_with_a_limit_streams_the_lines_of_a_gigabyte_file(served, tmp_path):
    log = tmp_path / "big.log"
    with open(log, "wb") as f:
        f.write(b"".join(b"line %d\n" % n for n in range(1, 2001)))
        f.truncate(1 << 30)  # sparse: a gigabyte that takes no disk
    with FakeModel(call("Read", file_path=str(log), offset=3, limit=5), text("ok")) as server:
        code, out, rss = agi_peak(["-s", str(tmp_path / "s"), "tail it"], served(server), tmp_path)
    assert (code, out) == (0, "ok\n")
    assert rss < RSS_BOUND, rss
    (result,) = tool_results(tmp_path / "s")
    lines = result.splitlines()
    assert [line.split("\t") for line in lines[:5]] == [
        [f"{n:6}", f"line {n}"] for n in range(3, 8)
    ]
    assert lines[5] == "(more lines follow; read on with offset 8)"


def test_a_sparse_binary_file_is_reported_without_reading_it(served, tmp_path):
    blob = tmp_path / "disk.img"
    with open(blob, "wb") as f:
        f.truncate(2 << 30)
    with FakeModel(call("Read", file_path=str(blob)), text("ok")) as server:
        code, out, rss = agi_peak(["-s", str(tmp_path / "s"), "look"], served(server), tmp_path)
    assert (code, out) == (0, "ok\n")
    assert rss < RSS_BOUND, rss
    assert tool_results(tmp_path / "s") == [f"Error: {blob} is a binary file"]


def test_read_counts_the_lines_it_does_not_show(agi, tmp_path):
    f = tmp_path / "f.txt"
    f.write_bytes(b"a\r\nb\n" + b"x" * 20000 + b"\nlast")
    script = [
        call("Read", file_path=str(f), limit=3),
        call("Read", file_path=str(f), offset=9),
        text("ok"),
    ]
    with FakeModel(*script) as server:
        r = agi("-s", str(tmp_path / "s"), "go", server=server)
    assert r.returncode == 0
    shown, past = tool_results(tmp_path / "s")
    lines = shown.splitlines()
    assert lines[:2] == ["     1\ta", "     2\tb"]
    assert lines[2] == "     3\t" + "x" * 2000 + " [line truncated]"
    assert lines[3] == "(1 more lines; read on with offset 4)"
    assert past == f"Error: {f} has only 4 lines; offset 9 is past the end"


def test_reads_of_fifos_are_refused_and_the_run_ends(agi, tmp_path):
    fifos = [tmp_path / "a.fifo", tmp_path / "b.fifo"]
    for fifo in fifos:
        os.mkfifo(fifo)
    script = [calls(*[("Read", {"file_path": str(p)}) for p in fifos]), text("ok")]
    with FakeModel(*script) as server:
        r = agi(
            "--timeout", "20", "-s", str(tmp_path / "s"), "read them", server=server, timeout=30
        )
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr  # not the time limit's exit 4
    assert all("is a FIFO, not a regular file" in t for t in tool_results(tmp_path / "s"))


def test_the_run_ends_at_its_deadline_whatever_its_threads_wait_for(agi, tmp_path):
    """Two calls run in threads, each held by a PreToolUse hook far past --timeout."""
    hook = unique_seconds(120)
    hooks = hooks_file(tmp_path, PreToolUse=f"sleep {hook}")
    script = [calls(("Bash", {"command": "echo a"}), ("Bash", {"command": "echo b"})), text("x")]
    with FakeModel(*script) as server:  # a hang guard at 15x the limit, far short of the hooks
        r = agi("--timeout", "2", "--hooks", str(hooks), "go", server=server, timeout=30)
    assert r.returncode == 4 and "time limit" in one_line(r)
    assert no_process(f"sleep {hook}")


# 7, 9. Signals: SIGHUP, and signals during the cleanup


def hooks_file(tmp_path: Path, **events: str) -> Path:
    path = tmp_path / "hooks.json"
    entries = {
        event: [{"matcher": "", "hooks": [{"type": "command", "command": command}]}]
        for event, command in events.items()
    }
    path.write_text(json.dumps({"hooks": entries}))
    return path


def test_sighup_exits_129_with_one_line_and_kills_running_commands(served, tmp_path):
    bg = unique_seconds(29)
    fg = unique_seconds(31)
    marker, s = tmp_path / "started", tmp_path / "s"
    command = f"sleep {bg} & touch {marker}; sleep {fg}"
    with FakeModel(call("Bash", command=command), text("later")) as server:
        proc = start_agi([AGI, "-s", str(s), "go"], served(server))
        wait_for_file(marker)
        proc.send_signal(signal.SIGHUP)
        out, err = proc.communicate(timeout=15)
    assert proc.returncode == 129, err
    assert err.startswith("agi: interrupted by SIGHUP") and err.count("\n") == 1, err
    assert out == ""
    assert no_process(f"sleep {fg}") and no_process(f"sleep {bg}")
    assert tool_results(s) == ["Error: interrupted by SIGHUP"]


def test_a_second_interrupt_during_session_end_ends_it_cleanly(served, tmp_path):
    hook = unique_seconds(33)
    bg = unique_seconds(27)
    fg = unique_seconds(31)
    running, ending, s = tmp_path / "running", tmp_path / "ending", tmp_path / "s"
    hooks = hooks_file(tmp_path, SessionEnd=f"touch {ending}; sleep {hook}")
    command = f"sleep {bg} & touch {running}; sleep {fg}"
    with FakeModel(call("Bash", command=command), text("later")) as server:
        proc = start_agi([AGI, "--hooks", str(hooks), "-s", str(s), "go"], served(server))
        wait_for_file(running)
        proc.send_signal(signal.SIGINT)
        wait_for_file(ending)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)  # a hang guard: the hook sleeps 33 s
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("agi: interrupted by SIGINT")
    for pattern in (f"sleep {bg}", f"sleep {fg}", f"sleep {hook}"):
        assert no_process(pattern), pattern


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_during_session_end_after_the_answer_sets_the_exit_code(served, tmp_path, sig):
    hook = unique_seconds(33)
    ending = tmp_path / "ending"
    hooks = hooks_file(tmp_path, SessionEnd=f"touch {ending}; sleep {hook}")
    with FakeModel(text("the answer")) as server:
        proc = start_agi([AGI, "--hooks", str(hooks), "go"], served(server))
        wait_for_file(ending)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=15)
    assert out == "the answer\n"  # it was printed, and stays the answer
    assert proc.returncode == 128 + sig, err
    assert err.startswith(f"agi: interrupted by {sig.name}") and err.count("\n") == 1, err
    assert no_process(f"sleep {hook}")


# 8. One line and the right exit code, never a traceback


@pytest.mark.parametrize("case", ["unreadable", "read-only", "foreign"])
def test_a_session_directory_agi_cannot_use_is_refused_with_exit_2(unprivileged, tmp_path, case):
    s = tmp_path / "s"
    with FakeModel(text("one"), text("never")) as server:
        assert unprivileged("-s", str(s), "first", server=server).returncode == 0
        before = {p.name: p.read_bytes() for p in s.iterdir()}
        if case == "foreign":
            if not ROOT:
                pytest.skip("only root can give a directory to another user")
            os.chown(s, 65534, 65534)
            s.chmod(0o755)
        else:
            s.chmod(0 if case == "unreadable" else 0o500)
        r = unprivileged("-s", str(s), "again", server=server)
        s.chmod(0o700)
        os.chown(s, os.getuid(), os.getgid())
    assert r.returncode == 2, r.stderr
    assert "cannot use" in one_line(r)
    assert len(server.requests) == 1
    assert {p.name: p.read_bytes() for p in s.iterdir()} == before


@pytest.mark.parametrize("name", ["messages.jsonl", "trace.jsonl"])
def test_a_session_file_that_is_a_directory_is_refused(agi, tmp_path, name):
    s = tmp_path / "s"
    with FakeModel(text("one")) as server:
        assert agi("-s", str(s), "first", server=server).returncode == 0
        (s / name).unlink()
        (s / name).mkdir()
        r = agi("-s", str(s), "again", server=server)
    assert r.returncode == 2 and "not a regular file" in one_line(r)


@pytest.mark.parametrize("meta", ["[]", "null", "42", '"x"', '{"messages": "many"}'])
def test_a_meta_json_of_the_wrong_shape_is_warned_about_and_rewritten(agi, tmp_path, meta):
    s, other, copy = tmp_path / "s", tmp_path / "other", tmp_path / "copy"
    with FakeModel(text("one"), text("two"), text("three"), text("four")) as server:
        assert agi("-s", str(other), "other question", server=server).returncode == 0
        assert agi("-s", str(s), "first", server=server).returncode == 0
        (s / "meta.json").write_text(meta)
        listed = agi("--list-sessions")
        forked = agi("--fork", str(s), "-s", str(copy), "forked", server=server)
        r = agi("-s", str(s), "second", server=server)
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == 2, listed.stderr
    assert "other question" in listed.stdout
    assert forked.returncode == 0 and forked.stdout == "three\n", forked.stderr
    assert r.returncode == 0 and r.stdout == "four\n", r.stderr
    assert json.loads((s / "meta.json").read_text())["messages"] == 4
    assert_valid_session(s)


def test_fork_into_a_file_or_into_the_original_is_refused(agi, tmp_path):
    s, f = tmp_path / "s", tmp_path / "file"
    f.write_text("mine")
    with FakeModel(text("one"), text("never")) as server:
        assert agi("-s", str(s), "first", server=server).returncode == 0
        before = sorted(p.name for p in s.rglob("*"))
        into_file = agi("--fork", str(s), "-s", str(f), "go", server=server)
        inside = agi("--fork", str(s), "-s", str(s / "sub"), "go", server=server)
    assert into_file.returncode == 2 and "not a directory" in one_line(into_file)
    assert inside.returncode == 2 and "inside the session" in one_line(inside)
    assert f.read_text() == "mine"
    assert sorted(p.name for p in s.rglob("*")) == before
    assert len(server.requests) == 1


def test_a_failed_fork_leaves_nothing_behind_and_can_be_retried(agi, tmp_path):
    s, copy = tmp_path / "s", tmp_path / "copy"
    with FakeModel(text("one"), text("two")) as server:
        assert agi("-s", str(s), "first", server=server).returncode == 0
        trace = (s / "trace.jsonl").read_bytes()
        (s / "trace.jsonl").unlink()
        os.mkfifo(s / "trace.jsonl")  # fails the copy half-way
        failed = agi("--fork", str(s), "-s", str(copy), "go", server=server)
        assert failed.returncode == 2 and "not a regular file" in one_line(failed)
        assert not copy.exists() and sorted(os.listdir(tmp_path)).count("copy") == 0
        assert not [p for p in tmp_path.iterdir() if ".fork-" in p.name]
        (s / "trace.jsonl").unlink()
        (s / "trace.jsonl").write_bytes(trace)
        retried = agi("--fork", str(s), "-s", str(copy), "go", server=server)
    assert retried.returncode == 0 and retried.stdout == "two\n", retried.stderr


@pytest.mark.parametrize("value", ["inf", "nan", "-inf"])
def test_a_timeout_that_is_not_a_finite_number_is_a_usage_error(agi, value):
    with FakeModel(text("never")) as server:
        r = agi("--timeout", value, "hi", server=server)
    assert r.returncode == 2 and "--timeout" in one_line(r)
    assert server.requests == []


def test_a_huge_timeout_is_no_limit_not_an_overflow(agi, env):
    with FakeModel(text("ok")) as server:
        r = agi("--timeout", "1e12", "hi", server=server)
        Path(env["AGI_CONFIG"]).write_text("timeout = 1e300\nidle_timeout = 1e300\n")
        configured = agi("hi", server=server)
        Path(env["AGI_CONFIG"]).write_text("timeout = inf\n")
        infinite = agi("hi", server=server)
    assert (r.returncode, r.stdout, r.stderr) == (0, "ok\n", "")
    assert (configured.returncode, configured.stdout, configured.stderr) == (0, "ok\n", "")
    assert infinite.returncode == 2 and "timeout must be a positive number" in one_line(infinite)


def shell(command: str, env: dict, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["bash", "-c", command], env=env, cwd=cwd, capture_output=True, timeout=60,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_a_closed_or_full_stdout_is_one_line_and_exit_1(served, tmp_path):
    with FakeModel(text("the answer")) as server:
        closed = shell(f"{AGI} -s s1 hi >&-", served(server), tmp_path)
        full = shell(f"{AGI} -s s2 hi >/dev/full", served(server), tmp_path)
    assert closed.returncode == 1 and "cannot write to stdout: it is closed" in one_line(closed)
    assert full.returncode == 1 and "No space left on device" in one_line(full)
    for s in ("s1", "s2"):  # the answer is kept in the session
        assert stored(tmp_path / s)[-1]["content"] == "the answer"


def test_a_closed_stderr_does_not_lose_the_answer(served, tmp_path):
    with FakeModel(text("the answer")) as server:
        r = shell(f"{AGI} -v hi 2>&-", served(server), tmp_path)
    assert (r.returncode, r.stdout) == (0, b"the answer\n")


def test_a_reader_that_goes_away_ends_listing_quietly(served, tmp_path):
    with FakeModel(text("ok")) as server:
        for n in range(3):
            assert shell(f"{AGI} -s s{n} hi", served(server), tmp_path).returncode == 0
        buffered = {k: v for k, v in served(server).items() if k != "PYTHONUNBUFFERED"}
        r = shell(f"set -o pipefail; {AGI} --list-sessions | true", buffered, tmp_path)
    assert r.returncode in (0, 141) and r.stderr == b"", r.stderr


# 10. Secrets stay out of every output channel

KEY = "sk-hardening-" + "5" * 24


def test_jsonl_output_redacts_a_tool_result_that_holds_the_key(agi, tmp_path):
    (tmp_path / "leak").write_text(f"key={KEY}\n")
    with FakeModel(call("Bash", command="cat leak"), text("done")) as server:
        r = agi("--output", "jsonl", "go", server=server, extra_env={"AGI_API_KEY": KEY})
    assert r.returncode == 0, r.stderr
    assert KEY not in r.stdout and "key=[REDACTED]" in r.stdout


def test_an_error_body_that_echoes_the_key_is_redacted(agi):
    body = {"error": {"message": f"Incorrect API key provided: {KEY}"}}
    with FakeModel(status(401, body)) as server:
        plain = agi("hi", server=server, extra_env={"AGI_API_KEY": KEY})
        as_json = agi("--output", "json", "hi", server=server, extra_env={"AGI_API_KEY": KEY})
    assert plain.returncode == 3 and KEY not in one_line(plain) and "[REDACTED]" in plain.stderr
    assert as_json.returncode == 3 and KEY not in as_json.stderr + as_json.stdout
    assert "[REDACTED]" in json.loads(as_json.stdout)["error"]


def test_a_key_streamed_in_pieces_is_not_in_the_trace(agi, tmp_path):
    s = tmp_path / "s"
    with FakeModel(text(f"it is {KEY}!", pieces=4)) as server:
        r = agi("-s", str(s), "what is it", server=server, extra_env={"AGI_API_KEY": KEY})
    assert r.returncode == 0 and r.stdout == "it is [REDACTED]!\n"
    responses = [json.loads(x) for x in (s / "trace.jsonl").read_text().splitlines()]
    (chunks,) = [t["chunks"] for t in responses if t.get("type") == "response"]
    streamed = "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices")
    )
    assert streamed == "it is [REDACTED]!"
    for path in s.iterdir():
        assert KEY[4:20] not in path.read_text(), path  # not even a piece of it


def test_tools_do_not_get_agis_key_unless_asked(agi, tmp_path):
    import base64

    step = call("Bash", command="printenv AGI_API_KEY OPENAI_API_KEY | base64 -w0")
    for keep, printed in (("", ""), ("AGI_API_KEY", f"{KEY}\n"), ("*", f"{KEY}\n{KEY}\n")):
        s = tmp_path / f"s{len(printed)}"
        with FakeModel(step, text("done")) as server:
            env = {"AGI_API_KEY": KEY, "OPENAI_API_KEY": KEY, "AGI_TOOL_ENV_KEYS": keep}
            r = agi("-s", str(s), "go", server=server, extra_env=env)
        assert r.returncode == 0, r.stderr
        (result,) = tool_results(s)
        assert (base64.b64decode(result).decode() if printed else result) == printed or (
            result == "(no output)" and not printed
        ), (keep, result)


# 11. Smaller things


def test_a_single_sys_file_in_the_config_is_one_file(agi, env, tmp_path):
    (tmp_path / "p.md").write_text("You are terse.")
    Path(env["AGI_CONFIG"]).write_text('sys = "p.md"\n')
    with FakeModel(text("ok")) as server:
        r = agi("hi", server=server)
    assert r.returncode == 0, r.stderr
    assert server.requests[0]["messages"][0] == {"role": "system", "content": "You are terse."}


@pytest.mark.parametrize("timeout", [float("nan"), True, "5", -1, float("inf")])
def test_bash_timeouts_that_are_not_a_positive_number_are_refused(agi, tmp_path, timeout):
    s = tmp_path / "s"
    with FakeModel(call("Bash", command="echo ran", timeout=timeout), text("ok")) as server:
        r = agi("-s", str(s), "go", server=server)
    assert r.returncode == 0, r.stderr
    (result,) = tool_results(s)
    if timeout == float("inf"):  # the cap, 600 s
        assert result == "ran"
    else:
        assert result == "Error: 'timeout' must be a positive number of milliseconds"


def test_a_call_cut_short_by_the_time_limit_says_so(agi, tmp_path):
    hook = unique_seconds(31)
    s = tmp_path / "s"
    hooks = hooks_file(tmp_path, PreToolUse=f"sleep {hook}")
    with FakeModel(call("Bash", command="echo hi"), text("never")) as server:
        r = agi("--timeout", "5", "--hooks", str(hooks), "-s", str(s), "go", server=server)
    assert r.returncode == 4 and "time limit" in one_line(r)
    (result,) = tool_results(s)
    assert "time limit reached" in result and "user" not in result
    assert no_process(f"sleep {hook}")


def test_a_newline_in_a_session_path_keeps_its_listing_on_one_line(agi, tmp_path):
    with FakeModel(text("one"), text("two")) as server:
        assert agi("-s", str(tmp_path / "a\nb"), "first", server=server).returncode == 0
        assert agi("-s", str(tmp_path / "c"), "second", server=server).returncode == 0
    r = agi("--list-sessions")
    assert r.returncode == 0
    rows = r.stdout.splitlines()
    assert len(rows) == 2 and rows[1].startswith(f"{tmp_path}/a\\nb\t")


@pytest.mark.parametrize("bad", ['"x"', '[1, "y"]', '[{"function": "f"}]', "{}"])
def test_stored_tool_calls_of_the_wrong_shape_are_dropped_with_a_warning(agi, tmp_path, bad):
    s = tmp_path / "s"
    with FakeModel(text("one"), text("two")) as server:
        assert agi("-s", str(s), "first", server=server).returncode == 0
        with open(s / "messages.jsonl", "a") as f:
            f.write(f'{{"role": "assistant", "content": "hm", "tool_calls": {bad}}}\n')
        r = agi("-s", str(s), "second", server=server)
    assert r.returncode == 0 and r.stdout == "two\n", r.stderr
    assert "malformed tool calls" in one_line(r)
    assert server.requests[1]["messages"][-2] == {"role": "assistant", "content": "hm"}


# Any bytes, anywhere: no traceback, a documented exit code, valid session files

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

LONE = st.sampled_from(["\ud83d", "\ude00", "\udce9", "\ud83d\ude00", "\x00", "\u2028"])
PIECE = st.one_of(st.text(max_size=12), LONE, st.binary(max_size=6))
NOT_NUL = st.binary(min_size=1, max_size=24).map(lambda b: b.replace(b"\0", b"?"))


def frame(piece: str | bytes) -> bytes:
    if isinstance(piece, str):
        return _chunk({"content": piece})
    body = piece.replace(b"\n", b" ").replace(b"\r", b" ")  # raw bytes inside the JSON text
    return b'data: {"choices": [{"index": 0, "delta": {"content": "' + body + b'"}}]}\n\n'


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    prompt=NOT_NUL,
    stdin=st.binary(max_size=200),
    pieces=st.lists(PIECE, max_size=6),
    content=st.binary(max_size=300),
)
def test_arbitrary_bytes_end_cleanly(served, tmp_path_factory, prompt, stdin, pieces, content):
    tmp = tmp_path_factory.mktemp("bytes")
    (tmp / "file").write_bytes(content)
    frames = [_chunk({"role": "assistant", "content": ""}), *map(frame, pieces)]
    frames += [_chunk({"content": "."}), _chunk({}, "stop"), b"data: [DONE]\n\n"]
    s = tmp / "s"
    with FakeModel(call("Read", file_path=str(tmp / "file")), sse(*frames)) as server:
        r = run_bytes([b"-s", os.fsencode(s), b"p " + prompt], served(server), tmp, input=stdin)
    err = r.stderr.decode("utf-8")  # strictly UTF-8 (and nothing from a surrogate)
    assert "Traceback" not in err
    assert r.returncode in (0, 3), err
    if r.returncode:
        assert err.startswith("agi: ") and err.count("\n") == 1, err
    else:
        assert r.stdout.decode("utf-8").endswith(".\n")
    assert_valid_session(s)


def test_a_key_streamed_in_pieces_never_reaches_stdout_or_the_terminal_view(agi):
    key = "sk-SECRETKEY123456789"
    reply = text(f"the key is {key} ok", pieces=8)
    with FakeModel(reply) as server:
        r = agi("--output", "jsonl", "-v", "x", server=server, extra_env={"AGI_API_KEY": key})
    assert r.returncode == 0, r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    streamed = "".join(e["text"] for e in events if e["type"] == "text")
    assert streamed == "the key is [REDACTED] ok"
    assert key not in r.stdout and key not in r.stderr
    assert events[-1]["answer"] == "the key is [REDACTED] ok"


def test_a_directory_made_under_umask_002_is_no_cause_for_a_warning(agi, tmp_path):
    import grp
    import pwd

    name = pwd.getpwuid(os.getuid()).pw_name
    if set(grp.getgrgid(os.getgid()).gr_mem) - {name}:
        pytest.skip("this user's primary group has other members")
    s = tmp_path / "s"
    s.mkdir()
    s.chmod(0o775)  # what `mkdir` gives under umask 002 (Debian's and Ubuntu's default for users)
    with FakeModel(text("one"), text("two")) as server:
        first = agi("-s", str(s), "first", server=server)
        second = agi("-s", str(s), "second", server=server)
    assert (first.returncode, first.stderr) == (0, "")
    assert (second.returncode, second.stderr) == (0, "")


# 11. Issue 27, as a user without root's powers: strays end, kernel files and own output refused


def test_unprivileged_a_process_that_left_its_session_ends_with_the_run(unprivileged, tmp_path):
    pid = tmp_path / "stray.pid"
    tmp_path.chmod(0o777)
    line = f"setsid sleep 1013 > /dev/null 2>&1 & echo $! > {pid}"
    with FakeModel(call("Bash", command=line), text("done")) as server:
        r = unprivileged("go", server=server)
    assert r.returncode == 0, r.stderr
    started = int(pid.read_text())
    for _ in range(100):
        if no_process("sleep 1013"):
            break
        time.sleep(0.05)
    try:
        assert no_process("sleep 1013")
    finally:
        if not no_process("sleep 1013"):
            os.kill(started, signal.SIGKILL)


@pytest.mark.skipif(not os.path.exists("/proc/kmsg"), reason="no /proc/kmsg here")
def test_unprivileged_reading_proc_kmsg_is_a_plain_error(unprivileged, tmp_path):
    with FakeModel(call("Read", file_path="/proc/kmsg"), text("done")) as server:
        r = unprivileged("go", server=server)
    assert r.returncode == 0, r.stderr
    result = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"][0]
    assert result.startswith("Error: ") and "TypeError" not in result, result


def test_unprivileged_write_refuses_agis_own_stdout(unprivileged, tmp_path):
    with FakeModel(call("Write", file_path="/dev/stdout", content="FOREIGN"), text("ok")) as s:
        r = unprivileged("--output", "json", "go", server=s)
    assert r.returncode == 0, r.stderr
    assert "FOREIGN" not in r.stdout and json.loads(r.stdout)["answer"] == "ok"
