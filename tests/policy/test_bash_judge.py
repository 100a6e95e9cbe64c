"""The Bash judge, table-driven: forms from bash's manual and the reports of issue 27, each
expected to run, to be denied by the deny rule, or to find no allow rule (docs: security).

One real `agi` run under `--permission-mode dontAsk` with a few allow rules and
`--deny 'Bash(rm:*)'` gets every form as a Bash call of one turn; the results, in call order,
say what the judge decided. A line the judge cannot reduce to known commands is denied by the
first deny rule (here the rm rule) and allowed by none.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fakeserver import FakeModel, calls, text

RM = "rm-rule"  # denied by the deny rule (what runs is rm, or cannot be known)
RUN = "run"  # allowed: every command it runs is allowed
NO = "no-allow"  # reduced to commands, but no allow rule names them all
DENIAL = 'Error: denied by permission rule "Bash(rm:*)" (command line)'
NO_RULE = "Error: denied: no permission rule allows this call (permission mode dontAsk)"
ALLOW = ["echo:*", "ls:*", "printf:*", "cat:*", "true", "grep:*", "wc:*"]
FORMS = [
    # the reports (S1, S3) and their neighbours: what bash runs is rm, or cannot be known
    (RM, "rm v"),
    (RM, "$'rm' v"),
    (RM, "$'\\x72m' v"),
    (RM, "$'\\162m' v"),
    (RM, "rm${IFS}v"),
    (RM, "time rm v"),
    (RM, "time -p rm v"),
    (RM, "$(:)rm v"),
    (RM, "`true`rm v"),
    (RM, "r\\\nm v"),
    (RM, "shopt -s expand_aliases; alias r=rm; r v"),
    (RM, "alias r=rm"),
    (RM, '$"rm" v'),
    (RM, "coproc rm v"),
    (RM, "${BASH:0:0}rm v"),
    (RM, "env rm v"),
    (RM, "env -i rm v"),
    (RM, "env A=1 rm v"),
    (RM, "env -u HOME rm v"),
    (RM, "command rm v"),
    (RM, "command -p rm v"),
    (RM, "builtin eval rm v"),
    (RM, "/bin/rm v"),
    (RM, "/usr/bin/rm v"),
    (RM, '"/bin/rm" v'),
    (RM, "timeout 5 rm v"),
    (RM, "timeout -s KILL 5 rm v"),
    (RM, "timeout --kill-after=1 5 rm v"),
    (RM, "nohup rm v"),
    (RM, "nice rm v"),
    (RM, "nice -n 5 rm v"),
    (RM, "echo v | xargs rm"),
    (RM, "xargs -n1 rm < v"),
    (RM, "xargs -I{} rm {} < v"),
    (RM, "find . -name v -exec rm {} \\;"),
    (RM, "find . -execdir rm {} +"),
    (RM, "bash -c 'rm v'"),
    (RM, 'sh -c "rm v"'),
    (RM, "bash -ec 'rm v'"),
    (RM, "bash -c 'echo x; rm v'"),
    (RM, "eval rm v"),
    (RM, "eval 'rm v'"),
    (RM, 'eval "echo; rm v"'),
    (RM, "echo x && rm v"),
    (RM, "echo $(rm v)"),
    (RM, 'echo "$(rm v)"'),
    (RM, "cat <(rm v)"),
    (RM, "exec rm v"),
    (RM, "exec -a x rm v"),
    (RM, "sudo -n rm v"),
    (RM, "stdbuf -oL rm v"),
    (RM, "setsid rm v"),
    (RM, "trap 'rm v' EXIT"),
    (RM, "watch -n 1 rm v"),
    (RM, "busybox rm v"),
    (RM, "\\rm v"),
    (RM, "r''m v"),
    (RM, '"r"m v'),
    (RM, 'r"m" v'),
    (RM, "x=rm; $x v"),
    (RM, "${x:-rm} v"),
    (RM, "$(echo rm) v"),
    (RM, '"$(printf rm)" v'),
    (RM, "{rm,v}"),
    (RM, "/bin/r? v"),
    (RM, 'cmd=rm; "$cmd" v'),
    (RM, "f() { rm v; }; f"),
    (RM, "if true; then rm v; fi"),
    (RM, "while false; do rm v; done"),
    (RM, "case x in x) rm v;; esac"),
    (RM, "(rm v)"),
    (RM, "{ rm v; }"),
    (RM, "! rm v"),
    (RM, "rm v &"),
    (RM, "echo x; rm v"),
    (RM, "echo x || rm v"),
    (RM, "echo ${x:=`rm v`}"),
    (RM, "a=$(rm v)"),
    (RM, "export A=$(rm v)"),
    (RM, "echo $((1+$(rm v)))"),
    (RM, "cat <<EOF\n$(rm v)\nEOF"),
    (RM, "PATH=/tmp/evil:$PATH ls"),
    (RM, "PATH=/tmp/evil:$PATH; ls"),
    (RM, "export PATH=/tmp/evil:$PATH; ls"),
    (RM, "BASH_ENV=/tmp/x bash -c true"),
    (RM, "a='x[$(rm v)]'; echo $((a))"),
    (RM, "x='$(rm v)'; echo ${x@P}"),
    (RM, "echo ${!x}"),
    (RM, "echo ${a[b]}"),
    (RM, "read n; echo $((n))"),
    (RM, "[[ $n -eq 1 ]]"),
    (RM, "declare -n r='a[$(rm v)]'"),
    (RM, "declare -i x='a[$(rm v)]'"),
    (RM, "printf -v 'a[$(rm v)]' x"),
    (RM, "unset 'a[$(rm v)]'"),
    (RM, "read 'a[$(rm v)]' < /dev/null"),
    (RM, "let 'x=a'"),
    (RM, "hash -p /bin/rm ls; ls v"),
    (RM, "enable -n echo"),
    (RM, "bind -x '\"a\":rm v'"),
    (RM, "complete -C 'rm v' x"),
    (RM, "mapfile -C 'rm v' a < v"),
    (RM, "fc -s rm"),
    (RM, "coproc X { rm v; }"),
    (RM, "time { rm v; }"),
    (RM, "echo 'rm v' | sh"),
    (RM, "bash -s < v"),
    (RM, "env -S 'rm v'"),
    (RM, "nice -n 5 $x v"),
    (RM, "timeout 5 $(echo rm) v"),
    (RM, "xargs $x < v"),
    (RM, "find . -exec $x {} \\;"),
    (RM, "find . -exec {} \\;"),
    (RM, "echo ${x:$(rm v)}"),
    (RM, "a[$(rm v)]=1"),
    (RM, "a[b]=1"),
    (RM, "IFS=x; echo"),
    (RM, "PS4='$(rm v)'; set -x; echo"),
    (RM, "PROMPT_COMMAND='rm v'"),
    (RM, "LD_PRELOAD=/tmp/x.so ls"),
    (RM, "BASH_CMDS[ls]=/bin/rm; ls v"),
    (RM, "echo ${x:a:b}"),
    (RM, "x=$(cat v); echo $((x))"),
    (RM, "[[ -v $n ]]"),
    (RM, "for ((i=0; i<n; i++)); do echo; done"),
    (RM, "echo $((${x}))"),
    (RM, "# c \\\nr\\\nm v"),
    (RM, 'echo "\\$(rm v)"'),
    (RM, 'sh -c "$x"'),
    (RM, 'eval "$x"'),
    (RM, 'trap "$x" EXIT'),
    # ordinary lines still run
    (RUN, "echo hi"),
    (RUN, 'echo "hi there"'),
    (RUN, "echo 'a b'"),
    (RUN, "echo $'a\\tb'"),
    (RUN, "ls"),
    (RUN, "ls -la"),
    (RUN, "echo hi | grep h"),
    (RUN, "echo $HOME"),
    (RUN, 'echo "$HOME"'),
    (RUN, "echo ${HOME}"),
    (RUN, "echo ${#HOME}"),
    (RUN, "echo ${HOME:-x}"),
    (RUN, "echo ${HOME:0:3}"),
    (RUN, "echo $((1+2))"),
    (RUN, "for i in 1 2 3; do echo $((i*2)); done"),
    (RUN, "i=3; echo $((i+1))"),
    (RUN, "echo $(echo nested)"),
    (RUN, "echo `echo x`"),
    (RUN, "cat <(echo a)"),
    (RUN, "echo x > /dev/null"),
    (RUN, "echo x 2>&1"),
    (RUN, "time echo x"),
    (RUN, "timeout 5 echo x"),
    (RUN, "nice -n 5 echo x"),
    (RUN, "nohup echo x 2>/dev/null"),
    (RUN, "command echo x"),
    (RUN, "echo *"),
    (RUN, "echo {a,b}"),
    (RUN, "echo ~"),
    (RUN, "cat <<EOF\nhello\nEOF"),
    (RUN, "cat <<'EOF'\n$(rm v)\nEOF"),
    (RUN, "echo '$(rm v)'"),
    (RUN, "echo '${x@P}'"),
    (RUN, "printf '%s\\n' a"),
    (RUN, "echo a; echo b"),
    (RUN, "echo a && ls"),
    (RUN, "if true; then echo y; fi"),
    (RUN, "true && echo x"),
    (RUN, "{ echo a; }"),
    (RUN, "(echo a)"),
    (RUN, "echo ${a[@]}"),
    (RUN, "echo ${!a[@]}"),
    (RUN, "echo $#"),
    (RUN, "echo $((RANDOM % 2))"),
    (RUN, "x=1; echo $x"),
    (RUN, "echo hi # rm v"),
    (RUN, 'echo "rm v"'),
    (RUN, "echo rm v"),
    (RUN, "grep -r 'rm -rf' v"),
    (RUN, "ls | wc -l"),
    (RUN, "echo x\\\ny"),
    (RUN, "echo ${x@Q}"),
    (RUN, "echo ${a[1]}"),
    # reduced to commands no allow rule names: not allowed under dontAsk
    (NO, "touch x"),
    (NO, "FOO=1 echo x"),
    (NO, "A=1; echo"),
    (NO, "source x"),
    (NO, ". x"),
    (NO, "/bin/echo hi"),
    (NO, "bash x.sh"),
    (NO, "env echo x"),
    (NO, "echo a | xargs echo"),
    (RM, "python3 -c 'print(1)'"),  # code in an argument: opaque (docs: permissions)
    (NO, "eval echo hi"),
    (NO, "bash -c 'echo hi'"),
    (NO, "bash"),  # reads the caller's stdin (empty for the Bash tool; typed lines are judged)
    (NO, "bash --norc"),
    (RM, "echo rm v | bash -s"),  # a shell reading commands from a pipe or a file
    (RM, "bash < v"),
    (RM, "bash <<< 'rm v'"),
    (RM, "bash <(echo rm v)"),
    (RM, "cat v | sh -"),
    (RM, "a='x[$(touch P1)]'; echo $((a))"),  # S1 exactly as reported
    (RM, "x='$(touch P2)'; echo ${x@P}"),
    (RM, "PATH=$PWD/evil:$PATH; ls"),
    (RM, "read PATH < v; ls"),  # names that change what runs, set another way
    (RM, "for PATH in /tmp; do ls; done"),
    (RM, "echo ${PATH:=/tmp/x}; ls"),
    (RM, "test -v 'a[$(rm v)]'"),
    (RM, "[ -v 'a[$(rm v)]' ]"),
    (RM, "source /dev/stdin <<< 'rm v'"),  # commands from a pipe or a descriptor
    (RM, ". <(echo rm v)"),
    (RM, "bash /dev/fd/3 3<<<'rm v'"),
    (RM, "bash <<EOF\nrm v\nEOF"),
    (RM, "strace -f rm v"),  # more wrappers
    (RM, "su -c 'rm v'"),
    (RM, "script -q -c 'rm v' /dev/null"),
    (RM, "flock /tmp/l rm v"),
    (RM, "flock -n /tmp/l -c 'rm v'"),
    (RM, "chroot / rm v"),
    (RM, "/usr/bin/time -f %e rm v"),
    (RM, "unshare -r rm v"),
    (RM, "firejail --net=none rm v"),
    (RM, "echo rm v | su"),
    (RM, "setpriv --reuid=1 rm v"),
    (RM, "taskset 1 rm v"),
    (RM, "bash -c 'r\\\nm v'"),  # a continuation inside the evaluated line
    (RM, "echo $'\\\\'$;$''rm&& echo \\$x\nx'"),  # tree-sitter ends this $'…' too late
    (RM, "bash -c \"$'\\x72m' v\""),  # a lone $ in double quotes is kept
    (RM, "coproc x=1 `echo rm` v"),  # keywords take assignments first
    (RM, "time a[i]=1 echo"),
    (RUN, "echo $'\\x'"),
    (RUN, 'echo "$"'),
    (RM, "echo rm v | xargs env"),  # the command would come from stdin
    (RM, "echo rm v | xargs timeout 5"),
    (NO, "echo a | xargs sh -c 'echo \"$@\"' _"),
    (RUN, "[ -f v ] && echo ok"),
    (NO, "test -f v"),
    (NO, "read -r line < v"),
    (NO, "source ./x.sh"),
    (NO, "echo $(touch x)"),
    (NO, "time touch x"),
    (NO, "nohup touch x"),
]


def test_the_table_has_a_hundred_forms():
    assert len(FORMS) >= 100
    assert len({form for _, form in FORMS}) == len(FORMS)


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """Every form's tool result, from one run."""
    import os
    import subprocess

    from conftest import AGI, PROVIDER_VARS

    home = tmp_path_factory.mktemp("judge")
    (home / "v").write_text("keep me\n")
    (home / "evil").mkdir()  # a planted ls, first in a PATH a line sets
    (home / "evil" / "ls").write_text(f"#!/bin/sh\ntouch {home}/PLANTED\n")
    (home / "evil" / "ls").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(PROVIDER_VARS)}
    env.update(AGI_HOME=str(home / "agi-home"), AGI_CONFIG=str(home / "config.toml"))
    (home / "config.toml").touch()
    step = calls(*[("Bash", {"command": form, "timeout": 10000}) for _, form in FORMS])
    args = ["--permission-mode", "dontAsk", "--deny", "Bash(rm:*)"]
    for rule in ALLOW:
        args += ["--allow", f"Bash({rule})"]
    with FakeModel(step, text("done")) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="fake-model")
        r = subprocess.run(
            [AGI, *args, "go"],
            env=env,
            cwd=home,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
    assert r.returncode == 0, r.stderr
    results = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert len(results) == len(FORMS)
    survived = (home / "v").exists() and (home / "v").read_text() == "keep me\n"
    survived = survived and not any((home / name).exists() for name in ("P1", "P2", "PLANTED"))
    return dict(zip([form for _, form in FORMS], results, strict=True)), survived


def test_no_form_removed_the_file(judged):
    assert judged[1], "a form that should have been denied ran rm"


@pytest.mark.parametrize(("expected", "form"), FORMS, ids=[repr(f)[:40] for _, f in FORMS])
def test_form(judged, expected, form):
    result = judged[0][form]
    if expected == RM:
        assert result == DENIAL
    elif expected == NO:
        assert result == NO_RULE
    else:
        assert not result.startswith("Error: denied"), result


# --- the class stays closed: rm wrapped, quoted and nested at random is always denied ----------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from agi.policy.permissions import Permissions, decide, parse_rules  # noqa: E402

RULES = Permissions(
    parse_rules(["Bash(rm:*)"], "deny", "command line", "/")
    + parse_rules([f"Bash({r})" for r in ALLOW], "allow", "command line", "/"),
    "dontAsk",
)
SPELLINGS = [
    "rm", "$'rm'", "$'\\x72m'", '$"rm"', "'rm'", '"rm"', "r''m", 'r""m', "\\rm", "/bin/rm",
    "/usr/bin/rm", '"/bin/rm"', "r\\\nm", "${BASH:0:0}rm", "$(:)rm", "rm${IFS}", "$X", "${x:-rm}",
]  # fmt: skip
WRAPPERS = [
    "{}", "time {}", "time -p {}", "nohup {}", "nice {}", "nice -n 5 {}", "timeout 5 {}",
    "env {}", "env A=1 {}", "env -i {}", "command {}", "builtin {}", "exec {}", "setsid {}",
    "stdbuf -oL {}", "sudo {}", "busybox {}", "coproc {}", "echo v | xargs {}",
    "find . -exec {} \\;", "! {}", "({})", "{{ {}; }}", "echo x && {}", "echo x; {}",
    "echo $({})", "echo `{}`", "echo <({})", "if true; then {}; fi", "f() {{ {}; }}; f",
    "while false; do {}; done", "{} &", "echo x | {}", "a=$({})", "strace -f {}",
    "chroot / {}", "flock /tmp/l {}", "unshare -r {}", "/usr/bin/time -f %e {}", "taskset 1 {}",
]  # fmt: skip
SHELLS = [
    "bash -c {}", "sh -c {}", "eval {}", "trap {} EXIT", "watch {}", "bash -xc {}", "su -c {}",
    "script -qc {} /dev/null", "flock /tmp/l -c {}",
]  # fmt: skip


def quoted(line: str) -> str:
    import shlex

    return shlex.quote(line)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(SPELLINGS),
    st.lists(st.sampled_from(WRAPPERS) | st.sampled_from(SHELLS), min_size=1, max_size=4),
)
def test_rm_under_any_wrapping_is_denied_and_never_allowed(spelling, layers):
    line = f"{spelling} v"
    for layer in layers:
        line = layer.format(quoted(line) if layer in SHELLS else line)
    decision = decide(RULES, "Bash", {"command": line}, "/tmp")
    assert decision.verdict == "deny", line
    assert decision.rule is not None and decision.rule.text == "Bash(rm:*)", line


