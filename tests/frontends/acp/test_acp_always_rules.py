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


def two_prompts(env, tmp_path: Path, answer, *script) -> tuple[Recorder, str]:
    """Prompts "first" then "second" in one session of the real `agi --acp`, each permission
    request answered by `answer(request, turn)`; the client and the session's directory."""
    turn = {"n": 1}

    async def go(server: FakeModel) -> tuple[Recorder, str]:
        client = Recorder(answer=lambda request: answer(request, turn["n"]))
        env_ = {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}
        async with Agent(agi_argv(AGI), env_, tmp_path, client) as agent:
            sid = await agent.start()
            await agent.prompt(sid, "first")
            turn["n"] = 2
            await agent.prompt(sid, "second")
            await agent.close()
            agent.assert_valid()
        return client, sid

    with FakeModel(*script) as server:
        return run(go(server))


def test_always_answers_add_one_narrow_rule_per_command_or_none(env, tmp_path: Path):
    def answer(request: dict, turn: int) -> str:
        offered = {o["optionId"] for o in request["options"]}
        if turn == 1 and "allow_always" in offered:
            return "allow_always"
        return "allow_once" if turn == 1 else "reject_once"

    client, sid = two_prompts(
        env,
        tmp_path,
        answer,
        calls(*[("Bash", {"command": line}) for line in FIRST]),
        text("ok"),
        calls(*[("Bash", {"command": line}) for line in SECOND]),
        text("ok"),
    )

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
    start = {"action": "start", "command": "echo hi", "wait_ms": 100}
    later = {"action": "start", "command": "touch PWNED", "wait_ms": 100}
    client, sid = two_prompts(
        env,
        tmp_path,
        lambda request, turn: "allow_always" if turn == 1 else "reject_once",
        calls(("Terminal", start)),
        text("ok"),
        calls(("Terminal", {**start, "id": "again"}), ("Terminal", later)),
        text("ok"),
    )
    rules = json.loads((Path(sid) / "settings.json").read_text())["permissions"]["allow"]
    assert rules == ["Bash(echo:*)"]
    asked = [r["toolCall"]["rawInput"].get("command") for r in client.asked]
    assert asked == ["echo hi", "touch PWNED"]  # the second `echo hi` ran unasked
    assert not (tmp_path / "PWNED").exists()
