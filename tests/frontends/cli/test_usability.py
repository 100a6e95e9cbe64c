"""Finding one's way (issue 41, point 12 and 13): a mistyped flag or setting names the closest,
colour follows NO_COLOR and --color, the effective settings say where each came from, --help is
grouped, shell completion comes from the option table, and --project opts a Claude Code
project's files in."""

from __future__ import annotations

import re

from fakeserver import FakeModel, text


def test_a_mistyped_flag_or_setting_names_the_closest(agi, tmp_path):
    with FakeModel(text("ran")) as server:
        result = agi("--no-stdin", "--shema", "[a:string]", "hi", server=server)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr == (
            "agi: unrecognized arguments: --shema; did you mean --schema? (see agi --help)\n"
        )
        result = agi("--no-stdin", "--max-step=3", "hi", server=server)
        assert result.returncode == 2 and "did you mean --max-steps?" in result.stderr
        result = agi("--no-stdin", "--zzzzqqq", "hi", server=server)
        assert result.returncode == 2 and "did you mean" not in result.stderr
        (tmp_path / "config.toml").write_text("max_step = 3\n")
        result = agi("--no-stdin", "hi", server=server)
        assert result.returncode == 2
        assert "unknown setting 'max_step'; did you mean 'max_steps'?" in result.stderr
        (tmp_path / "config.toml").write_text('[providers.mine]\nbase_ur = "http://x/v1"\n')
        result = agi("--no-stdin", "hi", server=server)
        assert result.returncode == 2
        assert "did you mean 'providers.mine.base_url'?" in result.stderr
        assert server.requests == []


COLOURS = ("\033[2m", "\033[31m", "\033[36m", "\033[0m")


def on_a_terminal(env: dict[str, str], cwd, *args: str, **extra: str) -> str:
    """`agi ARGS` with stderr on a pseudo-terminal (stdout a pipe): what the terminal showed."""
    import os
    import pty
    import subprocess

    from conftest import AGI

    master, slave = pty.openpty()
    try:
        done = subprocess.run(
            [AGI, *args], env={**env, **extra}, cwd=cwd, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=slave, timeout=60,
        )  # fmt: skip
        os.close(slave)
        assert done.returncode == 0, done
        shown = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal closed: all is read
                break
            if not chunk:
                break
            shown += chunk
        return shown.decode()
    finally:
        os.close(master)


def test_colour_follows_no_color_and_the_color_flag(agi, env, tmp_path):
    painted = lambda shown: any(code in shown for code in COLOURS)  # noqa: E731
    with FakeModel(*[text("ok")] * 6) as server:
        env = {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}
        shown = on_a_terminal(env, tmp_path, "--no-stdin", "hi")
        assert painted(shown) and "✓" in shown  # a terminal: colour
        shown = on_a_terminal(env, tmp_path, "--no-stdin", "hi", NO_COLOR="1")
        assert not painted(shown) and "✓" in shown  # the same lines, unpainted
        shown = on_a_terminal(env, tmp_path, "--no-stdin", "--color", "always", "hi", NO_COLOR="1")
        assert painted(shown)
        assert not painted(on_a_terminal(env, tmp_path, "--no-stdin", "--color=never", "hi"))
        result = agi("--no-stdin", "-v", "--color", "always", "hi", server=server)
        assert painted(result.stderr) and "\r" not in result.stderr  # a pipe: no cursor moves
        result = agi("--no-stdin", "-v", "hi", server=server)
        assert result.returncode == 0 and "✓" in result.stderr and not painted(result.stderr)
    (tmp_path / "config.toml").write_text('color = "sometimes"\n')
    result = agi("--no-stdin", "hi", server=server)
    assert result.returncode == 2 and "color must be one of auto, always, never" in result.stderr
    result = agi("--no-stdin", "--color", "sometimes", "hi")
    assert result.returncode == 2 and "--color" in result.stderr and result.stdout == ""


