"""Claude Code compatibility, third round (docs: claude-code), through the real executable with
real hook scripts: hook `if`, prompt hooks, asyncRewake, the PostToolUseFailure / SessionEnd /
Notification / PermissionRequest events, commands in sub-directories, the SlashCommand tool and
the permission modes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fakeserver import FakeModel, call, calls, text

PY = sys.executable
PRICED = '[prices."fake-model"]\ninput = 1000\noutput = 1000\n'  # fakeserver's USAGE: $0.015


def settings(tmp_path: Path, hooks: dict, name: str = "given-hooks.json", **more) -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"hooks": hooks, **more}))
    return str(path)


def entry(command: str, matcher: str = "", **fields) -> list:
    return [{"matcher": matcher, "hooks": [{"type": "command", "command": command, **fields}]}]


def recorder(tmp_path: Path, name: str, exit_code: int = 0, stderr: str = "") -> str:
    """A hook script that appends its payload (one JSON line) to tmp_path/NAME.jsonl."""
    script = tmp_path / f"{name}.sh"
    out = tmp_path / f"{name}.jsonl"
    lines = ["#!/bin/sh", f"{PY} -c 'import sys; sys.stdout.write(sys.stdin.read())' >>{out}"]
    lines += [f"echo >>{out}"]
    if stderr:
        lines.append(f"echo '{stderr}' >&2")
    lines.append(f"exit {exit_code}")
    script.write_text("\n".join(lines) + "\n")
    script.chmod(0o755)
    return str(script)


def payloads(tmp_path: Path, name: str) -> list[dict]:
    path = tmp_path / f"{name}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def tool_names(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


# -- `if` ---------------------------------------------------------------------------------------


def test_if_limits_a_hook_to_the_calls_its_rule_matches(agi, tmp_path):
    block = recorder(tmp_path, "guard", 2, "no commits here")
    hooks = settings(tmp_path, {"PreToolUse": entry(block, "Bash", **{"if": "Bash(git commit:*)"})})
    with FakeModel(
        call("Bash", command="echo plain"),
        call("Bash", command="echo a && git commit -m x"),
        call("Bash", command="git commit -m y"),
        text("done"),
    ) as server:
        r = agi("--hooks", hooks, "go", server=server)
    assert r.returncode == 0, r.stderr
    results = tool_results(server.requests[3])
    assert results[0] == "plain"
    assert "no commits here" in results[1] and "no commits here" in results[2]
    seen = [p["tool_input"]["command"] for p in payloads(tmp_path, "guard")]
    assert seen == ["echo a && git commit -m x", "git commit -m y"]


def test_if_with_a_path_pattern_on_post_tool_use(agi, tmp_path):
    note = recorder(tmp_path, "py")
    hooks = settings(tmp_path, {"PostToolUse": entry(note, "Write|Edit", **{"if": "Edit(*.py)"})})
    with FakeModel(
        calls(
            ("Write", {"file_path": str(tmp_path / "a.py"), "content": "x = 1\n"}),
            ("Write", {"file_path": str(tmp_path / "a.txt"), "content": "x\n"}),
        ),
        text("done"),
    ) as server:
        r = agi("--hooks", hooks, "go", server=server)
    assert r.returncode == 0, r.stderr
    assert [p["tool_input"]["file_path"] for p in payloads(tmp_path, "py")] == [
        str(tmp_path / "a.py")
    ]


def test_a_bad_if_rule_is_a_usage_error(agi, tmp_path):
    hooks = settings(tmp_path, {"PreToolUse": entry("true", "Bash", **{"if": "Bash(git"})})
    r = agi("--hooks", hooks, "go", extra_env={"AGI_MODEL": "openai:x"})
    assert r.returncode == 2 and "hooks.PreToolUse[0].hooks[0].if" in r.stderr, r.stderr


# -- prompt hooks -------------------------------------------------------------------------------


def prompt_hook(prompt: str, **more) -> list:
    return [{"hooks": [{"type": "prompt", "prompt": prompt, **more}]}]


def test_a_prompt_stop_hook_makes_the_agent_go_on_and_is_counted(agi, tmp_path):
    (tmp_path / "config.toml").write_text(PRICED)
    hooks = settings(tmp_path, {"Stop": prompt_hook("Is the work done? Event: $ARGUMENTS")})
    with FakeModel(
        text("first answer"),
        text('{"ok": false, "reason": "the tests were not run"}'),
        text("second answer"),
        text('{"ok": true}'),
    ) as server:
        r = agi("--hooks", hooks, "--output", "json", "go", server=server)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["answer"] == "second answer"
    asked = server.requests[1]["messages"]
    assert [m["role"] for m in asked] == ["system", "user"]  # nothing of the conversation
    assert asked[1]["content"].startswith("Is the work done? Event: {")
    event = json.loads(asked[1]["content"].split("Event: ", 1)[1].split("\n\n")[0])
    assert event["hook_event_name"] == "Stop" and event["last_assistant_message"] == "first answer"
    assert "the tests were not run" in server.requests[2]["messages"][-1]["content"]
    assert len(server.requests) == 4 and result["usage"]["cost"] == 0.06  # 4 calls of $0.015


def test_a_prompt_hook_blocks_a_tool_call_and_names_its_model(agi, tmp_path):
    marker = tmp_path / "marker"
    hooks = settings(
        tmp_path,
        {
            "PreToolUse": [
                {
                    "matcher": "Bash",
                    "hooks": [
                        {"type": "prompt", "prompt": "Is this safe?", "model": "openai:judge-model"}
                    ],
                }
            ]
        },
    )
    with FakeModel(
        call("Bash", command=f"touch {marker}"),
        text('{"ok": false, "reason": "touching files is not allowed"}'),
        text("understood"),
    ) as server:
        r = agi("--hooks", hooks, "go", server=server)
    assert r.returncode == 0, r.stderr
    assert not marker.exists()
    assert server.requests[1]["model"] == "judge-model"
    assert "Is this safe?\n\n{" in server.requests[1]["messages"][-1]["content"]  # appended
    assert "touching files is not allowed" in tool_results(server.requests[2])[0]


def test_a_prompt_hook_is_held_to_max_cost(agi, tmp_path):
    (tmp_path / "config.toml").write_text(PRICED)
    hooks = settings(tmp_path, {"Stop": prompt_hook("done? $ARGUMENTS")})
    with FakeModel(text("answer"), text('{"ok": true}')) as server:
        r = agi("--hooks", hooks, "--max-cost", "0.01", "go", server=server)
    assert r.returncode == 4, r.stderr
    assert len(server.requests) == 1  # the hook's call would pass the budget: not made


def test_a_prompt_hook_whose_model_fails_is_reported_and_ignored(agi, tmp_path):
    hooks = settings(tmp_path, {"Stop": prompt_hook("done? $ARGUMENTS")})
    with FakeModel(text("answer"), text("not json at all")) as server:
        r = agi("--hooks", hooks, "go", server=server)
    assert r.returncode == 0 and r.stdout == "answer\n", r.stderr
    assert "Stop hook" in r.stderr and "ignored" in r.stderr


# -- asyncRewake ----------------------------------------------------------------------------------


def test_async_rewake_runs_in_the_background_and_wakes_the_agent(agi, tmp_path):
    times = tmp_path / "times"
    script = tmp_path / "review.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"cat >/dev/null; date +%s.%N >{times}.start; sleep 2; date +%s.%N >{times}.end\n"
        "echo 'hard-coded secret in a.py' >&2; exit 2\n"
    )
    script.chmod(0o755)
    hooks = settings(
        tmp_path,
        {
            "PostToolUse": entry(
                str(script),
                "Bash",
                asyncRewake=True,
                rewakeMessage="Security review:",
                rewakeSummary="review found issues",
                **{"if": "Bash(git commit:*)"},
            )
        },
    )
    with FakeModel(
        call("Bash", command="git commit -m x || true"),
        call("Bash", command=f"sleep 0.5; date +%s.%N >{times}.second"),
        text("done"),
        text("acknowledged the finding"),
    ) as server:
        r = agi("--hooks", hooks, "go", server=server, timeout=60)
    assert r.returncode == 0 and r.stdout == "acknowledged the finding\n", r.stderr
    start, second, end = (
        float(Path(f"{times}.{k}").read_text()) for k in ("start", "second", "end")
    )
    assert start < second < end  # the agent worked on while the hook ran
    woken = server.requests[3]["messages"][-1]
    assert woken["role"] == "user"
    assert woken["content"] == "Security review:\n\nhard-coded secret in a.py"
    assert "review found issues" in r.stderr


def test_async_rewake_that_exits_0_wakes_nothing(agi, tmp_path):
    hooks = settings(tmp_path, {"Stop": entry("cat >/dev/null; sleep 0.3", asyncRewake=True)})
    with FakeModel(text("done")) as server:
        r = agi("--hooks", hooks, "go", server=server)
    assert r.returncode == 0 and r.stdout == "done\n" and len(server.requests) == 1


# -- events ---------------------------------------------------------------------------------------


def test_post_tool_use_failure_and_session_end_payloads(agi, tmp_path):
    fail, end = recorder(tmp_path, "fail"), recorder(tmp_path, "end")
    hooks = settings(
        tmp_path, {"PostToolUseFailure": entry(fail, "Read"), "SessionEnd": entry(end)}
    )
    with FakeModel(call("Read", file_path=str(tmp_path / "missing")), text("ok")) as server:
        r = agi("--hooks", hooks, "go", server=server)
    assert r.returncode == 0, r.stderr
    [failure] = payloads(tmp_path, "fail")
    assert failure["hook_event_name"] == "PostToolUseFailure" and failure["tool_name"] == "Read"
    assert failure["error"].startswith("Error:") and failure["is_interrupt"] is False
    assert "tool_response" not in failure and failure["tool_use_id"]
    [ended] = payloads(tmp_path, "end")
    assert ended["hook_event_name"] == "SessionEnd" and ended["reason"] == "other"


def test_session_end_in_the_repl_says_prompt_input_exit(agi, tmp_path):
    end = recorder(tmp_path, "end")
    hooks = settings(tmp_path, {"SessionEnd": entry(end, "prompt_input_exit")})
    with FakeModel(text("hi")) as server:
        r = agi("--hooks", hooks, "--repl", server=server, input="hello\n")
    assert r.returncode == 0, r.stderr
    assert [p["reason"] for p in payloads(tmp_path, "end")] == ["prompt_input_exit"]


def test_permission_request_hooks_answer_for_the_user(agi, tmp_path):
    allow = json.dumps(
        {
            "hookSpecificOutput": {
                "hookEventName": "PermissionRequest",
                "decision": {"behavior": "allow"},
            }
        }
    )
    deny = json.dumps(
        {
            "hookSpecificOutput": {
                "hookEventName": "PermissionRequest",
                "decision": {"behavior": "deny", "message": "not rm"},
            }
        }
    )
    record = recorder(tmp_path, "asked")
    hooks = settings(
        tmp_path,
        {
            "PermissionRequest": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": record}]},
                {
                    "matcher": "Bash",
                    "hooks": [{"type": "command", "command": f"echo '{allow}'"}],
                },
            ]
        },
    )
    hooks_deny = settings(
        tmp_path, {"PermissionRequest": entry(f"echo '{deny}'", "Bash")}, name="deny.json"
    )
    line = "git status --short || echo fine"
    with FakeModel(
        call("Bash", command=line), text("ok"), call("Bash", command=line), text("ok")
    ) as server:
        r = agi("--hooks", hooks, "--ask", "Bash(git status:*)", "go", server=server)
        denied = agi("--hooks", hooks_deny, "--ask", "Bash(git status:*)", "go", server=server)
    assert r.returncode == 0 and denied.returncode == 0, r.stderr + denied.stderr
    assert "denied" not in tool_results(server.requests[1])[0]
    assert tool_results(server.requests[3])[0] == (
        "Error: denied by a PermissionRequest hook: not rm"
    )
    [asked] = payloads(tmp_path, "asked")
    assert asked["tool_name"] == "Bash" and asked["permission_mode"] == "default"
    assert asked["permission_suggestions"][0]["rules"] == [  # one rule per command of the line
        {"toolName": "Bash", "ruleContent": "git status:*"},
        {"toolName": "Bash", "ruleContent": "echo:*"},
    ]


# -- commands in sub-directories, SlashCommand -------------------------------------------------


def command_file(path: Path, body: str, **meta) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    head = "".join(f"{k}: {v}\n" for k, v in meta.items())
    path.write_text(f"---\n{head}---\n{body}" if meta else body)


def test_commands_in_sub_directories_are_named_by_file(agi, tmp_path):
    command_file(tmp_path / "commands" / "git" / "commit.md", "Commit: $ARGUMENTS", description="c")
    plugin = tmp_path / "demo"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text('{"name": "demo"}')
    command_file(plugin / "commands" / "review" / "sec.md", "Review security of $ARGUMENTS")
    with FakeModel(text("ok")) as server:
        one = agi("/commit fix the bug", server=server)
        two = agi("--plugin-dir", str(plugin), "/demo:sec src/", server=server)
        three = agi("--plugin-dir", str(plugin), "/sec lib/", server=server)
    assert one.returncode == two.returncode == three.returncode == 0, one.stderr + two.stderr
    prompts = [r["messages"][-1]["content"] for r in server.requests]
    assert prompts == ["Commit: fix the bug", "Review security of src/", "Review security of lib/"]
    listed = agi("--plugin-dir", str(plugin), "--list-extensions")
    assert "/commit  c (git)" in listed.stdout and "/demo:sec  (review)" in listed.stdout


def test_the_model_runs_a_command_with_slash_command(agi, tmp_path):
    command_file(tmp_path / "commands" / "greet.md", "Greet $1 warmly.", description="greet")
    command_file(
        tmp_path / "commands" / "deploy.md",
        "Deploy now.",
        description="deploy",
        **{"disable-model-invocation": "true"},
    )
    with FakeModel(
        call("SlashCommand", command="/greet Ada"),
        call("SlashCommand", command="/deploy"),
        text("done"),
    ) as server:
        r = agi("go", server=server)
    assert r.returncode == 0, r.stderr
    [tool] = [t for t in server.requests[0]["tools"] if t["function"]["name"] == "SlashCommand"]
    assert "/greet" in tool["function"]["description"]
    assert "/deploy" not in tool["function"]["description"]
    results = tool_results(server.requests[2])
    assert "Greet Ada warmly." in results[0]
    assert results[1].startswith("Error: unknown command /deploy")
    listed = agi("--list-extensions")
    assert "/deploy  deploy [the model cannot run it]" in listed.stdout


# -- permission modes -----------------------------------------------------------------------------


def test_plan_offers_only_tools_that_change_nothing(agi, tmp_path):
    target = tmp_path / "f.txt"
    with FakeModel(call("Write", file_path=str(target), content="x"), text("planned")) as server:
        r = agi("--permission-mode", "plan", "go", server=server)
    assert r.returncode == 0, r.stderr
    offered = tool_names(server.requests[0])
    assert "Read" in offered and not {"Bash", "Write", "Edit", "Terminal"} & set(offered)
    assert not target.exists()
    assert (
        "permission mode plan offers only tools that change nothing"
        in tool_results(server.requests[1])[0]
    )


def test_accept_edits_runs_edits_inside_and_asks_about_the_rest(agi, tmp_path):
    inside, outside = tmp_path / "work" / "a.txt", tmp_path / "b.txt"
    inside.parent.mkdir()
    with FakeModel(
        calls(
            ("Write", {"file_path": str(inside), "content": "in"}),
            ("Write", {"file_path": str(outside), "content": "out"}),
            ("Bash", {"command": "echo ran"}),
            ("Read", {"file_path": str(inside)}),
        ),
        text("ok"),
    ) as server:
        r = agi("--permission-mode", "acceptEdits", "go", server=server, cwd=inside.parent)
    assert r.returncode == 0, r.stderr
    results = tool_results(server.requests[1])
    assert inside.read_text() == "in" and not outside.exists()
    asks = (
        "Error: denied: permission mode acceptEdits asks for approval and no one is at the terminal"
    )
    assert results[1] == asks and results[2] == asks
    assert results[3].startswith("Error: No such file")  # reading changes nothing: it ran


def test_bypass_permissions_runs_all_but_ask_rules_still_ask(agi, tmp_path):
    with FakeModel(
        calls(("Bash", {"command": "echo free"}), ("Bash", {"command": "echo guarded"})),
        text("ok"),
    ) as server:
        r = agi(
            "--permission-mode",
            "bypassPermissions",
            "--ask",
            "Bash(echo guarded)",
            "go",
            server=server,
        )
    assert r.returncode == 0, r.stderr
    results = tool_results(server.requests[1])
    assert results[0] == "free" and "asks for approval and no one is at the terminal" in results[1]


def test_default_mode_keeps_running_what_no_rule_decides(agi, tmp_path):
    with FakeModel(call("Bash", command="echo ran"), text("ok")) as server:
        r = agi("--permission-mode", "default", "go", server=server)
    assert r.returncode == 0 and tool_results(server.requests[1]) == ["ran"], r.stderr


def test_default_mode_from_settings_and_config_and_hooks_see_it(agi, tmp_path):
    record = recorder(tmp_path, "pre")
    path = settings(tmp_path, {"PreToolUse": entry(record)}, permissions={"defaultMode": "plan"})
    with FakeModel(call("Read", file_path=path), text("ok")) as server:
        r = agi("--settings", path, "go", server=server)
    assert r.returncode == 0, r.stderr
    assert "Bash" not in tool_names(server.requests[0])
    assert payloads(tmp_path, "pre")[0]["permission_mode"] == "plan"
    (tmp_path / "config.toml").write_text('permission_mode = "acceptEdits"\n')
    with FakeModel(call("Bash", command="echo x"), text("ok")) as server:
        r = agi("go", server=server)
    assert "permission mode acceptEdits asks" in tool_results(server.requests[1])[0]
    bad = agi("--permission-mode", "yolo", "go")
    assert bad.returncode == 2


def test_a_hook_ask_without_a_terminal_is_a_denial_and_notifies_no_one(agi, tmp_path):
    ask = json.dumps(
        {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "ask",
                "permissionDecisionReason": "risky",
            }
        }
    )
    notify = recorder(tmp_path, "notify")
    hooks = settings(
        tmp_path, {"PreToolUse": entry(f"echo '{ask}'", "Bash"), "Notification": entry(notify)}
    )
    with FakeModel(call("Bash", command="echo x"), text("ok")) as server:
        r = agi("--hooks", hooks, "go", server=server)
    assert r.returncode == 0, r.stderr
    assert tool_results(server.requests[1])[0] == (
        "Error: denied: a PreToolUse hook asks for approval (risky) and no one is at the terminal"
    )
    assert payloads(tmp_path, "notify") == []


def test_on_a_terminal_accept_edits_asks_and_notification_fires(env, tmp_path):
    from test_permissions import run_on_terminal

    marker = tmp_path / "marker"
    notify = recorder(tmp_path, "notify")
    hooks = settings(tmp_path, {"Notification": entry(notify, "permission_prompt")})
    with FakeModel(call("Bash", command=f"touch {marker}"), text("ok")) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="fake", TERM="dumb")
        code, screen = run_on_terminal(
            ["-q", "--hooks", hooks, "--permission-mode", "acceptEdits", "go"],
            env,
            tmp_path,
            b"y\n",
        )
    assert code == 0, screen
    assert "permission mode acceptEdits asks for approval" in screen and marker.exists()
    [note] = payloads(tmp_path, "notify")
    assert note["notification_type"] == "permission_prompt"
    assert note["message"] == "agi needs your permission to use Bash"


def test_if_on_an_event_without_a_tool_call_never_runs_and_says_so(agi, tmp_path):
    marker = tmp_path / "ran"
    hooks = settings(tmp_path, {"Stop": entry(f"touch {marker}", **{"if": "Bash(ls:*)"})})
    with FakeModel(text("done")) as server:
        r = agi("--hooks", hooks, "go", server=server)
    assert r.returncode == 0 and not marker.exists()
    assert "`if` applies to tool events only" in r.stderr


def test_a_hook_that_answers_async_goes_on_in_the_background(agi, tmp_path):
    marker = tmp_path / "finished"
    hook_cmd = f'echo \'{{"async": true, "asyncTimeout": 20000}}\'; sleep 2; touch {marker}'
    hooks = settings(tmp_path, {"SessionStart": entry(hook_cmd)})
    seen = []

    def answer(body):
        seen.append(marker.exists())
        return text("ok")

    with FakeModel(answer) as server:
        r = agi("--hooks", hooks, "go", server=server)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr
    assert seen == [False]  # the model was asked while the hook still ran
    assert '"async"' not in server.requests[0]["messages"][-1]["content"]  # no context from it


def test_an_async_rewake_hook_may_name_its_own_summary(agi, tmp_path):
    line = json.dumps({"rewakeSummary": "2 findings"})
    command = f"cat >/dev/null; echo '{line}'; echo 'fix it' >&2; exit 2"
    hooks = settings(tmp_path, {"Stop": entry(command, asyncRewake=True, rewakeSummary="x")})
    with FakeModel(text("first"), text("second")) as server:
        r = agi("--hooks", hooks, "--max-steps", "2", "go", server=server)
    assert "2 findings" in r.stderr
    assert "fix it" in server.requests[1]["messages"][-1]["content"]


def test_suggested_rules_are_written_as_claude_code_writes_them():
    from agi.policy.guard import suggest_rule

    assert suggest_rule("Bash", {"command": "git commit -m 'x y'"}) == "Bash(git commit:*)"
    assert suggest_rule("Bash", {"command": "FOO=1 npm run build"}) == "Bash(npm run:*)"
    assert suggest_rule("Bash", {"command": "echo hi"}) == "Bash(echo:*)"
    # global options before the subcommand keep the subcommand in the rule (docs: permissions)
    assert suggest_rule("Bash", {"command": "git -C x status"}) == "Bash(git status:*)"
    assert suggest_rule("Write", {"file_path": "/x"}) == "Write"


def test_an_always_answer_is_remembered_for_the_session(tmp_path):
    from agi.policy.guard import Guard
    from agi.policy.permissions import Permissions

    asked = []

    def ask(request):
        asked.append(request.suggestion)
        return "allow_always" if request.tool == "Bash" else "reject_always"

    learned = []
    guard = Guard(Permissions([], "acceptEdits"), ask=ask, on_learn=learned.append)
    cwd = str(tmp_path)
    assert guard.check("1", "Bash", {"command": "git commit -m a"}, cwd) is None
    assert guard.check("2", "Bash", {"command": "git commit -m b"}, cwd) is None
    assert guard.check("3", "Bash", {"command": "git push"}, cwd) is None  # asks again
    outside = {"file_path": "/elsewhere/f", "content": ""}
    assert "the user said no" in guard.check("4", "Write", outside, cwd)
    assert guard.check("5", "Write", outside, cwd).startswith("Error: denied by permission rule")
    assert asked == ["Bash(git commit:*)", "Bash(git push:*)", "Write"]
    assert [(r.kind, r.text) for r in learned] == [
        ("allow", "Bash(git commit:*)"),
        ("allow", "Bash(git push:*)"),
        ("deny", "Write"),
    ]
    guard.set_mode("plan")
    assert not guard.offers("Bash") and guard.offers("Read")
