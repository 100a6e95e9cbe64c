"""Claude Code plugins through the real `agi` (docs: permissions): a plugin directory in Claude
Code's layout, written here, whose hooks, skill, agent, command and MCP server all work; names
`PLUGIN:NAME` and bare; a loop plugin whose Stop hook reads Claude Code's transcript with jq;
transcript.jsonl; and bad plugin files."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from conftest import wait_for_file
from fakeserver import FakeModel, call, calls, text

MCP_SERVER = Path(__file__).parents[1] / "mcp_servers" / "server.py"
needs_jq = pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")


def write(path: Path, content: str, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    path.chmod(mode)
    return path


def make_plugin(root: Path, name: str = "demo", skill: str = "greeting") -> Path:
    """A plugin in Claude Code's layout; every command refers to its files through
    ${CLAUDE_PLUGIN_ROOT}, as real plugins do."""
    write(root / ".claude-plugin" / "plugin.json", json.dumps({"name": name, "version": "1.2.0"}))
    # `[[` is bash: under sh (dash) this hook would fail with exit 127
    context = '[[ -n "$CLAUDE_PLUGIN_ROOT" ]] && echo "plugin hook ran in $CLAUDE_PLUGIN_ROOT"'
    hooks = {
        "description": "test hooks",
        "hooks": {
            "UserPromptSubmit": [
                {"hooks": [{"type": "command", "command": context, "shell": "bash"}]},
                {"hooks": [{"type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/hooks/mark.sh"}]},
            ]
        },
    }
    write(root / "hooks" / "hooks.json", json.dumps(hooks))
    write(root / "hooks" / "mark.sh", '#!/bin/sh\ntouch "$CLAUDE_PLUGIN_ROOT/hook-ran"\n', 0o755)
    write(
        root / "skills" / skill / "SKILL.md",
        f"---\nname: {skill}\ndescription: Greets people warmly\n---\nSay hello from {name}.\n",
    )
    write(
        root / "agents" / "reviewer.md",
        "---\nname: reviewer\ndescription: Reviews code\ntools: Read, Grep\n---\n"
        f"You are the {name} reviewer.\n",
    )
    write(
        root / "commands" / "hello.md",
        "---\ndescription: Say hello\nargument-hint: NAME\n---\n"
        "Greet $1 (all arguments: $ARGUMENTS).\n\n"
        '```!\n"${CLAUDE_PLUGIN_ROOT}/scripts/setup.sh" $ARGUMENTS\n```\n',
    )
    write(
        root / "scripts" / "setup.sh",
        '#!/bin/bash\necho "setup got $# args: $*"\necho "root $CLAUDE_PLUGIN_ROOT"\n',
        0o755,
    )
    shutil.copy(MCP_SERVER, root / "server.py")
    server = {
        "command": sys.executable,
        "args": ["${CLAUDE_PLUGIN_ROOT}/server.py"],
        "env": {"MCP_START_LOG": "${CLAUDE_PLUGIN_ROOT}/starts.log"},
    }
    write(root / ".mcp.json", json.dumps({"mcpServers": {f"{name}-tools": server}}))
    return root


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def system(request: dict) -> str:
    return request["messages"][0]["content"]


def test_every_part_of_a_plugin_works_by_bare_names(agi, tmp_path):
    plugin = make_plugin(tmp_path / "demo-plugin")
    script = [
        call("Skill", skill="greeting"),
        call("Task", description="review", prompt="look", subagent_type="reviewer"),
        text("reviewed: fine"),  # the subagent's answer
        calls(("mcp__demo-tools__greet", {"name": "plugin"})),
        text("done"),
    ]
    with FakeModel(*script) as server:
        r = agi("--plugin-dir", str(plugin), "start", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"
    first = server.requests[0]
    assert f"plugin hook ran in {plugin}" in first["messages"][-1]["content"]
    assert (plugin / "hook-ran").exists()
    assert "demo:greeting: Greets people warmly" in system(first)
    tools = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert "demo:reviewer" in tools["Task"]["parameters"]["properties"]["subagent_type"]["enum"]
    assert "mcp__demo-tools__greet" in tools
    assert tool_results(server.requests[1])[0].startswith("Skill demo:greeting")
    assert "Say hello from demo." in tool_results(server.requests[1])[0]
    assert system(server.requests[2]) == "You are the demo reviewer."
    assert tool_results(server.requests[3])[-1] == "reviewed: fine"
    assert tool_results(server.requests[4])[-1] == "Hello, plugin!"
    assert (plugin / "starts.log").exists()  # ${CLAUDE_PLUGIN_ROOT} in the server's env


def test_qualified_names_work_and_a_clash_keeps_both_with_a_warning(agi, tmp_path):
    one = make_plugin(tmp_path / "one", "one")
    two = make_plugin(tmp_path / "two", "two")
    script = [
        call("Skill", skill="one:greeting"),
        call("Skill", skill="two:greeting"),
        call("Skill", skill="greeting"),
        text("done"),
    ]
    with FakeModel(*script) as server:
        r = agi("--plugin-dir", str(one), "--plugin-dir", str(two), "go", server=server)
    assert r.returncode == 0, r.stderr
    assert "the skill name greeting is in several plugins (one:greeting, two:greeting)" in r.stderr
    assert "the agent name reviewer is in several plugins" in r.stderr
    results = tool_results(server.requests[3])
    assert "Say hello from one." in results[0] and "Say hello from two." in results[1]
    assert results[2].startswith('Error: there is no skill named "greeting"')


def test_a_plugin_command_runs_its_shell_block_with_arguments(agi, tmp_path):
    plugin = make_plugin(tmp_path / "demo")
    with FakeModel(text("hi")) as server:
        r = agi("--plugin-dir", str(plugin), "/demo:hello Ada 'two words'", server=server)
        again = agi("--plugin-dir", str(plugin), "/hello Bob", server=server)
    assert r.returncode == 0 and again.returncode == 0, r.stderr + again.stderr
    prompt = server.requests[0]["messages"][-1]["content"]
    assert prompt.startswith("Greet Ada (all arguments: Ada 'two words').")
    assert "setup got 2 args: Ada two words" in prompt
    assert f"root {plugin}" in prompt and "```" not in prompt
    assert "Greet Bob" in server.requests[1]["messages"][-1]["content"]


LOOP_SETUP = """#!/bin/bash
# like a well-known loop plugin: remember the task and the iteration limit in a state file
set -euo pipefail
max=0; parts=()
while [[ $# -gt 0 ]]; do
  case $1 in --max-iterations) max=$2; shift 2;; *) parts+=("$1"); shift;; esac
