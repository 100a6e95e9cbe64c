"""Hooks and subagents through the real executable, with real hook scripts run by `sh -c`."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

from fakeserver import FakeModel, call, calls, text


def settings(tmp_path: Path, hooks: dict, name: str = "hooks.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"hooks": hooks}))
    return str(path)


def hook(command: str, matcher: object = "") -> list:
    return [{"matcher": matcher, "hooks": [{"type": "command", "command": command}]}]


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_pre_tool_use_exit_2_blocks_rm(agi, tmp_path):
    marker = tmp_path / "marker"
    script = tmp_path / "no-rm.sh"
    script.write_text(  # a Claude Code style guard: read the payload with Python, not jq
        "#!/bin/sh\n"
        f'{sys.executable} -c \'import json,sys; sys.exit(json.load(sys.stdin)["tool_input"]'
        '["command"].startswith("rm "))\' && exit 0\n'
        'echo "rm is not allowed here" >&2; exit 2\n'
    )
    script.chmod(0o755)
    hooks = settings(tmp_path, {"PreToolUse": hook(str(script), "Bash")})
    with FakeModel(
        call("Bash", command=f"rm -rf /nonexistent; touch {marker}"),
        call("Bash", command="echo allowed"),
        text("done"),
    ) as server:
        r = agi("--hooks", hooks, "clean up", server=server)
    assert r.returncode == 0, r.stderr
    assert not marker.exists()
    results = tool_results(server.requests[2])
    assert "rm is not allowed here" in results[0]
    assert results[1] == "allowed"


def test_permission_decision_deny_json(agi, tmp_path):
    marker = tmp_path / "marker"
    deny = json.dumps(
        {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "writes are frozen",
            }
        }
    )
    hooks = settings(tmp_path, {"PreToolUse": hook(f"echo '{deny}'", "Write")})
    with FakeModel(call("Write", file_path=str(marker), content="x"), text("ok")) as server:
        r = agi("--hooks", hooks, "write", server=server)
    assert r.returncode == 0
    assert not marker.exists()
    assert "writes are frozen" in tool_results(server.requests[1])[0]


def test_updated_input_changes_what_runs(agi, tmp_path):
    rewrite = json.dumps(
        {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "allow",
                "updatedInput": {"command": "echo rewritten"},
            }
        }
    )
    hooks = settings(tmp_path, {"PreToolUse": hook(f"echo '{rewrite}'", "Bash")})
    with FakeModel(call("Bash", command="echo original"), text("ok")) as server:
        agi("--hooks", hooks, "go", server=server)
    assert tool_results(server.requests[1]) == ["rewritten"]


def test_post_tool_use_receives_tool_response(agi, tmp_path):
    seen = tmp_path / "seen.json"
    hooks = settings(tmp_path, {"PostToolUse": hook(f"cat > {seen}", "Bash")})
    with FakeModel(call("Bash", command="echo out; echo err >&2; exit 3"), text("ok")) as server:
        r = agi("--hooks", hooks, "go", server=server)
    assert r.returncode == 0
    payload = json.loads(seen.read_text())
    assert payload["hook_event_name"] == "PostToolUse" and payload["tool_name"] == "Bash"
    assert payload["tool_input"] == {"command": "echo out; echo err >&2; exit 3"}
    response = payload["tool_response"]
    assert response["output"] == "out\nerr\n" and response["exit_code"] == 3
    assert response["interrupted"] is False and "out" in response["stdout"]
    assert payload["tool_use_id"].startswith("call_")
    assert payload["cwd"] == str(tmp_path)
    assert payload["transcript_path"].endswith("transcript.jsonl")


def test_user_prompt_submit_context_reaches_the_model_and_the_session(agi, tmp_path):
    ctx = json.dumps(
        {
            "hookSpecificOutput": {
                "hookEventName": "UserPromptSubmit",
                "additionalContext": "The user prefers metric.",
            }
        }
    )
    hooks = settings(tmp_path, {"UserPromptSubmit": hook(f"echo '{ctx}'")})
    s = tmp_path / "s"
    with FakeModel(text("20 C")) as server:
        agi("--hooks", hooks, "-s", str(s), "How warm is it?", server=server)
    sent = server.requests[0]["messages"][-1]["content"]
    assert sent.startswith("How warm is it?")
    assert '<context source="UserPromptSubmit hook">\nThe user prefers metric.' in sent
    stored = json.loads((s / "messages.jsonl").read_text().splitlines()[0])
    assert stored["content"] == sent


def test_user_prompt_submit_block_exits_6_and_stores_nothing(agi, tmp_path):
    hooks = settings(tmp_path, {"UserPromptSubmit": hook("echo 'no secrets, please' >&2; exit 2")})
    s = tmp_path / "s"
    with FakeModel(text("never")) as server:
        r = agi("--hooks", hooks, "-s", str(s), "my password is hunter2", server=server)
    assert r.returncode == 6
    assert r.stderr.startswith("agi: ") and "no secrets, please" in r.stderr
    assert server.requests == []
    assert (
        "hunter2" not in (s / "messages.jsonl").read_text()
        if (s / "messages.jsonl").exists()
        else True
    )


def test_stop_hook_block_makes_the_agent_continue_once(agi, tmp_path):
    # blocks only while stop_hook_active is false: the agent continues exactly once
    check = tmp_path / "stop.py"
    check.write_text(
        "import json, sys\n"
        "p = json.load(sys.stdin)\n"
        "if not p['stop_hook_active']:\n"
        "    print(json.dumps({'decision': 'block', 'reason': 'run the tests first'}))\n"
    )
    hooks = settings(tmp_path, {"Stop": hook(f"{sys.executable} {check}")})
    with FakeModel(text("done, I think"), text("tests pass; done")) as server:
        r = agi("--hooks", hooks, "fix it", server=server)
    assert r.returncode == 0
    assert r.stdout == "tests pass; done\n"
    assert len(server.requests) == 2
    assert "run the tests first" in server.requests[1]["messages"][-1]["content"]


def test_continue_false_exits_6(agi, tmp_path):
    stop = json.dumps({"continue": False, "stopReason": "maintenance window"})
    hooks = settings(tmp_path, {"PostToolUse": hook(f"echo '{stop}'")})
    with FakeModel(call("Bash", command="echo hi"), text("never")) as server:
        r = agi("--hooks", hooks, "go", server=server)
    assert r.returncode == 6
    assert r.stderr == "agi: maintenance window\n"
    assert len(server.requests) == 1


def test_object_matcher_on_edit_file_path(agi, tmp_path):
    log = tmp_path / "fired.log"
    env_file, other = tmp_path / "app.env", tmp_path / "notes.txt"
    env_file.write_text("A=1\n")
    other.write_text("A=1\n")
    matcher = {"tool": "Edit", "input": {"file_path": r"\.env$"}}
    hooks = settings(tmp_path, {"PreToolUse": hook(f"cat >> {log}; echo >> {log}", matcher)})
    with FakeModel(
        call("Edit", file_path=str(other), old_string="A=1", new_string="A=2"),
        call("Edit", file_path=str(env_file), old_string="A=1", new_string="A=2"),
        text("ok"),
    ) as server:
        agi("--hooks", hooks, "edit", server=server)
    fired = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert [p["tool_input"]["file_path"] for p in fired] == [str(env_file)]


def test_session_start_env_file_exports_reach_bash(agi, tmp_path):
    hooks = settings(
        tmp_path,
        {
            "SessionStart": hook(
                'echo "export GREETING=from-hook" >> "$CLAUDE_ENV_FILE"; echo "Project uses tabs."'
            )
        },
    )
    with FakeModel(call("Bash", command="echo $GREETING"), text("ok")) as server:
        agi("--hooks", hooks, "go", server=server)
    assert tool_results(server.requests[1]) == ["from-hook"]
    assert (
        '<context source="SessionStart hook">\nProject uses tabs.'
        in (server.requests[0]["messages"][-1]["content"])
    )


def test_every_hook_run_is_traced(agi, tmp_path):
    hooks = settings(tmp_path, {"PreToolUse": hook("echo checked", "Bash")})
    s = tmp_path / "s"
    with FakeModel(call("Bash", command="true"), text("ok")) as server:
        agi("--hooks", hooks, "-s", str(s), "go", server=server)
    runs = [json.loads(x) for x in (s / "trace.jsonl").open() if '"type": "hook"' in x]
    assert len(runs) == 1
    run = runs[0]
    assert run["event"] == "PreToolUse" and run["exit_code"] == 0 and run["stdout"] == "checked\n"
    assert run["input"]["tool_input"] == {"command": "true"} and isinstance(run["seconds"], float)


def test_bad_hooks_file_exits_2(agi, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"hooks": {"PreToolUse": [{"matcher": "(", "hooks": []}]}}')
    with FakeModel(text("never")) as server:
        r = agi("--hooks", str(bad), "go", server=server)
    assert r.returncode == 2 and str(bad) in r.stderr and server.requests == []


def test_two_tasks_run_concurrently_with_their_agent_files(agi, tmp_path):
    agents = tmp_path / "agents"
    agents.mkdir()
    for name in ("alpha", "beta"):
        (agents / f"{name}.md").write_text(
            f"---\nname: {name}\ndescription: The {name} specialist\ntools: Read\n---\n"
            f"You are the {name} agent.\n"
        )
    # a rendezvous: each subagent's request waits (up to 20 s) until the other's has arrived, so
    # both meet only if the two run at once; one after the other, the first waits in vain
    arrived = {"alpha": threading.Event(), "beta": threading.Event()}
    met: dict[str, bool] = {}

    def respond(body):
        system = body["messages"][0]["content"]
        for name, other in (("alpha", "beta"), ("beta", "alpha")):
            if system == f"You are the {name} agent.":
                assert [t["function"]["name"] for t in body["tools"]] == ["Read"]
                arrived[name].set()
                met[name] = arrived[other].wait(20)
                return text(f"{name} reporting")
        if any(m["role"] == "tool" for m in body["messages"]):
            return text("both answered")
        return calls(
            ("Task", {"description": "a", "prompt": "do A", "subagent_type": "alpha"}),
            ("Task", {"description": "b", "prompt": "do B", "subagent_type": "beta"}),
        )

    s = tmp_path / "s"
    with FakeModel(respond) as server:
        r = agi("--agents", str(agents), "-s", str(s), "delegate", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "both answered\n"
    assert tool_results(server.requests[-1]) == ["alpha reporting", "beta reporting"]
    assert met == {"alpha": True, "beta": True}  # each was asked while the other was
    kept = sorted(p.name.split("-")[2] for p in (s / "subagents").iterdir())
    assert kept == ["alpha", "beta"]
    child = next((s / "subagents").glob("*alpha*"))
    assert [json.loads(x)["content"] for x in (child / "messages.jsonl").open()] == [
        "do A",
        "alpha reporting",
    ]
    first = server.requests[0]
    task = next(t for t in first["tools"] if t["function"]["name"] == "Task")
    assert "The alpha specialist" in task["function"]["description"]


def test_general_purpose_task_without_agent_files(agi, tmp_path):
    def respond(body):
        if body["messages"][-1]["content"] == "count files":
            return text("3 files")
        if any(m["role"] == "tool" for m in body["messages"]):
            return text("the subagent says 3")
        return call("Task", description="count", prompt="count files")

    with FakeModel(respond) as server:
        r = agi("go", server=server)
    assert r.returncode == 0 and r.stdout == "the subagent says 3\n"
    child_request = next(
        b for b in server.requests if b["messages"][-1]["content"] == "count files"
    )
    names = {t["function"]["name"] for t in child_request["tools"]}
    assert {"Bash", "Read", "Task"} <= names  # the parent's tools, and one more level of Task


def test_subagent_stop_hook(agi, tmp_path):
    seen = tmp_path / "sub.json"
    hooks = settings(tmp_path, {"SubagentStop": hook(f"cat > {seen}")})

    def respond(body):
        if body["messages"][-1]["content"] == "sub task":
            return text("sub done")
        if any(m["role"] == "tool" for m in body["messages"]):
            return text("all done")
        return call("Task", description="x", prompt="sub task")

    with FakeModel(respond) as server:
        r = agi("--hooks", hooks, "go", server=server)
    assert r.returncode == 0
    payload = json.loads(seen.read_text())
    assert payload["hook_event_name"] == "SubagentStop"
    assert payload["last_assistant_message"] == "sub done"
    assert payload["agent_type"] == "general-purpose"


def test_a_pre_tool_use_hook_sees_the_real_absolute_path_of_a_write(agi, tmp_path):
    """A model may give a relative path, or one through a link; Claude Code's hooks always get
    an absolute one, and a guard that checks a prefix must not be fooled: the hook is given the
    path the write would really touch (docs: hooks)."""
    work = tmp_path / "work"
    protected = tmp_path / "protected"
    work.mkdir()
    protected.mkdir()
    (work / "link").symlink_to(protected)
    script = tmp_path / "guard.sh"
    script.write_text(  # denies writes under protected/, as a Claude Code user's guard would
        "#!/bin/sh\n"
        f'{sys.executable} -c \'import json,sys; p=json.load(sys.stdin)["tool_input"]'
        f'["file_path"]; print(p, file=open("{tmp_path}/seen", "a")); '
        f'sys.exit(p.startswith("{protected}/"))\' && exit 0\n'
        'echo "protected/ is read-only" >&2; exit 2\n'
    )
    script.chmod(0o755)
    hooks = settings(tmp_path, {"PreToolUse": hook(str(script), "Write")})
    with FakeModel(
        call("Write", file_path="link/secret.txt", content="x"),
        call("Write", file_path="notes.txt", content="y"),
        text("done"),
    ) as server:
        r = agi("--hooks", hooks, "write", server=server, cwd=work)
    assert r.returncode == 0, r.stderr
    assert not (protected / "secret.txt").exists()
    assert (work / "notes.txt").read_text() == "y"
    results = tool_results(server.requests[2])
    assert "protected/ is read-only" in results[0]
    seen = (tmp_path / "seen").read_text().splitlines()
    assert seen == [str(protected.resolve() / "secret.txt"), str(work.resolve() / "notes.txt")]
