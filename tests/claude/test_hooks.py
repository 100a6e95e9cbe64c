"""Hooks engine: real hook scripts under tests/hooks run with `sh -c` on Claude Code's payloads."""

from __future__ import annotations

import json
import os
import pty
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agi.claude.hooks.run import (
    Hooks,
    HookSettingsError,
    base_payload,
    load_hooks,
    read_env_file,
    resolve_ask,
)
from agi.errors import ConfigError

from conftest import FIXTURES, intervals, overlap, timed

SCRIPTS = Path(__file__).parents[1] / "hooks"
PAYLOADS = FIXTURES / "hooks" / "payloads"


def cmd(script: str, *args: object) -> str:
    """The settings-file command that runs a script of tests/hooks with arguments."""
    runner = sys.executable if script.endswith(".py") else "sh"
    return shlex.join([runner, str(SCRIPTS / script), *map(str, args)])


def group(*commands: str, matcher: Any = None, timeout: float | None = None) -> dict[str, Any]:
    entries: list[dict[str, Any]] = [{"type": "command", "command": c} for c in commands]
    for entry in entries:
        if timeout is not None:
            entry["timeout"] = timeout
    return {"hooks": entries} if matcher is None else {"matcher": matcher, "hooks": entries}


def write(path: Path, hooks: Any) -> Path:
    path.write_text(json.dumps({"hooks": hooks}))
    return path


def load(tmp_path: Path, **events: list[dict[str, Any]]) -> Hooks:
    return load_hooks([write(tmp_path / "hooks.json", events)], project_dir=tmp_path)


def payload(name: str) -> dict[str, Any]:
    return json.loads((PAYLOADS / f"{name}.json").read_text())


# -- payloads, environment, records -------------------------------------------------------------


EVENT_FIXTURES = [
    "pretooluse_bash_ls",
    "pretooluse_edit_env",
    "pretooluse_mcp",
    "posttooluse_bash",
    "posttoolusefailure_bash",
    "userpromptsubmit",
    "stop",
    "subagentstop",
    "sessionstart_startup",
    "sessionend",
]


@pytest.mark.parametrize("name", EVENT_FIXTURES)
def test_hook_receives_the_payload_on_stdin_in_the_project_dir(tmp_path: Path, name: str) -> None:
    data = payload(name)
    event = data["hook_event_name"]
    hooks = load(tmp_path, **{event: [group(cmd("record.sh", tmp_path))]})
    outcome = hooks.run(event, data)
    assert json.loads((tmp_path / "stdin.json").read_text()) == data
    env = dict(line.split("=", 1) for line in (tmp_path / "env").read_text().splitlines())
    assert env["pwd"] == env["CLAUDE_PROJECT_DIR"] == env["AGI_PROJECT_DIR"] == str(tmp_path)
    assert (env["CLAUDE_ENV_FILE"] != "unset") == (event == "SessionStart")
    assert not outcome.blocked and not outcome.stop and not outcome.messages
    common = {k: data[k] for k in ("session_id", "transcript_path", "cwd", "hook_event_name")}
    if "permission_mode" in data:
        common["permission_mode"] = data["permission_mode"]
    assert base_payload(data["session_id"], data["transcript_path"], data["cwd"], event) == common


def test_every_run_is_recorded_for_the_trace(tmp_path: Path) -> None:
    hooks = load(
        tmp_path,
        PreToolUse=[group(cmd("say.sh", 0, "out", "err"), cmd("say.sh", 3, "", "bad"))],
    )
    data = payload("pretooluse_bash_ls")
    runs = hooks.run("PreToolUse", data).runs
    assert [r["exit_code"] for r in runs] == [0, 3]
    first = runs[0]
    assert first["event"] == "PreToolUse" and first["command"] == cmd("say.sh", 0, "out", "err")
    assert first["input"] == data and first["stdout"] == "out\n" and first["stderr"] == "err\n"
    assert first["timed_out"] is False and first["seconds"] >= 0  # how long: bench/, not here
    assert first["source"] == str(tmp_path / "hooks.json")
    json.dumps(runs)  # trace records are plain JSON


