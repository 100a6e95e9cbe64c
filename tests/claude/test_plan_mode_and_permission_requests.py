"""Claude Code compatibility (docs: claude-code; hooks, permissions, acp): what
tests/claude/test_hook_if_prompt_async.py left untested, and the gaps closed since — MCP tools
marked read-only in the modes, a PermissionRequest hook's `updatedInput` / `updatedPermissions`,
asyncRewake reports delivered mid-turn, SlashCommand as Claude Code offers and guards it, `if`
on env-prefixed and SlashCommand calls, prompt hooks at UserPromptSubmit and PostToolUse, and
agent files whose front matter strict YAML rejects (loaded as Claude Code loads them). Every
test drives the real executable, with real hook scripts, against tests/fakeserver.py."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from fakeserver import FakeModel, call, calls, text

PY = sys.executable

needs_sdk = pytest.mark.skipif(
    importlib.util.find_spec("mcp") is None, reason="the mcp package is not installed"
)


def settings(tmp_path: Path, hooks: dict, name: str = "hooks.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"hooks": hooks}))
    return str(path)


def entry(command: str, matcher: str = "", **fields) -> list:
    return [{"matcher": matcher, "hooks": [{"type": "command", "command": command, **fields}]}]


def script(tmp_path: Path, name: str, body: str) -> str:
    """A hook script: appends its payload to tmp_path/NAME.jsonl, then runs `body`."""
    path = tmp_path / f"{name}.sh"
    out = tmp_path / f"{name}.jsonl"
    path.write_text(
        "#!/bin/sh\n"
        f"{PY} -c 'import sys; sys.stdout.write(sys.stdin.read())' >>{out}; echo >>{out}\n"
        f"{body}\n"
    )
    path.chmod(0o755)
    return str(path)


def payloads(tmp_path: Path, name: str) -> list[dict]:
    path = tmp_path / f"{name}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def answer_with(tmp_path: Path, name: str, data: dict) -> str:
    """A hook that records its payload and prints DATA as its JSON answer."""
    (tmp_path / f"{name}.answer.json").write_text(json.dumps(data))
    return script(tmp_path, name, f"cat {tmp_path / f'{name}.answer.json'}")


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def tool_names(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


def allow(**decision) -> dict:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "allow", **decision},
        }
    }


# -- MCP tools marked read-only (docs: acp, claude-code: plan offers them, modes never ask) --------

READ_ONLY_SERVER = """
try:
    from mcp.server.mcpserver import MCPServer as FastMCP
except ImportError:
    from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

server = FastMCP("review")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def look(name: str) -> str:
    \"\"\"Read a value.\"\"\"
    return f"value of {name}"


@server.tool()
def poke(name: str) -> str:
    \"\"\"Change a value.\"\"\"
    return f"changed {name}"


