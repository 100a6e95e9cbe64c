"""Session management and the REPL, as a user drives them."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import AGI
from fakeserver import FakeModel, call, text


def snapshot(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.is_file()}


def test_fork_leaves_the_original_byte_identical(agi, tmp_path):
    original = tmp_path / "orig"
    with FakeModel(text("one"), text("forked answer")) as server:
        agi("-s", str(original), "first", server=server)
        before = snapshot(original)
        r = agi("--fork", str(original), "-s", str(tmp_path / "copy"), "second", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "forked answer\n"
    assert snapshot(original) == before
    sent = [m["content"] for m in server.requests[1]["messages"] if m["role"] != "system"]
    assert sent == ["first", "one", "second"]
    copy = [json.loads(x)["content"] for x in (tmp_path / "copy" / "messages.jsonl").open()]
    assert copy == ["first", "one", "second", "forked answer"]
    meta = json.loads((tmp_path / "copy" / "meta.json").read_text())
    assert meta["forked_from"] == str(original.resolve())


def test_fork_without_session_makes_a_new_one(agi, tmp_path):
    original = tmp_path / "orig"
    with FakeModel(text("one"), text("two")) as server:
        agi("-s", str(original), "first", server=server)
        r = agi("--fork", str(original), "--output", "json", "second", server=server)
    new = Path(json.loads(r.stdout)["session"])
    assert new != original.resolve() and new.parent.name == "sessions"
    assert len((original / "messages.jsonl").read_text().splitlines()) == 2


def test_list_sessions_newest_first(agi, tmp_path):
    with FakeModel(text("a"), text("b")) as server:
        agi("-s", str(tmp_path / "s1"), "first question", server=server)
        agi("-s", str(tmp_path / "s2"), "second question", "--model", "other", server=server)
    r = agi("--list-sessions")
    assert r.returncode == 0
    rows = r.stdout.splitlines()
    assert [row.split("\t")[0] for row in rows] == [str(tmp_path / "s2"), str(tmp_path / "s1")]
    assert "second question" in rows[0] and "openai:other" in rows[0]
    assert "2 messages" in rows[0]


def test_show_prints_a_transcript_with_tool_calls_and_timings(agi, tmp_path):
    s = tmp_path / "s"
    with FakeModel(call("Bash", command="echo shown"), text("finished")) as server:
        agi("-s", str(s), "please run", server=server)
    before = snapshot(s)
    r = agi("--show", str(s))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "▶ user\n  please run" in out
    assert '⏺ Bash({"command": "echo shown"})' in out
    assert "⎿ (0." in out and "shown" in out
    assert "finished" in out
    assert snapshot(s) == before
    bad = agi("--show", str(tmp_path))
    assert bad.returncode == 2 and "not an agi session" in bad.stderr


def test_jsonl_events_arrive_while_the_run_goes(env, tmp_path):
    with FakeModel(
        call("Bash", command="echo hi"), text("slow answer streaming", delay=0.5, pieces=6)
    ) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="m")
        proc = subprocess.Popen(
            [AGI, "--output", "jsonl", "go"],
            env=env,
            text=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        first = json.loads(proc.stdout.readline())
        running = proc.poll() is None  # the server is still streaming
        rest = [json.loads(line) for line in proc.stdout]
        proc.wait(timeout=30)
    assert running and first == {"type": "step", "step": 1}
    types = [e["type"] for e in rest]
    assert "tool_start" in types and "tool_end" in types and "text" in types
    end = next(e for e in rest if e["type"] == "tool_end")
    assert end["name"] == "Bash" and end["result"] == "hi" and isinstance(end["seconds"], float)
    result = rest[-1]
    assert result["type"] == "result" and result["answer"] == "slow answer streaming"
    assert result["exit_code"] == 0 and result["steps"] == 2


def test_json_output_on_failure_still_has_a_result(agi):
    with FakeModel(call("Bash", command="true")) as server:
        r = agi("--output", "json", "--max-steps", "1", "go", server=server)
    assert r.returncode == 4
    result = json.loads(r.stdout)
    assert result["answer"] is None and result["exit_code"] == 4 and "step limit" in result["error"]


def test_repl_reads_prompts_from_a_pipe(agi, tmp_path):
    s = tmp_path / "s"
    with FakeModel(text("first answer"), text("second answer")) as server:
        r = agi("--repl", "-s", str(s), server=server, input="hello\nagain \\\nand more\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "first answer\nsecond answer\n"
    stored = [json.loads(x)["content"] for x in (s / "messages.jsonl").open()]
    assert stored == ["hello", "first answer", "again \nand more", "second answer"]


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True).stdout


def wait_for(pane: str, needle: str, timeout: float = 15) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = tmux("capture-pane", "-p", "-t", pane)
        if needle in screen:
            return screen
        time.sleep(0.1)
    raise AssertionError(f"{needle!r} never appeared; screen:\n{screen}")


@pytest.mark.skipif(
    subprocess.run(["which", "tmux"], capture_output=True).returncode != 0,
    reason="tmux is not installed",
)
def test_repl_in_tmux_two_prompts_cancel_and_continue(agi, env, tmp_path):
    s = tmp_path / "s"
    name = f"agi-{uuid.uuid4().hex[:8]}"
    script = [
        text("Answer one"),
        text("Answer two"),
        text("never finishes " * 40, delay=0.5, pieces=40),
        text("after cancel"),
        text("Answer three"),
    ]
    with FakeModel(*script) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="m")
        exports = " ".join(
            f"{k}='{v}'" for k, v in env.items() if k.startswith("AGI_") or k in ("PATH", "HOME")
        )
        tmux(
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "100",
            "-y",
            "30",
            f"env -i {exports} TERM=xterm {AGI} --repl --session {s}; sleep 30",
        )
        try:
            pane = f"{name}:0"
            wait_for(pane, "›")
            tmux("send-keys", "-t", pane, "first prompt", "Enter")
            wait_for(pane, "Answer one")
            tmux("send-keys", "-t", pane, "second prompt", "Enter")
            wait_for(pane, "Answer two")
            tmux("send-keys", "-t", pane, "slow one", "Enter")
            wait_for(pane, "never finishes")
            tmux("send-keys", "-t", pane, "C-c")
            wait_for(pane, "(cancelled)")
            tmux("send-keys", "-t", pane, "still here?", "Enter")
            wait_for(pane, "after cancel")
            tmux("send-keys", "-t", pane, "C-d")
            time.sleep(0.5)
        finally:
            subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
        r = agi("--session", str(s), "third", server=server)
    assert r.stdout == "Answer three\n"
    sent = [m["content"] for m in server.requests[-1]["messages"] if m["role"] != "system"]
    assert sent[:4] == ["first prompt", "Answer one", "second prompt", "Answer two"]
    assert sent[4] == "slow one" and sent[5].startswith("never finishes")  # the partial answer
    assert sent[6:] == ["still here?", "after cancel", "third"]