def test_no_matching_hook_runs_nothing(tmp_path: Path) -> None:
    hooks = load(tmp_path, PreToolUse=[group(cmd("guard_rm.sh"), matcher="Write")])
    assert hooks and hooks.has("PreToolUse") and not hooks.has("Stop")
    outcome = hooks.run("PreToolUse", payload("pretooluse_bash_rm_rf"))
    assert outcome.runs == [] and not outcome.blocked
    assert not load_hooks([], project_dir=tmp_path)
    assert hooks.run("PreCompact", payload("precompact")).runs == []  # known, none configured
    with pytest.raises(ValueError, match="unknown hook event"):
        hooks.run("NoSuchEvent", payload("precompact"))


# -- matchers ------------------------------------------------------------------------------------


def fired(hooks: Hooks, name: str) -> list[str]:
    """Which labelled hooks (context.sh LABEL) ran for a fixture payload."""
    data = payload(name)
    return hooks.run(data["hook_event_name"], data).context


def test_string_matchers(tmp_path: Path) -> None:
    labels = {
        "bash": "Bash",
        "either": "Edit|Write",
        "star": "*",
        "empty": "",
        "omitted": None,
        "mcp": "mcp__memory__.*",
        "anchored": "^(Read|Task)$",
        "prefix": "Edi",  # a plain name is an exact name, not a prefix
    }
    groups = [group(cmd("context.sh", label), matcher=m) for label, m in labels.items()]
    hooks = load(tmp_path, PreToolUse=groups, PostToolUse=groups)
    always = ["star", "empty", "omitted"]
    assert fired(hooks, "pretooluse_bash_ls") == ["bash", *always]
    assert fired(hooks, "pretooluse_edit_env") == ["either", *always]
    assert fired(hooks, "pretooluse_write_ok") == ["either", *always]
    assert fired(hooks, "pretooluse_mcp") == [*always, "mcp"]
    assert fired(hooks, "pretooluse_read") == [*always, "anchored"]
    assert fired(hooks, "pretooluse_task") == [*always, "anchored"]
    assert fired(hooks, "posttooluse_write") == ["either", *always]


def test_regex_matchers_search_like_claude_code(tmp_path: Path) -> None:
    hooks = load(tmp_path, PreToolUse=[group(cmd("context.sh", "x"), matcher="ash.*")])
    assert fired(hooks, "pretooluse_bash_ls") == ["x"]  # unanchored, as RegExp.test


def test_object_matchers_test_named_arguments(tmp_path: Path) -> None:
    hooks = load(
        tmp_path,
        PreToolUse=[
            group(cmd("context.sh", "rm"), matcher={"tool": "Bash", "input": {"command": "^rm "}}),
            group(
                cmd("context.sh", "env"),
                matcher={"tool": "Edit", "input": {"file_path": r"\.env$"}},
            ),
            group(
                cmd("context.sh", "debug"),
                matcher={
                    "tool": "Edit",
                    "input": {"file_path": "project/", "new_string": "DEBUG=1"},
                },
            ),
            group(cmd("context.sh", "dots"), matcher={"input": {"file_path": r"\.\./"}}),
            group(cmd("context.sh", "missing"), matcher={"tool": "Bash", "input": {"nope": "."}}),
            group(cmd("context.sh", "timeout"), matcher={"input": {"timeout": "^120000$"}}),
        ],
    )
    assert fired(hooks, "pretooluse_bash_rm_rf") == ["rm"]
    assert fired(hooks, "pretooluse_bash_ls") == []
    assert fired(hooks, "pretooluse_bash_sudo") == []
    assert fired(hooks, "pretooluse_edit_env") == ["env", "debug"]
    assert fired(hooks, "pretooluse_edit_traversal") == ["dots"]  # new_string "b": no debug
    assert fired(hooks, "pretooluse_bash_grep") == ["timeout"]  # numbers are matched as JSON


def test_session_start_matches_the_source_and_other_events_ignore_matchers(tmp_path: Path) -> None:
    hooks = load(
        tmp_path,
        SessionStart=[
            group(cmd("context.sh", "startup"), matcher="startup"),
            group(cmd("context.sh", "resume"), matcher="resume"),
        ],
        UserPromptSubmit=[group(cmd("context.sh", "prompt"), matcher="Bash")],
        Stop=[group(cmd("context.sh", "stop"), matcher="Nothing")],
    )
    assert fired(hooks, "sessionstart_startup") == ["startup"]
    resumed = {**payload("sessionstart_startup"), "source": "resume"}
    assert hooks.run("SessionStart", resumed).context == ["resume"]
    assert fired(hooks, "userpromptsubmit") == ["prompt"]
    assert fired(hooks, "stop") == ["stop"]


