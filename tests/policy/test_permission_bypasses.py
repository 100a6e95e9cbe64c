"""Ways around a Bash deny rule that a review found, each closed: a line the parser cannot read
wholly, substitutions the parser does not show, the Terminal tool, odd paths and linked roots.
The real `agi` against the scripted server; a file that must survive each attempt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakeserver import FakeModel, call, text

DENIAL = 'Error: denied by permission rule "Bash(rm:*)" (command line)'


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize(
    "line",
    [
        "echo hi\nrm -f {victim}\nif",  # a syntax error at the end: bash runs the lines before it
        "echo ${{x:=`rm -f {victim}`}}",  # a substitution inside a parameter expansion
        "echo `echo \\`rm -f {victim}\\``",  # backticks escaped inside backticks
        "cat <<EOF\n\\\nEOF\nrm -f {victim}\nEOF",  # a here-document bash ends early
    ],
    ids=["syntax-error-last", "param-expansion", "nested-backticks", "heredoc-continuation"],
)
def test_a_line_the_parser_cannot_vouch_for_is_denied(agi, tmp_path, line):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    with FakeModel(call("Bash", command=line.format(victim=victim)), text("done")) as server:
        r = agi("--deny", "Bash(rm:*)", "go", server=server)
    assert r.returncode == 0, r.stderr
    assert victim.exists()
    assert tool_results(server.requests[1]) == [DENIAL]


def test_an_allow_rule_does_not_vouch_for_a_hidden_substitution(agi, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    line = f"echo ${{x:=`rm -f {victim}`}}"
    with FakeModel(call("Bash", command=line), text("done")) as server:
        r = agi("--permission-mode", "dontAsk", "--allow", "Bash(echo:*)", "go", server=server)
    assert r.returncode == 0, r.stderr
    assert victim.exists()
    assert tool_results(server.requests[1])[0].startswith("Error: denied")


def test_ordinary_lines_still_run(agi, tmp_path):
    line = "echo $(echo one) `echo two` && diff <(echo a) <(echo a) && echo '`three`'"
    with FakeModel(call("Bash", command=line), text("done")) as server:
        r = agi("--deny", "Bash(rm:*)", "go", server=server)
    assert r.returncode == 0, r.stderr
    assert tool_results(server.requests[1]) == ["one two\n`three`"]


@pytest.mark.parametrize("how", ["start", "send"])
def test_the_terminal_tool_is_held_to_the_bash_rules(agi, tmp_path, how):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    if how == "start":
        steps = [call("Terminal", action="start", id="t", command=f"rm -f {victim}")]
    else:
        steps = [
            call("Terminal", action="start", id="t", command="bash --norc"),
            call("Terminal", action="send", id="t", keys=f"rm -f {victim}<Enter>"),
        ]
    with FakeModel(*steps, text("done")) as server:
        r = agi("--deny", "Bash(rm:*)", "go", server=server)
    assert r.returncode == 0, r.stderr
    assert victim.exists()
    assert tool_results(server.requests[-1])[-1] == DENIAL


def test_a_nul_byte_in_a_path_is_an_error_result_not_a_crash(agi, tmp_path):
    with FakeModel(call("Read", file_path="/tmp/x\u0000y"), text("done")) as server:
        r = agi("--deny", "Read(//etc/**)", "go", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"
    assert tool_results(server.requests[1])[0].startswith("Error:")


def test_a_rule_from_a_settings_file_reached_through_a_link_holds(agi, tmp_path: Path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "secret.txt").write_text("s3cret")
    (project / "settings.json").write_text(
        json.dumps({"permissions": {"deny": ["Read(/secret.txt)"]}})
    )
    link = tmp_path / "link"
    link.symlink_to(project)
    read = call("Read", file_path=str(project / "secret.txt"))
    with FakeModel(read, text("done")) as server:
        r = agi("--settings", str(link / "settings.json"), "go", server=server)
    assert r.returncode == 0, r.stderr
    (result,) = tool_results(server.requests[1])
    assert result.startswith('Error: denied by permission rule "Read(/secret.txt)"')
    assert "s3cret" not in result


@pytest.mark.parametrize(
    "sends",
    [
        ["r", "m -f {victim}<Enter>"],  # a line typed over two sends
        ["rmX<BS> -f {victim}<Enter>"],  # editing keys applied
        ["m -f {victim}<Home>r<Enter>"],
        ["echo <C-u>rm -f {victim}<Enter>"],
        ["rm -f {victim}<Left><Left><Right><Right><Enter>"],
        ["r<Tab>m -f {victim}<Enter>"],  # completion: what is typed cannot be replayed
        ["<Up><Enter>"],  # history: the same
    ],
    ids=["two-sends", "backspace", "home", "kill-line", "arrows", "tab", "history"],
)
def test_the_terminal_judges_the_line_the_shell_receives(agi, tmp_path, sends):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    steps = [call("Terminal", action="start", id="t", command="bash --norc")]
    steps += [call("Terminal", action="send", id="t", keys=k.format(victim=victim)) for k in sends]
    with FakeModel(*steps, text("done")) as server:
        r = agi("--deny", "Bash(rm:*)", "go", server=server)
    assert r.returncode == 0, r.stderr
    assert victim.exists()
    assert tool_results(server.requests[-1])[-1] == DENIAL


def test_ordinary_typing_still_reaches_the_terminal(agi, tmp_path):
    steps = [
        call("Terminal", action="start", id="t", command="bash --norc"),
        call("Terminal", action="send", id="t", keys="ech"),
        call("Terminal", action="send", id="t", keys="o typed-X<BS>Y<Enter>", wait_ms=2000),
    ]
    with FakeModel(*steps, text("done")) as server:
        r = agi("--deny", "Bash(rm:*)", "go", server=server)
    assert r.returncode == 0, r.stderr
    assert "typed-Y" in tool_results(server.requests[-1])[-1]
