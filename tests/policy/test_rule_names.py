"""Permission rules name real tools (docs: permissions): a misspelled or lower-case tool name in a
rule would protect nothing, so it is a usage error (exit 2) naming the rule, where it came from
and the closest known name — from flags, settings files, plugin commands and agent files alike.
MCP rules are checked against a server's tools when they are known, and warned about otherwise.
The real `agi` against the scripted server; the file the rule protects must survive."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fakeserver import FakeModel, call, text

TIME = {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}


@pytest.mark.parametrize(
    ("flag", "rule", "closest"),
    [
        ("--deny", "bash(rm:*)", "Bash"),
        ("--deny", "Bsh(rm:*)", "Bash"),
        ("--ask", "WRITE(secrets/**)", "Write"),
        ("--allow", "Raed", "Read"),
    ],
)
def test_an_unknown_tool_in_a_flag_is_a_usage_error(agi, tmp_path, flag, rule, closest):
    victim = tmp_path / "v"
    victim.write_text("keep me")
    with FakeModel(call("Bash", command=f"rm {victim}"), text("done")) as server:
        r = agi(flag, rule, "go", server=server)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agi: "), r.stderr
    assert repr(rule) in lines[0] and f"({flag})" in lines[0]
    assert f"did you mean {closest!r}" in lines[0]
    assert server.requests == [] and victim.exists()


def test_an_unknown_tool_in_a_settings_file_names_the_file(agi, tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"permissions": {"deny": ["Read(.env)", "bash(rm:*)"]}}))
    with FakeModel(text("done")) as server:
        r = agi("--settings", str(settings), "go", server=server)
    assert r.returncode == 2
    assert "'bash(rm:*)'" in r.stderr and str(settings) in r.stderr and "'Bash'" in r.stderr
    assert server.requests == []


def plugin(tmp_path: Path) -> Path:
    root = tmp_path / "plug"
    (root / ".claude-plugin").mkdir(parents=True)
    (root / ".claude-plugin" / "plugin.json").write_text('{"name": "plug"}')
    return root


def test_an_unknown_tool_in_a_plugin_commands_allowed_tools_is_a_usage_error(agi, tmp_path):
    root = plugin(tmp_path)
    (root / "commands").mkdir()
    command = root / "commands" / "tidy.md"
    command.write_text("---\nallowed-tools: Bash(git status:*), bash(git add:*)\n---\nTidy up.\n")
    with FakeModel(text("done")) as server:
        r = agi("--plugin-dir", str(root), "/tidy", server=server)
    assert r.returncode == 2, r.stderr
    assert "'bash(git add:*)'" in r.stderr and str(command) in r.stderr
    assert server.requests == []


def test_an_unknown_tool_in_an_agent_file_is_a_usage_error(agi, tmp_path):
    root = plugin(tmp_path)
    (root / "agents").mkdir()
    agent = root / "agents" / "reviewer.md"
    agent.write_text("---\nname: reviewer\ndescription: Reviews.\ntools: Read, Gerp\n---\nGo.\n")
    with FakeModel(text("done")) as server:
        r = agi("--plugin-dir", str(root), "--deny", "Bash(rm:*)", "go", server=server)
    assert r.returncode == 2, r.stderr
    assert "'Gerp'" in r.stderr and str(agent) in r.stderr and "'Grep'" in r.stderr


def test_known_names_run_as_before(agi, tmp_path):
    settings = tmp_path / "settings.json"
    rules = ["WebFetch(domain:example.com)", "Glob", "mcp__github", "Task(reviewer)", "Skill(pdf)"]
    settings.write_text(json.dumps({"permissions": {"allow": rules}}))
    with FakeModel(text("done")) as server:
        r = agi("--settings", str(settings), "--deny", "Terminal", "go", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"
    assert "mcp__github" in r.stderr and "not known" in r.stderr  # no such server: a warning


def test_an_mcp_rule_is_checked_against_the_servers_tools(agi, tmp_path):
    pytest.importorskip("mcp_server_time")
    cfg = tmp_path / "mcp.json"
    cfg.write_text(json.dumps({"mcpServers": {"time": TIME}}))
    with FakeModel(text("done")) as server:
        r = agi("--mcp", str(cfg), "--deny", "mcp__time__get_curent_time", "go", server=server)
    assert r.returncode == 2, r.stderr
    assert "'get_curent_time'" in r.stderr and "mcp__time__get_current_time" in r.stderr
    with FakeModel(text("done")) as server:
        r = agi("--mcp", str(cfg), "--deny", "mcp__time__get_current_time", "go", server=server)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("server_flag", ["--acp", "--mcp-serve"])
def test_a_server_started_with_an_unknown_tool_in_a_rule_does_not_start(agi, server_flag):
    # an editor or agent would otherwise be served rules that protect nothing until a session
    # or call is set up; the start fails instead, before the first message is read
    initialize = '{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}\n'
    with FakeModel(text("done")) as server:
        bad = agi(server_flag, "--deny", "bash(rm:*)", server=server, input=initialize)
        known = agi(server_flag, "--deny", "Bash(rm:*)", server=server, input="")
    assert bad.returncode == 2 and bad.stdout == "", bad.stderr
    line = bad.stderr.strip()
    assert line.startswith("agi: ") and "\n" not in line and "did you mean 'Bash'" in line
    assert "'bash(rm:*)' (--deny)" in line
    assert known.returncode == 0, known.stderr
    assert server.requests == []
