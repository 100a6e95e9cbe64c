"""Fault injection: the network, the model, tools and signals misbehave; agi ends cleanly.

Every case ends with a documented exit code and one `agi: …` line, within its deadline, and
leaves a session that loads and can be continued.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import AGI, start_agi, unique_seconds, wait_for_file
from fakeserver import FakeModel, _chunk, call, calls, hang, keepalive, reset, text


def one_line(r) -> str:
    assert r.stderr.startswith("agi: ") and r.stderr.count("\n") == 1, r.stderr
    return r.stderr


def messages(session: Path) -> list[dict]:
    out = []
    for line in (session / "messages.jsonl").read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def test_reset_mid_headers_is_retried_then_fails_with_exit_3(agi):
    with FakeModel(reset(b"HTTP/1.1 200 OK\r\nContent-Type: text/ev")) as server:
        r = agi("hi", server=server)
    assert r.returncode == 3
    assert "cannot reach" in one_line(r)
    assert len(server.requests) == 3


def test_reset_mid_headers_then_success(agi):
    with FakeModel(reset(b"HTTP/1.1 200 OK\r\n"), text("recovered")) as server:
        r = agi("hi", server=server)
    assert r.returncode == 0 and r.stdout == "recovered\n"


def test_reset_mid_stream_is_not_retried_and_keeps_the_partial_text(agi, tmp_path):
    s = tmp_path / "s"
    frames = [_chunk({"role": "assistant", "content": ""}), _chunk({"content": "Half an ans"})]
    with FakeModel(reset(frames=frames), text("second")) as server:
        r = agi("-s", str(s), "hi", server=server)
    assert r.returncode == 3
    one_line(r)
    assert r.stdout == ""
    assert len(server.requests) == 1  # content was delivered: never retried, never duplicated
    assert messages(s)[-1] == {"role": "assistant", "content": "Half an ans"}
    with FakeModel(text("continued")) as server:
        again = agi("-s", str(s), "go on", server=server)
    assert again.returncode == 0 and again.stdout == "continued\n"


def test_endless_keepalives_end_at_the_idle_limit(agi, tmp_path, env):
    Path(env["AGI_CONFIG"]).write_text("idle_timeout = 1.5\n")
    with FakeModel(keepalive(0.2)) as server:
        r = agi("hi", server=server, timeout=60)  # endless keep-alives: a hang guard
    assert r.returncode == 3
    assert "keep-alives" in one_line(r)


def test_endless_keepalives_end_at_the_timeout(agi):
    with FakeModel(keepalive(0.2)) as server:
        r = agi("--timeout", "2", "hi", server=server, timeout=30)  # endless: a hang guard
    assert r.returncode == 4 and "time limit" in one_line(r)


def test_silent_server_without_timeout_ends_at_the_idle_limit(agi, env):
    Path(env["AGI_CONFIG"]).write_text("idle_timeout = 1\n")
    with FakeModel(hang()) as server:
        r = agi("hi", server=server, timeout=60)  # the server is silent for 120 s: a hang guard
    assert r.returncode == 3 and "no answer" in one_line(r)


def test_a_five_megabyte_tool_output_is_cut(agi, tmp_path):
    s = tmp_path / "s"
    with FakeModel(
        call("Bash", command="head -c 5000000 /dev/zero | tr '\\0' x; echo; echo END"), text("ok")
    ) as server:
        r = agi("-s", str(s), "go", server=server)
    assert r.returncode == 0
    result = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"][0]
    assert len(result) < 40_000 and result.endswith("END") and "omitted" in result
    assert (s / "messages.jsonl").stat().st_size < 200_000


def test_the_same_call_forever_is_reported_and_ends_at_the_step_limit(agi):
    with FakeModel(call("Bash", command="echo same")) as server:
        r = agi("--max-steps", "5", "loop", server=server)
    assert r.returncode == 4 and "step limit" in one_line(r)
    notes = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert "repeats itself" not in notes[0] and "repeats itself" not in notes[1]
    assert all("repeats itself" in n for n in notes[2:])


def test_sigint_and_sigterm_during_a_hook(env, tmp_path):
    marker, hook = tmp_path / "hook-started", unique_seconds(31)
    hooks = tmp_path / "hooks.json"
    hooks.write_text(
        json.dumps(
            {
                "hooks": {
                    "PreToolUse": [
                        {
                            "matcher": "",
                            "hooks": [
                                {"type": "command", "command": f"touch {marker}; sleep {hook}"}
                            ],
                        }
                    ]
                }
            }
        )
    )
    for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        marker.unlink(missing_ok=True)
        s = tmp_path / f"s{code}"
        with FakeModel(call("Bash", command="echo hi"), text("later")) as server:
            env.update(AGI_BASE_URL=server.url, AGI_MODEL="m")
            proc = start_agi([AGI, "--hooks", str(hooks), "-s", str(s), "go"], env)
            wait_for_file(marker)
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=10)
            assert proc.returncode == code, err
            assert err.startswith("agi: interrupted") and out == ""
            leftover = subprocess.run(["pgrep", "-f", f"sleep {hook}"], capture_output=True)
            assert leftover.returncode == 1
            stored = messages(s)
            assert stored[-1]["role"] == "tool" and "interrupted" in stored[-1]["content"]
            r = subprocess.run(
                [AGI, "-s", str(s), "continue"],
                env=env,
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=30,
            )
            assert r.returncode == 0 and r.stdout == "later\n"


@pytest.mark.parametrize("n", [10, 20])
def test_concurrent_runs_on_one_session(env, tmp_path, n):
    """Every line of messages.jsonl parses, every prompt is there, each answer follows its own."""
    s = tmp_path / "s"
    with FakeModel(lambda body: text("re: " + body["messages"][-1]["content"])) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="m")
        procs = [start_agi([AGI, "-s", str(s), f"p{i}"], env) for i in range(n)]
        outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * n, outs
    stored = [json.loads(x) for x in (s / "messages.jsonl").read_text().splitlines()]
    assert sorted(m["content"] for m in stored if m["role"] == "user") == sorted(
        f"p{i}" for i in range(n)
    )
    for i in range(0, 2 * n, 2):  # whole turns: each answer right after its own prompt
        assert stored[i + 1]["content"] == "re: " + stored[i]["content"]
    assert json.loads((s / "meta.json").read_text())["messages"] == 2 * n


def test_fifty_runs_on_fifty_sessions(env, tmp_path):
    with FakeModel(lambda body: text("re: " + body["messages"][-1]["content"])) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="m")
        procs = [start_agi([AGI, "-s", str(tmp_path / f"s{i}"), f"p{i}"], env) for i in range(50)]
        outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0] * 50
    assert [o for o, _ in outs] == [f"re: p{i}\n" for i in range(50)]


def test_unreadable_session_directory_exits_2_and_is_left_alone(agi, tmp_path):
    import os

    if os.geteuid() == 0:
        pytest.skip("root reads every directory")
    s = tmp_path / "s"
    s.mkdir()
    s.chmod(0)
    with FakeModel(text("never")) as server:
        r = agi("-s", str(s), "hi", server=server)
    s.chmod(0o700)
    assert r.returncode == 2 and server.requests == []


def test_a_session_directory_that_is_a_file_exits_2(agi, tmp_path):
    f = tmp_path / "file"
    f.write_text("mine")
    with FakeModel(text("never")) as server:
        r = agi("-s", str(f), "hi", server=server)
    assert r.returncode == 2 and "not a directory" in one_line(r)
    assert f.read_text() == "mine" and server.requests == []


def test_damaged_meta_json_is_reported_not_fatal(agi, tmp_path):
    s = tmp_path / "s"
    with FakeModel(text("one"), text("two")) as server:
        agi("-s", str(s), "first", server=server)
        (s / "meta.json").write_text("{not json")
        r = agi("-s", str(s), "second", server=server)
    assert r.returncode == 0 and r.stdout == "two\n"
    assert json.loads((s / "meta.json").read_text())["messages"] == 4


def test_the_api_key_is_in_no_file_and_no_hook_payload(agi, tmp_path):
    key = "sk-unique-" + "7" * 24
    seen = tmp_path / "payloads"
    hooks = tmp_path / "hooks.json"
    hooks.write_text(
        json.dumps(
            {
                "hooks": {
                    event: [
                        {"matcher": "", "hooks": [{"type": "command", "command": f"cat >> {seen}"}]}
                    ]
                    for event in (
                        "PreToolUse",
                        "PostToolUse",
                        "UserPromptSubmit",
                        "Stop",
                        "SessionStart",
                    )
                }
            }
        )
    )
    s = tmp_path / "s"
    script = [
        calls(
            ("Bash", {"command": "echo $AGI_API_KEY"}),
            ("Write", {"file_path": str(tmp_path / "out.txt"), "content": "x"}),
        ),
        text("the key is " + key),
    ]
    with FakeModel(*script) as server:
        r = agi(
            "--hooks",
            str(hooks),
            "-s",
            str(s),
            "--output",
            "jsonl",
            f"use {key}",
            server=server,
            extra_env={"AGI_API_KEY": key},
        )
    assert r.returncode == 0, r.stderr
    assert key not in seen.read_text()
    home = tmp_path / "agi-home"
    for path in [*s.rglob("*"), *home.rglob("*")]:
        if path.is_file():
            assert key not in path.read_text(errors="replace"), path
