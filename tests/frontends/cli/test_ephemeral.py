"""`--ephemeral` (docs: volume): a run that writes nothing of its own, driven through the real
executable against the scripted server, with AGI_HOME and the working directory listed
afterwards; the options that need a session refused before anything is sent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fakeserver import FakeModel, call, calls, text


def tree(root: Path) -> list[str]:
    """Every path under `root` (directories too), relative; [] when root does not exist."""
    if not root.exists():
        return []
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def home(env: dict[str, str]) -> Path:
    return Path(env["AGI_HOME"])


def test_a_run_with_tools_leaves_nothing_but_what_the_tools_wrote(agi, tmp_path, home) -> None:
    """A Write and a Bash call change the working directory (a git repository, where a
    checkpoint would otherwise be taken); AGI_HOME stays absent and the working directory holds
    only what the tools made. `--output json` says session null."""
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    before = tree(work)
    script = (
        call("Write", file_path=str(work / "made.txt"), content="hello\n"),
        call("Bash", command="echo more > more.txt"),
        text("both written"),
    )
    with FakeModel(*script) as server:
        r = agi("--ephemeral", "--output", "json", "write two files", server=server, cwd=work)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    result = json.loads(r.stdout)
    assert result["session"] is None and result["answer"] == "both written"
    assert result["steps"] == 3 and result["exit_code"] == 0
    assert len(server.requests) == 3
    assert tree(home) == []
    assert set(tree(work)) - set(before) == {"made.txt", "more.txt"}
    assert (work / "made.txt").read_text() == "hello\n"


def test_the_same_run_without_it_keeps_a_session(agi, tmp_path, home) -> None:
    """The comparison that makes the test above mean something: a plain run writes its
    session, index entry and (with a file written) a checkpoint repository under AGI_HOME."""
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    script = (call("Write", file_path=str(work / "made.txt"), content="hi\n"), text("ok"))
    with FakeModel(*script) as server:
        r = agi("--output", "json", "write", server=server, cwd=work)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["session"] is not None
    assert "index.jsonl" in tree(home) and "sessions" in tree(home)


def test_text_output_and_stderr_are_unchanged(agi, tmp_path, home) -> None:
    """The answer on stdout, nothing on stderr (not a terminal), exit 0; under -v the summary
    line names no session."""
    with FakeModel(text("the answer")) as server:
        plain = agi("--ephemeral", "say it", server=server)
        verbose = agi("--ephemeral", "-v", "say it", server=server)
    assert (plain.returncode, plain.stdout, plain.stderr) == (0, "the answer\n", "")
    assert verbose.returncode == 0 and verbose.stdout == "the answer\n"
    assert "session" not in verbose.stderr and "✓" in verbose.stderr
    assert tree(home) == []


def test_errors_keep_their_exit_codes(agi, home) -> None:
    """A provider failure is still exit 3, a step limit exit 4: one `agi:` line, nothing kept."""
    with FakeModel(call("Bash", command="true")) as server:
        limited = agi("--ephemeral", "--max-steps", "1", "loop", server=server)
    assert limited.returncode == 4
    assert limited.stderr.startswith("agi: ") and limited.stderr.count("\n") == 1
    assert "session" not in limited.stderr
    from fakeserver import status

    with FakeModel(status(401, {"error": {"message": "bad key"}})) as server:
        failed = agi("--ephemeral", "hi", server=server)
    assert failed.returncode == 3 and failed.stderr.startswith("agi: ")
    assert tree(home) == []


def test_subagents_keep_nothing_either(agi, tmp_path, home) -> None:
    """A Task call runs a subagent; its conversation stays in memory like the parent's."""

    def step(body):
        users = [m for m in body["messages"] if m["role"] == "user"]
        if users and users[0]["content"] == "look into it":  # the subagent's own conversation
            return text("found it")
        if any(m["role"] == "tool" for m in body["messages"]):
            return text("the subagent found it")
        return calls(("Task", {"description": "look", "prompt": "look into it"}))

    with FakeModel(step) as server:
        r = agi("--ephemeral", "--output", "json", "delegate", server=server)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["answer"] == "the subagent found it"
    assert len(server.requests) == 3
    assert tree(home) == []


@pytest.mark.parametrize(
    "args, named",
    [
        (["-s", "{tmp}/s", "hi"], "--session"),
        (["-c", "hi"], "--continue"),
        (["--fork", "{tmp}/old", "hi"], "--fork"),
        (["--rewind"], "--rewind"),
        (["-i"], "--repl"),
    ],
)
def test_options_that_need_a_session_are_usage_errors(agi, tmp_path, home, args, named) -> None:
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "meta.json").write_text('{"agi_session": 1}\n')
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    with FakeModel(text("never")) as server:
        r = agi("--ephemeral", *argv, server=server)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("agi: ") and r.stderr.count("\n") == 1
    assert "--ephemeral" in r.stderr and named in r.stderr
    assert server.requests == []
    assert not (tmp_path / "s").exists()
    assert tree(home) == []


