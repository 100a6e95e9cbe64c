"""The bubblewrap sandbox: the policy, the bwrap command line, and real runs under real bwrap.

Unit tests check `Policy` alone; the real runs go through `run_process(policy.wrap(...))`, the
Terminal tool and, once the CLI has `--sandbox`, the `agi` executable against the scripted
server. Files a broken sandbox could create outside the test's directories carry a unique name
and are removed afterwards.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from agi.errors import ToolError, UsageError
from agi.policy.sandbox import INSTALL_HINT, Policy
from agi.tools import ToolContext
from agi.tools.shell import run_process

from fakeserver import FakeModel, call, text


def bwrap_works() -> bool:
    try:
        Policy.load("read-only").check()
    except UsageError:
        return False
    return True


BWRAP = bwrap_works()
# the interpreter itself, not the virtualenv's link to it: a checkout under /tmp (and its .venv)
# is hidden in the sandbox, whose /tmp is private; what runs there needs the standard library only
PYTHON = os.path.realpath(sys.executable)
needs_bwrap = pytest.mark.skipif(not BWRAP, reason="bwrap is missing or cannot create namespaces")


def run(policy: Policy, command: str, cwd: Path, timeout: float = 20) -> tuple[str, int]:
    output, code, timed_out = run_process(
        policy.wrap(["bash", "-c", command], str(cwd)), str(cwd), timeout
    )
    assert not timed_out
    return output.text(), code


@pytest.fixture
def outside():
    """Unique paths in the home directory and /etc, removed whatever happens."""
    home = Path.home() / f"agi-sandbox-test-{uuid.uuid4().hex[:8]}"
    etc = Path(f"/etc/agi-test-{uuid.uuid4().hex[:8]}")
    yield home, etc
    for p in (home, etc):
        try:
            p.unlink()
        except OSError:
            pass


def processes_with(marker: str) -> list[str]:
    """Command lines of live processes that contain `marker` (zombies and this test excluded)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            raw = Path(f"/proc/{name}/cmdline").read_bytes()
            cmdline = raw.replace(b"\0", b" ").decode("utf-8", "replace")
            state = (
                Path(f"/proc/{name}/stat").read_text(errors="replace").rsplit(")", 1)[1].split()[0]
            )
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(cmdline)
    return found


def listener() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    return s


# --- the policy ------------------------------------------------------------------------------


def test_load_checks_the_options(tmp_path):
    assert Policy.load(None) == Policy() and not Policy().enabled
    with pytest.raises(UsageError, match="one of off, read-only, workspace"):
        Policy.load("strict")
    with pytest.raises(UsageError, match="--no-network needs a sandbox"):
        Policy.load("off", no_network=True)
    with pytest.raises(UsageError, match="--allow-write .*nope: not a directory"):
        Policy.load("workspace", [str(tmp_path / "nope")])
    assert Policy.load("read-only", [str(tmp_path)]).writable == ()  # only workspace writes