def test_list_settings_says_where_each_came_from_with_secrets_redacted(agi, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text(
        "max_steps = 7\nparams = { temperature = 0.2 }\n[providers.mine]\n"
        'base_url = "http://127.0.0.1:9/v1"\napi_key = "sk-file-secret"\n'
    )
    env = {"AGI_MODEL": "mine:m", "AGI_API_KEY": "sk-env-secret", "NO_COLOR": ""}
    result = agi("--list-settings", "--timeout", "9", "-q", extra_env=env)
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0] == f"# config file: {config}"
    assert f"max_steps = 7  # {config}" in lines
    assert f"params = {{ temperature = 0.2 }}  # {config}" in lines
    assert 'model = "mine:m"  # env AGI_MODEL' in lines
    assert "timeout = 9.0  # flag --timeout" in lines and "quiet = true  # flag --quiet" in lines
    assert 'output = "text"  # default' in lines and "# schema: not set" in lines
    assert 'api_key = "<redacted>"  # env AGI_API_KEY' in lines
    assert "sk-file-secret" not in result.stdout and "sk-env-secret" not in result.stdout
    assert lines[-1] == "# the model: mine:m at http://127.0.0.1:9/v1, the key of AGI_API_KEY"
    config.write_text("max_step = 7\n")  # the config file is checked as for a run
    result = agi("--list-settings", extra_env=env)
    assert result.returncode == 2 and "did you mean 'max_steps'?" in result.stderr


def a_claude_project(root):
    """A team's repository: a deny rule, a command, an agent, a skill, CLAUDE.md, AGENTS.md."""
    claude = root / ".claude"
    for part in ("commands", "agents", "skills/greet"):
        (claude / part).mkdir(parents=True)
    (claude / "settings.json").write_text('{"permissions": {"deny": ["Bash(rm:*)"]}}\n')
    (claude / "settings.local.json").write_text('{"env": {"TEAM_MODE": "local"}}\n')
    (claude / "commands" / "hi.md").write_text(
        "---\ndescription: say hi\n---\nSay hi to $ARGUMENTS\n"
    )
    (claude / "agents" / "helper.md").write_text(
        "---\nname: helper\ndescription: helps\n---\nYou help.\n"
    )
    (claude / "skills" / "greet" / "SKILL.md").write_text(
        "---\nname: greet\ndescription: greets people\n---\nGreet.\n"
    )
    (root / "CLAUDE.md").write_text("Always answer in French.\n")
    (root / "AGENTS.md").write_text("Run make test first.\n")
    (root / "keep.txt").write_text("x")


def test_project_uses_the_working_directorys_claude_code_files(agi, tmp_path):
    from fakeserver import call

    project = tmp_path / "repo"
    project.mkdir()
    a_claude_project(project)
    listing = agi("--project", "--list-extensions", cwd=project).stdout
    assert f"project {project}:" in listing
    for shown in (".claude/settings.json", ".claude/settings.local.json", ".claude/commands",
                  ".claude/agents", ".claude/skills", "CLAUDE.md", "AGENTS.md", "/hi  say hi",
                  "helper  helps", "greet  greets people", "deny Bash(rm:*)"):  # fmt: skip
        assert shown in listing, shown
    assert "project" not in agi("--list-extensions", cwd=project).stdout  # off by default
    with FakeModel(call("Bash", command="rm keep.txt"), text("bonjour"), text("hi")) as server:
        result = agi("--no-stdin", "--project", "--sys", "default", "/hi team", server=server,
                     cwd=project)  # fmt: skip
        assert result.returncode == 0 and result.stdout == "bonjour\n", result.stderr
        assert (project / "keep.txt").exists()  # the team's deny rule held
        first, second = server.requests[0], server.requests[1]
        system = first["messages"][0]["content"]
        assert system.index("Always answer in French.") < system.index("Run make test first.")
        assert not system.startswith("Always")  # after --sys (the built-in prompt)
        assert "Say hi to team" in first["messages"][-1]["content"]  # its command
        [denied] = [m["content"] for m in second["messages"] if m["role"] == "tool"]
        assert "denied by permission rule" in denied and "Bash(rm:*)" in denied
        result = agi("--no-stdin", "hi", server=server, cwd=project)  # without --project
        assert result.returncode == 0
        assert "Always answer in French." not in server.requests[2]["messages"][0]["content"]
    (tmp_path / "config.toml").write_text("project = true\n")  # the config file's switch
    assert f"project {project}:" in agi("--list-extensions", cwd=project).stdout