def test_the_config_file_says_it_too(agi, tmp_path, env, home) -> None:
    """`ephemeral = true` in config.toml makes every run ephemeral; -s is then refused."""
    Path(env["AGI_CONFIG"]).write_text("ephemeral = true\n")
    with FakeModel(text("quiet")) as server:
        r = agi("--output", "json", "hi", server=server)
        refused = agi("-s", str(tmp_path / "s"), "hi", server=server)
    assert r.returncode == 0 and json.loads(r.stdout)["session"] is None
    assert refused.returncode == 2 and "--session" in refused.stderr
    assert tree(home) == []


def test_a_batch_of_ephemeral_jobs(agi, tmp_path, home) -> None:
    """`--batch --ephemeral`, and a job's own `"ephemeral": true` field: every line says
    session null and AGI_HOME stays empty; a job without the field keeps its session."""
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("".join(json.dumps({"id": i, "prompt": f"p{i}"}) + "\n" for i in range(6)))
    with FakeModel(text("ok")) as server:
        r = agi("--batch", str(jobs), "--ephemeral", server=server)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(lines) == 6 and all(x["session"] is None and x["exit"] == 0 for x in lines)
    assert tree(home) == []
    jobs.write_text(
        json.dumps({"id": "e", "prompt": "a", "ephemeral": True})
        + "\n"
        + json.dumps({"id": "k", "prompt": "b"})
        + "\n"
    )
    with FakeModel(text("ok")) as server:
        r = agi("--batch", str(jobs), server=server)
    assert r.returncode == 0, r.stderr
    by_id = {x["id"]: x for x in map(json.loads, r.stdout.splitlines())}
    assert by_id["e"]["session"] is None and by_id["k"]["session"] is not None
    sessions = [p for p in tree(home) if p.count(os.sep) == 1 and p.startswith("sessions")]
    assert len(sessions) == 1


def test_a_batch_job_naming_a_session_is_refused(agi, tmp_path, home) -> None:
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps({"id": 1, "prompt": "x", "session": str(tmp_path / "s")}) + "\n")
    with FakeModel(text("ok")) as server:
        r = agi("--batch", str(jobs), "--ephemeral", server=server)
    line = json.loads(r.stdout)
    assert r.returncode == 1 and line["exit"] == 2 and "--session" in line["error"]
    assert server.requests == [] and tree(home) == []


def test_the_python_api(env, tmp_path, home) -> None:
    """`agi.run(prompt, ephemeral=True)`: Result.session is None, nothing written."""
    with FakeModel(text("from python")) as server:
        code = (
            "import agi, json\n"
            f"r = agi.run('hi', model='fake', base_url={server.url!r}, ephemeral=True)\n"
            "print(json.dumps([r.answer, r.session is None, r.to_json()['session']]))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["from python", True, None]
    assert tree(home) == []


def test_hooks_run_and_get_no_transcript(agi, tmp_path, home) -> None:
    """UserPromptSubmit and Stop hooks fire as usual; their transcript_path is empty (no file
    is kept), and --schema keeps the ghost exchange that hooks may watch."""
    seen = tmp_path / "seen"
    seen.mkdir()
    hook = {
        "hooks": [
            {
                "type": "command",
                "command": f"cat >> {seen}/payloads.jsonl; echo >> {seen}/payloads.jsonl",
            }
        ]
    }
    settings = tmp_path / "hooks.json"
    settings.write_text(json.dumps({"hooks": {"UserPromptSubmit": [hook], "Stop": [hook]}}))
    with FakeModel(text("It is spam."), text('{"kind": "spam"}')) as server:
        r = agi(
            "--ephemeral",
            "--no-tools",
            "--hooks",
            str(settings),
            "--schema",
            "kind: str",
            "classify",
            server=server,
        )
    assert (r.returncode, r.stdout) == (0, '{"kind":"spam"}\n'), r.stderr
    payloads = [
        json.loads(line)
        for line in (seen / "payloads.jsonl").read_text().split("\n")
        if line.strip()
    ]
    assert [p["hook_event_name"] for p in payloads] == ["UserPromptSubmit", "Stop"]
    assert all(p["transcript_path"] == "" for p in payloads)
    assert len(server.requests) == 2
    assert tree(home) == []
