"""make under a `Bash(make:*)` rule (docs: permissions): the rule vouches for the project's
recipes, not for code given in make's arguments: `--eval`/`-E` (and its prefixes), a makefile
named by `-f`, another directory's by `-C`, a variable set on the command line (`SHELL=…`,
`CC=…`), a word of unknown value. Those are opaque: denied by the first Bash deny rule, allowed
only by a rule naming the option. Through `decide`, and end to end: the real `agi` in dontAsk
mode with a scripted model calling Bash, where the files the attacks aim at must never appear."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agi.policy.permissions import Permissions, decide, parse_rule

from fakeserver import FakeModel, calls, text

ATTACKS = [
    "make --eval='x:;@touch PWN' x", "make --ev='x:;@touch PWN' x", "make -E 'x:;@touch PWN' x",
    "make -sE 'x:;@touch PWN' x", "make -f /outside/Makefile", "make -f/outside/Makefile",
    "make --file=/outside/Makefile", "make --makefile /outside/Makefile", "make -C /outside",
    "make --directory=/outside", "make SHELL=/outside/sh test", "make 'CC=touch PWN;' test",
    "make test .SHELLFLAGS='-c touch PWN;'", 'make "$target"', "gmake -E x", "bmake -f M",
]  # fmt: skip


def rules(allow=("Bash(make:*)",), deny=()) -> Permissions:
    found = [parse_rule(a, "allow", "command line", "/tmp") for a in allow]
    found += [parse_rule(d, "deny", "command line", "/tmp") for d in deny]
    return Permissions(found, "dontAsk")


@pytest.mark.parametrize("line", ATTACKS)
def test_make_s_rule_does_not_vouch_for_code_in_its_arguments(line):
    broad = ("Bash(make:*)", "Bash(gmake:*)", "Bash(bmake:*)")
    assert decide(rules(broad), "Bash", {"command": line}, "/tmp").verdict == "none", line
    denied = decide(rules(broad, deny=("Bash(rm:*)",)), "Bash", {"command": line}, "/tmp")
    assert denied.verdict == "deny", line  # opaque: the first Bash deny rule


@pytest.mark.parametrize(
    "line",
    ["make", "make test", "make -j4 test", "make -j 4 all", "make -k -s check", "make -I inc"],
)
def test_the_project_s_recipes_stay_allowed(line):
    assert decide(rules(), "Bash", {"command": line}, "/tmp").verdict == "allow", line


@pytest.mark.parametrize(
    ("rule", "line"),
    [
        ("Bash(make -C:*)", "make -C sub test"),
        ("Bash(make -f:*)", "make -f other.mk"),
        ("Bash(make --eval:*)", "make --eval 'x:;@:' x"),
        ("Bash(make PREFIX=/usr install)", "make PREFIX=/usr install"),
    ],
)
def test_a_rule_naming_the_option_vouches_for_it(rule, line):
    decision = decide(rules((rule,)), "Bash", {"command": line}, "/tmp")
    assert decision.verdict == "allow" and decision.rule is not None and decision.rule.text == rule


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_attacks_fail_end_to_end_in_dont_ask_mode(agi, tmp_path: Path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "Makefile").write_text("test:\n\t@echo recipe-ran\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "Makefile").write_text("all:\n\t@touch PWN-outside\n")
    attacks = [
        "make --eval='x:;@touch PWN1' x",
        "make -E 'x:;@touch PWN2' x",
        f"make -f {outside}/Makefile",
        f"make -C {outside}",
        "make 'SHELL=/bin/sh' '.SHELLFLAGS=-c touch PWN3;' test",
    ]
    step = calls(*[("Bash", {"command": line}) for line in [*attacks, "make test"]])
    args = ["--permission-mode", "dontAsk", "--allow", "Bash(make:*)"]
    with FakeModel(step, text("done")) as server:
        r = agi(*args, "go", server=server, cwd=project)
    assert r.returncode == 0, r.stderr
    results = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert len(results) == len(attacks) + 1
    for line, result in zip(attacks, results, strict=False):
        assert result.startswith("Error: denied"), (line, result)
    assert results[-1] == "recipe-ran"
    made = [p.name for d in (project, outside) for p in d.iterdir() if p.name.startswith("PWN")]
    assert made == []