def test_help_is_grouped_with_examples_the_config_path_and_the_environment(agi, tmp_path):
    result = agi("--help", extra_env={"COLUMNS": "120"})
    assert result.returncode == 0 and result.stderr == ""
    out = result.stdout
    titles = ["general:", "model:", "session:", "tools:", "extensions (", "output (and input):",
              "limits:", "front ends ("]  # fmt: skip
    at = [out.index("\n" + title) for title in titles]
    assert at == sorted(at)
    starts = dict(zip(titles, at, strict=True))
    group = lambda flag: [t for t, i in starts.items() if i < out.index(flag)][-1]  # noqa: E731
    assert group("  --max-steps N") == "limits:" and group("  --color") == "output (and input):"
    assert group("  --project") == "extensions (" and group("  --batch FILE") == "front ends ("
    assert "examples:\n  agi " in out and "--list-settings" in out
    assert f"config file: {tmp_path / 'config.toml'} (AGI_CONFIG" in out
    assert "environment:" in out and "NO_COLOR" in out and "AGI_MODEL" in out


BASH_COMPLETES = r"""
source <("$AGI" --completion bash) || exit 9
spec=$(complete -p agi) || exit 8
echo "$spec"
function=${spec#*-F }; function=${function%% *}
complete_words() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); "$function"
    echo "${COMPREPLY[*]}"; }
complete_words agi --sch
complete_words agi --color ""
complete_words agi --sys pro
complete_words agi -s ""
complete_words agi --list-se
"""


def test_bash_completion_from_the_table_completes_flags_choices_and_files(env, tmp_path):
    import subprocess

    from agi.options.table import OPTIONS

    from conftest import AGI

    (tmp_path / "prompt.md").write_text("terse\n")
    (tmp_path / "notes").mkdir()
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", BASH_COMPLETES], env={**env, "AGI": AGI},
        cwd=tmp_path, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    spec, schema, colours, sys_file, session_dir, listing = done.stdout.splitlines()
    assert spec.startswith("complete -o filenames -F ") and spec.endswith(" agi")
    assert schema == "--schema" and colours == "auto always never"
    assert sys_file == "prompt.md" and session_dir == "notes"  # -s DIR: directories only
    assert sorted(listing.split()) == ["--list-sessions", "--list-settings"]
    script = subprocess.run([AGI, "--completion", "bash"], env=env, capture_output=True, text=True)
    offered = re.search(r'== -\* \]\]; then\s+COMPREPLY=\(\$\(compgen -W "([^"]*)"', script.stdout)
    assert offered is not None
    assert set(offered.group(1).split()) == {f for o in OPTIONS for f in o.flags}  # the table's


def test_zsh_and_fish_completion_name_every_flag(agi):
    import shutil
    import subprocess

    from agi.options.table import OPTIONS

    zsh, fish = agi("--completion", "zsh").stdout, agi("--completion", "fish").stdout
    assert zsh.startswith("#compdef agi\n") and "'*--sys[" in zsh and "(auto always never)" in zsh
    assert "complete -c agi -l color -d " in fish and "-x -a 'auto always never'" in fish
    for option in OPTIONS:
        for flag in option.flags:
            assert f"'{flag}[" in zsh or f"'*{flag}[" in zsh, flag
            short, long = f"-s {flag[1:]} ", f"-l {flag[2:]} "
            assert (short if len(flag) == 2 else long) in fish, flag
    for shell, text_ in (("zsh", zsh), ("fish", fish)):  # parsed by the shell itself, if here
        if shutil.which(shell):
            checked = subprocess.run([shell, "-n"], input=text_, capture_output=True, text=True)
            assert checked.returncode == 0, checked.stderr
    result = agi("--completion", "ksh")
    assert result.returncode == 2 and "invalid choice: 'ksh'" in result.stderr
