"""Issue 27 (CONTRACT section 20): path rules on the real path, Write/Edit refusing agi's own
output and special files, kernel files that never end, lone surrogates in arguments. The real
`agi` against the scripted server."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import AGI
from fakeserver import FakeModel, call, text


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def up_to_root(cwd: Path) -> str:
    """`..` enough times to climb from cwd to /."""
    return "/".join([".."] * (len(cwd.resolve().parts) - 1))


# --- S2: path rules judged on the path the kernel will open ------------------------------------


def test_a_read_deny_rule_holds_through_proc_self_cwd_and_dotdot(agi, tmp_path):
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key.txt").write_text("s3cret")
    path = f"/proc/self/root/proc/self/cwd/{up_to_root(tmp_path)}{secret}/key.txt"
    with FakeModel(call("Read", file_path=path), text("done")) as server:
        r = agi("--deny", f"Read(/{secret}/**)", "go", server=server)
    assert r.returncode == 0, r.stderr
    (result,) = tool_results(server.requests[1])
    assert result.startswith("Error: denied by permission rule"), result
    assert "s3cret" not in result


def test_a_write_deny_rule_holds_through_proc_self_cwd_and_dotdot(agi, tmp_path):
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    path = "/proc/self/root/proc/self/cwd/../outside/pwned"
    with FakeModel(call("Write", file_path=path, content="x"), text("done")) as server:
        r = agi("--deny", f"Write(/{outside}/**)", "go", server=server, cwd=work)
    assert r.returncode == 0, r.stderr
    assert tool_results(server.requests[1])[0].startswith("Error: denied by permission rule")
    assert not (outside / "pwned").exists()


def test_an_allow_rule_does_not_cover_a_link_followed_by_dotdot(agi, tmp_path):
    (tmp_path / "src").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "src" / "link").symlink_to(outside)
    write = call("Write", file_path="src/link/../escape.txt", content="x")
    with FakeModel(write, text("done")) as server:
        r = agi("--permission-mode", "dontAsk", "--allow", "Write(src/**)", "go", server=server)
    assert r.returncode == 0, r.stderr
    assert tool_results(server.requests[1])[0].startswith("Error: denied")
    assert not (tmp_path / "escape.txt").exists()


def test_an_allow_rule_still_covers_ordinary_paths(agi, tmp_path):
    (tmp_path / "src").mkdir()
    write = call("Write", file_path="src/sub/../ok.txt", content="x")
    with FakeModel(write, text("done")) as server:
        r = agi("--permission-mode", "dontAsk", "--allow", "Write(src/**)", "go", server=server)
    assert r.returncode == 0, r.stderr
    assert tool_results(server.requests[1])[0].startswith("Created")
    assert (tmp_path / "src" / "ok.txt").read_text() == "x"


# --- S9, H2: Write and Edit refuse agi's own output and special files --------------------------


def test_write_to_dev_stdout_is_refused_when_stdout_is_a_pipe(agi, tmp_path):
    with FakeModel(call("Write", file_path="/dev/stdout", content="FOREIGN"), text("done")) as s:
        r = agi("--output", "json", "go", server=s)
    assert r.returncode == 0, r.stderr
    assert "FOREIGN" not in r.stdout
    assert r.stdout.startswith("{")
    assert tool_results(s.requests[1])[0].startswith("Error: ")


@pytest.mark.parametrize("tool", ["Write", "Edit"])
def test_write_and_edit_refuse_the_file_that_is_agis_stdout(env, tmp_path, tool):
    out = tmp_path / "answer.txt"
    args = {"file_path": str(out), "content": "FOREIGN"}
    if tool == "Edit":
        args = {"file_path": str(out), "old_string": "{", "new_string": "FOREIGN"}
    with FakeModel(call(tool, **args), text("the answer")) as server:
        env = {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}
        with open(out, "w") as stdout:
            r = subprocess.run(
                [AGI, "--output", "json", "go"], env=env, cwd=tmp_path, stdout=stdout,
                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=60, text=True,
            )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "FOREIGN" not in out.read_text()
    assert "the answer" in out.read_text()
    assert "agi's own stdout" in tool_results(server.requests[1])[0]


@pytest.mark.parametrize("tool", ["Write", "Edit"])
def test_write_and_edit_refuse_a_fifo_without_blocking(agi, tmp_path, tool):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    args = {"file_path": str(fifo), "content": "x"}
    if tool == "Edit":
        args = {"file_path": str(fifo), "old_string": "a", "new_string": "b"}
    with FakeModel(call(tool, **args), text("done")) as server:
        r = agi("go", server=server, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "FIFO" in tool_results(server.requests[1])[0]


def test_write_refuses_a_device(agi, tmp_path):
    with FakeModel(call("Write", file_path="/dev/null", content="x"), text("done")) as server:
        r = agi("go", server=server)
    assert r.returncode == 0, r.stderr
    assert "character device" in tool_results(server.requests[1])[0]


# --- small ones ----------------------------------------------------------------------------------


@pytest.mark.skipif(not os.path.exists("/proc/kmsg"), reason="no /proc/kmsg here")
def test_reading_proc_kmsg_is_a_plain_error(agi, tmp_path):
    with FakeModel(call("Read", file_path="/proc/kmsg"), text("done")) as server:
        r = agi("go", server=server, timeout=30)
    assert r.returncode == 0, r.stderr
    (result,) = tool_results(server.requests[1])
    assert result.startswith("Error: ") and "TypeError" not in result, result


def test_a_lone_surrogate_in_arguments_is_a_plain_error(agi, tmp_path):
    write = call("Write", file_path=str(tmp_path / "x"), content="a\ud800b")
    with FakeModel(write, text("done")) as server:
        r = agi("go", server=server)
    assert r.returncode == 0, r.stderr
    (result,) = tool_results(server.requests[1])
    assert "lone surrogate" in result and "UnicodeEncodeError" not in result, result
    assert not (tmp_path / "x").exists()


# --- S7: the key reaches no child, nor does a variable that contains it ------------------------

KEY = "sk-round3-" + "k" * 24


def test_no_child_sees_the_key_or_a_variable_holding_it(agi, tmp_path):
    """Bash, a hook, a user tool's --describe and a command's shell step each dump their
    environment; none holds the key, and OTHER_CFG (which contains it) is withheld too."""
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    tool = tmp_path / "envtool"
    tool.write_text(
        "#!/usr/bin/env bash\n"
        f'if [ "$1" = --describe ]; then env > {dumps}/describe; '
        'echo \'{"name": "envtool", "description": "d", "parameters": {"type": "object", '
        '"properties": {}}}\'; exit 0; fi\necho ran\n'
    )
    tool.chmod(0o755)
    hooks = tmp_path / "settings.json"
    entry = {"matcher": "Bash", "hooks": [{"type": "command", "command": f"env > {dumps}/hook"}]}
    hooks.write_text(json.dumps({"hooks": {"PreToolUse": [entry]}}))
    (tmp_path / "commands").mkdir()
    (tmp_path / "commands" / "envdump.md").write_text("Here: !`env`\n")
    step = call("Bash", command=f"env > {dumps}/bash")
    with FakeModel(step, text("done")) as server:
        r = agi(
            "--tool", str(tool), "--settings", str(hooks), "/envdump", server=server,
            extra_env={"AGI_API_KEY": KEY, "OTHER_CFG": f"token={KEY};x=1", "PLAIN": "seen"},
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    prompt = json.dumps(server.requests[0]["messages"])
    assert "PLAIN=seen" in prompt  # the step ran and its output is in the prompt
    assert KEY not in prompt and "OTHER_CFG" not in prompt
    for name in ("describe", "hook", "bash"):
        dumped = (dumps / name).read_text()
        assert "PLAIN=seen" in dumped, name
        assert KEY not in dumped and "OTHER_CFG" not in dumped, name


# --- S8: control sequences from models and tools are shown escaped -----------------------------

HOSTILE = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;pwned\x07\x1b[2J\x9b2J"


def test_the_terminal_view_and_show_escape_control_sequences(agi, tmp_path):
    step = call("Bash", command="printf '\\033]52;c;eA==\\007\\033[2Jtool-out'")
    with FakeModel(step, text(f"answer {HOSTILE} end")) as server:
        r = agi("-v", "go", server=server)
    assert r.returncode == 0, r.stderr
    for raw in ("\x1b]", "\x1b[2J", "\x07", "\x9b"):
        assert raw not in r.stderr
    assert "\\x1b]52" in r.stderr
    sessions = sorted((tmp_path / "agi-home" / "sessions").rglob("meta.json"))
    shown = agi("--show", str(sessions[-1].parent))
    assert shown.returncode == 0, shown.stderr
    for raw in ("\x1b]", "\x1b[2J", "\x07", "\x9b"):
        assert raw not in shown.stdout
    assert "\\x1b]0;pwned" in shown.stdout and "tool-out" in shown.stdout
