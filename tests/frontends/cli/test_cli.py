"""The command line as a user drives it: the real executable against the scripted server."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from conftest import AGI, intervals, overlap, start_agi, timed, wait_for_file
from fakeserver import FakeModel, call, calls, hang, status, text


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_answer_in_a_pipe_is_exactly_the_answer(agi, env, tmp_path):
    with FakeModel(text("The answer is 42.")) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="fake-model")
        r = subprocess.run(
            ["bash", "-c", f"'{AGI}' hi | cat"],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            timeout=30,
        )
    assert r.returncode == 0
    assert r.stdout == "The answer is 42.\n"
    assert r.stderr == ""


def test_three_tool_calls_bash_write_read(agi, tmp_path):
    target = tmp_path / "work" / "note.txt"
    script = [
        call("Bash", command="echo out; echo err >&2; echo more"),
        call("Write", file_path=str(target), content="first line\nsecond line\n"),
        call("Read", file_path=str(target)),
        text("done"),
    ]
    with FakeModel(*script) as server:
        r = agi("do it", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"
    assert target.read_text() == "first line\nsecond line\n"
    reqs = server.requests
    assert len(reqs) == 4
    results = [m for m in reqs[3]["messages"] if m["role"] == "tool"]
    assert len(results) == 3
    assert results[0]["content"] == "out\nerr\nmore"
    assert "Created" in results[1]["content"] and str(target) in results[1]["content"]
    assert results[2]["content"] == "     1\tfirst line\n     2\tsecond line"
    # each result answers the call before it, by id
    calls_made = [m for m in reqs[3]["messages"] if m.get("tool_calls")]
    assert [c["tool_calls"][0]["id"] for c in calls_made] == [r["tool_call_id"] for r in results]
    tool_names = {t["function"]["name"] for t in reqs[0]["tools"]}
    assert {"Bash", "Read", "Write", "Edit", "TempDir"} <= tool_names


def test_parallel_tool_calls_run_concurrently(agi, tmp_path):
    log = tmp_path / "intervals"
    a, b = timed("a", log) + "; echo a", timed("b", log) + "; echo b"
    script = [calls(("Bash", {"command": a}), ("Bash", {"command": b})), text("both")]
    with FakeModel(*script) as server:
        r = agi("go", server=server)
    assert r.returncode == 0, r.stderr
    results = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert results == ["a", "b"]
    ran = intervals(log)
    assert overlap(ran["a"], ran["b"]), ran  # two one-second commands at once


def test_session_twice_sends_the_first_exchange(agi, tmp_path):
    session = tmp_path / "conv"
    with FakeModel(text("Paris"), text("About 2.1 million")) as server:
        r1 = agi("--session", str(session), "Capital of France?", server=server)
        r2 = agi("--session", str(session), "Its population?", server=server)
    assert (r1.returncode, r2.returncode) == (0, 0), r1.stderr + r2.stderr
    assert r2.stdout == "About 2.1 million\n"
    second = [m for m in server.requests[1]["messages"] if m["role"] != "system"]
    assert second == [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris"},
        {"role": "user", "content": "Its population?"},
    ]
    stored = lines(session / "messages.jsonl")
    assert [m["content"] for m in stored] == [
        "Capital of France?",
        "Paris",
        "Its population?",
        "About 2.1 million",
    ]
    meta = json.loads((session / "meta.json").read_text())
    assert meta["messages"] == 4 and meta["model"] == "openai:fake-model"
    assert oct(session.stat().st_mode & 0o777) == "0o700"
    for name in ("messages.jsonl", "meta.json", "trace.jsonl"):
        assert oct((session / name).stat().st_mode & 0o777) == "0o600", name


def test_continue_uses_the_latest_session(agi, tmp_path):
    with FakeModel(text("one"), text("two")) as server:
        agi("first", server=server)
        r = agi("-c", "second", server=server)
    assert r.returncode == 0, r.stderr
    contents = [m["content"] for m in server.requests[1]["messages"] if m["role"] != "system"]
    assert contents == ["first", "one", "second"]


def test_stdin_is_the_prompt_or_a_context_block(agi):
    with FakeModel(text("ok")) as server:
        agi(server=server, input="summarise this\n")
        agi("count the lines", server=server, input="a\nb\n")
        agi("--no-stdin", "only args", server=server, input="ignored")
    prompts = [r["messages"][-1]["content"] for r in server.requests]
    assert prompts[0] == "summarise this"
    assert prompts[1] == "count the lines\n\n<stdin>\na\nb\n</stdin>"
    assert prompts[2] == "only args"


def test_sys_files_replace_the_system_prompt(agi, tmp_path):
    (tmp_path / "a.md").write_text("You are terse.\n")
    (tmp_path / "b.md").write_text("Answer in French.")
    with FakeModel(text("oui")) as server:
        agi("--sys", "a.md", "--sys", "b.md", "hi", server=server)
        agi("--sys", "default", "--sys", "b.md", "hi", server=server)
    assert server.requests[0]["messages"][0] == {
        "role": "system",
        "content": "You are terse.\n\nAnswer in French.",
    }
    second = server.requests[1]["messages"][0]["content"]
    assert second.startswith("You are agi") and second.endswith("\n\nAnswer in French.")


def test_usage_errors_exit_2_and_send_nothing(agi, tmp_path):
    with FakeModel(text("never")) as server:
        no_prompt = agi(server=server)
        bad_sys = agi("--sys", "missing.md", "hi", server=server)
        bad_flag = agi("--max-steps", "zero", "hi", server=server)
        not_session = tmp_path / "project"
        not_session.mkdir()
        (not_session / "keep.txt").write_text("mine")
        refused = agi("--session", str(not_session), "hi", server=server)
    no_model = agi("hi")
    for r in (no_prompt, bad_sys, bad_flag, refused, no_model):
        assert r.returncode == 2, r.stderr
        assert r.stdout == ""
        assert r.stderr.startswith("agi: ") and r.stderr.count("\n") == 1, r.stderr
    assert server.requests == []
    assert "no prompt" in no_prompt.stderr
    assert "missing.md" in bad_sys.stderr
    assert "AGI_MODEL" in no_model.stderr and "-m" in no_model.stderr
    assert "not an agi session" in refused.stderr
    assert sorted(p.name for p in not_session.iterdir()) == ["keep.txt"]


def test_server_error_every_time_exits_3(agi):
    with FakeModel(status(500, {"error": {"message": "upstream exploded"}})) as server:
        r = agi("hi", server=server)
    assert r.returncode == 3
    assert r.stderr == "agi: HTTP 500: upstream exploded\n"
    assert len(server.requests) == 3  # retried


def test_connection_refused_exits_3(agi):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    r = agi("hi", extra_env={"AGI_BASE_URL": f"http://127.0.0.1:{port}/v1", "AGI_MODEL": "m"})
    assert r.returncode == 3
    assert r.stderr.startswith("agi: cannot reach http://127.0.0.1:") and r.stderr.count("\n") == 1


def test_step_limit_exits_4(agi, tmp_path):
    with FakeModel(call("Bash", command="echo again")) as server:
        r = agi("--max-steps", "2", "loop", server=server)
    assert r.returncode == 4
    assert "step limit" in r.stderr and r.stderr.count("\n") == 1
    assert len(server.requests) == 2


def test_timeout_with_a_silent_server_exits_4_quickly(agi):
    with FakeModel(hang()) as server:
        r = agi("--timeout", "2", "hi", server=server, timeout=30)  # the server waits 120 s
    assert r.returncode == 4, r.stderr
    assert "time limit" in r.stderr


def test_sigint_exits_130_and_keeps_the_session(env, tmp_path):
    session = tmp_path / "s"
    marker = tmp_path / "started"
    with FakeModel(call("Bash", command=f"touch {marker}; sleep 30"), text("after")) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="m")
        proc = start_agi([AGI, "--session", str(session), "long job"], env)
        wait_for_file(marker)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
        assert proc.returncode == 130, err
        assert out == ""
        assert err.startswith("agi: interrupted") and err.count("\n") == 1
        stored = lines(session / "messages.jsonl")
        assert stored[0] == {"role": "user", "content": "long job"}
        assert stored[1]["tool_calls"][0]["function"]["name"] == "Bash"
        assert stored[2]["role"] == "tool" and "interrupted" in stored[2]["content"]
        # no `sleep 30` left behind
        ps = subprocess.run(["pgrep", "-f", f"touch {marker}"], capture_output=True)
        assert ps.returncode == 1
        # the session continues, and the history is valid for the provider
        r = subprocess.run(
            [AGI, "--session", str(session), "go on"],
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=30,
        )
    assert r.returncode == 0 and r.stdout == "after\n"
    sent = [m["role"] for m in server.requests[1]["messages"] if m["role"] != "system"]
    assert sent == ["user", "assistant", "tool", "user"]


def test_api_key_never_reaches_the_session(agi, tmp_path):
    key = "sk-test-9f8e7d6c5b4a39281706"
    session = tmp_path / "s"
    (tmp_path / "k").write_text(f"found {key}\n")
    script = [
        call("Bash", command="echo key is $AGI_API_KEY; env | grep AGI_API_KEY; cat k"),
        text("done"),
    ]
    with FakeModel(*script) as server:
        r = agi(
            "--session",
            str(session),
            "--output",
            "json",
            "hi",
            server=server,
            extra_env={"AGI_API_KEY": key},
        )
    assert r.returncode == 0, r.stderr
    assert server.headers[0]["Authorization"] == f"Bearer {key}"
    for path in session.rglob("*"):
        if path.is_file():
            assert key not in path.read_text(errors="replace"), path
    assert json.loads(r.stdout)["session"] == str(session.resolve())
    assert key not in r.stdout
    assert (session / "trace.jsonl").exists()
    # tools do not get agi's key variables; a key they find is redacted in what is stored
    stored = lines(session / "messages.jsonl")
    assert stored[2]["content"].startswith("key is\nfound [REDACTED]")


def test_version_and_help_import_no_heavy_modules(env, tmp_path):
    for flag in ("--version", "--help"):
        r = subprocess.run(
            [AGI, flag],
            env={**env, "PYTHONPROFILEIMPORTTIME": "1"},
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
        assert r.returncode == 0
        imported = {
            line.split("|")[-1].strip()
            for line in r.stderr.splitlines()
            if line.startswith("import time:")
        }
        assert "agi.frontends.cli.main" in imported  # the profile is real
        for heavy in ("httpx", "pydantic", "pyte", "agi.providers.transport"):
            assert heavy not in imported, (flag, heavy)
    assert r.stdout.startswith("usage: agi")


def test_a_run_does_not_import_trio_though_it_is_installed(agi):
    """httpcore imports trio wherever it is installed (tens of milliseconds of every start);
    agi's process never runs under trio, so it keeps it out (docs: development)."""
    import importlib.util

    assert importlib.util.find_spec("trio") is not None  # installed here: the check is real
    with FakeModel(text("fine")) as server:
        r = agi("hi", server=server, extra_env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert r.returncode == 0 and r.stdout == "fine\n", r.stderr
    imported = {
        line.split("|")[-1].strip() for line in r.stderr.splitlines() if "import time:" in line
    }
    assert "httpcore" in imported  # the profile is real, and the model was called
    assert not {m for m in imported if m.startswith("trio.")}  # `trio` alone: the refused try


def test_torn_last_line_is_skipped_with_a_warning(agi, tmp_path):
    session = tmp_path / "s"
    with FakeModel(text("one"), text("two")) as server:
        agi("--session", str(session), "first", server=server)
        with open(session / "messages.jsonl", "a") as f:
            f.write('{"role": "assistant", "content": "cut o')  # killed mid-write
        r = agi("--session", str(session), "second", server=server)
    assert r.returncode == 0
    assert r.stdout == "two\n"
    assert "damaged line" in r.stderr
    contents = [m["content"] for m in server.requests[1]["messages"] if m["role"] != "system"]
    assert contents == ["first", "one", "second"]
    assert [m["content"] for m in lines_skipping(session / "messages.jsonl")] == [
        "first",
        "one",
        "second",
        "two",
    ]


def lines_skipping(path: Path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def test_output_json(agi):
    with FakeModel(call("Bash", command="true"), text("fine")) as server:
        r = agi("--output", "json", "hi", server=server)
    assert r.returncode == 0
    result = json.loads(r.stdout)
    assert result["answer"] == "fine" and result["exit_code"] == 0 and result["steps"] == 2
    assert result["usage"] == {  # two calls of fakeserver's USAGE; no price for fake-model
        "input": 20,
        "output": 10,
        "cached": 0,
        "cache_write": 0,
        "reasoning": 0,
        "cost": None,
    }
    assert os.path.isdir(result["session"])


def test_trace_records_requests_responses_and_tool_runs(agi, tmp_path):
    session = tmp_path / "s"
    with FakeModel(call("Bash", command="echo traced"), text("ok")) as server:
        r = agi("--session", str(session), "go", server=server)
    assert r.returncode == 0
    trace = lines(session / "trace.jsonl")
    kinds = [t["type"] for t in trace]
    assert kinds == ["run", "request", "response", "tool", "request", "response"]
    assert trace[1]["body"]["messages"][-1] == {"role": "user", "content": "go"}
    assert trace[2]["message"]["tool_calls"][0]["function"]["name"] == "Bash"
    assert trace[3]["name"] == "Bash" and trace[3]["result"] == "traced"
    assert all(isinstance(t["time"], float) for t in trace)
    assert isinstance(trace[3]["seconds"], float) and isinstance(trace[2]["seconds"], float)


def read_events_until(proc: subprocess.Popen[str], done, timeout: float = 15) -> list[dict]:
    """`--output jsonl` events from the running process's stdout until done(events) holds."""
    events: list[dict] = []
    buffer = b""
    deadline = time.monotonic() + timeout
    fd = proc.stdout.fileno()
    while not done(events):
        left = deadline - time.monotonic()
        assert left > 0 and select.select([fd], [], [], left)[0], f"no event in time: {events}"
        chunk = os.read(fd, 65536)
        assert chunk, f"stdout closed (exit {proc.wait()}): {events} {proc.stderr.read()}"
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        events += [json.loads(line) for line in complete if line.strip()]
    return events


def test_sigint_mid_stream_keeps_the_partial_answer(env, tmp_path):
    """SIGINT once agi has the first part of the answer (it has emitted it as events) and the
    rest is held back: exit 130, one `agi:` line, and the session keeps exactly that part."""
    session = tmp_path / "s"
    first, rest = "first part of a long answer", " that arrives only after the interrupt"
    release = threading.Event()

    def frames():
        yield from text(first, pieces=3)["frames"][:-3]  # the role and content chunks only
        release.wait(60)
        yield from text(rest)["frames"][1:]

    with FakeModel({"kind": "sse", "frames": frames(), "delay": 0.0}) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="m")
        proc = start_agi([AGI, "-s", str(session), "--output", "jsonl", "tell me"], env)
        try:
            read_events_until(  # agi has the first part: it is in the answer being salvaged
                proc, lambda got: "".join(e["text"] for e in got if e["type"] == "text") == first
            )
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=10)
        finally:
            release.set()
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, err
    assert err.startswith("agi: interrupted") and err.count("\n") == 1, err
    (result,) = [json.loads(line) for line in out.splitlines()]  # nothing more after the signal
    assert result["type"] == "result" and result["exit_code"] == 130 and result["answer"] is None
    assert len(server.requests) == 1
    stored = lines(session / "messages.jsonl")
    stored = [(m["role"], m["content"]) for m in stored]
    assert stored == [("user", "tell me"), ("assistant", first)]