server.run()
"""


def mcp_config(tmp_path: Path) -> str:
    server = tmp_path / "review_server.py"
    server.write_text(READ_ONLY_SERVER)
    cfg = tmp_path / "mcp.json"
    cfg.write_text(json.dumps({"mcpServers": {"rv": {"command": PY, "args": [str(server)]}}}))
    return str(cfg)


@needs_sdk
def test_plan_offers_mcp_tools_the_server_marks_read_only(agi, tmp_path):
    cfg = mcp_config(tmp_path)
    with FakeModel(
        calls(("mcp__rv__look", {"name": "x"}), ("mcp__rv__poke", {"name": "x"})), text("ok")
    ) as server:
        r = agi("--mcp", cfg, "--permission-mode", "plan", "go", server=server, timeout=60)
    assert r.returncode == 0, r.stderr
    offered = tool_names(server.requests[0])
    assert "mcp__rv__look" in offered and "mcp__rv__poke" not in offered
    looked, poked = tool_results(server.requests[1])
    assert looked == "value of x"
    assert poked.startswith("Error: denied: permission mode plan offers only tools")


@needs_sdk
def test_accept_edits_asks_about_mcp_tools_unless_marked_read_only(agi, tmp_path):
    cfg = mcp_config(tmp_path)
    with FakeModel(
        calls(("mcp__rv__look", {"name": "y"}), ("mcp__rv__poke", {"name": "y"})), text("ok")
    ) as server:
        r = agi("--mcp", cfg, "--permission-mode", "acceptEdits", "go", server=server, timeout=60)
    assert r.returncode == 0, r.stderr
    looked, poked = tool_results(server.requests[1])
    assert looked == "value of y"
    assert poked == (
        "Error: denied: permission mode acceptEdits asks for approval and no one is at the terminal"
    )


# -- PermissionRequest: updatedInput and updatedPermissions (Claude Code's decision fields) ------


def test_a_permission_request_hook_may_rewrite_the_call(agi, tmp_path):
    hook = answer_with(tmp_path, "rewrite", allow(updatedInput={"command": "echo rewritten"}))
    hooks = settings(tmp_path, {"PermissionRequest": entry(hook, "Bash")})
    session = tmp_path / "session"
    with FakeModel(call("Bash", command="echo original"), text("ok")) as server:
        r = agi("--hooks", hooks, "--ask", "Bash(echo:*)", "-s", str(session), "go", server=server)
    assert r.returncode == 0, r.stderr
    assert tool_results(server.requests[1]) == ["rewritten"]
    [asked] = payloads(tmp_path, "rewrite")
    assert asked["tool_input"] == {"command": "echo original"}
    trace = [json.loads(x) for x in (session / "trace.jsonl").read_text().splitlines()]
    assert {"command": "echo rewritten"} in [
        t.get("input") for t in trace if t["type"] == "hook_input"
    ]


def test_deny_rules_hold_against_a_permission_request_rewrite(agi, tmp_path):
    keep = tmp_path / "keep.txt"
    keep.write_text("x")
    hook = answer_with(tmp_path, "rewrite", allow(updatedInput={"command": f"rm {keep}"}))
    hooks = settings(tmp_path, {"PermissionRequest": entry(hook, "Bash")})
    with FakeModel(call("Bash", command="echo hi"), text("ok")) as server:
        r = agi(
            "--hooks", hooks, "--ask", "Bash(echo:*)", "--deny", "Bash(rm:*)", "go", server=server
        )
    assert r.returncode == 0, r.stderr
    assert keep.exists()
    assert tool_results(server.requests[1]) == [
        'Error: denied by permission rule "Bash(rm:*)" (command line)'
    ]


def test_updated_permissions_add_a_rule_for_the_rest_of_the_session(agi, tmp_path):
    rule = {"toolName": "Bash", "ruleContent": "echo:*"}
    update = {"type": "addRules", "rules": [rule], "behavior": "allow", "destination": "session"}
    hook = answer_with(tmp_path, "grant", allow(updatedPermissions=[update]))
    hooks = settings(tmp_path, {"PermissionRequest": entry(hook, "Bash")})
    with FakeModel(
        call("Bash", command="echo one"),
        call("Bash", command="echo two"),
        call("Bash", command="touch nope"),
        text("ok"),
    ) as server:
        r = agi("--hooks", hooks, "--permission-mode", "acceptEdits", "go", server=server)
    assert r.returncode == 0, r.stderr
    assert tool_results(server.requests[1]) == ["one"]
    assert tool_results(server.requests[2])[-1] == "two"
    # the hook was asked about `echo one` and `touch nope`; `echo two` ran under the new rule
    assert [p["tool_input"]["command"] for p in payloads(tmp_path, "grant")] == [
        "echo one",
        "touch nope",
    ]


def test_updated_permissions_may_switch_the_mode(agi, tmp_path):
    update = {"type": "setMode", "mode": "bypassPermissions", "destination": "session"}
    hook = answer_with(tmp_path, "mode", allow(updatedPermissions=[update]))
    record = script(tmp_path, "pre", "true")
    hooks = settings(
        tmp_path, {"PermissionRequest": entry(hook, "Bash"), "PreToolUse": entry(record, "Bash")}
    )
    with FakeModel(
        call("Bash", command="echo a"), call("Bash", command="echo b"), text("ok")
    ) as server:
        r = agi("--hooks", hooks, "--permission-mode", "acceptEdits", "go", server=server)
    assert r.returncode == 0, r.stderr
    assert len(payloads(tmp_path, "mode")) == 1
    assert [p["permission_mode"] for p in payloads(tmp_path, "pre")] == [
        "acceptEdits",
        "bypassPermissions",
    ]


# -- asyncRewake: a report that arrives while the agent works reaches its next model call -------


def test_an_async_rewake_report_arrives_mid_turn(agi, tmp_path):
    go, done = tmp_path / "go", tmp_path / "hook-done"
    hook = (  # reports only once the next step has begun, so the report comes mid-turn
        f"cat >/dev/null; while [ ! -e {go} ]; do sleep 0.1; done; "
        f"echo 'lint: 2 errors' >&2; touch {done}; exit 2"
    )
    hooks = settings(tmp_path, {"PostToolUse": entry(hook, "Write", asyncRewake=True)})
    wait = f"touch {go}; while [ ! -e {done} ]; do sleep 0.1; done; sleep 2; echo waited"
    with FakeModel(
        call("Write", file_path=str(tmp_path / "a.py"), content="x = 1\n"),
        call("Bash", command=wait),
        text("fixed the lint errors"),
    ) as server:
        r = agi("--hooks", hooks, "go", server=server, timeout=60)
    assert r.returncode == 0 and r.stdout == "fixed the lint errors\n", r.stderr
    assert len(server.requests) == 3  # nothing is left over for the stop
    last = server.requests[2]["messages"]
    assert last[-2]["role"] == "tool" and last[-2]["content"] == "waited"
    assert last[-1] == {
        "role": "user",
        "content": "A background PostToolUse hook reports:\n\nlint: 2 errors",
    }
    assert "a background PostToolUse hook reported a problem" in r.stderr


# -- `if`: judged as the permission rules judge, wrappers and all -------------------------------


def test_if_matches_a_command_behind_variable_assignments(agi, tmp_path):
    record = script(tmp_path, "commit", "true")
    hooks = settings(
        tmp_path, {"PreToolUse": entry(record, "Bash", **{"if": "Bash(git commit:*)"})}
    )
    with FakeModel(
        call("Bash", command="GIT_AUTHOR_NAME=x git commit -m y || true"), text("ok")
    ) as server:
        r = agi("--hooks", hooks, "go", server=server)
    assert r.returncode == 0, r.stderr
    assert len(payloads(tmp_path, "commit")) == 1


def test_if_on_permission_request_and_post_tool_use_failure(agi, tmp_path):
    asked, failed = script(tmp_path, "asked", "true"), script(tmp_path, "failed", "true")
    hooks = settings(
        tmp_path,
        {
            "PermissionRequest": entry(asked, "Bash", **{"if": "Bash(ls:*)"}),
            "PostToolUseFailure": entry(failed, "Read", **{"if": "Read(*.md)"}),
        },
    )
    with FakeModel(
        calls(
            ("Bash", {"command": "echo x"}),
            ("Bash", {"command": "ls /nonexistent-dir-for-review"}),
            ("Read", {"file_path": str(tmp_path / "missing.txt")}),
            ("Read", {"file_path": str(tmp_path / "missing.md")}),
        ),
        text("ok"),
    ) as server:
        r = agi("--hooks", hooks, "--permission-mode", "acceptEdits", "go", server=server)
    assert r.returncode == 0, r.stderr
    assert [p["tool_input"]["command"] for p in payloads(tmp_path, "asked")] == [
        "ls /nonexistent-dir-for-review"
    ]
    assert [p["tool_input"]["file_path"] for p in payloads(tmp_path, "failed")] == [
        str(tmp_path / "missing.md")
    ]


# -- prompt hooks at UserPromptSubmit and PostToolUse -------------------------------------------


def prompt_hook(prompt: str, matcher: str = "") -> list:
    return [{"matcher": matcher, "hooks": [{"type": "prompt", "prompt": prompt}]}]


def test_a_prompt_hook_blocks_a_user_prompt(agi, tmp_path):
    hooks = settings(tmp_path, {"UserPromptSubmit": prompt_hook("Is this on topic? $ARGUMENTS")})
    with FakeModel(text('{"ok": false, "reason": "off topic"}')) as server:
        r = agi("--hooks", hooks, "tell me a joke", server=server)
    assert r.returncode == 6, r.stderr
    assert "off topic" in r.stderr and len(server.requests) == 1
    asked = server.requests[0]["messages"][-1]["content"]
    event = json.loads(asked.split("? ", 1)[1].split("\n\n")[0])
    assert event["hook_event_name"] == "UserPromptSubmit" and event["prompt"] == "tell me a joke"


def test_a_prompt_hook_gives_feedback_after_a_tool_and_ok_lets_a_call_run(agi, tmp_path):
    hooks = settings(
        tmp_path,
        {
            "PreToolUse": prompt_hook("May this run? $ARGUMENTS", "Bash"),
            "PostToolUse": prompt_hook("Did it go well? $ARGUMENTS", "Bash"),
        },
    )
    with FakeModel(
        call("Bash", command="echo ran"),
        text('{"ok": true}'),
        text('{"ok": false, "reason": "the output says nothing useful"}'),
        text("done"),
    ) as server:
        r = agi("--hooks", hooks, "go", server=server)
    assert r.returncode == 0 and r.stdout == "done\n", r.stderr
    [result] = tool_results(server.requests[3])
    assert result.startswith("ran")
    assert "PostToolUse hook feedback: the output says nothing useful" in result


# -- SlashCommand as Claude Code offers and guards it -------------------------------------------


def command_file(path: Path, body: str, **meta) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    head = "".join(f"{k}: {v}\n" for k, v in meta.items())
    path.write_text(f"---\n{head}---\n{body}" if meta else body)


def test_permission_rules_guard_slash_command_calls(agi, tmp_path):
    command_file(tmp_path / "commands" / "greet.md", "Greet $1.", description="greet someone")
    command_file(tmp_path / "commands" / "plain.md", "No description here.")
    command_file(tmp_path / "commands" / "fmt.md", "Format $ARGUMENTS.", description="format")
    with FakeModel(
        calls(
            ("SlashCommand", {"command": "/greet Ada"}),
            ("SlashCommand", {"command": "/plain"}),
            ("SlashCommand", {"command": "/fmt src"}),
        ),
        text("done"),
    ) as server:
        r = agi(
            "--deny", "SlashCommand(/greet:*)", "--allow", "SlashCommand:/fmt", "go", server=server
        )
    assert r.returncode == 0, r.stderr
    [tool] = [t for t in server.requests[0]["tools"] if t["function"]["name"] == "SlashCommand"]
    assert "/greet" in tool["function"]["description"]
    assert tool["function"]["description"].endswith(
        "- /plain"
    )  # undescribed: offered (docs: claude-code)
    greet, plain, fmt = tool_results(server.requests[1])
    assert greet == 'Error: denied by permission rule "SlashCommand(/greet:*)" (command line)'
    assert "No description here." in plain
    assert "Format src." in fmt


# -- front matter strict YAML rejects: loaded as Claude Code loads it ---------------------------


def plugin_with_agent(tmp_path: Path, front: str) -> Path:
    """A plugin `demo` with agents/simplify.md: FRONT, then a body."""
    plugin = tmp_path / "demo"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text('{"name": "demo"}')
    (plugin / "agents").mkdir()
    body = "You simplify code and keep its behaviour.\n"
    (plugin / "agents" / "simplify.md").write_text(f"---\n{front}---\n\n{body}")
    return plugin


# A description that runs on over unindented lines, one of them without a colon: not YAML (the
# shape of several official plugins' agent files), written here, not copied from them.
RUN_ON = (
    "name: simplify\n"
    "description: Use this agent after code was written. Examples:\\n\\n<example>\n"
    "Context: some code was just written\n"
    'user: "Please add a cache"\n'
    "<a step left out>\n"
    "</example>\n"
    "model: opus\n"
)


def test_an_agent_whose_front_matter_is_not_yaml_loads_as_in_claude_code(agi, tmp_path):
    plugin = plugin_with_agent(tmp_path, RUN_ON)
    listed = agi("--plugin-dir", str(plugin), "--list-extensions")
    assert listed.returncode == 0, listed.stderr
    assert "demo:simplify" in listed.stdout
    with FakeModel(
        call("Task", description="tidy", prompt="tidy a.py", subagent_type="demo:simplify"),
        text("simplified"),
        text("done"),
    ) as server:
        r = agi("--plugin-dir", str(plugin), "go", server=server)
    assert r.returncode == 0 and r.stdout == "done\n", r.stderr
    system = server.requests[1]["messages"][0]
    assert system["role"] == "system" and "You simplify code" in system["content"]
    assert server.requests[1]["model"] == server.requests[0]["model"]  # `model: opus` unread
    assert "simplify.md: front matter: line 5" in r.stderr and "as Claude Code does" in r.stderr


def test_an_unreadable_front_matter_keeps_its_tools_line(agi, tmp_path):
    plugin = plugin_with_agent(tmp_path, RUN_ON + "tools: Read\n")
    with FakeModel(
        call("Task", description="tidy", prompt="tidy a.py", subagent_type="demo:simplify"),
        text("simplified"),
        text("done"),
    ) as server:
        r = agi("--plugin-dir", str(plugin), "go", server=server)
    assert r.returncode == 0, r.stderr
    assert tool_names(server.requests[1]) == ["Read"]  # dropping it would give every tool


def test_an_unreadable_front_matter_with_an_unreadable_tools_line_is_refused(agi, tmp_path):
    plugin = plugin_with_agent(tmp_path, RUN_ON + "tools:\n- Read\n  - Bash\n")
    listed = agi("--plugin-dir", str(plugin), "--list-extensions")
    assert "demo:simplify" not in listed.stdout


def test_values_yaml_would_misread_are_retried_quoted_as_claude_code_does(agi, tmp_path):
    front = "name: simplify\ndescription: [experimental] tidies code: keeps behaviour\n"
    plugin = plugin_with_agent(tmp_path, front)
    listed = agi("--plugin-dir", str(plugin), "--list-extensions")
    assert "demo:simplify  [experimental] tidies code: keeps behaviour" in listed.stdout


# -- the modes hold in every front end: a batch job (docs: claude-code, batch) ---------------------


def test_the_permission_mode_holds_in_batch_jobs(agi, tmp_path):
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text('{"id": "p", "prompt": "plan it"}\n')
    target = tmp_path / "f.txt"
    with FakeModel(call("Write", file_path=str(target), content="x"), text("planned")) as server:
        r = agi("--batch", str(jobs), "--permission-mode", "plan", server=server)
    assert r.returncode == 0, r.stderr
    [result] = [json.loads(line) for line in r.stdout.splitlines()]
    assert result["answer"] == "planned" and not target.exists()
    assert "Write" not in tool_names(server.requests[0])
    assert "permission mode plan" in tool_results(server.requests[1])[0]


def test_a_prompt_hook_past_its_timeout_is_ignored_and_the_run_goes_on(agi, tmp_path):
    hooks = {"Stop": [{"hooks": [{"type": "prompt", "prompt": "done? $ARGUMENTS", "timeout": 1}]}]}
    path = tmp_path / "slow.json"
    path.write_text(json.dumps({"hooks": hooks}))
    with FakeModel(text("answer"), text('{"ok": false, "reason": "late"}', delay=1.5)) as server:
        r = agi("--hooks", str(path), "go", server=server)
    assert r.returncode == 0 and r.stdout == "answer\n", r.stderr
    assert "Stop hook" in r.stderr and "timed out after 1 s; ignored" in r.stderr


def test_accept_edits_asks_about_edits_in_protected_directories(agi, tmp_path):
    (tmp_path / ".git" / "hooks").mkdir(parents=True)
    hook, plain = tmp_path / ".git" / "hooks" / "pre-commit", tmp_path / "notes.txt"
    with FakeModel(
        calls(
            ("Write", {"file_path": str(hook), "content": "#!/bin/sh\n"}),
            ("Write", {"file_path": str(plain), "content": "x"}),
        ),
        text("ok"),
    ) as server:
        r = agi("--permission-mode", "acceptEdits", "go", server=server)
    assert r.returncode == 0, r.stderr
    asked, wrote = tool_results(server.requests[1])
    assert asked.startswith("Error: denied: permission mode acceptEdits asks for approval")
    assert not hook.exists() and plain.read_text() == "x" and not wrote.startswith("Error")