def test_subagent_stop_matches_the_agent_type_and_session_end_the_reason(tmp_path: Path) -> None:
    hooks = load(
        tmp_path,
        SubagentStop=[
            group(cmd("context.sh", "explore"), matcher="Explore"),
            group(cmd("context.sh", "plan"), matcher="Plan"),
        ],
        SessionEnd=[group(cmd("context.sh", "exit"), matcher="prompt_input_exit|other")],
    )
    assert fired(hooks, "subagentstop") == ["explore"]
    assert fired(hooks, "sessionend") == ["exit"]
    assert hooks.run("SessionEnd", {**payload("sessionend"), "reason": "clear"}).runs == []


def test_identical_commands_run_once(tmp_path: Path) -> None:
    spec = {"PreToolUse": [group(cmd("context.sh", "once"), matcher="Bash")]}
    files = [write(tmp_path / "a.json", spec), write(tmp_path / "b.json", spec)]
    hooks = load_hooks(files, project_dir=tmp_path)
    outcome = hooks.run("PreToolUse", payload("pretooluse_bash_ls"))
    assert outcome.context == ["once"] and len(outcome.runs) == 1


# -- PreToolUse decisions ------------------------------------------------------------------------


def test_exit_2_blocks_with_stderr_as_the_reason(tmp_path: Path) -> None:
    hooks = load(tmp_path, PreToolUse=[group(cmd("guard_rm.sh"), matcher="Bash")])
    blocked = hooks.run("PreToolUse", payload("pretooluse_bash_rm_rf"))
    assert blocked.blocked and blocked.permission == "deny"
    assert blocked.reason == "rm is not allowed here; move files to ./trash instead"
    allowed = hooks.run("PreToolUse", payload("pretooluse_bash_ls"))
    assert not allowed.blocked and allowed.permission is None and allowed.reason == ""


def test_json_deny_blocks_with_its_reason(tmp_path: Path) -> None:
    hooks = load(tmp_path, PreToolUse=[group(cmd("decide.sh", "deny", "no writes to /etc"))])
    outcome = hooks.run("PreToolUse", payload("pretooluse_write_etc"))
    assert (
        outcome.blocked and outcome.permission == "deny" and outcome.reason == "no writes to /etc"
    )


def test_legacy_decisions_map_to_allow_and_deny(tmp_path: Path) -> None:
    block = json.dumps({"decision": "block", "reason": "old style"})
    hooks = load(tmp_path, PreToolUse=[group(cmd("say.sh", 0, block))])
    outcome = hooks.run("PreToolUse", payload("pretooluse_bash_ls"))
    assert outcome.blocked and outcome.permission == "deny" and outcome.reason == "old style"
    approve = json.dumps({"decision": "approve", "reason": "fine", "suppressOutput": True})
    hooks = load(tmp_path, PreToolUse=[group(cmd("say.sh", 0, approve))])
    outcome = hooks.run("PreToolUse", payload("pretooluse_bash_ls"))
    assert not outcome.blocked and outcome.permission == "allow"
    assert outcome.runs[0]["suppress_output"] is True


def test_ask_carries_its_reason_for_the_question(tmp_path: Path) -> None:
    hooks = load(tmp_path, PreToolUse=[group(cmd("decide.sh", "ask", "sudo needs a person"))])
    outcome = hooks.run("PreToolUse", payload("pretooluse_bash_sudo"))
    assert outcome.permission == "ask" and not outcome.blocked
    assert outcome.reason == "sudo needs a person"


@pytest.mark.parametrize(
    ("decisions", "expected"),
    [
        (["allow", "ask", "deny"], "deny"),
        (["deny", "allow"], "deny"),
        (["allow", "ask"], "ask"),
        (["ask", "allow", "allow"], "ask"),
        (["allow"], "allow"),
    ],
)
def test_deny_beats_ask_beats_allow(tmp_path: Path, decisions: list[str], expected: str) -> None:
    commands = [cmd("decide.sh", d, f"hook {i} says {d}") for i, d in enumerate(decisions)]
    outcome = load(tmp_path, PreToolUse=[group(*commands)]).run(
        "PreToolUse", payload("pretooluse_bash_ls")
    )
    assert outcome.permission == expected and outcome.blocked == (expected == "deny")
    assert len(outcome.runs) == len(decisions)
    if expected != "allow":
        assert f"says {expected}" in outcome.reason


