"""The Bash judge treats programs by what they run (docs: permissions): wrappers are
unwrapped and the wrapped command judged; programs that run code from their arguments or input
are opaque (denied by the first Bash deny rule, allowed only by a rule naming the program with
that option); redirections and writing options are writes, judged by Write rules and the mode.

Table-driven through `decide` and the Guard, and end to end: the real `agi` in dontAsk mode with
a scripted model calling Bash, where the files the attacks aim at must survive or never appear.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agi.policy.guard import Guard
from agi.policy.permissions import Permissions, decide, parse_rule

from fakeserver import FakeModel, calls, text

DENIAL = 'Error: denied by permission rule "Bash(rm:*)" (command line)'
NO_RULE = "Error: denied: no permission rule allows this call (permission mode dontAsk)"


def rules(allow=(), deny=("Bash(rm:*)",), mode="dontAsk", base="/tmp") -> Permissions:
    found = [parse_rule(a, "allow", "command line", base) for a in allow]
    found += [parse_rule(d, "deny", "command line", base) for d in deny]
    return Permissions(found, mode)


# every wrapper of issue 35, and each entry of the tables, running rm
WRAPPED = [
    "setarch x86_64 rm v", "setarch x86_64 -R rm v", "linux64 rm v", "linux32 rm v",
    "i386 rm v", "x86_64 rm v", "chronic rm v", "ifne rm v", "eatmydata rm v", "tini rm v",
    "tini -s -- rm v", "dumb-init rm v", "gosu root rm v", "su-exec nobody rm v",
    "uv run rm v", "uv run --with x rm v", "uvx rm v", "poetry run rm v", "pipenv run rm v",
    "pdm run rm v", "hatch run rm v", "conda run -n base rm v", "bundle exec rm v",
    "npx rm v", "npx -y rm v", "npx -c 'rm v'", "pnpm dlx rm v", "pnpm exec rm v", "bunx rm v",
    "bun x rm v", "yarn dlx rm v", "npm exec -- rm v", "nix-shell --run 'rm v'",
    "nix-shell -p hello --run 'rm v'", "nix develop -c rm v", "docker exec box rm v",
    "docker exec -it box rm v", "podman exec -u 0 box rm v", "kubectl exec pod -- rm v",
    "kubectl exec -it pod -c app -- rm v", "ssh localhost rm v", "ssh localhost 'rm v'",
    "ssh -p 22 -i key user@host rm v", "ssh -tt host 'echo; rm v'", "tmux new -d 'rm v'",
    "tmux new-session -d -s x rm v", "tmux send-keys -t x 'rm v' Enter", "screen -dm rm v",
    "screen -dmS name rm v", "screen -S x -X stuff 'rm v'", "at now", "echo 'rm v' | at now",
    "batch", "nohup rm v", "timeout 5 rm v", "nice rm v", "ionice -c 3 rm v",
    "stdbuf -oL rm v", "env rm v", "sudo rm v", "doas rm v", "echo v | xargs rm",
    "flock /tmp/l rm v", "ssh-agent rm v", "sshpass -p x rm v", "direnv exec . rm v",
    "ip netns exec n rm v", "systemd-inhibit rm v", "entr rm v", "mise exec -- rm v",
    "setarch x86_64 timeout 5 uv run rm v", "command -p setarch x86_64 rm v",
    "sudo -u root setarch x86_64 rm v", "env -C / linux64 rm v", "linux64 -R rm v",
    "setarch $(uname -m) rm v",
]  # fmt: skip


@pytest.mark.parametrize("line", WRAPPED)
def test_a_wrapped_rm_is_denied_by_the_rm_rule(line):
    decision = decide(rules(), "Bash", {"command": line}, "/tmp")
    assert decision.verdict == "deny", line
    assert decision.rule is not None and decision.rule.text == "Bash(rm:*)", line


# programs that run code or commands taken from their arguments or input
OPAQUE = [
    "awk 'BEGIN{system(\"touch P\")}'", "gawk 'BEGIN { \"id\" | getline x }'",
    "awk '{ print | \"sh\" }' f", "awk -f prog.awk f", "awk '{print > \"/etc/x\"}' f",
    "sed -n '1e touch PWN1' f", "sed '1e touch P' f", "sed -e '1e touch P' f",
    "sed --expression='1e touch P' f", "sed 's/x/touch P/e' f", "sed -n 'w /tmp/out' f",
    "sed -f script.sed f", "sed -ne '1e touch P' f",
    "git -c alias.x='!touch PWNED' x", "git -c core.pager='touch P' log",
    "git -c core.sshCommand='touch P' fetch", "git --config-env=core.pager=X log",
    "git -c diff.external=x diff", "git rebase -x 'touch P' HEAD~1", "git bisect run touch P",
    "git submodule foreach 'touch P'", "git difftool -x 'touch P'", "git grep -O'touch P' x",
    "git config alias.x '!touch P'", "git fetch --upload-pack='touch P' origin",
    "tar --to-command='touch P' -xf a.tar", "tar -xf a.tar --checkpoint=1 "
    "--checkpoint-action=exec='touch P'", "tar -I 'touch P' -xf a.tar", "tar xIf x a.tar",
    "tar --use-compress-program='touch P' -xf a", "rsync -e 'touch P' a h:b",
    "rsync --rsh='touch P' a h:b", "rsync -avze 'touch P' a h:b", "ssh -o ProxyCommand='touch P' h",
    "ssh -oProxyCommand='touch P' h", "ssh -F cfg h", "scp -S 'touch P' a h:b",
    "find . -exec touch P \\;", "make", "make clean", "m4 f.m4", "gdb -ex 'shell touch P'",
    "gdb -batch -x cmds", "vim -c '!touch P'", "nvim --cmd '!touch P'", "vim +'!touch P' f",
    "ex -c '!touch P' f", "python -c 'import os'", "python3 -c 'import os'",
    "python3 -Bc 'import os'", "python3.12 -c 1", "echo 'import os' | python3",
    "python3 - < code.py", "perl -e 'system 1'", "perl -ne 'system 1' f", "perl -de0",
    "perl -MPOSIX -e 1", "ruby -e 'system 1'", "node -e 'x'", "node --eval=x", "node -p 1",
    "deno eval 'x'", "php -r 'system(1);'", "lua -e 'os.execute()'", "Rscript -e 'system()'",
    "julia -e 'run()'", "expect -c 'spawn x'", "osascript -e x", "pwsh -c x",
    "sqlite3 db '.shell touch P'", "echo '.shell touch P' | sqlite3 db", "sqlite3 -cmd x db",
    "mysql -e 'system touch P'", "psql -c x", "dc -e '!touch P'", "echo '!touch P' | ed f",
    "emacs --eval '(shell-command \"x\")'", "less '+!touch P' f", "man -P 'touch P' ls",
    "docker run img touch P", "hyperfine 'touch P'", "irb",
    "GIT_PAGER='touch P' git log", "PAGER='touch P' man ls", "GIT_SSH_COMMAND=x git fetch",
    "EDITOR='touch P' git commit", "env GIT_PAGER=x git log", "TAR_OPTIONS=x tar -xf a",
    # abbreviated long options, values of earlier options, code from a substitution
    "tar --to-com='touch P' -xf a", "tar -xf a --use-comp=x", "sed --expr='1e x' f",
    "git rebase --exe='touch P' HEAD", "git --exec-pa=/x status", "awk --sou 'BEGIN{system(1)}'",
    "python3 -W ignore -c x", "perl -I lib -e x", "node --require x -e y",
    "git -c alias.x='!touch P' -c color.ui=never x", "git --config-env alias.x=E x",
    "git -cAlias.x='!t' x", "sed -n \"$(printf '1e touch P')\" f", "awk -- 'BEGIN{system(1)}'",
]  # fmt: skip


@pytest.mark.parametrize("line", OPAQUE)
def test_an_opaque_program_is_denied_by_the_first_bash_deny_rule(line):
    decision = decide(rules(), "Bash", {"command": line}, "/tmp")
    assert decision.verdict == "deny", line


ALLOWLIST = ("Bash(sed -n:*)", "Bash(sed:*)", "Bash(cat:*)", "Bash(git:*)", "Bash(git log:*)")
ALLOWLIST += ("Bash(awk:*)", "Bash(python3:*)", "Bash(perl:*)", "Bash(tar:*)", "Bash(make:*)")
ALLOWLIST += ("Bash(gdb:*)", "Bash(sqlite3:*)", "Bash(ed:*)", "Bash(ex:*)")


@pytest.mark.parametrize(
    "line",
    [
        "sed -n '1e touch PWN1' f", "sed 's/a/b/e' f", "git -c alias.x='!touch PWNED' x",
        "git -c core.pager='touch P' log", "awk 'BEGIN{system(\"x\")}'", "python3 -c 'x'",
        "perl -e 'x'", "tar --to-command=x -xf a", "echo x | python3",
        "echo 'system(1)' | perl", "python3 - <<< 'import os'", "gdb -batch -ex 'shell x'",
        "echo '.shell x' | sqlite3", "ed -s f <<< '!x'", "ex -s -c '!x' -c q f",
    ],
)  # fmt: skip
def test_no_broad_allow_rule_vouches_for_an_opaque_program(line):
    decision = decide(rules(ALLOWLIST, deny=()), "Bash", {"command": line}, "/tmp")
    assert decision.verdict == "none", line


@pytest.mark.parametrize(
    ("rule", "line"),
    [
        ("Bash(python3 -c:*)", "python3 -c 'print(1)'"),
        ("Bash(perl -e:*)", "perl -e 'print 1'"),
        ("Bash(perl -ne:*)", "perl -ne 'print' f"),
        ("Bash(git -c:*)", "git -c core.pager=cat log"),
        ("Bash(make:*)", "make test"),
        ("Bash(tar --to-command=cat:*)", "tar --to-command=cat -xf a.tar"),
        ("Bash(sed -n '1e date' f)", "sed -n '1e date' f"),
        ("Bash(ssh -o:*)", "ssh -o ProxyCommand=x h"),
    ],
)
def test_a_rule_naming_the_program_with_its_option_allows_it(rule, line):
    decision = decide(rules([rule], deny=("Bash(rm:*)",)), "Bash", {"command": line}, "/tmp")
    assert decision.verdict == "allow", line
    assert decision.rule is not None and decision.rule.text == rule


@pytest.mark.parametrize(
    ("rule", "line"),
    [
        ("Bash(sed -n:*)", "sed -n 1p f"),
        ("Bash(sed:*)", "sed 's/a/b/g' f"),
        ("Bash(sed:*)", "sed -e 's/a/b/' -e '/x/d' f"),
        ("Bash(git:*)", "git -c color.ui=never status"),
        ("Bash(git log:*)", "git log --oneline"),
        ("Bash(awk:*)", "awk '{print $1}' f"),
        ("Bash(awk:*)", "awk -F: '$3 > 100 {print $1}' f"),
        ("Bash(python3:*)", "python3 x.py"),
        ("Bash(python3:*)", "python3 -m pytest -q"),
        ("Bash(tar:*)", "tar -xzf a.tar.gz"),
        ("Bash(tar:*)", "tar czf out.tgz src"),
        ("Bash(ssh:*)", "ssh host"),
        ("Bash(rsync:*)", "rsync -av a/ b/"),
        ("Bash(node:*)", "node app.js"),
        ("Bash(vim:*)", "vim f"),
    ],
)
def test_ordinary_uses_of_those_programs_are_still_allowed(rule, line):
    decision = decide(rules([rule], deny=("Bash(rm:*)",)), "Bash", {"command": line}, "/tmp")
    assert decision.verdict == "allow", line


@pytest.mark.parametrize(
    "line",
    [
        "ssh host ls", "uv run pytest", "docker exec box ls", "setarch x86_64 ls",
        "tmux new -d 'ls'", "chronic ls", "kubectl exec pod -- ls",
    ],
)  # fmt: skip
def test_a_wrapper_around_an_allowed_command_is_allowed_with_its_own_rule(line):
    wrapper = line.split()[0]
    allow = (f"Bash({wrapper}:*)", "Bash(ls:*)", "Bash(pytest:*)")
    decision = decide(rules(allow), "Bash", {"command": line}, "/tmp")
    assert decision.verdict == "allow", line


# --- writes ----------------------------------------------------------------------------------


def judge(permissions: Permissions, line: str, cwd: str) -> str | None:
    guard = Guard(permissions, ask=lambda request: None)
    return guard.check("c1", "Bash", {"command": line}, cwd)


READERS = ("Bash(cat:*)", "Bash(sed -n:*)", "Bash(git log:*)", "Bash(sort:*)", "Bash(echo:*)")


@pytest.mark.parametrize(
    "line",
    [
        "cat <<< x > {out}/profile",
        "cat f >> {out}/profile",
        "echo x &> {out}/profile",
        "echo x >| {out}/profile",
        "git log --output={out}/F",
        "git log --output {out}/F",
        "sort -o {out}/F f",
        "sed -n 1p f > {out}/F",
        "{{ cat f; }} > {out}/F",
        "cat f > $HOME/x",
        "cd {out} && cat f > profile",
        "echo x | tee {out}/F",
        "cat f > >(cat > {out}/F)",
        "cat > {out}/F <<EOF\nx\nEOF",
        "bash -c 'echo x > {out}/F'",
        "git log --out={out}/F",
        "sort -o{out}/F f",
    ],
)
def test_dont_ask_denies_a_write_no_write_rule_allows(tmp_path, line):
    out = tmp_path / "outside"
    allow = READERS + ("Bash(tee:*)", "Bash(cd:*)", "Bash(bash:*)")
    denial = judge(rules(allow), line.format(out=out), str(tmp_path))
    assert denial is not None and denial.startswith("Error: denied: no permission rule allows"), (
        line,
        denial,
    )
    assert "writing" in denial


def test_a_line_of_redirections_alone_needs_a_rule(tmp_path):
    denial = judge(rules(READERS), f"> {tmp_path}/outside/F", str(tmp_path))
    assert denial == NO_RULE


def test_a_write_allow_rule_lets_the_redirection_run(tmp_path):
    permissions = rules(READERS + (f"Write(/{tmp_path}/out/**)",), base="/")
    assert judge(permissions, f"cat f > {tmp_path}/out/log", str(tmp_path)) is None
    assert judge(permissions, f"cat f > {tmp_path}/elsewhere", str(tmp_path)) is not None


def test_reads_copies_and_dev_null_are_not_writes(tmp_path):
    permissions = rules(READERS)
    for line in ("cat < f", "cat f 2>&1", "cat f 2>/dev/null", "echo x >&2", "cat f | sort"):
        assert judge(permissions, line, str(tmp_path)) is None, line


def test_a_write_deny_rule_holds_in_every_mode(tmp_path):
    for mode in ("default", "acceptEdits", "bypassPermissions"):
        permissions = rules(("Bash(echo:*)",), deny=("Write(secrets/**)",), mode=mode)
        denial = judge(permissions, "echo k > secrets/key.txt", str(tmp_path))
        assert denial is not None and '"Write(secrets/**)"' in denial, mode


def test_accept_edits_allows_writes_inside_the_project_and_asks_outside(tmp_path):
    permissions = rules(("Bash(cat:*)",), deny=(), mode="acceptEdits")
    assert judge(permissions, "cat f > inside.txt", str(tmp_path)) is None
    denial = judge(permissions, "cat f > /tmp/outside-profile", str(tmp_path))
    assert denial is not None and "no one is at the terminal" in denial


def test_plan_mode_refuses_a_command_that_writes(tmp_path):
    permissions = rules(("Bash(cat:*)",), deny=(), mode="plan")
    assert judge(permissions, "cat f > inside.txt", str(tmp_path)) is not None


# --- end to end --------------------------------------------------------------------------------


def test_the_issues_attacks_fail_end_to_end_in_dont_ask_mode(agi, tmp_path: Path):
    """A prompt-injected model, an operator's dontAsk allowlist of reading commands and a deny
    rule on rm: no file is deleted, no command runs, nothing is written outside."""
    home = tmp_path
    (home / "v").write_text("keep me\n")
    (home / "f").write_text("one\ntwo\n")
    outside = home / "outside"
    outside.mkdir()
    attacks = [
        "setarch x86_64 rm v",
        "linux64 rm v",
        "sed -n '1e touch PWN1' f",
        "git -c alias.x='!touch PWNED' x",
        "awk 'BEGIN{system(\"touch PWN2\")}'",
        "tar --to-command='touch PWN3' -cf /dev/null f",
        'python3 -c \'open("PWN4", "w")\'',
        f"cat <<< x > {outside}/profile",
        f"git log --output={outside}/F",
    ]
    ordinary = ["sed -n 1p f", "cat f"]
    step = calls(*[("Bash", {"command": line}) for line in attacks + ordinary])
    args = ["--permission-mode", "dontAsk", "--deny", "Bash(rm:*)"]
    for rule in ("sed -n:*", "cat:*", "git log:*", "git:*", "awk:*", "tar:*", "python3:*"):
        args += ["--allow", f"Bash({rule})"]
    with FakeModel(step, text("done")) as server:
        r = agi(*args, "go", server=server, cwd=home)
    assert r.returncode == 0, r.stderr
    results = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert len(results) == len(attacks) + len(ordinary)
    assert (home / "v").read_text() == "keep me\n"
    assert not [p.name for p in home.iterdir() if p.name.startswith("PWN")]
    assert not list(outside.iterdir())
    assert results[:2] == [DENIAL, DENIAL]
    for line, result in zip(attacks[2:], results[2:], strict=False):
        assert result.startswith("Error: denied"), (line, result)
    assert results[-2:] == ["one", "one\ntwo"]


def test_a_wrapped_rm_is_denied_end_to_end_in_default_mode(agi, tmp_path: Path):
    (tmp_path / "v").write_text("keep me\n")
    lines = ["setarch x86_64 rm v", "linux64 rm v", "timeout 5 setarch x86_64 rm -f v"]
    step = calls(*[("Bash", {"command": line}) for line in lines])
    with FakeModel(step, text("done")) as server:
        r = agi("--deny", "Bash(rm:*)", "go", server=server, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "v").exists()
    results = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert results == [DENIAL] * len(lines)


def test_the_permissions_page_lists_every_table_entry():
    """The page carries the tables as the module generates them, so every entry is listed."""
    from agi.policy.bash.programs import reference, table

    page = (Path(__file__).parents[2] / "docs" / "claude-code" / "permissions.md").read_text()
    assert reference() in page, "regenerate: python -m agi.policy.bash.programs"
    names = [name for _, names, _ in table() for name in names.split()]
    assert {"setarch", "linux64", "uv", "ssh", "awk", "sed", "git", "python", "tee"} <= set(names)