def test_sigterm_exits_143(env, tmp_path):
    with FakeModel(hang()) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="m")
        proc = start_agi([AGI, "hi"], env)
        while not server.requests:
            time.sleep(0.05)
        proc.terminate()
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 143
    assert err.startswith("agi: interrupted by SIGTERM") and out == ""


def test_a_killed_run_s_tool_calls_get_interrupted_results(agi, tmp_path):
    session = tmp_path / "s"
    with FakeModel(text("hello")) as server:
        agi("-s", str(session), "start", server=server)
    with open(session / "messages.jsonl", "a") as f:  # as a run SIGKILLed mid-tool leaves it
        f.write(json.dumps({"role": "user", "content": "list files"}) + "\n")
        f.write(
            json.dumps(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "call_a",
                            "type": "function",
                            "function": {"name": "Bash", "arguments": '{"command": "ls"}'},
                        },
                        {
                            "id": "call_b",
                            "type": "function",
                            "function": {"name": "Bash", "arguments": '{"command": "pwd"}'},
                        },
                    ],
                }
            )
            + "\n"
        )
        f.write(json.dumps({"role": "tool", "tool_call_id": "call_a", "content": "x"}) + "\n")
    with FakeModel(text("resumed")) as server:
        r = agi("-s", str(session), "again", server=server)
    assert r.returncode == 0 and r.stdout == "resumed\n"
    sent = [m for m in server.requests[0]["messages"] if m["role"] != "system"]
    assert sent[-2]["role"] == "tool" and sent[-2]["tool_call_id"] == "call_b"
    assert "interrupted" in sent[-2]["content"]
    assert sent[-1] == {"role": "user", "content": "again"}


def test_server_rejecting_stream_options_is_asked_again_without(agi):
    def step(body):
        if "stream_options" in body:
            message = "Unrecognized request argument: stream_options"
            return status(400, {"error": {"message": message}})
        return text("fine")

    with FakeModel(step) as server:
        r = agi("hi", server=server)
    assert r.returncode == 0 and r.stdout == "fine\n"
    assert ["stream_options" in b for b in server.requests] == [True, False]


def test_directories_agi_creates_are_private(agi, tmp_path):
    def respond(body):
        if body["messages"][-1]["content"] == "sub":
            return text("done below")
        if any(m["role"] == "tool" for m in body["messages"]):
            return text("done")
        return call("Task", description="x", prompt="sub")

    with FakeModel(respond) as server:
        r = agi("--output", "json", "go", server=server)
    session = Path(json.loads(r.stdout)["session"])
    home = tmp_path / "agi-home"
    for d in [home, session.parent, session, *session.rglob("*")]:
        if d.is_dir():
            assert oct(d.stat().st_mode & 0o777) == "0o700", d
