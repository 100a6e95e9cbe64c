"""Slash commands through the real `agi` (docs: permissions): `commands/` beside the config,
arguments, shell steps and their permissions, front matter, unknown commands, stdin and the REPL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakeserver import FakeModel, call, text


def command(tmp_path: Path, name: str, body: str) -> Path:
    """A command file in `commands/` beside the config file (AGI_CONFIG is tmp_path/config.toml)."""
    path = tmp_path / "commands" / f"{name}.md"
    path.parent.mkdir(exist_ok=True)
    path.write_text(body)
    return path


def sent(server: FakeModel, n: int = 0) -> str:
    return server.requests[n]["messages"][-1]["content"]


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_arguments_and_positions(agi, tmp_path):
    command(
        tmp_path, "fix", "---\ndescription: Fix an issue\n---\nFix issue #$1 in $2: $ARGUMENTS\n"
    )
    command(tmp_path, "plain", "Review the code.\n")
    with FakeModel(text("ok")) as server:
        r = agi("/fix 42 parser 'very urgent'", server=server)
        r2 = agi("/plain the parser module", server=server)
    assert r.returncode == 0 and r2.returncode == 0, r.stderr + r2.stderr
    assert sent(server) == "Fix issue #42 in parser: 42 parser 'very urgent'"
    assert sent(server, 1) == "Review the code.\n\nARGUMENTS: the parser module"  # as Claude Code


def test_inline_and_fenced_shell_steps_run_before_sending(agi, tmp_path):
    (tmp_path / "data.txt").write_text("alpha\nbeta\n")
    command(
        tmp_path,
        "count",
        "Lines: !`wc -l < data.txt`\nWord: !`echo $ARGUMENTS | tr a-z A-Z`\n\n"
        "```!\nhead -1 data.txt\necho second line\n```\nThen think.\n",
    )
    with FakeModel(text("ok")) as server:
        r = agi("/count shout", server=server)
    assert r.returncode == 0, r.stderr
    assert sent(server) == "Lines: 2\nWord: SHOUT\n\nalpha\nsecond line\nThen think."


def test_a_failing_step_shows_its_exit_code_and_warns(agi, tmp_path):
    command(tmp_path, "bad", "Status: !`echo oops; exit 3`\n")
    with FakeModel(text("ok")) as server:
        r = agi("/bad", server=server)
    assert r.returncode == 0
    assert sent(server) == "Status: oops\nexit code 3"
    assert "shell step `echo oops; exit 3` failed (exit code 3)" in r.stderr


def test_allowed_tools_allow_the_steps_and_calls_while_the_command_runs(agi, tmp_path):
    command(
        tmp_path,
        "commit",
        "---\nallowed-tools: Bash(git status:*), Bash(echo:*)\n---\nStatus: !`echo clean`\n",
    )
    with FakeModel(
        call("Bash", command="echo from the model"), call("Bash", command="id"), text("ok")
    ) as server:
        r = agi("--permission-mode", "dontAsk", "/commit", server=server)
    assert r.returncode == 0, r.stderr
    assert sent(server) == "Status: clean"
    results = tool_results(server.requests[2])
    assert results[0] == "from the model"
    assert "permission mode dontAsk" in results[1]
    # without the command, nothing is allowed
    with FakeModel(call("Bash", command="echo x"), text("ok")) as server:
        r = agi("--permission-mode", "dontAsk", "plain prompt", server=server)
    assert "permission mode dontAsk" in tool_results(server.requests[1])[0]


def test_a_denied_step_is_exit_2_and_nothing_is_sent(agi, tmp_path):
    marker = tmp_path / "marker"
    command(tmp_path, "danger", "Go: !`touch marker`\n")  # the working directory is tmp_path
    with FakeModel(text("never")) as server:
        r = agi("--deny", "Bash(touch:*)", "/danger", server=server)
        r2 = agi("--permission-mode", "dontAsk", "/danger", server=server)
    assert r.returncode == 2 and r2.returncode == 2
    assert r.stderr == (
        "agi: /danger: its shell step `touch marker` was not run: denied by permission rule "
        '"Bash(touch:*)" (command line)\n'
    )
    assert "(permission mode dontAsk)" in r2.stderr
    assert not marker.exists() and server.requests == []


def test_unknown_commands_are_usage_errors_and_paths_are_prompts(agi, tmp_path):
    command(tmp_path, "fix", "Fix it.\n")
    with FakeModel(text("ok")) as server:
        r = agi("/nope do it", server=server)
        r2 = agi("/plug:nope", server=server)
        r3 = agi("/usr/bin/x is broken", server=server)
        r4 = agi("/tmp is full", server=server)
    assert r.returncode == 2 and r.stderr == "agi: unknown command /nope (known: /fix)\n"
    assert r2.returncode == 2 and "unknown command /plug:nope" in r2.stderr
    assert r3.returncode == 0 and sent(server) == "/usr/bin/x is broken"
    assert r4.returncode == 2  # `/tmp` has the form of a command
    assert len(server.requests) == 1


def test_a_command_from_stdin_keeps_the_rest_as_context(agi, tmp_path):
    command(tmp_path, "review", "Review this: $ARGUMENTS\n")
    with FakeModel(text("ok")) as server:
        r = agi("/review carefully", server=server, input="diff --git a b\n")
        r2 = agi(server=server, input="/review the stdin prompt\n")
    assert r.returncode == 0 and r2.returncode == 0, r.stderr + r2.stderr
    assert sent(server) == "Review this: carefully\n\n<stdin>\ndiff --git a b\n</stdin>"
    assert sent(server, 1) == "Review this: the stdin prompt"


def test_front_matter_model_picks_the_model(agi, tmp_path):
    command(tmp_path, "cheap", "---\nmodel: openai:tiny-model\n---\nBe brief.\n")
    command(tmp_path, "claude", "---\nmodel: claude-3-5-haiku-20241022\n---\nBe brief.\n")
    with FakeModel(text("ok")) as server:
        r = agi("/cheap", server=server)
        r2 = agi("/claude", server=server)  # a Claude model means nothing to this provider
    assert r.returncode == 0 and r2.returncode == 0, r.stderr + r2.stderr
    assert server.requests[0]["model"] == "tiny-model"
    assert server.requests[1]["model"] == "fake-model"


@pytest.mark.parametrize(
    "body, problem",
    [
        # `description: [unclosed` now reads as Claude Code's retry reads it (quoted)
        ("---\ndescription: x\n<not a key>\n---\nx\n", "front matter"),
        ("---\ndescription: x\nno end\n", "not closed"),
    ],
)
def test_bad_front_matter_is_exit_2_naming_the_file(agi, tmp_path, body, problem):
    path = command(tmp_path, "broken", body)
    with FakeModel(text("never")) as server:
        r = agi("/broken", server=server)
    assert r.returncode == 2 and str(path) in r.stderr and problem in r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_commands_in_the_repl_keep_the_built_ins(agi, tmp_path):
    command(tmp_path, "hello", "---\ndescription: Say hello\n---\nSay hello to $1.\n")
    session = tmp_path / "s"
    lines = "/hello Ada\n/help\n/nope\nplain question\n"
    with FakeModel(text("one"), text("two")) as server:
        r = agi("--repl", "-s", str(session), server=server, input=lines)
    assert r.returncode == 0, r.stderr
    assert sent(server) == "Say hello to Ada."
    assert sent(server, 1) == "plain question"
    assert "/hello  Say hello" in r.stderr  # /help lists the commands
    assert "unknown command /nope (known: /compact, /help, /session, /sys, /hello)" in r.stderr
    stored = [json.loads(line) for line in (session / "messages.jsonl").read_text().splitlines()]
    assert [m["content"] for m in stored if m["role"] == "user"] == [
        "Say hello to Ada.",
        "plain question",
    ]


@pytest.mark.parametrize(
    "tools, entry",
    [
        ("Bash(git add:*), Bash(git", "'Bash(git'"),  # the `)` missing: not `Bash` and `git`
        ("Bash(", "'Bash('"),
        ("5", "'5'"),
        ('["Read", "Bash(echo"]', "'Bash(echo'"),
    ],
)
def test_a_bad_allowed_tools_entry_is_exit_2_naming_file_and_entry(agi, tmp_path, tools, entry):
    marker = tmp_path / "marker"
    path = command(tmp_path, "typo", f"---\nallowed-tools: {tools}\n---\nGo: !`touch marker`\n")
    with FakeModel(text("never")) as server:
        r = agi("/typo", server=server)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("agi: ")
    assert str(path) in r.stderr and "allowed-tools" in r.stderr and entry in r.stderr
    assert "Traceback" not in r.stderr and server.requests == [] and not marker.exists()
