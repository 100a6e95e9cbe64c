"""Issue 27 (docs: security): path rules on the real path, Write/Edit refusing agi's own
output and special files, kernel files that never end, lone surrogates in arguments. The real
`agi` against the scripted server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import AGI, peak_rss
from fakeserver import FakeModel, call, calls, text


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


# --- S5, S6: command arguments and plugin directories are data, never shell --------------------


def make_command(where: Path, name: str, body: str) -> None:
    (where / "commands").mkdir(exist_ok=True)
    (where / "commands" / f"{name}.md").write_text(body)


def test_arguments_never_become_shell_steps(agi, tmp_path):
    make_command(tmp_path, "review", "Please review: $ARGUMENTS\n")
    with FakeModel(text("done")) as server:
        r = agi("/review the file !`touch P5` and ```!\ntouch P5b\n```", server=server)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "P5").exists() and not (tmp_path / "P5b").exists()
    assert "!`touch P5`" in server.requests[0]["messages"][-1]["content"]


@pytest.mark.parametrize(
    "step",
    ["echo logged $1", 'echo "logged $1"', "echo 'logged $1'", "echo logged $ARGUMENTS"],
    ids=["unquoted", "double", "single", "arguments"],
)
@pytest.mark.parametrize("how", ["argv", "stdin"])
def test_arguments_reach_a_step_as_data(agi, tmp_path, step, how):
    make_command(tmp_path, "log", f"Log:\n```!\n{step}\n```\n")
    line = "/log ;touch${IFS}P6;`touch${IFS}P6b`$(touch${IFS}P6c)"  # one word: $1 is all of it
    with FakeModel(text("done")) as server:
        if how == "argv":
            r = agi(line, server=server)
        else:
            r = agi(server=server, input=line + "\n")
    assert r.returncode == 0, r.stderr
    for name in ("P6", "P6b", "P6c"):
        assert not (tmp_path / name).exists()
    sent = server.requests[0]["messages"][-1]["content"]
    assert "logged ;touch${IFS}P6;`touch${IFS}P6b`$(touch${IFS}P6c)" in sent


EVIL = "evil $(touch P7) `touch P7b` dir"


@pytest.mark.parametrize(
    "ref",
    [
        '"${CLAUDE_PLUGIN_ROOT}"/bin/mark',
        "${CLAUDE_PLUGIN_ROOT}/bin/mark",
        "'${CLAUDE_PLUGIN_ROOT}/bin/mark'",
    ],
    ids=["quoted", "unquoted", "single-quoted"],
)
def test_a_plugin_directory_name_runs_nothing(agi, tmp_path, ref):
    plugin = tmp_path / EVIL
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "evil"}))
    (plugin / "bin").mkdir()
    (plugin / "bin" / "mark").write_text('#!/bin/sh\necho "$1" >> "$CLAUDE_PLUGIN_ROOT/marks"\n')
    (plugin / "bin" / "mark").chmod(0o755)
    (plugin / "hooks").mkdir()
    hook = {"hooks": [{"type": "command", "command": f"{ref} hook"}]}
    (plugin / "hooks" / "hooks.json").write_text(
        json.dumps({"hooks": {"UserPromptSubmit": [hook]}})
    )
    (plugin / "commands").mkdir()
    (plugin / "commands" / "go.md").write_text(f"Go:\n```!\n{ref} step\n```\n")
    work = tmp_path / "work"
    work.mkdir()
    with FakeModel(text("done")) as server:
        r = agi("--plugin-dir", str(plugin), "/go", server=server, cwd=work)
    assert r.returncode == 0, r.stderr
    for where in (tmp_path, work, plugin):
        assert not (where / "P7").exists() and not (where / "P7b").exists()
    assert sorted((plugin / "marks").read_text().split()) == ["hook", "step"]


# --- H3: one long SSE line is bounded and decoded linearly ------------------------------------


def test_a_hundred_megabyte_sse_line_ends_the_run_as_a_provider_error(agi, tmp_path):
    piece = b"x" * (1 << 16)
    frames = [b"data: "] + [piece] * 1600  # 100 MB with no newline: quadratic before
    step = {"kind": "sse", "frames": frames, "delay": 0.0}
    with FakeModel(step) as server:
        r = agi("go", server=server, timeout=120)  # a hang guard only
    assert r.returncode == 3, r.stderr
    assert "over 16 MB" in r.stderr


# --- C1 and a malformed reply: wrong JSON types are error results or provider errors -----------


def chat_frames(tool_call: dict) -> dict:
    delta = {"choices": [{"index": 0, "delta": {"tool_calls": [tool_call]}}]}
    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    frames = [f"data: {json.dumps(c)}\n\n".encode() for c in (delta, end)] + [b"data: [DONE]\n\n"]
    return {"kind": "sse", "frames": frames, "delay": 0.0}


@pytest.mark.parametrize(
    "tool_call",
    [
        {"index": 0, "id": 7, "type": "function", "function": {"name": 5, "arguments": "{}"}},
        {"index": 0, "id": "c1", "type": "function", "function": {"name": 5, "arguments": "{}"}},
        {"index": 0, "id": "c1", "type": "function", "function": {"name": "Read", "arguments": 3}},
        {"index": [0], "id": "c1", "type": "function", "function": {"name": "Read"}},
        {"index": 0, "id": "c1", "type": "function", "function": ["Read"]},
    ],
    ids=["numeric-id-and-name", "numeric-name", "numeric-arguments", "list-index", "list-function"],
)
def test_a_tool_call_with_wrong_types_is_an_error_result(agi, tmp_path, tool_call):
    with FakeModel(chat_frames(tool_call), text("done")) as server:
        r = agi("go", server=server)
    assert "Traceback" not in r.stderr and "TypeError" not in r.stderr, r.stderr
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"


def test_a_numeric_tool_use_name_from_anthropic_is_an_error_result(agi, tmp_path):
    from fakeserver import anthropic_events, anthropic_text

    events = [
        {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
                                              "content": [], "usage": {"input_tokens": 1}}},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "tool_use", "id": 9, "name": 5, "input": {}}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
         "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    ]  # fmt: skip
    with FakeModel(anthropic_events(events), anthropic_text("done")) as server:
        r = agi("-m", "anthropic:claude-fake", "go", server=server,
                extra_env={"ANTHROPIC_API_KEY": "x" * 20, "AGI_BASE_URL": server.url})  # fmt: skip
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"


def test_choices_that_are_not_a_list_end_the_run_at_once(agi, tmp_path):
    frames = [b'data: {"choices":"x"}\n\n', b"data: [DONE]\n\n"]
    with FakeModel({"kind": "sse", "frames": frames, "delay": 0.0}) as server:
        r = agi("go", server=server)
    assert r.returncode == 3, r.stderr
    assert len(server.requests) == 1
    assert "choices" in r.stderr


# --- H1: stdin is read within --timeout and up to a limit --------------------------------------


def test_stdin_that_never_ends_is_cut_by_the_timeout(env, tmp_path):
    env = {**env, "AGI_BASE_URL": "http://127.0.0.1:9/v1", "AGI_MODEL": "fake-model"}
    read, write = os.pipe()  # the writer stays open: stdin never ends
    try:
        proc = subprocess.Popen(
            [AGI, "--timeout", "2", "x"], env=env, cwd=tmp_path, stdin=read,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            out, err = proc.communicate(timeout=30)  # a hang guard
        finally:
            proc.kill()
    finally:
        os.close(read)
        os.close(write)
    assert proc.returncode == 4, err  # a limit reached (docs: exit-codes)
    assert "time limit reached: 2 s (--timeout)" in err


@pytest.mark.parametrize("limit", [None, 1000])
def test_stdin_over_the_limit_is_a_usage_error(env, tmp_path, limit):
    if limit:
        (tmp_path / "config.toml").write_text(f"stdin_limit = {limit}\n")
    env = {**env, "AGI_BASE_URL": "http://127.0.0.1:9/v1", "AGI_MODEL": "fake-model"}
    with open("/dev/zero", "rb") as zero:
        r = subprocess.run(
            [AGI, "x"], env=env, cwd=tmp_path, stdin=zero, capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip
    assert r.returncode == 2, r.stderr
    shown = str(limit) if limit else str(10 << 20)
    assert f"stdin is over the limit of {shown} bytes" in r.stderr


def test_stdin_within_the_limit_is_the_prompt(agi, tmp_path):
    (tmp_path / "config.toml").write_text("stdin_limit = 1000\n")
    with FakeModel(text("done")) as server:
        r = agi("summarize", server=server, input="x" * 900)
    assert r.returncode == 0, r.stderr
    assert "x" * 900 in server.requests[0]["messages"][-1]["content"]


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_to_a_full_device_is_a_failure(env, tmp_path, flag):
    with open("/dev/full", "w") as full:
        r = subprocess.run([AGI, flag], env=env, stdout=full, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 1, r.stderr
    assert "cannot write to stdout" in r.stderr


# --- C2: numbers outside finite range in meta.json ---------------------------------------------


def test_infinite_numbers_in_meta_json_are_ignored_with_a_warning(agi, tmp_path):
    with FakeModel(text("first")) as server:
        r = agi("-s", str(tmp_path / "s"), "hi", server=server)
    assert r.returncode == 0, r.stderr
    meta = tmp_path / "s" / "meta.json"
    good = json.loads(meta.read_text())
    raw = meta.read_text()
    meta.write_text(raw[:-1].rstrip().rstrip("}") + ', "usage": {"input": 1e999, "cost": 1e999}}')
    assert json.loads(meta.read_text())["usage"]["input"] == float("inf")
    (tmp_path / "other").mkdir()
    with FakeModel(text("second")) as server:
        again = agi("-s", str(tmp_path / "s"), "again", server=server)
        listed = agi("--list-sessions")
        shown = agi("--show", str(tmp_path / "s"))
    for r in (again, listed, shown):
        assert r.returncode == 0, r.stderr
        assert "Traceback" not in r.stderr and "OverflowError" not in r.stderr
    assert again.stdout == "second\n"
    assert "not a finite number" in again.stderr
    assert str(tmp_path / "s") in listed.stdout
    assert (
        "Infinity" not in meta.read_text()
        and good["model"] == json.loads(meta.read_text())["model"]
    )


# --- H6: a hook's stray child does not hold its reader -----------------------------------------


@pytest.mark.parametrize("answer", ["printf '{}'", "echo '{}'"])
def test_a_hook_that_left_a_child_holding_its_stdout_does_not_stall(agi, tmp_path, answer):
    pid = tmp_path / "stray.pid"
    command = f"setsid sh -c 'echo $$ > {pid}; exec sleep 300' & {answer}"
    entry = {"matcher": "Bash", "hooks": [{"type": "command", "command": command, "timeout": 60}]}
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [entry]}}))
    steps = [call("Bash", command="echo one"), call("Bash", command="echo two"), text("done")]
    try:
        with FakeModel(*steps) as server:
            r = agi("--settings", str(settings), "go", server=server, timeout=25)  # hang guard
    finally:
        for _ in range(50):
            if pid.exists() and pid.read_text().strip():
                break
            import time

            time.sleep(0.05)
        if pid.exists() and pid.read_text().strip():
            try:
                os.kill(int(pid.read_text()), 9)
            except ProcessLookupError:
                pass
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"
    assert tool_results(server.requests[2]) == ["one", "two"]
    assert "timed out" not in r.stderr


# --- H5: temporary directories and escaped processes end with the run --------------------------


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize(
    "line",
    [
        "setsid sleep 1003 > /dev/null 2>&1 & echo $! > {pid}",
        "(setsid sh -c 'sleep 1004' > /dev/null 2>&1 & echo $! > {pid}) ",
        "nohup setsid sleep 1005 > /dev/null 2>&1 & echo $! > {pid}",
    ],
    ids=["setsid", "subshell", "nohup"],
)
def test_a_process_that_left_its_group_ends_with_the_run(agi, tmp_path, line):
    pid = tmp_path / "pid"
    with FakeModel(call("Bash", command=line.format(pid=pid)), text("done")) as server:
        r = agi("go", server=server)
    assert r.returncode == 0, r.stderr
    started = int(pid.read_text())
    import time

    for _ in range(100):  # a hang guard: the run's end has already killed it
        if not alive(started):
            break
        time.sleep(0.05)
    try:
        assert not alive(started)
    finally:
        if alive(started):
            os.kill(started, 9)


def test_a_terminal_program_that_left_its_session_ends_with_the_run(agi, tmp_path):
    pid = tmp_path / "pid"
    steps = [
        call("Terminal", action="start", id="t", command="bash --norc"),
        call("Terminal", action="send", id="t", keys=f"setsid sleep 1006 & echo $! > {pid}<Enter>"),
        text("done"),
    ]
    with FakeModel(*steps) as server:
        r = agi("go", server=server)
    assert r.returncode == 0, r.stderr
    started = int(pid.read_text())
    try:
        assert not alive(started)
    finally:
        if alive(started):
            os.kill(started, 9)


def test_temporary_directories_are_removed_at_the_end(agi, tmp_path):
    with FakeModel(call("TempDir"), call("TempDir"), text("done")) as server:
        r = agi("go", server=server)
    assert r.returncode == 0, r.stderr
    made = [tool_results(server.requests[2])[0], tool_results(server.requests[2])[1]]
    assert all(m.startswith("/") for m in made), made
    assert not any(os.path.exists(m) for m in made)


# --- H4: session files are read as streams -----------------------------------------------------


def test_a_huge_sparse_messages_file_is_not_read_whole(agi, env, tmp_path):
    with FakeModel(text("first")) as server:
        r = agi("-s", str(tmp_path / "s"), "hi", server=server)
    assert r.returncode == 0, r.stderr
    messages = tmp_path / "s" / "messages.jsonl"
    with open(messages, "r+b") as f:  # 1 GB of NULs after the real lines, on no disk space
        f.seek(0, os.SEEK_END)
        f.truncate(f.tell() + (1 << 30))
    with FakeModel(text("second")) as server:
        again = agi("-s", str(tmp_path / "s"), "again", server=server, timeout=120)
        e = {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}
        code, out, peak = peak_rss([AGI, "-s", str(tmp_path / "s"), "more"], e, tmp_path)
        shown_code, _, shown_peak = peak_rss([AGI, "--show", str(tmp_path / "s")], e, tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout == "second\n"
    assert "skipped line" in again.stderr
    assert code == 0 and out == b"second\n" and shown_code == 0
    for measured in (peak, shown_peak):
        assert measured < 512 << 20, f"agi reached {measured >> 20} MiB"


# --- --max-cost with concurrent subagents: at most one call's cost past the budget --------------


def test_parallel_subagents_do_not_all_start_past_the_budget(agi, tmp_path):
    (tmp_path / "config.toml").write_text('[prices."fake-model"]\ninput = 1000\noutput = 1000\n')

    def respond(body):  # every call costs $0.015
        first = next(m for m in body["messages"] if m["role"] == "user")
        if first["content"].startswith("sub"):
            step = call("Bash", command="true")
            return {**step, "delay": 0.5}  # slow enough that the three would overlap
        if any(m["role"] == "tool" for m in body["messages"]):
            return text("done")
        return calls(*[("Task", {"description": "x", "prompt": f"sub{i}"}) for i in range(3)])

    with FakeModel(respond) as server:
        r = agi("--max-cost", "0.04", "go", server=server)
    assert r.returncode == 4, r.stderr
    assert len(server.requests) <= 3  # the parent's call, and calls one at a time after it
    assert "cost limit reached" in r.stderr


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("mcp") is None, reason="the mcp package is not installed"
)
def test_an_mcp_server_started_on_a_cold_cache_does_not_see_the_key(agi, tmp_path):
    server_py = Path(__file__).parents[1] / "mcp_servers" / "server.py"
    dump = tmp_path / "mcp-env"
    spec = {
        "command": "sh",
        "args": ["-c", f'env > "{dump}"; exec "$0" "$1"', sys.executable, str(server_py)],
    }
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"t": spec}}))
    with FakeModel(call("mcp__t__add", a=1, b=2), text("done")) as server:
        r = agi(
            "--mcp", str(tmp_path / "mcp.json"), "go", server=server,
            extra_env={"AGI_API_KEY": KEY, "OTHER_CFG": f"x{KEY}y", "PLAIN": "seen"},
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert tool_results(server.requests[1]) == ["3"]
    dumped = dump.read_text()
    assert "PLAIN=seen" in dumped
    assert KEY not in dumped and "OTHER_CFG" not in dumped


def bwrap_works() -> bool:
    from agi.errors import UsageError
    from agi.policy.sandbox import Policy

    try:
        Policy.load("read-only").check()
    except UsageError:
        return False
    return True


@pytest.mark.skipif(not bwrap_works(), reason="bwrap is missing or cannot create namespaces")
def test_the_sandbox_scratch_directory_is_removed_at_the_end(agi, tmp_path):
    with FakeModel(call("TempDir"), text("done")) as server:
        r = agi("--sandbox", "workspace", "go", server=server)
    assert r.returncode == 0, r.stderr
    made = Path(tool_results(server.requests[1])[0])
    assert made.is_absolute() and not made.exists() and not made.parent.exists()


def test_a_provider_error_is_shown_escaped(agi, tmp_path):
    from fakeserver import status

    body = {"error": {"message": "bad \x1b]0;pwned\x07 request \x1b[2J"}}
    with FakeModel(status(400, body)) as server:
        r = agi("go", server=server)
    assert r.returncode == 3, r.stderr
    assert "\x1b" not in r.stderr and "\x07" not in r.stderr
    assert "\\x1b]0;pwned" in r.stderr
