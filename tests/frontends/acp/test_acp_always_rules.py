"""ACP "always" answers never widen a rule past what section 16 of the docs describes (docs:
acp): one `Bash(NAME[ SUB]:*)` per command of a line, the subcommand kept after global options
(`git -c … status`), and no "always" choice for a line whose command names are not plain words
(`(echo one)`, `[ -d . ]`). The real `agi --acp` with the library's client; what the rules
learned must not let a later `git -c alias.x='!touch PWNED' x` run unasked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from acp_client import Agent, Recorder, agi_argv, run

from conftest import AGI
from fakeserver import FakeModel, calls, text

pytestmark = pytest.mark.timeout(180)

FIRST = [
    "(echo one)",
    "[ -d . ] && echo yes",
    "git -c color.ui=never status",
    "git -C sub log",
    "echo a && git commit -m x",
]
SECOND = ["git -c alias.x='!touch PWNED' x", "echo later", "git status --short"]


def test_always_answers_add_one_narrow_rule_per_command_or_none(env, tmp_path: Path):
    turn = {"n": 1}

    def answer(request: dict) -> str:
        offered = {o["optionId"] for o in request["options"]}
        if turn["n"] == 1 and "allow_always" in offered:
            return "allow_always"
        return "allow_once" if turn["n"] == 1 else "reject_once"

    async def go(server: FakeModel) -> tuple[Recorder, str]:
        client = Recorder(answer=answer)
        env_ = {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}
        async with Agent(agi_argv(AGI), env_, tmp_path, client) as agent:
            sid = await agent.start()
            await agent.prompt(sid, "first")
            turn["n"] = 2
            await agent.prompt(sid, "second")
            await agent.close()
            agent.assert_valid()
        return client, sid

    with FakeModel(
        calls(*[("Bash", {"command": line}) for line in FIRST]),
        text("ok"),
        calls(*[("Bash", {"command": line}) for line in SECOND]),
        text("ok"),
    ) as server:
        client, sid = run(go(server))

    offers = {r["toolCall"]["rawInput"]["command"]: r["options"] for r in client.asked}
    for line in FIRST[:2]:  # not plain command names: once only
        assert [o["optionId"] for o in offers[line]] == ["allow_once", "reject_once"], line
    for line in FIRST[2:]:
        assert "allow_always" in [o["optionId"] for o in offers[line]], line
    rules = json.loads((Path(sid) / "settings.json").read_text())["permissions"]["allow"]
    assert sorted(rules) == [
        "Bash(echo:*)",
        "Bash(git commit:*)",
        "Bash(git log:*)",
        "Bash(git status:*)",
    ]
    asked_later = [r["toolCall"]["rawInput"]["command"] for r in client.asked[len(FIRST) :]]
    assert asked_later == [SECOND[0]]  # the learned rules cover the others, not the alias
    assert not (tmp_path / "PWNED").exists()


def test_always_on_a_terminal_call_adds_the_rules_of_its_line_not_terminal(env, tmp_path: Path):
    """`allow_always` on a Terminal starting `echo hi` keeps `Bash(echo:*)` (which then allows
    that line in a terminal too), never the bare `Terminal`: a later terminal running another
    command is asked about."""
    turn = {"n": 1}

    def answer(request: dict) -> str:
        return "allow_always" if turn["n"] == 1 else "reject_once"

    async def go(server: FakeModel) -> tuple[Recorder, str]:
        client = Recorder(answer=answer)
        env_ = {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}
        async with Agent(agi_argv(AGI), env_, tmp_path, client) as agent:
            sid = await agent.start()
            await agent.prompt(sid, "first")
            turn["n"] = 2
            await agent.prompt(sid, "second")
            await agent.close()
            agent.assert_valid()
        return client, sid

    start = {"action": "start", "command": "echo hi", "wait_ms": 100}
    later = {"action": "start", "command": "touch PWNED", "wait_ms": 100}
    with FakeModel(
        calls(("Terminal", start)),
        text("ok"),
        calls(("Terminal", {**start, "id": "again"}), ("Terminal", later)),
        text("ok"),
    ) as server:
        client, sid = run(go(server))
    rules = json.loads((Path(sid) / "settings.json").read_text())["permissions"]["allow"]
    assert rules == ["Bash(echo:*)"]
    asked = [r["toolCall"]["rawInput"].get("command") for r in client.asked]
    assert asked == ["echo hi", "touch PWNED"]  # the second `echo hi` ran unasked
    assert not (tmp_path / "PWNED").exists()