def test_workspace_defaults_to_the_working_directory_resolved(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert Policy.load("workspace", cwd=str(tmp_path / "link")).writable == (str(real),)
    both = Policy.load("workspace", [str(tmp_path / "link"), str(real), str(tmp_path)])
    assert both.writable == (str(real), str(tmp_path))  # duplicates dropped, order kept


def test_label_and_record_say_what_the_sandbox_is(tmp_path):
    p = Policy.load("workspace", [str(tmp_path)], no_network=True)
    assert p.label() == f"workspace (writable: {tmp_path}), no network"
    assert p.record() == {"mode": "workspace", "writable": [str(tmp_path)], "network": False}
    assert Policy.from_record(p.record()) == p
    assert Policy.load("read-only").label() == "read-only"
    assert Policy().label() == "off"


def test_wrap_is_the_identity_when_off():
    assert Policy().wrap(["bash", "-c", "ls"], "/") == ["bash", "-c", "ls"]


def test_wrap_read_only_shape():
    p = Policy("read-only", bwrap="/usr/bin/bwrap")
    argv = p.wrap(["bash", "-c", "echo hi"], "/srv/project")
    assert argv[:4] == ["/usr/bin/bwrap", "--ro-bind", "/", "/"]
    assert argv[argv.index("--") :] == ["--", "bash", "-c", "echo hi"]
    opts = " ".join(argv[: argv.index("--")])
    for part in (
        "--dev /dev",
        "--proc /proc",
        "--tmpfs /tmp",
        "--unshare-all",
        "--share-net",
        "--die-with-parent",
        "--cap-drop ALL",
        "--chdir /srv/project",
    ):
        assert part in opts
    assert "--bind" not in argv
    assert "--new-session" not in argv  # it would take the Terminal tool's controlling tty away
    assert "--share-net" not in Policy("read-only", network=False, bwrap="bwrap").wrap(["true"])
    assert "--die-with-parent" not in p.wrap(["bash"], "/", die_with_parent=False)  # terminals


def test_wrap_workspace_binds_writable_dirs_and_keeps_them_on_top_of_tmp():
    p = Policy("workspace", ("/srv/a", "/srv/a/sub", "/tmp/w", "/tmp/w/x/y"), bwrap="bwrap")
    argv = p.wrap(["make"], "/tmp")
    pairs = [(argv[i], argv[i + 1]) for i in range(len(argv) - 1)]
    assert ("--bind", "/srv/a") in pairs and ("--bind", "/tmp/w") in pairs
    assert ("--bind", "/srv/a/sub") not in pairs and ("--bind", "/tmp/w/x/y") not in pairs
    assert argv.index("/srv/a") < argv.index("--tmpfs")  # outside /tmp: before the tmpfs is fine
    assert argv.index("/tmp/w") > argv.index("--tmpfs")  # under /tmp: after, or it is hidden


def test_wrap_keeps_the_working_and_program_directories_visible_under_tmp(tmp_path):
    (tmp_path / "ws").mkdir()
    (tmp_path / "tools").mkdir()
    p = Policy("workspace", (str(tmp_path / "ws"),), bwrap="bwrap")
    argv = p.wrap([str(tmp_path / "tools" / "t")], str(tmp_path))
    ro = [argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind"]
    assert ro == ["/", str(tmp_path), str(tmp_path / "tools")] or ro == [
        "/",
        str(tmp_path / "tools"),
        str(tmp_path),
    ]
    # the read-only parent goes first, the writable child on top of it
    assert argv.index(str(tmp_path)) < argv.index(str(tmp_path / "ws"))
    inside = p.wrap(["true"], str(tmp_path / "ws" / "deeper"))
    assert inside.count("--ro-bind") == 1  # the working directory is already bound writable


def test_allows_write_resolves_symlinks_and_dots(tmp_path):
    ws, out = tmp_path / "ws", tmp_path / "out"
    ws.mkdir()
    out.mkdir()
    (ws / "escape").symlink_to(out)
    (ws / "passwd").symlink_to("/etc/passwd")
    (tmp_path / "ws-twin").mkdir()
    p = Policy.load("workspace", [str(ws)])
    assert p.allows_write(ws / "new.txt")
    assert p.allows_write(ws / "not" / "yet" / "there.txt")
    assert p.allows_write(ws)
    assert p.allows_write(tmp_path / "out" / ".." / "ws" / "f")
    assert not p.allows_write(ws / ".." / "out" / "f")
    assert not p.allows_write(ws / "escape" / "f")
    assert not p.allows_write(ws / "passwd")
    assert not p.allows_write(tmp_path / "ws-twin" / "f")  # a prefix of the name is not inside
    assert not p.allows_write("/etc/agi-test")
    assert not Policy.load("read-only").allows_write(ws / "f")
    assert Policy().allows_write("/etc/agi-test")


def test_check_write_names_the_mode_and_returns_the_real_path(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "link").symlink_to(ws)
    with pytest.raises(ToolError) as e:
        Policy.load("read-only").check_write("/etc/agi-test")
    assert str(e.value) == "the sandbox (read-only) does not allow writing /etc/agi-test"
    p = Policy.load("workspace", [str(ws)])
    with pytest.raises(
        ToolError, match=rf"\(workspace\) does not allow writing /etc/x \(writable: {ws}\)"
    ):
        p.check_write("/etc/x")
    assert p.check_write(tmp_path / "link" / "f") == ws / "f"
    assert Policy().check_write("rel/f") == Path("rel/f")


def test_temp_dir_in_read_only_is_writable_and_bound(tmp_path):
    p = Policy("read-only", bwrap="bwrap")
    d = p.temp_dir()
    try:
        assert os.path.isdir(d) and oct(os.stat(d).st_mode & 0o777) == "0o700"
        assert p.allows_write(Path(d) / "f") and not p.allows_write(tmp_path / "f")
        argv = p.wrap(["true"], "/")
        assert argv[argv.index(p.scratch) - 1] == "--bind"
        assert argv.index(p.scratch) > argv.index("--tmpfs")
        assert Path(p.temp_dir()).parent == Path(d).parent  # one parent per run
    finally:
        shutil.rmtree(str(p.scratch))


def test_missing_bwrap_is_a_usage_error_with_the_install_hint(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    for mode in ("read-only", "workspace"):
        with pytest.raises(UsageError) as e:
            Policy.load(mode, cwd=str(tmp_path)).check()
        assert "apt-get install bubblewrap" in str(e.value) and "dnf install bubblewrap" in str(
            e.value
        )
        assert INSTALL_HINT in str(e.value) and e.value.exit_code == 2
    Policy().check()  # off needs nothing


def test_bwrap_that_cannot_create_namespaces_is_a_usage_error(tmp_path, monkeypatch):
    fake = tmp_path / "bwrap"  # what bwrap says when user namespaces are disabled
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    with pytest.raises(
        UsageError, match="cannot set up a sandbox.*No permissions.*user namespaces"
    ):
        Policy.load("read-only").check()


# --- real bwrap --------------------------------------------------------------------------------


@needs_bwrap
def test_read_only_refuses_writes_to_home_and_etc(tmp_path, outside):
    home, etc = outside
    out, code = run(Policy.load("read-only"), f"touch {home}; echo hi > {etc}", tmp_path)
    assert code != 0
    assert out.count("Read-only file system") == 2, out
    assert not home.exists() and not etc.exists()


@needs_bwrap
def test_read_only_has_a_private_tmp_and_sees_the_working_directory(tmp_path):
    (tmp_path / "here.txt").write_text("visible")
    mine = Path("/tmp") / f"agi-host-{uuid.uuid4().hex[:8]}"
    mine.write_text("host")
    try:
        out, code = run(
            Policy.load("read-only"),
            f"cat here.txt; pwd; echo x > /tmp/inner && echo tmp-writable; ls {mine}; touch y",
            tmp_path,
        )
    finally:
        mine.unlink()
    assert out.startswith(f"visible{tmp_path}\ntmp-writable\n"), out
    assert "No such file" in out and "Read-only file system" in out
    assert not (tmp_path / "y").exists() and not Path("/tmp/inner").exists()


@needs_bwrap
def test_workspace_writes_inside_the_allowed_dirs_only(tmp_path, outside):
    home, _ = outside
    ws, other = tmp_path / "ws", tmp_path / "other"
    ws.mkdir()
    other.mkdir()
    (ws / "sub").mkdir()
    (ws / "escape").symlink_to(other)
    p = Policy.load("workspace", [str(ws)])
    out, code = run(
        p,
        f"echo a > in.txt && mkdir -p sub/deep && echo b > sub/deep/f && echo wrote; "
        f"echo c > {other}/x; echo d > escape/y; touch {home}",
        ws,
    )
    # `other` is hidden by the private /tmp; the home directory is read-only
    assert "wrote" in out and len(re.findall(r"No such file|Read-only file system", out)) == 3, out
    assert (ws / "in.txt").read_text() == "a\n" and (ws / "sub" / "deep" / "f").exists()
    assert list(other.iterdir()) == [] and not home.exists()


@needs_bwrap
def test_no_escape_through_proc_or_remounting(tmp_path, outside):
    home, _ = outside
    command = (
        f"for p in /proc/[0-9]*; do echo x > $p/root{home} 2>/dev/null && echo ESCAPED $p; done; "
        "mount -o remount,rw / 2>/dev/null && echo REMOUNTED; "
        f"mount -o remount,rw,bind / 2>/dev/null && echo REMOUNTED; touch {home}; "
        "grep CapEff /proc/self/status; ls /proc | grep -c '^[0-9]'"
    )
    out, _ = run(Policy.load("read-only"), command, tmp_path)
    assert "ESCAPED" not in out and "REMOUNTED" not in out and not home.exists(), out
    assert "CapEff:\t0000000000000000" in out
    assert int(out.split()[-1]) < 10  # its own PID namespace: only the command's processes


@needs_bwrap
def test_no_network_unshares_the_loopback_too(tmp_path):
    server = listener()
    port = server.getsockname()[1]
    probe = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"
    try:
        out, code = run(Policy.load("read-only"), probe, tmp_path)
        assert (out, code) == ("connected\n", 0)
        out, code = run(Policy.load("read-only", no_network=True), probe, tmp_path)
        assert code != 0 and "connected" not in out.replace("connect:", ""), out
    finally:
        server.close()


@needs_bwrap
def test_timed_out_command_leaves_no_process_behind(tmp_path):
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}.5"
    p = Policy.load("read-only")
    argv = p.wrap(["bash", "-c", f"sleep {marker} & sleep {marker}; echo never"], str(tmp_path))
    started = time.monotonic()
    output, code, timed_out = run_process(argv, str(tmp_path), 1.0)
    assert timed_out and code == -1 and time.monotonic() - started < 30  # a hang guard
    deadline = time.monotonic() + 10
    while processes_with(f"sleep {marker}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with(f"sleep {marker}") == []


@needs_bwrap
def test_background_jobs_and_daemons_end_with_their_command(tmp_path):
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}.25"
    daemons = (
        f"sleep {marker} & setsid nohup sleep {marker} >/dev/null 2>&1 & (setsid sleep {marker} &)"
    )
    out, code = run(Policy.load("read-only"), f"{daemons}; echo started", tmp_path)
    assert (out, code) == ("started\n", 0)
    assert processes_with(f"sleep {marker}") == []  # its PID namespace ended with the command


@needs_bwrap
def test_exit_codes_and_signals_come_through(tmp_path):
    p = Policy.load("read-only")
    assert run(p, "echo out; echo err >&2; exit 7", tmp_path) == ("out\nerr\n", 7)
    assert run(p, "kill -9 $$", tmp_path)[1] == 137


@needs_bwrap
def test_temp_dir_works_in_read_only_for_commands_and_native_tools(tmp_path):
    p = Policy.load("read-only")
    d = Path(p.temp_dir())
    try:
        out, code = run(p, f"echo from-bash > {d}/f && cat {d}/f", tmp_path)
        assert (out, code) == ("from-bash\n", 0)
        assert (d / "f").read_text() == "from-bash\n"
        p.check_write(d / "g").write_text("native")
        assert run(p, f"cat {d}/g", tmp_path)[0] == "native"
    finally:
        shutil.rmtree(str(p.scratch))


@needs_bwrap
def test_user_tool_under_tmp_runs_in_the_sandbox(tmp_path):
    ws, tools = tmp_path / "ws", tmp_path / "tools"
    ws.mkdir()
    tools.mkdir()
    tool = tools / "save"
    tool.write_text('#!/bin/sh\nread -r line\necho "$line" > "$1/got" && echo saved\ntouch "$2"\n')
    tool.chmod(0o755)
    p = Policy.load("workspace", [str(ws)])
    with open(tmp_path / "stdin", "w+b") as f:
        f.write(b'{"x": 1}\n')
        f.seek(0)
        argv = p.wrap([str(tool), str(ws), str(tools / "nope")], str(ws))
        output, code, _ = run_process(argv, str(ws), 20, stdin=f)
    assert "saved" in output.text() and "Read-only file system" in output.text()
    assert (ws / "got").read_text() == '{"x": 1}\n' and not (tools / "nope").exists()


@needs_bwrap
def test_terminal_keeps_job_control_in_the_sandbox(tmp_path, outside):
    from agi.tools.terminal import Terminal

    home, _ = outside
    p = Policy.load("read-only")
    shell = shlex.join(p.wrap(["bash", "--norc", "--noprofile", "-i"], str(tmp_path)))
    term, ctx = Terminal(), ToolContext(cwd=str(tmp_path))

    def send(keys: str, wait_ms: int = 1000) -> str:
        return term.run({"action": "send", "id": "sb", "keys": keys, "wait_ms": wait_ms}, ctx)

    try:
        term.run({"action": "start", "id": "sb", "command": shell, "wait_ms": 3000}, ctx)
        screen = send("set -o | grep monitor<Enter>")
        assert re.search(r"monitor\s+on", screen), screen  # job control: it has a terminal
        send("sleep 300<Enter>", 500)
        send("<C-c>", 500)
        screen = send("echo back<Enter>")
        assert "^C" in screen and "\nback\n" in screen, screen  # Ctrl-C reached the job
        python = f"{PYTHON} -c 'print(open(\"/dev/tty\").name)'"
        screen = send(f"{python}; touch {home}<Enter>", 3000)
        assert "\n/dev/tty\n" in screen and "Read-only file system" in screen, screen
        assert not home.exists()
    finally:
        term.close()


@needs_bwrap
def test_native_tools_obey_the_sandbox(tmp_path, outside):
    from agi.tools.files import Edit, TempDir, Write
    from agi.tools.shell import Bash
    from agi.tools.terminal import Terminal

    home, _ = outside
    ws = tmp_path / "ws"
    ws.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    ctx = ToolContext(cwd=str(ws), sandbox=Policy.load("workspace", [str(ws)]))
    assert "Created" in Write().run({"file_path": "a.txt", "content": "x"}, ctx)
    assert "Edited" in Edit().run({"file_path": "a.txt", "old_string": "x", "new_string": "y"}, ctx)
    assert (ws / "a.txt").read_text() == "y"
    with pytest.raises(ToolError, match="does not allow writing"):
        Write().run({"file_path": str(victim), "content": "gone"}, ctx)
    with pytest.raises(ToolError, match="does not allow writing"):
        Edit().run({"file_path": str(victim), "old_string": "keep", "new_string": "gone"}, ctx)
    assert victim.read_text() == "keep"
    # the victim lies under /tmp, outside the working directory: the write lands in the private
    # /tmp and is thrown away; the home directory is read-only
    out = Bash().run({"command": f"echo z > b.txt; echo gone > {victim}; touch {home}"}, ctx)
    assert "Read-only file system" in out and (ws / "b.txt").exists(), out
    assert victim.read_text() == "keep" and not home.exists()
    ro = ToolContext(cwd=str(ws), sandbox=Policy.load("read-only"))
    d = TempDir().run({}, ro)
    terminal = Terminal()
    try:
        assert "Created" in Write().run({"file_path": f"{d}/n", "content": "1"}, ro)
        assert Bash().run({"command": f"cat {d}/n; touch c.txt"}, ro).startswith("1")
        assert not (ws / "c.txt").exists()
        screen = terminal.run({"action": "start", "command": f"touch {home}"}, ro)
        assert "Read-only file system" in screen and not home.exists(), screen
    finally:
        terminal.close()
        shutil.rmtree(str(ro.sandbox.scratch))


@needs_bwrap
def test_terminal_outlives_the_thread_that_started_it(tmp_path):
    from agi.tools.terminal import Terminal

    term = Terminal()
    ctx = ToolContext(cwd=str(tmp_path), sandbox=Policy.load("read-only"))
    start = {"action": "start", "id": "bg", "command": "sleep 60", "wait_ms": 100}
    worker = threading.Thread(target=term.run, args=(start, ctx))  # as parallel calls run
    worker.start()
    worker.join()
    try:
        time.sleep(0.3)
        screen = term.run({"action": "read", "id": "bg", "wait_ms": 100}, ctx)
        assert ", running]" in screen, screen
    finally:
        term.close()


# --- the agi executable ---------------------------------------------------------------------


def tool_results_of(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def tool_results(server: FakeModel) -> list[str]:
    """The tool results the model saw in the last request."""
    return tool_results_of(server.requests[-1])


@needs_bwrap
def test_cli_read_only_bash_cannot_write_home_or_etc(agi, tmp_path, outside):
    home, etc = outside
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}.75"
    command = f"sleep {marker} & touch {home}; echo hi > {etc}"
    with FakeModel(call("Bash", command=command), text("done")) as server:
        r = agi("--sandbox", "read-only", "try", server=server)
    assert r.returncode == 0, r.stderr
    [result] = tool_results(server)
    assert result.count("Read-only file system") == 2 and result.endswith("exit code 1"), result
    assert not home.exists() and not etc.exists()
    assert processes_with(f"sleep {marker}") == []


@needs_bwrap
def test_cli_workspace_bash_user_tool_write_and_edit(agi, tmp_path):
    ws, other = tmp_path / "ws", tmp_path / "other"
    ws.mkdir()
    other.mkdir()
    (other / "keep.txt").write_text("keep")
    tool = tmp_path / "tools" / "put"
    tool.parent.mkdir()
    desc = {
        "name": "put",
        "description": "write a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
    tool.write_text(
        f"#!{PYTHON}\nimport json, sys\n"
        f"if sys.argv[1:] == ['--describe']:\n    print({json.dumps(desc)!r}); sys.exit(0)\n"
        "open(json.load(sys.stdin)['path'], 'w').write('tool')\nprint('put done')\n"
    )
    tool.chmod(0o755)
    script = [
        call("Bash", command=f"echo in > {ws}/bash.txt; echo out > {other}/bash.txt"),
        call("put", path=f"{ws}/tool.txt"),
        call("put", path=f"{other}/tool.txt"),
        call("Write", file_path=f"{ws}/write.txt", content="w"),
        call("Write", file_path=f"{other}/write.txt", content="w"),
        call("Edit", file_path=f"{ws}/write.txt", old_string="w", new_string="e"),
        call("Edit", file_path=f"{other}/keep.txt", old_string="keep", new_string="lost"),
        text("done"),
    ]
    with FakeModel(*script) as server:
        r = agi(
            "--sandbox",
            "workspace",
            "--allow-write",
            str(ws),
            "--tool",
            str(tool),
            "go",
            server=server,
        )
    assert r.returncode == 0, r.stderr
    bash, tool_in, tool_out, write_in, write_out, edit_in, edit_out = tool_results(server)
    assert "Read-only file system" in bash
    assert tool_in == "put done" and tool_out.startswith("Error (exit 1)")
    assert "Read-only file system" in tool_out
    assert write_in.startswith("Created") and edit_in.startswith("Edited")
    for refused, path in ((write_out, "write.txt"), (edit_out, "keep.txt")):
        assert refused == (
            f"Error: the sandbox (workspace) does not allow writing {other}/{path} (writable: {ws})"
        )
    assert sorted(p.name for p in ws.iterdir()) == ["bash.txt", "tool.txt", "write.txt"]
    assert (ws / "write.txt").read_text() == "e"
    assert sorted(p.name for p in other.iterdir()) == ["keep.txt"]
    assert (other / "keep.txt").read_text() == "keep"


@needs_bwrap
def test_cli_read_only_refuses_write_and_edit_and_tempdir_works(agi, tmp_path):
    (tmp_path / "f.txt").write_text("old")
    script = [
        call("Write", file_path="new.txt", content="x"),
        call("Edit", file_path="f.txt", old_string="old", new_string="new"),
        call("TempDir"),
        lambda body: call(
            "Bash", command=f"cd {tool_results_of(body)[-1]} && echo ok > f && cat f"
        ),
        text("done"),
    ]
    with FakeModel(*script) as server:
        r = agi("--sandbox", "read-only", "go", server=server)
    assert r.returncode == 0, r.stderr
    write, edit, temp, bash = tool_results(server)
    assert write == f"Error: the sandbox (read-only) does not allow writing {tmp_path}/new.txt"
    assert edit == f"Error: the sandbox (read-only) does not allow writing {tmp_path}/f.txt"
    assert bash == "ok"  # the TempDir was writable inside the read-only sandbox
    assert not Path(temp).exists()  # and, with the sandbox's scratch, removed at the end
    assert (tmp_path / "f.txt").read_text() == "old" and not (tmp_path / "new.txt").exists()


@needs_bwrap
def test_cli_no_network(agi, tmp_path):
    server_socket = listener()
    probe = f"exec 3<>/dev/tcp/127.0.0.1/{server_socket.getsockname()[1]} && echo connected"
    try:
        results = []
        for extra in ([], ["--no-network"]):
            with FakeModel(call("Bash", command=probe), text("done")) as server:
                r = agi("--sandbox", "read-only", *extra, "go", server=server)
            assert r.returncode == 0, r.stderr
            results += tool_results(server)
    finally:
        server_socket.close()
    assert results[0] == "connected"
    assert "Connection refused" in results[1] and results[1].endswith("exit code 1")


def test_cli_without_bwrap_exits_2_with_the_hint(agi, tmp_path):
    with FakeModel(text("never")) as server:
        r = agi("--sandbox", "workspace", "go", server=server, extra_env={"PATH": str(tmp_path)})
    assert r.returncode == 2
    assert r.stderr.startswith("agi: ") and "apt-get install bubblewrap" in r.stderr
    assert "dnf install bubblewrap" in r.stderr and server.requests == []


def test_cli_option_mistakes_exit_2(agi, tmp_path):
    with FakeModel(text("never")) as server:
        no_net = agi("--no-network", "go", server=server)
        allow = agi("--sandbox", "read-only", "--allow-write", str(tmp_path), "go", server=server)
        missing = agi("--sandbox", "workspace", "--allow-write", "nope", "go", server=server)
    assert (no_net.returncode, allow.returncode, missing.returncode) == (2, 2, 2)
    assert "--no-network needs a sandbox" in no_net.stderr
    assert "--allow-write needs --sandbox workspace" in allow.stderr
    assert "nope: not a directory" in missing.stderr and server.requests == []


@needs_bwrap
def test_cli_config_file_sets_the_sandbox(agi, tmp_path, outside):
    home, _ = outside
    (tmp_path / "config.toml").write_text('sandbox = "read-only"\nno_network = true\n')
    with FakeModel(call("Bash", command=f"touch {home}"), text("done")) as server:
        r = agi("-v", "go", server=server)
    assert r.returncode == 0, r.stderr
    assert "Read-only file system" in tool_results(server)[0] and not home.exists()
    assert "sandbox read-only, no network" in r.stderr


@needs_bwrap
def test_cli_view_show_and_trace_say_which_sandbox(agi, tmp_path):
    session = tmp_path / "s"
    with FakeModel(call("Bash", command="echo hi"), text("done"), text("again")) as server:
        r = agi(
            "-v", "--sandbox", "workspace", "--no-network", "-s", str(session), "go", server=server
        )
        agi("-s", str(session), "once more", server=server)
    assert r.returncode == 0, r.stderr
    label = f"workspace (writable: {tmp_path}), no network"
    assert f"sandbox {label}" in r.stderr
    runs = [
        json.loads(line)
        for line in (session / "trace.jsonl").read_text().splitlines()
        if json.loads(line).get("type") == "run"
    ]
    assert [run["sandbox"] for run in runs] == [
        {"mode": "workspace", "writable": [str(tmp_path)], "network": False},
        {"mode": "off", "writable": [], "network": True},
    ]
    show = agi("--show", str(session))
    assert show.returncode == 0, show.stderr
    assert f"sandbox {label}, off" in show.stdout.splitlines()[0]


def test_ci_has_bwrap():
    """CI installs bubblewrap (.ci/run): there, none of the sandbox tests may skip."""
    if os.environ.get("CI") == "true":
        assert BWRAP, "bwrap is missing or cannot create namespaces on CI"
