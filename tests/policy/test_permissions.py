"""Permission rules (docs: permissions): a table of commands and paths against rule sets, then
the real `agi` executable: denials as tool results, ask in a pipe and on a terminal, dontAsk,
and how rules and PreToolUse hooks overrule each other."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import time
from pathlib import Path

import pytest

from agi.errors import UsageError
from agi.policy.permissions import KINDS, Permissions, decide, parse_rule, parse_rules

from conftest import AGI
from fakeserver import FakeModel, call, text

HOME = os.path.expanduser("~")


def rules(**kinds: list[str]) -> Permissions:
    found = []
    for kind in KINDS:
        found += parse_rules(kinds.get(kind, []), kind, "command line", "/proj")
    return Permissions(found)


GIT = rules(
    allow=["Bash(git diff:*)", "Bash(git status)", "Bash(npm:*)", "Bash(echo *)", "Bash(ls:*)"],
    deny=["Bash(rm:*)", "Bash(git push:*)", "Bash(curl *)"],
    ask=["Bash(git commit:*)"],
)

# (command, verdict under GIT): allow = every part allowed; none = no rule decides
BASH_TABLE = [
    ("git diff", "allow"),
    ("git diff HEAD~1 -- src", "allow"),
    ("git diffx", "none"),  # a prefix ends at a word boundary
    ("git status", "allow"),
    ("git status --short", "none"),  # an exact rule is exact
    ("npm", "allow"),
    ("npm test", "allow"),
    ("npm run build --prod", "allow"),
    ("npmx install", "none"),
    ("npm-check", "none"),
    ("echo hello", "allow"),
    ("echo", "allow"),
    ("echo 'a b c'", "allow"),
    ("ls -la", "allow"),
    ("lsof -i", "none"),
    ("rm -rf /tmp/x", "deny"),
    ("rm", "deny"),
    ("rmdir x", "none"),
    ("git push origin main", "deny"),
    ("git pushx", "none"),
    ("curl http://example.com", "deny"),
    ("git commit -m 'x'", "ask"),
    # compound commands: every part must be allowed; a denied part denies the whole
    ("git diff && git status", "allow"),
    ("git diff && rm -rf /", "deny"),
    ("git diff || rm -rf /", "deny"),
    ("git diff; rm -rf /", "deny"),
    ("git diff\nrm -rf /", "deny"),
    ("git diff | npm test", "allow"),
    ("git diff | wc -l", "none"),
    ("ls && whoami", "none"),
    ("git diff & rm x", "deny"),
    ("ls; git commit -m x", "ask"),
    ("rm x && git commit -m y", "deny"),  # deny before ask
    # substitutions run commands too
    ("echo $(rm -rf /)", "deny"),
    ("echo `rm -rf /`", "deny"),
    ("echo $(git diff)", "allow"),
    ("echo $(whoami)", "none"),
    ("ls <(rm x)", "deny"),
    ('echo "$(rm y)"', "deny"),
    ("echo ${X:-$(rm z)}", "deny"),
    ("X=$(rm a) ls", "deny"),
    ("export A=$(rm b)", "deny"),
    ("cat <<EOF\n$(rm c)\nEOF", "deny"),
    ("cat <<'EOF'\n$(rm c)\nEOF", "none"),  # a quoted here-document runs nothing
    # quoting: operators inside quotes are text
    ('echo "a && rm -rf /"', "allow"),
    ("echo 'rm -rf /; ls'", "allow"),
    ("echo a\\;rm", "allow"),
    ('"rm" -rf x', "deny"),
    ("'git' diff", "allow"),
    # redirections are not part of the command
    ("git diff > out.txt", "allow"),
    ("git diff 2>&1 | npm test", "allow"),
    ("npm test >/dev/null 2>&1", "allow"),
    ("rm x 2>/dev/null", "deny"),
    # control flow, functions, subshells
    ("for f in *.txt; do rm $f; done", "deny"),
    ("for f in a b; do echo $f; done", "allow"),
    ("if git diff --quiet; then echo same; fi", "allow"),
    ("while true; do rm x; done", "deny"),
    ("(cd /tmp && rm -rf x)", "deny"),
    ("{ git diff; git status; }", "allow"),
    ("f() { rm x; }; f", "deny"),
    ("[[ -f a ]] && git diff", "allow"),
    ("case x in a) rm y;; esac", "deny"),
    ("echo $((1 + 2))", "allow"),
    ("! git diff", "allow"),
    # assignments: a deny rule sees through them, an allow rule does not
    ("X=1 rm y", "deny"),
    ("X=1 npm test", "none"),
    ("PATH=/evil:$PATH git diff", "deny"),  # another git may run: judged unknown (section 20)
    # what the parser cannot read matches no allow rule; deny rules still see the text
    # a line the parser cannot read wholly: no rule can vouch for it, so a deny rule decides
    ("echo 'unterminated", "deny"),
    ("git diff $(", "deny"),
    ("rm -rf / 'unterminated", "deny"),
    ("if then fi", "deny"),
]


@pytest.mark.parametrize("command, verdict", BASH_TABLE)
def test_bash_rules(command: str, verdict: str) -> None:
    assert decide(GIT, "Bash", {"command": command}, "/proj").verdict == verdict


def test_the_table_is_large_enough() -> None:
    assert len(BASH_TABLE) >= 60


@pytest.mark.parametrize(
    "rule, command, matches",
    [
        ("Bash(git * main)", "git push origin main", True),
        ("Bash(git * main)", "git push origin dev", False),
        ("Bash(npm run test:*)", "npm run test", True),
        ("Bash(npm run test:*)", "npm run test -- --watch", True),
        ("Bash(npm run test:*)", "npm run testing", False),
        ("Bash(ls*)", "lsof", True),
        ("Bash(ls *)", "lsof", False),
        ("Bash", "anything at all", True),
        ("Bash(*)", "anything at all", True),
        ("Bash(/opt/plugin/setup.sh:*)", '"/opt/plugin/setup.sh" Fix the bug', True),
    ],
)
def test_bash_specifiers(rule: str, command: str, matches: bool) -> None:
    permissions = Permissions([parse_rule(rule, "allow", "command line", "/proj")])
    verdict = decide(permissions, "Bash", {"command": command}, "/proj").verdict
    assert (verdict == "allow") is matches


PATHS = rules(
    deny=["Read(//etc/**)", "Read(*.env)", "Edit(/secrets/**)", "Read(~/.ssh/**)"],
    allow=["Edit(src/**)", "Read(./docs/*.md)", "Write(//tmp/out/**)"],
    ask=["Write(**/*.lock)"],
)


@pytest.mark.parametrize(
    "tool, path, verdict",
    [
        ("Read", "/etc/passwd", "deny"),
        ("Read", "/etc/ssl/certs/x.pem", "deny"),
        ("Read", "/etcetera/x", "none"),
        ("Read", ".env", "deny"),
        ("Read", "sub/dir/prod.env", "deny"),  # no slash in the pattern: any depth
        ("Read", "/elsewhere/.env", "none"),  # relative patterns stay under the working dir
        ("Write", "/proj/secrets/key", "deny"),  # Edit rules cover Write
        ("Edit", "secrets/key", "deny"),  # /secrets is relative to the settings file's dir
        ("Edit", "other/secrets/key", "none"),
        ("Read", f"{HOME}/.ssh/id_rsa", "deny"),
        ("Read", "~/.ssh/id_rsa", "deny"),
        ("Edit", "src/a.py", "allow"),
        ("Edit", "src/deep/er/a.py", "allow"),
        ("Edit", "/proj/src/a.py", "allow"),
        ("Edit", "srcx/a.py", "none"),
        ("Edit", "../proj/src/a.py", "allow"),
        ("Read", "docs/guide.md", "allow"),
        ("Read", "docs/deeper/guide.md", "none"),
        ("Write", "/tmp/out/a/b.txt", "allow"),
        ("Write", "/tmp/outside.txt", "none"),
        ("Write", "pkg/Cargo.lock", "ask"),
    ],
)
def test_path_rules(tool: str, path: str, verdict: str) -> None:
    assert decide(PATHS, tool, {"file_path": path}, "/proj").verdict == verdict


def test_a_symlink_out_of_an_allowed_tree_is_not_allowed(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "link").symlink_to("/etc/hostname")
    permissions = Permissions([parse_rule("Edit(src/**)", "allow", "x", tmp_path)])
    assert decide(permissions, "Edit", {"file_path": "src/link"}, str(tmp_path)).verdict == "none"
    assert decide(permissions, "Edit", {"file_path": "src/a"}, str(tmp_path)).verdict == "allow"


@pytest.mark.parametrize(
    "rule, name, input, verdict",
    [
        ("mcp__github", "mcp__github__create_issue", {}, "deny"),
        ("mcp__github", "mcp__githubx__create_issue", {}, "none"),
        ("mcp__github__create_issue", "mcp__github__create_issue", {}, "deny"),
        ("mcp__github__create_issue", "mcp__github__list", {}, "none"),
        ("mcp__github__*", "mcp__github__list", {}, "deny"),
        ("Task(reviewer)", "Task", {"subagent_type": "reviewer"}, "deny"),
        ("Task(reviewer)", "Task", {"subagent_type": "demo:reviewer"}, "deny"),
        ("Task(reviewer)", "Task", {"subagent_type": "writer"}, "none"),
        ("Task(general-purpose)", "Task", {}, "deny"),
        ("Skill(pdf)", "Skill", {"skill": "pdf"}, "deny"),
        ("Skill(pdf:*)", "Skill", {"skill": "pdf"}, "deny"),
        ("Skill(pdf)", "Skill", {"skill": "docx"}, "none"),
        ("Write", "Write", {"file_path": "x"}, "deny"),
        ("Read", "Write", {"file_path": "x"}, "none"),
    ],
)
def test_tool_rules(rule: str, name: str, input: dict, verdict: str) -> None:
    permissions = Permissions([parse_rule(rule, "deny", "command line", "/proj")])
    assert decide(permissions, name, input, "/proj").verdict == verdict


def test_first_match_in_deny_ask_allow_order() -> None:
    permissions = rules(allow=["Bash"], ask=["Bash(git:*)"], deny=["Bash(git push:*)"])
    assert decide(permissions, "Bash", {"command": "git push"}, "/").verdict == "deny"
    assert decide(permissions, "Bash", {"command": "git log"}, "/").verdict == "ask"
    assert decide(permissions, "Bash", {"command": "ls"}, "/").verdict == "allow"


@pytest.mark.parametrize("bad", ["Bash(", "", "Bash(x) y", 42])
def test_a_bad_rule_is_a_usage_error(bad: object) -> None:
    with pytest.raises(UsageError, match="bad permission rule"):
        parse_rule(bad, "allow", "command line", "/")


# --- through the real executable ---------------------------------------------------------------


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_a_denied_call_tells_the_model_the_rule_and_the_run_goes_on(agi, tmp_path):
    marker = tmp_path / "marker"
    with FakeModel(
        call("Bash", command=f"echo hi && touch {marker}"),
        call("Bash", command="echo allowed"),
        text("done"),
    ) as server:
        r = agi("--deny", "Bash(touch:*)", "go", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"
    assert not marker.exists()
    results = tool_results(server.requests[2])
    assert results[0] == 'Error: denied by permission rule "Bash(touch:*)" (command line)'
    assert results[1] == "allowed"


def test_settings_file_rules_name_the_file_and_trace_and_show_the_decision(agi, tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps({"permissions": {"deny": ["Read(/secret.txt)"]}, "model": "ignored"})
    )
    (tmp_path / "secret.txt").write_text("s3cret")
    session = tmp_path / "s"
    with FakeModel(call("Read", file_path=str(tmp_path / "secret.txt")), text("ok")) as server:
        r = agi("--settings", str(settings), "-s", str(session), "read it", server=server)
    assert r.returncode == 0, r.stderr
    result = tool_results(server.requests[1])[0]
    assert result == f'Error: denied by permission rule "Read(/secret.txt)" ({settings})'
    records = [json.loads(line) for line in (session / "trace.jsonl").read_text().splitlines()]
    decision = next(r for r in records if r["type"] == "permission")
    assert decision["decision"] == "deny" and decision["source"] == str(settings)
    assert decision["rule"] == "Read(/secret.txt)"
    shown = agi("--show", str(session))
    assert f'⚖ denied by rule "Read(/secret.txt)" ({settings})' in shown.stdout


def test_ask_in_a_pipe_is_a_denial(agi, tmp_path):
    marker = tmp_path / "marker"
    with FakeModel(call("Bash", command=f"touch {marker}"), text("ok")) as server:
        r = agi("--ask", "Bash(touch:*)", "go", server=server, input="")
    assert r.returncode == 0, r.stderr
    assert not marker.exists()
    assert tool_results(server.requests[1])[0] == (
        'Error: denied: rule "Bash(touch:*)" (command line) asks for approval and no one is at '
        "the terminal"
    )


def run_on_terminal(args: list[str], env: dict, cwd: Path, answer: bytes) -> tuple[int, str]:
    """agi with a pseudo-terminal as its controlling terminal, stdin and stderr; `answer` is
    typed when the question appears."""
    master, slave = pty.openpty()

    def take_terminal() -> None:
        os.setsid()
        import fcntl
        import termios

        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        [AGI, *args],
        env=env,
        cwd=cwd,
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=slave,
        preexec_fn=take_terminal,
    )
    os.close(slave)
    screen, answered = b"", False
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                screen += os.read(master, 65536)
            except OSError:
                break
        if not answered and b"[y/N]" in screen:
            os.write(master, answer)
            answered = True
    out = proc.communicate(timeout=10)[0]
    os.close(master)
    return proc.returncode, screen.decode("utf-8", "replace") + out.decode()


@pytest.mark.parametrize("answer, runs", [(b"y\n", True), (b"n\n", False)])
def test_ask_on_a_terminal_is_a_question(env, tmp_path, answer, runs):
    marker = tmp_path / "marker"
    with FakeModel(call("Bash", command=f"touch {marker}"), text("ok")) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="fake", TERM="dumb")
        code, screen = run_on_terminal(
            ["-q", "--ask", "Bash(touch:*)", "go"], env, tmp_path, answer
        )
    assert code == 0, screen
    assert 'rule "Bash(touch:*)" (command line) asks' in screen
    assert marker.exists() is runs
    if not runs:
        assert "the user said no" in tool_results(server.requests[1])[0]


def test_dont_ask_denies_what_no_rule_allows(agi, tmp_path):
    with FakeModel(
        call("Bash", command="echo allowed"),
        call("Bash", command="echo other"),
        call("Write", file_path=str(tmp_path / "f"), content="x"),
        text("ok"),
    ) as server:
        r = agi(
            "--permission-mode", "dontAsk", "--allow", "Bash(echo allowed)", "go", server=server
        )
    assert r.returncode == 0, r.stderr
    results = tool_results(server.requests[3])
    dont = "Error: denied: no permission rule allows this call (permission mode dontAsk)"
    assert results == ["allowed", dont, dont]
    assert not (tmp_path / "f").exists()


def hook_settings(tmp_path: Path, decision: str) -> str:
    answer = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": decision}}
    path = tmp_path / f"hook-{decision}.json"
    command = f"cat > {tmp_path}/payload.json; echo '{json.dumps(answer)}'"
    hooks = [{"matcher": "Bash", "hooks": [{"type": "command", "command": command}]}]
    path.write_text(json.dumps({"hooks": {"PreToolUse": hooks}}))
    return str(path)


def test_a_deny_rule_beats_a_hook_s_allow(agi, tmp_path):
    marker = tmp_path / "marker"
    hooks = hook_settings(tmp_path, "allow")
    with FakeModel(call("Bash", command=f"touch {marker}"), text("ok")) as server:
        r = agi("--hooks", hooks, "--deny", "Bash(touch:*)", "go", server=server)
    assert r.returncode == 0, r.stderr
    assert not marker.exists()
    assert "denied by permission rule" in tool_results(server.requests[1])[0]


def test_a_hook_s_allow_beats_ask_and_dont_ask(agi, tmp_path):
    marker = tmp_path / "marker"
    hooks = hook_settings(tmp_path, "allow")
    with FakeModel(call("Bash", command=f"touch {marker}"), text("ok")) as server:
        r = agi("--hooks", hooks, "--permission-mode", "dontAsk", "go", server=server)
    assert r.returncode == 0, r.stderr
    assert marker.exists()
    assert json.loads((tmp_path / "payload.json").read_text())["permission_mode"] == "dontAsk"


def test_a_hook_s_deny_beats_an_allow_rule(agi, tmp_path):
    marker = tmp_path / "marker"
    hooks = hook_settings(tmp_path, "deny")
    with FakeModel(call("Bash", command=f"touch {marker}"), text("ok")) as server:
        r = agi("--hooks", hooks, "--allow", "Bash(touch:*)", "go", server=server)
    assert r.returncode == 0, r.stderr
    assert not marker.exists()
    assert tool_results(server.requests[1])[0].startswith("Blocked by a PreToolUse hook")


@pytest.mark.parametrize(
    "content, problem",
    [
        ("{not json", "invalid JSON at line 1"),
        ('{"permissions": {"allow": "Bash"}}', "permissions.allow must be a list of strings"),
        ('{"permissions": []}', "permissions must be an object"),
        ('{"env": {"A": ["x"]}}', "env must be an object of strings"),
        ('{"hooks": {"Stop": {}}}', "hooks.Stop must be a list"),
        ('{"permissions": {"deny": ["Bash("]}}', "bad permission rule"),
        ("[]", "the top level must be a JSON object"),
    ],
)
def test_a_malformed_settings_file_is_exit_2_naming_file_and_key(agi, tmp_path, content, problem):
    path = tmp_path / "settings.json"
    path.write_text(content)
    with FakeModel(text("never")) as server:
        r = agi("--settings", str(path), "hi", server=server)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and str(path) in r.stderr and problem in r.stderr
    assert "Traceback" not in r.stderr and server.requests == []


def test_settings_env_reaches_tools_and_hooks_and_unknown_keys_are_ignored(agi, tmp_path):
    settings = tmp_path / "settings.json"
    stop = [{"hooks": [{"type": "command", "command": f"echo $TEAM_VAR > {tmp_path}/hook.txt"}]}]
    data = {"env": {"TEAM_VAR": "from-settings"}, "hooks": {"Stop": stop}, "statusLine": {}}
    settings.write_text(json.dumps(data))
    with FakeModel(call("Bash", command="echo $TEAM_VAR"), text("ok")) as server:
        r = agi("--settings", str(settings), "go", server=server)
    assert r.returncode == 0, r.stderr
    assert tool_results(server.requests[1])[0] == "from-settings"
    assert (tmp_path / "hook.txt").read_text().strip() == "from-settings"


def test_config_file_rules_and_mode(agi, tmp_path):
    (tmp_path / "config.toml").write_text('permission_mode = "dontAsk"\nallow = ["Bash(echo:*)"]\n')
    with FakeModel(call("Bash", command="echo yes"), call("Bash", command="id"), text("ok")) as s:
        r = agi("go", server=s)
    assert r.returncode == 0, r.stderr
    assert tool_results(s.requests[2])[0] == "yes"
    assert "permission mode dontAsk" in tool_results(s.requests[2])[1]