def test_exit_2_beats_allow(tmp_path: Path) -> None:
    hooks = load(tmp_path, PreToolUse=[group(cmd("decide.sh", "allow", "ok"), cmd("guard_rm.sh"))])
    outcome = hooks.run("PreToolUse", payload("pretooluse_bash_rm_rf"))
    assert outcome.blocked and outcome.permission == "deny" and outcome.reason.startswith("rm is")


def test_hooks_run_in_parallel(tmp_path: Path) -> None:
    log = tmp_path / "intervals"
    hook = 'cat >/dev/null; {}; echo \'{{"systemMessage": "slept"}}\''
    both = [hook.format(timed(name, log, "sleep 0.5")) for name in ("a", "b")]
    outcome = load(tmp_path, Stop=[group(*both)]).run("Stop", payload("stop"))
    assert len(outcome.runs) == 2 and outcome.messages == ["slept", "slept"]
    ran = intervals(log)
    assert overlap(ran["a"], ran["b"]), ran


def test_updated_input_replaces_the_input(tmp_path: Path) -> None:
    hooks = load(tmp_path, PreToolUse=[group(cmd("rewrite.py", "ls -la --color=never"))])
    outcome = hooks.run("PreToolUse", payload("pretooluse_bash_ls"))
    assert outcome.permission == "allow" and not outcome.blocked
    assert outcome.updated_input == {"command": "ls -la --color=never", "description": "List files"}


def test_identical_updated_inputs_agree_and_different_ones_refuse_the_call(tmp_path: Path) -> None:
    same = [cmd("rewrite.py", "ls"), cmd("rewrite.py", "ls") + " "]  # not deduplicated
    outcome = load(tmp_path, PreToolUse=[group(*same)]).run(
        "PreToolUse", payload("pretooluse_bash_ls")
    )
    assert outcome.updated_input == {"command": "ls", "description": "List files"}
    differ = [cmd("rewrite.py", "ls"), cmd("rewrite.py", "ls -a")]
    outcome = load(tmp_path, PreToolUse=[group(*differ)]).run(
        "PreToolUse", payload("pretooluse_bash_ls")
    )
    assert outcome.blocked and outcome.permission == "deny" and outcome.updated_input is None
    assert "different updatedInput" in outcome.reason and outcome.messages == [outcome.reason]


def test_a_denial_discards_updated_input(tmp_path: Path) -> None:
    hooks = load(
        tmp_path, PreToolUse=[group(cmd("rewrite.py", "ls"), cmd("decide.sh", "deny", "no"))]
    )
    outcome = hooks.run("PreToolUse", payload("pretooluse_bash_ls"))
    assert outcome.blocked and outcome.updated_input is None and outcome.reason == "no"


def test_plain_stdout_of_pretooluse_is_ignored(tmp_path: Path) -> None:
    hooks = load(tmp_path, PreToolUse=[group(cmd("say.sh", 0, "just chatting {not json"))])
    outcome = hooks.run("PreToolUse", payload("pretooluse_bash_ls"))
    assert not outcome.blocked and outcome.permission is None
    assert outcome.context == [] and outcome.messages == [] and outcome.updated_input is None


# -- context, stop, other events -----------------------------------------------------------------


def test_additional_context_is_collected_from_every_hook(tmp_path: Path) -> None:
    hooks = load(
        tmp_path,
        PostToolUse=[group(cmd("context.sh", "lint: clean"), cmd("context.sh", "tests: 3 passed"))],
    )
    outcome = hooks.run("PostToolUse", payload("posttooluse_bash"))
    assert outcome.context == ["lint: clean", "tests: 3 passed"] and not outcome.blocked


def test_plain_stdout_is_context_for_prompts_and_session_start(tmp_path: Path) -> None:
    hooks = load(
        tmp_path,
        UserPromptSubmit=[
            group(cmd("say.sh", 0, "Current branch: main"), cmd("context.sh", "json"))
        ],
        SessionStart=[group(cmd("say.sh", 0, "open issues: 3"))],
        PostToolUse=[group(cmd("say.sh", 0, "formatted"))],
    )
    assert fired(hooks, "userpromptsubmit") == ["Current branch: main", "json"]
    assert fired(hooks, "sessionstart_startup") == ["open issues: 3"]
    assert fired(hooks, "posttooluse_write") == []