@settings(max_examples=200, deadline=None)
@given(
    st.text(st.sampled_from(list("echo rm$'\"`\\(){};&|<>!#=[]*?~ \n\t:-x${IFS}@P")), max_size=30)
)
def test_no_line_is_allowed_unless_every_command_it_runs_is_allowed(line):
    """Random shell-ish text: whatever the judge allows, each part it found is an allowed
    command, and no line that mentions rm as a command word is allowed."""
    from agi.policy.bash.parse import split

    decision = decide(RULES, "Bash", {"command": line}, "/tmp")
    if decision.verdict != "allow":
        return
    parts = split(line)
    assert parts is not None, line
    assert all(
        p.transparent
        or p.words
        and p.words[0] in ("echo", "ls", "printf", "cat", "true", "grep", "wc")
        for p in parts
    ), line


# --- differential: what the judge lets through, real bash runs without running rm --------------

FRAGMENTS = [
    "rm", "x", " ", ";", "'", '"', "\\", "\\'", '\\"', "\\;", "\\ ", "\\\n", "\n", "$'", "'\\''",
    "$'\\''", "$'\\\\'", '$"', "`", "$(", ")", "#", "&", "|", "{", "}", "$", "${", "\\`", "\\$",
    "$((1))", "<<", "EOF", "\t", "=", "!", "(", "a=1 ",
]  # fmt: skip


