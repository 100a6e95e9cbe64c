"""A fresh round of hostile probes after issue 27's fixes (docs: security): what the
Bash judge and the Terminal's line replay missed, each a class closed in the code.

- positional parameters (`$1`, `$0`) in arithmetic: a function named like an allowed command
  evaluates its argument (`echo() { builtin echo $(( $1 )); }; echo 'a[$(cmd)]'`);
- substring offsets of `${@:…}`, `${a[@]:…}`, `${a[0]:…}` are arithmetic too;
- `printf -vNAME` (attached) and `printf -v PATH`/`PS4`/`IFS`;
- a name a builtin sets in any quoting (`read "a"`, `printf -v 'a'`, `mapfile "a"`), an array
  element (`a[0]=…` is what `$((a))` reads), `source FILE`, and the traps and functions an
  evaluated line or a terminal's earlier lines bring: no variable is then a known integer;
- `runuser -u USER CMD`, `sg GROUP LINE`, `su -s PROGRAM`, `su --session-command`, and programs
  that run commands from their arguments (`parallel`, `systemd-run`, `torsocks`, …);
- in the Terminal, what changes the meaning of keys typed later: `set -o vi` (C-a inserts),
  `bind` macros and key bindings, `stty erase q`.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import AGI, PROVIDER_VARS, peak_rss
from fakeserver import FakeModel, call, calls, raw, text

DENIAL = 'Error: denied by permission rule "Bash(rm:*)" (command line)'
NO_RULE = "Error: denied: no permission rule allows this call (permission mode dontAsk)"
ALLOW = ["echo:*", "ls:*", "printf:*", "cat:*", "true"]
# each form runs rm (or touches P) in bash today's judge let through; all must be denied
DENIED = [
    "echo() { builtin echo $(( $1 )); }; echo 'a[$(touch P)]'",
    "echo() { builtin echo $(( $1 )); }; echo 'a[$(rm v)]'",
    "echo() { builtin echo ${a[$1]}; }; echo 'x[$(touch P)]'",
    "echo() { builtin echo ${x:$1}; }; echo 'a[$(touch P)]'",
    "bash -c 'echo $(( $0 ))' 'a[$(rm v)]'",
    "f() { [[ $1 -eq 1 ]]; }; f 'a[$(rm v)]'",
    "x='a[$(touch P)]'; set -- a b; echo ${@:x}",
    "x='a[$(touch P)]'; a=(1 2); echo ${a[@]:x}",
    "x='a[$(touch P)]'; a=(1 2); echo ${a[0]:1:x}",
    "x='a[$(touch P)]'; echo ${*:x}",
    "printf -v'a[$(touch P)]' x",
    "printf -v PS4 '%s' '$(rm v)'; set -x; echo",
    "printf -vPATH '%s' /nonexistent; ls",
    "x='-va[$(touch P)]'; printf \"$x\" y",
    "x='a[$(touch P)]'; printf '-v'\"$x\" y",
    "a=1; printf -v 'a' '%s' 'x[$(touch P)]'; echo $((a))",
    "a=1; printf -v \"a\" '%s' 'x[$(rm v)]'; echo $((a))",
    "a=1; read \"a\" <<< 'x[$(rm v)]'; echo $((a))",
    "a=1; mapfile -t \"a\" <<< 'x[$(rm v)]'; echo $((a))",
    "a=1; builtin read \"a\" <<< 'x[$(rm v)]'; echo $((a))",
    "a=1; time read \"a\" <<< 'x[$(rm v)]'; echo $((a))",
    "a=1; a[0]='x[$(touch P)]'; echo $((a))",
    "a=1; declare a[0]='x[$(rm v)]'; echo $((a))",
    "a=1; echo 'a=\"x[\\$(rm v)]\"' > s; source s; echo $((a))",
    "f() { a='x[$(rm v)]'; }; trap f DEBUG; eval 'a=1; echo $((a))'",
    "trap 'a=x\\[\\$\\(rm\\ v\\)\\]' DEBUG; eval 'a=1; echo $((a))'",
    "runuser -u nobody -- rm v",
    "runuser -u nobody rm v",
    "sg root 'rm v'",
    "su -s /bin/rm root",
    "su --session-command='rm v' root",
    "parallel rm ::: v",
    "echo rm v | parallel",
    "systemd-run --user rm v",
    "torsocks rm v",
    "catchsegv rm v",
    # words after a redirection are the command's (the parse files them under it)
    "exec 3>&1 rm v",
    "time 2>&1 rm v",
    "env 2>/dev/null rm v",
    "command >/dev/null rm v",
    "bash 2>&1 -c 'rm v'",
    "eval 2>&1 'rm v'",
    "builtin 2>&1 eval 'rm v'",
    # '…' and $'…' inside double quotes quote nothing
    "echo \"${x-'$(rm v)'}\"",
    "echo \"${x:-'$(touch P)'}\"",
    "echo \"${x-$'$(rm v)'}\"",
    "echo \"${x-'`rm v`'}\"",
]
# ordinary lines that must still run
RUNS = [
    "printf 'Total: %s\\n' 3",
    'printf "Total: $HOME\\n"',
    "printf -v x '%s' y; echo $x",
    "i=3; echo $((i+1))",
    "for i in 1 2 3; do echo $((i*2)); done",
    "echo ${HOME:0:3}",
]


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """Every form's tool result, from one dontAsk run with a deny rule for rm."""
    home = tmp_path_factory.mktemp("probes")
    (home / "v").write_text("keep me\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(PROVIDER_VARS)}
    env.update(AGI_HOME=str(home / "agi-home"), AGI_CONFIG=str(home / "config.toml"))
    (home / "config.toml").touch()
    forms = DENIED + RUNS
    step = calls(*[("Bash", {"command": form, "timeout": 10000}) for form in forms])
    args = ["--permission-mode", "dontAsk", "--deny", "Bash(rm:*)"]
    for rule in ALLOW:
        args += ["--allow", f"Bash({rule})"]
    with FakeModel(step, text("done")) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="fake-model")
        r = subprocess.run(
            [AGI, *args, "go"],
            env=env,
            cwd=home,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
    assert r.returncode == 0, r.stderr
    results = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert len(results) == len(forms)
    survived = (home / "v").exists() and not (home / "P").exists()
    return dict(zip(forms, results, strict=True)), survived


def test_nothing_ran(judged):
    assert judged[1], "a form that should have been denied ran rm or touch"


@pytest.mark.parametrize("form", DENIED, ids=[repr(f)[:40] for f in DENIED])
def test_denied(judged, form):
    assert judged[0][form] == DENIAL


@pytest.mark.parametrize("form", RUNS, ids=[repr(f)[:40] for f in RUNS])
def test_still_runs(judged, form):
    assert not judged[0][form].startswith("Error: denied"), judged[0][form]


# --- the Terminal: state that changes what later keys mean ---------------------------------------

TERMINAL = [  # (keys that change the meaning of later keys, keys that would then run rm)
    ("set -o vi<Enter>", "rm v <C-a>echo <Enter>"),
    ('bind \'"Z": "rm v"\'<Enter>', "Z<Enter>"),
    ("bind 'set editing-mode vi'<Enter>", "rm v <C-a>echo <Enter>"),
    ("bind '\"\\C-a\": self-insert'<Enter>", "rm v <C-a>echo <Enter>"),
    ("stty erase q<Enter>", "echo qqqqqrm v<Enter>"),
]


@pytest.mark.parametrize(("setup", "attack"), TERMINAL, ids=[s for s, _ in TERMINAL])
def test_terminal_state_that_changes_keys_is_denied(agi, tmp_path, setup, attack):
    (tmp_path / "v").write_text("keep me\n")
    with FakeModel(
        call("Terminal", action="start", id="t", command="bash --norc"),
        call("Terminal", action="send", id="t", keys=setup),
        call("Terminal", action="send", id="t", keys=attack),
        call("Terminal", action="read", id="t"),
        text("done"),
    ) as server:
        r = agi("--deny", "Bash(rm:*)", "go", server=server, timeout=120)
    assert r.returncode == 0, r.stderr
    results = [
        [m for m in req["messages"] if m["role"] == "tool"][-1]["content"]
        for req in server.requests[1:]
    ]
    assert results[1] == DENIAL, results[1]
    assert (tmp_path / "v").exists()


def test_terminal_lines_trust_no_variable_earlier_lines_could_set(agi, tmp_path):
    """A function typed earlier sets `i` when called: `i=1; f; echo $((i))` is not safe in a
    shell that ran earlier lines, though it would be in a fresh one."""
    (tmp_path / "v").write_text("keep me\n")
    with FakeModel(
        call("Terminal", action="start", id="t", command="bash --norc"),
        call("Terminal", action="send", id="t", keys="f() { i='x[$(rm v)]'; }<Enter>"),
        call("Terminal", action="send", id="t", keys="i=1; f; echo $((i))<Enter>"),
        call("Terminal", action="read", id="t"),
        text("done"),
    ) as server:
        r = agi("--deny", "Bash(rm:*)", "go", server=server, timeout=120)
    assert r.returncode == 0, r.stderr
    last = [m for m in server.requests[3]["messages"] if m["role"] == "tool"][-1]
    assert last["content"] == DENIAL
    assert (tmp_path / "v").exists()


# --- the key in agi's own environment: /proc/$PPID/environ and /proc/$PPID/mem -------------------


def test_a_child_cannot_read_the_key_from_agis_own_environment(env, tmp_path):
    """Children get an environment without the key, but agi's own is in /proc/$PPID/environ
    (and its memory in /proc/$PPID/mem) for any process of its uid: agi makes itself
    non-dumpable, which closes both. As root, run without capabilities (setpriv), as a user."""
    import shutil

    setpriv = shutil.which("setpriv")
    if os.geteuid() == 0 and not setpriv:
        pytest.skip("running as root without setpriv: cannot drop root's powers")
    prefix = [setpriv, "--bounding-set=-all", "--inh-caps=-all"] if os.geteuid() == 0 else []
    key = "sk-probe-" + "k3y" * 8
    forms = [
        "tr '\\0' '\\n' < /proc/$PPID/environ",
        f"grep -ac {key} /proc/$PPID/mem",
    ]
    with FakeModel(calls(*[("Bash", {"command": f}) for f in forms]), text("done")) as server:
        e = dict(env, OPENAI_API_KEY=key, AGI_BASE_URL=server.url, AGI_MODEL="fake-model")
        r = subprocess.run(
            [*prefix, AGI, "go"],
            env=e,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    assert r.returncode == 0, r.stderr
    results = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert len(results) == 2
    for result in results:
        assert key not in result
        assert "Permission denied" in result, result


# --- the answer on a terminal: the model's control sequences escaped -----------------------------

HOSTILE = "\x1b]52;c;cHduZWQ=\x07\x1b]0;TITLE\x07\x1b[2J\x9b2J"


@pytest.mark.parametrize("output", ["text", "json", "jsonl"])
def test_the_answer_on_a_terminal_has_its_control_sequences_escaped(env, tmp_path, output):
    """stdout a terminal: the answer (and the result object) reaches it with OSC 52, titles,
    screen clears and C1 codes escaped; agi's own output stays what it was."""
    import pty

    master, slave = pty.openpty()
    with FakeModel(text("answer" + HOSTILE)) as server:
        e = dict(env, AGI_BASE_URL=server.url, AGI_MODEL="fake-model")
        r = subprocess.run(
            [AGI, "--output", output, "go"],
            env=e,
            cwd=tmp_path,
            stdout=slave,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert r.returncode == 0, r.stderr
    assert b"answer" in seen
    for sequence in (b"\x1b]", b"\x07", b"\x1b[2J", "\x9b".encode()):
        assert sequence not in seen, (sequence, seen)


def test_the_answer_to_a_pipe_is_unchanged(agi):
    with FakeModel(text("answer" + HOSTILE)) as server:
        r = agi("go", server=server)
    assert r.returncode == 0
    assert r.stdout == "answer" + HOSTILE + "\n"


# --- tool-call arguments nested a hundred thousand deep: an error result, never a traceback ------


def _deep_openai(arguments: str) -> dict:
    from fakeserver import _chunk

    call_delta = {"index": 0, "id": "c1", "type": "function"}
    call_delta["function"] = {"name": "Bash", "arguments": arguments}
    frames = [
        _chunk({"role": "assistant", "content": None}),
        _chunk({"tool_calls": [call_delta]}),
        _chunk({}, "tool_calls"),
        b"data: [DONE]\n\n",
    ]
    return {"kind": "sse", "frames": frames, "delay": 0.0}


def _deep_anthropic(arguments: str) -> dict:
    from fakeserver import anthropic_events

    block = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}
    delta = {"type": "input_json_delta", "partial_json": arguments}
    events = [
        {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
                                              "content": [], "usage": {"input_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_delta", "index": 0, "delta": delta},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
         "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    ]  # fmt: skip
    return anthropic_events(events)


DEEP = ["[" * 100000 + "]" * 100000, '{"command":' + "[" * 100000 + "]" * 100000 + "}"]


@pytest.mark.parametrize("arguments", DEEP, ids=["array", "in-object"])
@pytest.mark.parametrize("transport", ["openai", "anthropic"])
def test_deeply_nested_arguments_are_an_error_result(agi, arguments, transport):
    from fakeserver import anthropic_text

    if transport == "openai":
        steps, args, extra = (_deep_openai(arguments), text("done")), ["go"], {}
    else:
        steps = (_deep_anthropic(arguments), anthropic_text("done"))
        args, extra = ["-m", "anthropic:claude-fake", "go"], {"ANTHROPIC_API_KEY": "x" * 20}
    with FakeModel(*steps) as server:
        r = agi(*args, server=server, extra_env={**extra, "AGI_BASE_URL": server.url})
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout == "done\n"
    assert "nested deeper than" in json.dumps(server.requests[1])


@pytest.mark.parametrize(
    ("tool", "extra"),
    [("Read", {}), ("Write", {"content": "x"}), ("Edit", {"old_string": "x", "new_string": "y"})],
)
def test_a_path_with_a_nul_byte_is_a_plain_error(agi, tool, extra):
    """Not `Error: ValueError: embedded null byte` (a Python exception's text)."""
    with FakeModel(call(tool, file_path="a\x00b", **extra), text("done")) as server:
        r = agi("go", server=server)
    assert r.returncode == 0, r.stderr
    result = [m for m in server.requests[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert result == "Error: no file has a name with a NUL byte in it"


def test_an_exact_allow_rule_does_not_cover_words_after_a_redirection(agi, tmp_path):
    """`Bash(touch exact)` allows that line; `touch exact >/dev/null P` runs `touch exact P`."""
    with FakeModel(call("Bash", command="touch exact >/dev/null P"), text("done")) as server:
        r = agi("--permission-mode", "dontAsk", "--allow", "Bash(touch exact)", "go",
                server=server)  # fmt: skip
    assert r.returncode == 0, r.stderr
    result = [m for m in server.requests[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert result == NO_RULE
    assert not (tmp_path / "P").exists()


# --- a decompression bomb of short lines: one huge chunk is not split all at once ----------------


def test_a_huge_chunk_of_short_lines_is_split_one_line_at_a_time():
    """httpx inflates a gzip response chunk by chunk, each up to about a thousand times its
    size on the wire: 64 KB of `\\n` can arrive as one 64 MB chunk. Splitting it whole made a
    list of one object a line (8 bytes each on top of the chunk: 2 GB for a 1 MB bomb of `: k`
    keep-alives); the lines are taken one at a time."""
    import tracemalloc

    from agi.providers.stream import sse_lines

    chunk = b"\n" * (8 << 20)
    tracemalloc.start()
    try:
        lines = sse_lines([chunk])
        assert next(lines) == ""
        assert next(lines) == ""
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < len(chunk), peak


def test_a_gzip_bomb_of_keepalives_stays_small(env, tmp_path):
    """End to end: a 12 KB gzip body that inflates to 12 MB of `: k` lines; agi's peak memory
    stays far below what a list of its lines would take."""
    import zlib

    from fakeserver import raw, with_headers

    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    body = packer.compress(b": k\n" * (3 << 20)) + packer.flush()  # ~12 KB on the wire
    step = with_headers(raw(body), **{"Content-Encoding": "gzip"})
    with FakeModel(step) as server:
        e = dict(env, AGI_BASE_URL=server.url, AGI_MODEL="fake-model")
        _, _, peak = peak_rss([AGI, "--timeout", "120", "go"], e, tmp_path)
    assert peak < 160 << 20, f"peak RSS {peak >> 20} MB"  # about 55 MB; was 245 MB


# --- a hook that writes forever fills no memory -------------------------------------------------


def test_a_hook_that_writes_forever_is_bounded(env, tmp_path):
    """`yes` as a PreToolUse hook with a 2 s timeout: agi kept every byte (gigabytes in two
    seconds); it keeps the first 10 MB of each stream and reads the rest away."""
    hooks = [{"type": "command", "command": "yes xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "timeout": 2}]
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": hooks}]}}))
    with FakeModel(call("Bash", command="echo hi"), text("done")) as server:
        e = dict(env, AGI_BASE_URL=server.url, AGI_MODEL="fake-model")
        code, out, peak = peak_rss(
            [AGI, "--settings", str(settings), "--timeout", "60", "go"], e, tmp_path
        )
    assert code == 0
    assert out == b"done\n"
    assert peak < 300 << 20, f"peak RSS {peak >> 20} MB"


def test_the_file_tools_open_their_real_path_following_no_link(tmp_path):
    """A Write's path is judged as the real path it touches, and opened following no link: a
    directory on that path swapped for a link after the check is refused, never followed."""
    from agi.errors import ToolError
    from agi.tools.reading import open_for_writing

    (tmp_path / "inside").mkdir()
    (tmp_path / "outside").mkdir()
    real = tmp_path / "inside" / "f.txt"
    with open_for_writing(real) as f:  # a real path: written
        f.write(b"ok")
    assert real.read_bytes() == b"ok"
    (tmp_path / "inside").rename(tmp_path / "was-inside")
    (tmp_path / "inside").symlink_to(tmp_path / "outside")  # swapped after the check
    with pytest.raises(ToolError, match="changed while it was being written"):
        open_for_writing(real)
    assert list((tmp_path / "outside").iterdir()) == []


def test_a_link_flipped_while_writes_run_never_takes_one_past_a_deny_rule(agi, tmp_path):
    """A command flips `src/link` between an allowed and a denied directory as fast as it can
    while the model writes through it: no file lands in the denied one."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "src" / "inside").mkdir(parents=True)
    (tmp_path / "src" / "link").symlink_to("inside")
    src, out = tmp_path / "src", tmp_path / "outside"
    flip = (
        f"(end=$((SECONDS+60)); while [ $SECONDS -lt $end ] && [ ! -e {tmp_path}/stop ]; do "
        f"ln -sfn {out} {src}/l2; mv -T {src}/l2 {src}/link; "
        f"ln -sfn inside {src}/l3; mv -T {src}/l3 {src}/link; done) >/dev/null 2>&1 &"
    )
    writes = [("Write", {"file_path": f"src/link/w{i}", "content": "x"}) for i in range(60)]
    script = [call("Bash", command=flip), calls(*writes), call("Bash", command="touch stop")]
    with FakeModel(*script, text("done")) as server:
        r = agi("--deny", f"Write(/{out}/**)", "go", server=server, timeout=300)
    (tmp_path / "stop").touch()
    assert r.returncode == 0, r.stderr
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("field", ["id", "name"])
def test_a_tool_call_id_or_name_of_the_wrong_type_is_an_error_result(agi, tmp_path, field):
    """docs: security: a numeric id (or name) is an error result; the call does not run."""
    marker = tmp_path / "ran"
    tc = {"index": 0, "id": "c1", "type": "function"}
    tc["function"] = {"name": "Bash", "arguments": json.dumps({"command": f"touch {marker}"})}
    if field == "id":
        tc["id"] = 7
    else:
        tc["function"]["name"] = 5
    chunk = {"choices": [{"index": 0, "delta": {"tool_calls": [tc]}, "finish_reason": None}]}
    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    body = f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(end)}\n\ndata: [DONE]\n\n"
    with FakeModel(raw(body.encode()), text("done")) as server:
        r = agi("go", server=server)
    assert r.returncode == 0, r.stderr
    assert not marker.exists()
    result = [m for m in server.requests[1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert result.startswith("Error: ") and "not a string" in result, result