@pytest.mark.parametrize(
    "hook",
    [
        cmd("say.sh", 2, "", "no secrets in prompts"),
        cmd("say.sh", 0, json.dumps({"decision": "block", "reason": "no secrets in prompts"})),
    ],
)
def test_user_prompt_submit_can_block(tmp_path: Path, hook: str) -> None:
    hooks = load(tmp_path, UserPromptSubmit=[group(hook, cmd("context.sh", "ctx"))])
    outcome = hooks.run("UserPromptSubmit", payload("userpromptsubmit_secret"))
    assert outcome.blocked and outcome.reason == "no secrets in prompts"


@pytest.mark.parametrize("event", ["PostToolUse", "PostToolUseFailure", "Stop", "SubagentStop"])
def test_block_gives_the_reason_to_the_model(tmp_path: Path, event: str) -> None:
    fixture = {
        "PostToolUse": "posttooluse_bash",
        "PostToolUseFailure": "posttoolusefailure_bash",
        "Stop": "stop",
        "SubagentStop": "subagentstop",
    }[event]
    block = json.dumps({"decision": "block", "reason": "run the tests first"})
    hooks = load(tmp_path, **{event: [group(cmd("say.sh", 0, block))]})
    outcome = hooks.run(event, payload(fixture))
    assert outcome.blocked and outcome.reason == "run the tests first" and not outcome.stop
    hooks = load(tmp_path, **{event: [group(cmd("say.sh", 2, "", "lint failed"))]})
    outcome = hooks.run(event, payload(fixture))
    assert outcome.blocked and outcome.reason == "lint failed"


def test_session_events_cannot_block(tmp_path: Path) -> None:
    hooks = load(
        tmp_path,
        SessionStart=[group(cmd("say.sh", 2, "", "too early"))],
        SessionEnd=[group(cmd("say.sh", 0, json.dumps({"decision": "block", "reason": "x"})))],
    )
    start = hooks.run("SessionStart", payload("sessionstart_startup"))
    assert not start.blocked and not start.stop
    # the message names the command cut to a length, so match its ends, not the checkout's path
    (message,) = start.messages
    assert message.startswith("SessionStart hook `") and message.endswith("`: too early"), message
    assert not hooks.run("SessionEnd", payload("sessionend")).blocked


def test_continue_false_stops_the_run_and_wins_over_block(tmp_path: Path) -> None:
    answer = {
        "continue": False,
        "stopReason": "budget spent",
        "decision": "block",
        "reason": "more",
    }
    hooks = load(
        tmp_path,
        Stop=[group(cmd("say.sh", 0, json.dumps(answer)))],
        PostToolUse=[
            group(cmd("say.sh", 0, json.dumps({"continue": False, "systemMessage": "bye"})))
        ],
    )
    outcome = hooks.run("Stop", payload("stop"))
    assert outcome.stop and outcome.stop_reason == "budget spent"
    outcome = hooks.run("PostToolUse", payload("posttooluse_write"))
    assert outcome.stop and outcome.stop_reason == "" and outcome.messages == ["bye"]


def test_answers_for_another_event_are_ignored(tmp_path: Path) -> None:
    wrong = {"hookSpecificOutput": {"hookEventName": "PostToolUse", "permissionDecision": "deny"}}
    hooks = load(tmp_path, PreToolUse=[group(cmd("say.sh", 0, json.dumps(wrong)))])
    outcome = hooks.run("PreToolUse", payload("pretooluse_bash_ls"))
    assert not outcome.blocked and outcome.permission is None
    assert "answered for PostToolUse" in outcome.messages[0]


def test_huge_context_is_capped(tmp_path: Path) -> None:
    hooks = load(tmp_path, UserPromptSubmit=[group(f"{sys.executable} -c \"print('x' * 50000)\"")])
    (context,) = hooks.run("UserPromptSubmit", payload("userpromptsubmit")).context
    assert len(context) < 10_100 and context.endswith("[hook output truncated]")


