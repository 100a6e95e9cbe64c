"""Hooks name real tools, as permission rules do (docs: hooks, permissions): an `if` condition
naming a tool agi does not know (`bash(rm:*)`, `Bsh(rm:*)`) is a usage error naming the rule,
the file and the closest known name (exit 2); a PermissionRequest hook's `updatedPermissions`
rule naming one is not learnt, with a warning naming it. The real executable, real hook
scripts, the scripted server."""

from __future__ import annotations

import pytest
from test_plan_mode_and_permission_requests import (
    allow,
    answer_with,
    entry,
    payloads,
    settings,
    tool_results,
)

from fakeserver import FakeModel, call, text


@pytest.mark.parametrize(("written", "close"), [("bash(rm:*)", "Bash"), ("Bsh(rm:*)", "Bash")])
def test_an_if_naming_no_known_tool_is_a_usage_error(agi, tmp_path, written, close):
    hooks = settings(tmp_path, {"PreToolUse": entry("true", "Bash", **{"if": written})})
    with FakeModel(text("never")) as server:
        r = agi("--hooks", hooks, "go", server=server)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    line = r.stderr.strip().splitlines()[0]
    assert line.startswith("agi: ") and written in line and hooks in line, r.stderr
    assert f"did you mean {close!r}" in line, r.stderr
    assert server.requests == []


def test_updated_permissions_naming_no_known_tool_are_not_learnt(agi, tmp_path):
    rule = {"toolName": "bash", "ruleContent": "echo:*"}
    update = {"type": "addRules", "rules": [rule], "behavior": "allow", "destination": "session"}
    hook = answer_with(tmp_path, "grant", allow(updatedPermissions=[update]))
    hooks = settings(tmp_path, {"PermissionRequest": entry(hook, "Bash")})
    with FakeModel(
        call("Bash", command="echo one"), call("Bash", command="echo two"), text("ok")
    ) as server:
        r = agi("--hooks", hooks, "--permission-mode", "acceptEdits", "go", server=server)
    assert r.returncode == 0, r.stderr
    assert tool_results(server.requests[1]) == ["one"]
    assert "'bash(echo:*)'" in r.stderr and "did you mean 'Bash'" in r.stderr, r.stderr
    # no rule was learnt: the hook was asked about both calls
    asked = [p["tool_input"]["command"] for p in payloads(tmp_path, "grant")]
    assert asked == ["echo one", "echo two"]


def test_an_if_naming_the_users_own_tool_is_checked_with_the_runs_tools(agi, tmp_path):
    """The names an `if` may use are the run's: a user's tool (`--tool`) is one, so its hook
    fires; the check waits for the run to know its tools, as for permission rules."""
    import json

    desc = {"name": "greet", "description": "greets", "parameters": {"type": "object"}}
    tool = tmp_path / "greet"
    tool.write_text(
        "#!/usr/bin/env bash\n"
        f"if [ \"$1\" = --describe ]; then echo '{json.dumps(desc)}'; exit 0; fi\necho hi\n"
    )
    tool.chmod(0o755)
    hook = answer_with(tmp_path, "seen", {})
    hooks = settings(tmp_path, {"PreToolUse": entry(hook, "greet", **{"if": "greet"})})
    with FakeModel(call("greet"), text("done")) as server:
        r = agi("--hooks", hooks, "--tool", str(tool), "go", server=server)
    assert r.returncode == 0, r.stderr
    assert [p["tool_name"] for p in payloads(tmp_path, "seen")] == ["greet"]