done
mkdir -p .claude
printf -- '---\\niteration: 1\\nmax_iterations: %s\\n---\\n%s\\n' "$max" "${parts[*]}" \\
  > .claude/loop.local.md
echo "Loop started: ${parts[*]}"
"""

LOOP_STOP = """#!/bin/bash
# a Stop hook that reads the last assistant text from the transcript, as Claude Code hooks do
set -euo pipefail
input=$(cat)
state=.claude/loop.local.md
[[ -f $state ]] || exit 0
iteration=$(sed -n 's/^iteration: //p' "$state")
max=$(sed -n 's/^max_iterations: //p' "$state")
transcript=$(echo "$input" | jq -r .transcript_path)
last=$(grep '"role":"assistant"' "$transcript" | tail -1 |
  jq -r '.message.content | map(select(.type == "text")) | map(.text) | join("\\n")')
echo "$iteration: $last" >> .claude/seen.log
if [[ $iteration -ge $max ]]; then rm "$state"; exit 0; fi
sed -i "s/^iteration: .*/iteration: $((iteration + 1))/" "$state"
prompt=$(awk '/^---$/{i++; next} i>=2' "$state")
jq -n --arg prompt "$prompt" '{decision: "block", reason: $prompt}'
"""


def make_loop_plugin(root: Path) -> Path:
    write(root / ".claude-plugin" / "plugin.json", json.dumps({"name": "looper"}))
    stop = [{"hooks": [{"type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/hooks/stop.sh"}]}]
    write(root / "hooks" / "hooks.json", json.dumps({"hooks": {"Stop": stop}}))
    write(root / "hooks" / "stop.sh", LOOP_STOP, 0o755)
    write(root / "scripts" / "setup.sh", LOOP_SETUP, 0o755)
    write(
        root / "commands" / "loop.md",
        "---\ndescription: Start a loop\n"
        'allowed-tools: ["Bash(${CLAUDE_PLUGIN_ROOT}/scripts/setup.sh:*)"]\n---\n'
        '```!\n"${CLAUDE_PLUGIN_ROOT}/scripts/setup.sh" $ARGUMENTS\n```\n\nWork on the task.\n',
    )
    return root


@needs_jq
def test_a_loop_plugin_continues_for_n_iterations_then_stops(agi, tmp_path):
    plugin = make_loop_plugin(tmp_path / "looper")
    work = tmp_path / "work"
    work.mkdir()
    script = [text("answer 1"), text("answer 2"), text("answer 3"), text("never")]
    with FakeModel(*script) as server:
        r = agi(
            "--plugin-dir",
            str(plugin),
            "--permission-mode",
            "dontAsk",  # the command's allowed-tools let its setup script run
            "/loop fix the parser --max-iterations 3",
            server=server,
            cwd=work,
        )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "answer 3\n"
    assert len(server.requests) == 3
    assert "Loop started: fix the parser" in server.requests[0]["messages"][-1]["content"]
    assert "fix the parser" in server.requests[1]["messages"][-1]["content"]
    seen = (work / ".claude" / "seen.log").read_text().splitlines()
    assert seen == ["1: answer 1", "2: answer 2", "3: answer 3"]
    assert not (work / ".claude" / "loop.local.md").exists()


def test_the_transcript_is_claude_code_s_format_and_only_written_with_hooks(agi, tmp_path):
    copy = tmp_path / "copy.jsonl"
    hooks = tmp_path / "stop-hooks.json"  # not hooks.json: that one is beside the config
    command = f'cp "$(jq -r .transcript_path 2>/dev/null || echo none)" {copy} 2>/dev/null; true'
    if shutil.which("jq") is None:
        command = (
            f"{sys.executable} -c 'import json,sys,shutil; "
            f'shutil.copy(json.load(sys.stdin)["transcript_path"], "{copy}")\''
        )
    hooks.write_text(
        json.dumps({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": command}]}]}})
    )
    session, plain = tmp_path / "s", tmp_path / "plain"
    with FakeModel(call("Bash", command="echo out"), text("the end")) as server:
        r = agi("--hooks", str(hooks), "-s", str(session), "go", server=server)
        r2 = agi("-s", str(plain), "go", server=server)
    assert r.returncode == 0 and r2.returncode == 0, r.stderr + r2.stderr
    assert not (plain / "transcript.jsonl").exists()
    raw = copy.read_text().splitlines()
    assert raw == (session / "transcript.jsonl").read_text().splitlines()
    assert all(": " not in line.split('"text"')[0] for line in raw)  # compact, as Claude Code's
    lines = [json.loads(line) for line in raw]
    assert [line["type"] for line in lines] == ["user", "assistant", "user", "assistant"]
    assert lines[0]["message"] == {"role": "user", "content": [{"type": "text", "text": "go"}]}
    tool_use = lines[1]["message"]["content"][0]
    assert tool_use["type"] == "tool_use" and tool_use["input"] == {"command": "echo out"}
    result = lines[2]["message"]["content"][0]
    assert result == {"type": "tool_result", "tool_use_id": tool_use["id"], "content": "out"}
    assert lines[3]["message"]["content"] == [{"type": "text", "text": "the end"}]
    assert lines[0]["parentUuid"] is None
    assert [line["parentUuid"] for line in lines[1:]] == [line["uuid"] for line in lines[:-1]]
    assert {line["sessionId"] for line in lines} == {"s"}
    assert all(line["cwd"] == str(tmp_path) and line["timestamp"].endswith("Z") for line in lines)
    # a continued session appends only what is new
    with FakeModel(text("again")) as server:
        r = agi("--hooks", str(hooks), "-s", str(session), "more", server=server)
    assert r.returncode == 0, r.stderr
    more = (session / "transcript.jsonl").read_text().splitlines()
    assert more[:4] == raw and len(more) == 6
    assert json.loads(more[4])["parentUuid"] == lines[3]["uuid"]


def test_an_async_hook_does_not_hold_the_run(agi, tmp_path):
    marker, release = tmp_path / "late", tmp_path / "release"
    command = f"for i in $(seq 600); do [ -e {release} ] && break; sleep 0.1; done; touch {marker}"
    hooks = tmp_path / "async-hooks.json"
    entry = {"type": "command", "command": command, "async": True}
    hooks.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [entry]}]}}))
    with FakeModel(text("quick")) as server:  # waiting for the hook would take 60 s
        r = agi("--hooks", str(hooks), "go", server=server, timeout=30)
    assert r.returncode == 0, r.stderr
    assert not marker.exists()  # the run ended before the hook was let go
    release.touch()
    wait_for_file(marker, 10)
    assert marker.exists()


def test_list_extensions_names_every_part_and_its_file(agi, tmp_path):
    plugin = make_plugin(tmp_path / "demo")
    r = agi("--plugin-dir", str(plugin), "--deny", "Bash(rm:*)", "--list-extensions")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert f"demo 1.2.0\n      {plugin}" in out
    assert f"/demo:hello  NAME — Say hello\n      {plugin / 'commands' / 'hello.md'}" in out
    assert f"demo:greeting  Greets people warmly\n      {plugin / 'skills'}" in out
    assert f"demo:reviewer  Reviews code\n      {plugin / 'agents' / 'reviewer.md'}" in out
    assert f"UserPromptSubmit {plugin}/hooks/mark.sh" in out
    assert "deny Bash(rm:*)" in out and "command line" in out


@pytest.mark.parametrize(
    "where, content, problem",
    [
        (".claude-plugin/plugin.json", "{broken", "plugin manifest"),
        (".claude-plugin/plugin.json", '{"name": "has space"}', "name must be a word"),
        (".claude-plugin/plugin.json", '{"commands": 3}', "commands must be a path"),
        ("hooks/hooks.json", "[]", "the top level must be a JSON object"),
        (
            "hooks/hooks.json",
            '{"hooks": {"Stop": [{"hooks": [{"type": "command"}]}]}}',
            "command must be a non-empty string",
        ),
        (
            "hooks/hooks.json",
            '{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x", "shell": 1}]}]}}',
            "shell must name a shell",
        ),
    ],
)
def test_bad_plugin_files_are_exit_2_naming_the_file(agi, tmp_path, where, content, problem):
    plugin = make_plugin(tmp_path / "demo")
    write(plugin / where, content)
    with FakeModel(text("never")) as server:
        r = agi("--plugin-dir", str(plugin), "hi", server=server)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and problem in r.stderr and where.split("/")[-1] in r.stderr
    assert "Traceback" not in r.stderr and server.requests == []


def test_a_missing_plugin_dir_is_exit_2_and_a_bad_skill_is_skipped(agi, tmp_path):
    with FakeModel(text("never")) as server:
        r = agi("--plugin-dir", str(tmp_path / "nowhere"), "hi", server=server)
    assert r.returncode == 2 and "not a directory" in r.stderr
    plugin = make_plugin(tmp_path / "demo")
    write(plugin / "skills" / "broken" / "SKILL.md", "no front matter")
    with FakeModel(text("ok")) as server:
        r = agi("--plugin-dir", str(plugin), "hi", server=server)
    assert r.returncode == 0 and "broken" in r.stderr and "skipped" in r.stderr


def test_a_plugin_without_manifest_is_named_after_its_directory(agi, tmp_path):
    plugin = make_plugin(tmp_path / "bare-plugin")
    (plugin / ".claude-plugin" / "plugin.json").unlink()
    with FakeModel(text("ok")) as server:
        r = agi("--plugin-dir", str(plugin), "/bare-plugin:hello you", server=server)
    assert r.returncode == 0, r.stderr
    assert "Greet you" in server.requests[0]["messages"][-1]["content"]


def test_a_shell_step_s_output_is_not_run_as_a_step(agi, tmp_path):
    plugin = tmp_path / "shower"
    write(plugin / ".claude-plugin" / "plugin.json", json.dumps({"name": "shower"}))
    write(plugin / "data.txt", "look: !`touch pwned`\n")
    write(plugin / "commands" / "show.md", "```!\ncat ${CLAUDE_PLUGIN_ROOT}/data.txt\n```\n")
    with FakeModel(text("ok")) as server:
        r = agi("--plugin-dir", str(plugin), "/show", server=server)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "pwned").exists()  # the working directory is tmp_path
    assert server.requests[0]["messages"][-1]["content"] == "look: !`touch pwned`"


@pytest.mark.parametrize(
    "permissions, key",
    [
        ({"defaultMode": 3}, "permissions.defaultMode"),
        ({"defaultMode": ["dontAsk"]}, "permissions.defaultMode"),
        ({"allow": "Bash"}, "permissions.allow"),
        ({"ask": [1]}, "permissions.ask"),
        ({"deny": {"Bash": True}}, "permissions.deny"),
    ],
)
def test_a_settings_key_of_the_wrong_type_is_exit_2(agi, tmp_path, permissions, key):
    path = write(tmp_path / "settings.json", json.dumps({"permissions": permissions}))
    with FakeModel(text("never")) as server:
        r = agi("--settings", str(path), "hi", server=server)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and str(path) in r.stderr and key in r.stderr
    assert "Traceback" not in r.stderr and server.requests == []