# -- failures never kill the run -----------------------------------------------------------------


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text(errors="replace").rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_a_timed_out_hook_is_killed_with_its_children(tmp_path: Path) -> None:
    pidfile = tmp_path / "sleep.pid"
    hooks = load(
        tmp_path,
        PreToolUse=[
            group(cmd("sleepy.sh", 60, pidfile), timeout=1),
            group(cmd("decide.sh", "allow", "ok")),
        ],
    )
    start = time.monotonic()
    outcome = hooks.run("PreToolUse", payload("pretooluse_bash_ls"))
    assert 0.9 < time.monotonic() - start < 15  # waited for the timeout; a hang guard
    assert not outcome.blocked and outcome.permission == "allow"
    assert outcome.runs[0]["timed_out"] and outcome.runs[0]["exit_code"] == -9
    assert len(outcome.messages) == 1 and "timed out after 1 s" in outcome.messages[0]
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


def test_an_interrupt_kills_the_running_hooks(tmp_path: Path) -> None:
    pidfile = tmp_path / "sleep.pid"
    settings = write(tmp_path / "hooks.json", {"Stop": [group(cmd("sleepy.sh", 60, pidfile))]})
    program = (
        "import sys; from pathlib import Path; from agi.claude.hooks.run import load_hooks\n"
        f"hooks = load_hooks([Path({str(settings)!r})])\n"
        "try:\n    hooks.run('Stop', {})\n"
        "except KeyboardInterrupt:\n    print('interrupted')\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=15)  # a hang guard: the hook sleeps 60 s
    assert out == "interrupted\n"
    pid = int(pidfile.read_text())
    while alive(pid) and time.monotonic() < start + 10:
        time.sleep(0.05)
    assert not alive(pid)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (cmd("say.sh", 1, "", "Traceback: boom"), "failed with exit code 1: Traceback: boom"),
        ("agi-no-such-hook-command --flag", "failed with exit code 127"),
        (cmd("say.sh", 0, '{"continue": false'), None),  # broken JSON is plain text: ignored
    ],
)
def test_a_crashing_hook_is_a_warning(tmp_path: Path, command: str, expected: str | None) -> None:
    hooks = load(tmp_path, PreToolUse=[group(command, cmd("context.sh", "still here"))])
    outcome = hooks.run("PreToolUse", payload("pretooluse_bash_ls"))
    assert not outcome.blocked and not outcome.stop and outcome.context == ["still here"]
    if expected is None:
        assert outcome.messages == []
    else:
        (message,) = outcome.messages
        assert message.startswith("PreToolUse hook `") and expected in message


def test_a_hook_that_cannot_start_is_a_warning(tmp_path: Path) -> None:
    hooks = load_hooks(
        [write(tmp_path / "h.json", {"Stop": [group("true")]})],
        project_dir=tmp_path / "gone",
    )
    outcome = hooks.run("Stop", payload("stop"))
    assert not outcome.blocked and outcome.runs[0]["exit_code"] is None
    assert "cannot start" in outcome.messages[0]


# -- settings files ------------------------------------------------------------------------------


def stop(*entries: Any) -> dict[str, Any]:
    return {"hooks": {"Stop": [{"hooks": list(entries)}]}}


def pre(matcher: Any) -> dict[str, Any]:
    return {"hooks": {"PreToolUse": [{"matcher": matcher, "hooks": []}]}}


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "No such file"),
        ("{not json", "invalid JSON at line 1"),
        ([], "top level must be a JSON object"),
        ({"hooks": []}, '"hooks" must be an object'),
        ({"hooks": {"PreToolUse": {}}}, "hooks.PreToolUse must be a list"),
        ({"hooks": {"Stop": [{"matcher": ""}]}}, 'hooks.Stop[0] must be an object with a "hooks"'),
        (stop("echo"), "hooks.Stop[0].hooks[0] must be an object"),
        (stop({"command": "x"}), '"type": "command"'),
        (stop({"type": "command"}), "command must be a non-empty"),
        (stop({"type": "command", "command": "x", "timeout": "5"}), "timeout must be a positive"),
        (stop({"type": "command", "command": "x", "timeout": 0}), "timeout must be a positive"),
        (pre("Bash("), "invalid regex 'Bash('"),
        (pre(3), "must be a string or an object"),
        (
            pre({"tool": "Bash", "input": {"command": "[rm"}}),
            "matcher.input.command: invalid regex",
        ),
        (pre({"tool": "Bash", "input": {"command": 1}}), "must map argument names to regex"),
        (pre({"tool": "Bash", "args": {}}), 'only "tool" and "input"'),
        (
            {"hooks": {"Stop": [{"matcher": {"tool": "Bash"}, "hooks": []}]}},
            "object matchers apply to tool events only",
        ),
    ],
)
def test_malformed_settings_name_the_file(tmp_path: Path, content: Any, problem: str) -> None:
    path = tmp_path / "settings.json"
    if content is not None:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(HookSettingsError) as caught:
        load_hooks([path])
    assert isinstance(caught.value, ConfigError) and caught.value.exit_code == 2
    message = str(caught.value)
    assert message.startswith(f"hooks file {path}: ") and problem in message