def stub_bin(tmp: Path) -> Path:
    """A PATH where rm, cat, ls, grep and wc only log that they ran, and the wrappers are real."""
    import shutil

    stubs = tmp / "bin"
    stubs.mkdir()
    for name in ("rm", "cat", "ls", "grep", "wc", "touch"):
        (stubs / name).write_text(f'#!/bin/sh\necho "{name} $*" >> "{tmp}/log"\n')
        (stubs / name).chmod(0o755)
    for name in ("env", "timeout", "nohup", "nice", "xargs", "find", "sh", "bash", "setsid"):
        real = shutil.which(name)
        if real:
            (stubs / name).symlink_to(real)
    return stubs


def runs_rm(line: str, tmp: Path, stubs: Path) -> bool:
    import subprocess

    log = tmp / "log"
    log.unlink(missing_ok=True)
    try:
        subprocess.run(
            ["/bin/bash", "-c", line], env={"PATH": str(stubs)}, cwd=tmp, timeout=5,
            stdin=subprocess.DEVNULL, capture_output=True,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pass
    return log.exists() and any(row.startswith("rm") for row in log.read_text().splitlines())


@pytest.fixture(scope="module")
def sandbox_bin(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bashdiff")
    (tmp / "v").write_text("v\n")
    return tmp, stub_bin(tmp)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=6), min_size=1, max_size=4),
    st.sampled_from([";", "\n", "&&", "|", ""]),
)
def test_a_line_the_judge_lets_through_runs_no_rm(sandbox_bin, words, joiner):
    tmp, stubs = sandbox_bin
    line = "echo " + " ".join("".join(w) for w in words)
    line += f"{joiner} echo x" if joiner else ""
    decision = decide(RULES, "Bash", {"command": line}, str(tmp))
    if decision.verdict == "deny":
        return
    assert not runs_rm(line, tmp, stubs), line


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(SPELLINGS),
    st.lists(st.sampled_from(WRAPPERS[:20]) | st.sampled_from(SHELLS[:4]), min_size=1, max_size=3),
)
def test_a_wrapped_rm_the_judge_does_not_deny_never_runs(sandbox_bin, spelling, layers):
    tmp, stubs = sandbox_bin
    line = f"{spelling} v"
    for layer in layers:
        line = layer.format(quoted(line) if layer in SHELLS else line)
    decision = decide(RULES, "Bash", {"command": line}, str(tmp))
    if decision.verdict == "deny" and decision.rule and decision.rule.text == "Bash(rm:*)":
        return
    assert not runs_rm(line, tmp, stubs), line
