"""--schema and --exit-code through the real executable: ghost conversations, exit codes, jq."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from conftest import AGI
from fakeserver import FakeModel, text

SYSTEM = (
    'distro:str:"Distribution name", cores:int(1..):"CPU cores", '
    'load:dec(0..):"1-minute load average", swap:bool:"Is swap enabled?"'
)


def stored(session) -> list[dict]:
    return [json.loads(line) for line in (session / "messages.jsonl").read_text().splitlines()]


def mentions_json(message: dict) -> bool:
    content = str(message.get("content", ""))
    return any(w in content for w in ("JSON", "schema", "cores", "{"))


def test_invalid_json_is_answered_with_the_error_then_valid_json_is_printed(agi, tmp_path, env):
    s = tmp_path / "s"
    script = [
        text("It is Debian 12 with 2 cores."),
        text('{"distro": "Debian", "cores": 0, "load": 0.5, "swap": false}'),
        text('```json\n{"distro": "Debian", "cores": 2, "load": 0.5, "swap": false}\n```'),
    ]
    with FakeModel(*script) as server:
        r = agi("--schema", SYSTEM, "-s", str(s), "Describe this machine", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == '{"distro":"Debian","cores":2,"load":0.5,"swap":false}\n'
    # the first JSON request asks for the schema, the second carries the validation error
    first, second = server.requests[1], server.requests[2]
    assert "response_format" in first and first["response_format"]["type"] == "json_schema"
    assert first["response_format"]["json_schema"]["schema"]["properties"]["cores"]["minimum"] == 1
    assert "tools" not in first
    error = second["messages"][-1]["content"]
    assert "cores" in error and "greater than or equal to 1" in error
    assert second["messages"][-2]["content"].startswith('{"distro": "Debian", "cores": 0')
    # the session holds the prompt and the normal answer, nothing about JSON
    assert stored(s) == [
        {"role": "user", "content": "Describe this machine"},
        {"role": "assistant", "content": "It is Debian 12 with 2 cores."},
    ]
    trace = [json.loads(x) for x in (s / "trace.jsonl").open()]
    assert [t.get("ghost", False) for t in trace if t["type"] == "request"] == [False, True, True]
    if shutil.which("jq"):
        load = subprocess.run(["jq", ".load"], input=r.stdout, capture_output=True, text=True)
        assert load.stdout == "0.5\n"


def test_three_invalid_replies_exit_5(agi, tmp_path):
    s = tmp_path / "s"
    with FakeModel(text("an answer"), text("not json at all")) as server:
        r = agi("--schema", "score:integer(0..100)", "-s", str(s), "rate it", server=server)
    assert r.returncode == 5
    assert r.stdout == ""
    assert r.stderr.startswith("agi: no valid JSON after 3 attempts") and r.stderr.count("\n") == 1
    assert len(server.requests) == 4
    assert [m["content"] for m in stored(s)] == ["rate it", "an answer"]


def test_bad_schema_exits_2_with_a_caret_and_sends_nothing(agi):
    with FakeModel(text("never")) as server:
        r = agi("--schema", "name:str, age:int(0..", "hi", server=server)
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert lines[0].startswith("agi: bad --schema at column 22")
    assert lines[1:] == ["name:str, age:int(0..", " " * 21 + "^"]
    assert server.requests == []


def test_list_schema_prints_an_array(agi):
    with FakeModel(
        text("Plan: a, b"), text('[{"task_title": "a"}, {"task_title": "b"}]')
    ) as server:
        r = agi("--schema", '[task_title:string:"Title of the subtask"]', "plan", server=server)
    assert r.stdout == '[{"task_title":"a"},{"task_title":"b"}]\n'
    schema = server.requests[1]["response_format"]["json_schema"]["schema"]
    assert schema["type"] == "array" and schema["items"]["required"] == ["task_title"]


def test_recipe_questionnaire_in_one_session(agi, tmp_path):
    """The README pattern: a chain of prompts in one session, the last one answered as JSON."""
    s = tmp_path / "recipe"
    answers = [
        "Pasta with tomatoes.",
        "Pasta, tomatoes, garlic, olive oil.",
        "Boil, fry, mix.",
        "20 minutes.",
        "Serves 2.",
    ]
    script = [text(a) for a in answers] + [
        text('{"dish": "Pasta al pomodoro", "minutes": 20, "ingredients": ["pasta", "tomatoes"]}'),
        text("Add basil."),
    ]
    questions = [
        "What can I cook tonight?",
        "What do I need?",
        "How do I make it?",
        "How long does it take?",
        "How many does it serve?",
    ]
    with FakeModel(*script) as server:
        for q in questions[:-1]:
            assert agi("-s", str(s), q, server=server).returncode == 0
        r = agi(
            "-s",
            str(s),
            "--schema",
            "dish:str, minutes:int(1..), ingredients:str[]",
            questions[-1],
            server=server,
        )
        assert json.loads(r.stdout)["minutes"] == 20
        sixth = agi("-s", str(s), "Any tip?", server=server)
    assert sixth.stdout == "Add basil.\n"
    last = server.requests[-1]
    assert "response_format" not in last
    assert not any(mentions_json(m) for m in last["messages"] if m["role"] != "system")
    conversation = [m["content"] for m in last["messages"] if m["role"] != "system"]
    assert conversation == [x for pair in zip(questions, answers, strict=True) for x in pair] + [
        "Any tip?"
    ]


def judge(success: bool, reason: str):
    return text(json.dumps({"reason": reason, "success": success}))


def test_exit_code_success_and_failure(agi, tmp_path):
    s = tmp_path / "s"
    with FakeModel(text("P=NP is unproven."), judge(False, "an open problem")) as server:
        r = agi("-s", str(s), "--exit-code", "prove P=NP", server=server)
    assert r.returncode == 1
    assert r.stdout == "P=NP is unproven.\n"  # the answer is still printed
    assert r.stderr == "agi: judged failed: an open problem\n"
    request = server.requests[1]
    assert "prove P=NP" in request["messages"][-3]["content"]  # the prompt, not a criterion
    assert "impossible task is a failure" in request["messages"][-1]["content"]
    assert [m["content"] for m in stored(s)] == ["prove P=NP", "P=NP is unproven."]

    with FakeModel(text("4"), judge(True, "correct")) as server:
        ok = agi("--exit-code=the answer is a number", "--output", "json", "2+2?", server=server)
    assert ok.returncode == 0
    result = json.loads(ok.stdout)
    assert result["answer"] == "4" and result["judgement"] == {"reason": "correct", "success": True}
    assert "the answer is a number" in server.requests[1]["messages"][-1]["content"]


def test_schema_and_exit_code_together(agi):
    with FakeModel(
        text("Debian"), text('{"distro": "Debian"}'), judge(False, "unverified")
    ) as server:
        r = agi("--schema", "distro:str", "--exit-code", "what distro?", server=server)
    assert r.returncode == 1
    assert r.stdout == '{"distro":"Debian"}\n'
    assert len(server.requests) == 3


@pytest.mark.parametrize(
    "spec",
    ['{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}', "@FILE"],
)
def test_json_schema_literal_and_file(agi, tmp_path, spec):
    if spec == "@FILE":
        (tmp_path / "s.json").write_text(
            '{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}'
        )
        spec = f"@{tmp_path / 's.json'}"
    with FakeModel(text("seven"), text('{"n": 7}')) as server:
        r = agi("--schema", spec, "count", server=server)
    assert r.returncode == 0 and r.stdout == '{"n":7}\n'


def test_terminal_shows_the_judgement(env, tmp_path):
    from test_terminal_view import run_with_tty_stderr

    with FakeModel(text("done"), judge(True, "the file exists")) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="m")
        code, out, err = run_with_tty_stderr(["--exit-code", "make a file"], env, tmp_path)
    assert code == 0 and out == "done\n"
    assert "success" in err and "the file exists" in err


def test_exit_code_is_not_eaten_as_criteria_by_a_following_prompt(env, tmp_path):
    with FakeModel(text("no"), judge(False, "impossible")) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="m")
        r = subprocess.run(
            [AGI, "--exit-code", "guess", "what", "I'm", "thinking"],
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=30,
        )
    assert r.returncode == 1
    assert server.requests[0]["messages"][-1]["content"] == "guess what I'm thinking"


def test_schema_and_exit_code_from_the_config_file(agi, env):
    from pathlib import Path

    Path(env["AGI_CONFIG"]).write_text('schema = "n:int"\nexit_code = true\n')
    with FakeModel(text("seven"), text('{"n": 7}'), judge(True, "fine")) as server:
        r = agi("count", server=server)
    assert r.returncode == 0 and r.stdout == '{"n":7}\n'
    assert len(server.requests) == 3