def test_claude_code_settings_with_more_than_agi_runs_load_with_warnings(tmp_path: Path) -> None:
    settings = {
        "permissions": {"allow": ["Bash(ls:*)"]},
        "hooks": {
            "SubagentStart": [group("notify-send hi")],
            "Stop": [
                {
                    "hooks": [
                        {"type": "http", "url": "http://localhost/x"},
                        {"type": "command", "command": "true"},
                    ]
                }
            ],
        },
    }
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(settings))
    hooks = load_hooks([path], project_dir=tmp_path)
    assert hooks.has("Stop") and not hooks.has("PreToolUse")
    assert len(hooks.warnings) == 2 and all(
        w.startswith(f"hooks file {path}") for w in hooks.warnings
    )
    assert "'SubagentStart'" in hooks.warnings[0] and "no http hooks" in hooks.warnings[1]
    assert not load_hooks([write(tmp_path / "empty.json", {})], project_dir=tmp_path)


# -- CLAUDE_ENV_FILE ----------------------------------------------------------------------------


def test_session_start_exports_reach_later_bash_calls(tmp_path: Path) -> None:
    hooks = load(tmp_path, SessionStart=[group(cmd("set_env.sh"), cmd("record.sh", tmp_path))])
    outcome = hooks.run("SessionStart", payload("sessionstart_startup"))
    assert outcome.context == ["the build uses make"]
    assert outcome.env == {
        "AGI_TEST_GREETING": "hello world",
        "AGI_TEST_PLAIN": "plain",
        "PATH": "/opt/agi-test/bin:" + os.environ["PATH"],
    }
    env = dict(line.split("=", 1) for line in (tmp_path / "env").read_text().splitlines())
    assert not Path(env["CLAUDE_ENV_FILE"]).exists()  # agi's own temporary file is gone


def test_a_given_env_file_is_used_and_kept(tmp_path: Path) -> None:
    env_file = tmp_path / "session.env"
    hooks = load(tmp_path, SessionStart=[group(cmd("set_env.sh"))])
    outcome = hooks.run(
        "SessionStart", payload("sessionstart_startup"), env={"CLAUDE_ENV_FILE": str(env_file)}
    )
    assert outcome.env["AGI_TEST_GREETING"] == "hello world"
    assert env_file.exists() and "AGI_TEST_GREETING" in env_file.read_text()


def test_read_env_file(tmp_path: Path) -> None:
    path = tmp_path / "env.sh"
    assert read_env_file(path) == {}
    path.write_text(
        "export A=1\nexport B='two words'\nexport C=\"$A-$HOME\"\nD=4\necho noise\n"
        "export HOME=/elsewhere\n"
    )
    base = {"HOME": "/home/me", "PATH": os.environ["PATH"]}
    assert read_env_file(path, base) == {
        "A": "1",
        "B": "two words",
        "C": "1-/home/me",
        "D": "4",
        "HOME": "/elsewhere",
    }
    path.write_text("export A=1\nif then fi (\n")
    with pytest.raises(ValueError, match="could not be sourced"):
        read_env_file(path, base)


# -- ask -----------------------------------------------------------------------------------------


def test_ask_without_a_person_is_a_no() -> None:
    assert resolve_ask("Allow Bash(sudo apt-get install -y jq)?", interactive=False) is False


@pytest.mark.parametrize(
    ("answer", "expected"), [(b"y\n", 0), (b"yes\n", 0), (b"n\n", 1), (b"\n", 1)]
)
def test_ask_reads_the_answer_from_the_terminal(answer: bytes, expected: int) -> None:
    pid, fd = pty.fork()
    if pid == 0:  # the child: the pty is its controlling terminal, /dev/tty
        os._exit(0 if resolve_ask("Allow Bash(sudo)?", interactive=True) else 1)
    shown = b""
    while b"[y/N]" not in shown:
        shown += os.read(fd, 1024)
    assert b"Allow Bash(sudo)? [y/N] " in shown
    os.write(fd, answer)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert os.waitstatus_to_exitcode(status) == expected
