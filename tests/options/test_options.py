"""The options layer (docs: configuration): one precedence for every front end, errors that name
where a setting came from, resolving that runs nothing, and the first-hour papercuts of the
command line. The real executable against the scripted model server; Neovim in a real headless
Neovim."""

# ruff: noqa: F811  (the Neovim fixtures imported from test_nvim are test parameters here)
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_nvim import PY_BUFFER, editor, manifest, needs_nvim  # noqa: F401  (fixtures)

from fakeserver import FakeModel, call, status, text

README = Path(__file__).resolve().parents[2] / "docs" / "reference" / "configuration.md"


def config(env: dict[str, str], body: str) -> Path:
    path = Path(env["AGI_CONFIG"])
    path.write_text(body)
    return path


def offered(request: dict) -> list[str]:
    return sorted(t["function"]["name"] for t in request.get("tools") or [])


# ---------------------------------------------------------------- a later layer replaces


@pytest.mark.parametrize(
    ("file", "flags", "expected"),
    [
        ('tools = "Bash,Read"', ["--no-tools"], []),
        ('tools = "Bash,Read"', ["--tools", "Read"], ["Read"]),
        ('tools = ["Bash", "Read"]', [], ["Bash", "Read"]),
        ("no_tools = true", ["--tools", "Read"], ["Read"]),
        ("no_tools = true", [], []),
    ],
)
def test_the_command_line_replaces_the_files_tool_choice(agi, env, file, flags, expected):
    config(env, file + "\n")
    with FakeModel(text("done")) as server:
        r = agi(*flags, "hi", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"
    assert offered(server.requests[0]) == expected


def test_no_bash_replaces_the_files_allowlist(agi, env, tmp_path):
    """--no-bash offers no built-in tool, and says nothing more: the file's `tools` (naming
    built-in tools) no longer applies, so the run offers the user's own tools only."""
    config(env, 'tools = "Bash,Read"\n')
    tool = tmp_path / "shout"
    tool.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --describe ]; then\n'
        '  echo \'{"name": "shout", "description": "upper-case",'
        ' "parameters": {"type": "object", "properties": {}}}\'\n'
        "  exit 0\nfi\ntr a-z A-Z\n"
    )
    tool.chmod(0o755)
    with FakeModel(text("done")) as server:
        r = agi("--no-bash", "--tool", str(tool), "hi", server=server)
    assert r.returncode == 0, r.stderr
    assert offered(server.requests[0]) == ["shout"]


def test_the_environment_is_between_the_file_and_the_flags(agi, env):
    config(env, 'model = "from-file"\n')
    with FakeModel(text("a"), text("b")) as server:
        from_env = agi("hi", server=server)  # AGI_MODEL=fake-model from the fixture
        from_flag = agi("-m", "flag-model", "hi", server=server)
    assert from_env.returncode == 0 and from_flag.returncode == 0, from_env.stderr
    assert [q["model"] for q in server.requests] == ["fake-model", "flag-model"]


# ---------------------------------------------------------------- errors name their source


def test_a_bad_sys_entry_in_the_config_names_the_file_and_key(agi, env):
    path = config(env, 'sys = ["~/nowhere/terse.md"]\n')
    with FakeModel(text("never")) as server:
        r = agi("hi", server=server)
    assert r.returncode == 2
    assert r.stderr.startswith(f"agi: {path.name}: sys: cannot read ~/nowhere/terse.md"), r.stderr
    assert "--sys" not in r.stderr
    assert server.requests == []


def test_a_bad_sys_flag_names_the_flag(agi, tmp_path):
    with FakeModel(text("never")) as server:
        r = agi("--sys", str(tmp_path / "missing.md"), "hi", server=server)
    assert r.returncode == 2
    assert r.stderr.startswith(f"agi: --sys: cannot read {tmp_path / 'missing.md'}"), r.stderr


def test_a_bad_schema_in_the_config_names_the_file_and_key(agi, env):
    path = config(env, 'schema = "name: strr"\n')
    with FakeModel(text("never")) as server:
        r = agi("hi", server=server)
    assert r.returncode == 2
    assert f"{path.name}: schema" in r.stderr.splitlines()[0], r.stderr


def readme_config() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("# Configuration file")
    block = text[text.index("```toml", start) + len("```toml\n") :]
    return block[: block.index("```")]


def test_the_readmes_config_example_works_pasted_as_is(agi, env, tmp_path):
    """With the files it names present (under a HOME of the test's own), the example from the
    README runs: its model through its own provider table (the endpoint from AGI_BASE_URL,
    which the environment may set), its system prompt file, its hooks file, its judge."""
    home = tmp_path / "home"
    (home / ".config" / "agi").mkdir(parents=True)
    (home / ".config" / "agi" / "terse.md").write_text("Answer tersely.\n")
    (home / "hooks.json").write_text('{"hooks": {}}\n')
    config(env, readme_config())
    verdict = text(json.dumps({"success": True, "reason": "answered"}))
    with FakeModel(text("hello"), verdict) as server:
        r = agi("hi", server=server, extra_env={"HOME": str(home), "AGI_MODEL": ""})
    assert r.returncode == 0, r.stderr
    assert r.stdout == "hello\n"
    first = server.requests[0]
    assert first["model"] == "qwen2.5-coder"
    assert first["messages"][0]["content"].startswith("Answer tersely.")
    assert first["temperature"] == 0.2
    assert offered(first) == ["Bash", "Read"]
    assert len(server.requests) == 2  # exit_code = true: the answer was judged


# ---------------------------------------------------------------- resolving runs nothing


def command_dir(env: dict[str, str], marker: Path) -> None:
    commands = Path(env["AGI_CONFIG"]).parent / "commands"
    commands.mkdir(exist_ok=True)
    (commands / "mark.md").write_text(f"Marked: !`touch {marker} && echo made`\n")


def test_listing_help_and_a_plain_prompt_run_no_command_step(agi, env, tmp_path):
    marker = tmp_path / "marker"
    command_dir(env, marker)
    listing = agi("--list-extensions")
    assert listing.returncode == 0 and "/mark" in listing.stdout, listing.stderr
    assert agi("--help").returncode == 0
    with FakeModel(text("plain")) as server:
        r = agi("just a question", server=server)
    assert r.returncode == 0, r.stderr
    assert not marker.exists()


def test_a_command_step_runs_inside_the_run_and_is_traced(agi, env, tmp_path):
    marker = tmp_path / "marker"
    command_dir(env, marker)
    session = tmp_path / "s"
    with FakeModel(text("ok")) as server:
        r = agi("-s", str(session), "/mark", server=server)
    assert r.returncode == 0, r.stderr
    assert marker.exists()
    assert server.requests[0]["messages"][-1]["content"] == "Marked: made"
    trace = [json.loads(x) for x in (session / "trace.jsonl").read_text().splitlines()]
    steps = [t for t in trace if t["type"] == "step"]
    assert len(steps) == 1 and steps[0]["command"] == "/mark" and steps[0]["exit_code"] == 0
    assert marker.name in steps[0]["step"]


def test_a_denied_command_step_is_traced_and_runs_nothing(agi, env, tmp_path):
    marker = tmp_path / "marker"
    command_dir(env, marker)
    session = tmp_path / "s"
    with FakeModel(text("never")) as server:
        r = agi("-s", str(session), "--deny", "Bash(touch:*)", "/mark", server=server)
    assert r.returncode == 2
    assert "was not run" in r.stderr
    assert not marker.exists() and server.requests == []
    trace = [json.loads(x) for x in (session / "trace.jsonl").read_text().splitlines()]
    assert [t.get("denied", "") != "" for t in trace if t["type"] == "step"] == [True]


# ---------------------------------------------------------------- first-hour papercuts


def test_a_judge_that_gives_no_verdict_keeps_the_answer(agi):
    script = [text("the answer"), text("not json"), text("still not"), text("nope")]
    with FakeModel(*script) as server:
        r = agi("--exit-code", "do it", server=server)
    assert r.returncode == 5
    assert r.stdout == "the answer\n"
    assert r.stderr.startswith("agi: the answer could not be judged: no valid JSON"), r.stderr


def test_a_judge_that_gives_no_verdict_keeps_the_answer_in_json(agi):
    script = [text("the answer"), text("not json")]
    with FakeModel(*script) as server:
        r = agi("--exit-code", "--output", "json", "do it", server=server)
    assert r.returncode == 5
    result = json.loads(r.stdout)
    assert result["answer"] == "the answer" and result["exit_code"] == 5
    assert "could not be judged" in result["error"]


def test_help_shows_the_exit_code_form_that_works(agi):
    r = agi("--help")
    assert "--exit-code[=CRITERIA]" in r.stdout
    assert not re.search(r"--exit-code CRITERIA", r.stdout)


def test_steps_count_the_agent_loops_model_calls(agi):
    with FakeModel(text("x"), text('{"n": 1}')) as server:
        r = agi("--max-steps", "1", "--schema", "n: int", "--output", "json", "hi", server=server)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["answer"] == {"n": 1} and result["steps"] == 1
    assert len(server.requests) == 2


def test_a_failed_run_is_listed_with_its_model(agi, tmp_path):
    with FakeModel(status(401, {"error": {"message": "bad key"}})) as server:
        r = agi("-s", str(tmp_path / "s"), "hi", server=server)
    assert r.returncode == 3, r.stderr
    meta = json.loads((tmp_path / "s" / "meta.json").read_text())
    assert meta["model"].endswith("fake-model")
    listing = agi("--list-sessions")
    line = next(x for x in listing.stdout.splitlines() if str(tmp_path / "s") in x)
    assert "fake-model" in line and " ? " not in line


# ---------------------------------------------------------------- Neovim's layer


@needs_nvim
def test_neovims_default_tools_false_wins_over_the_files_tools(editor, env):
    config(env, 'tools = "Bash,Read"\n')
    with FakeModel(text("```python\nresult = [x * 2 for x in items]\n```")) as server:
        ed = editor(server, setup={"warmup": False})
        ed.buffer(PY_BUFFER)
        ed.command("2,4AgiRefactor use a list comprehension")
        (event,) = ed.done()
    assert event["status"] == "done", event
    assert offered(server.requests[0]) == []


def test_the_repl_assembles_each_turn_from_that_turns_options(agi, env, tmp_path):
    """A command's allow rules hold for its own turn only; /sys holds from the next turn on."""
    commands = Path(env["AGI_CONFIG"]).parent / "commands"
    commands.mkdir()
    (commands / "greet.md").write_text("---\nallowed-tools: Bash(echo:*)\n---\nGreet.\n")
    terse = tmp_path / "terse.md"
    terse.write_text("Be terse.\n")
    script = [
        call("Bash", command="echo one"),
        text("greeted"),
        call("Bash", command="echo two"),
        text("refused"),
        text("tersely"),
    ]
    lines = f"/greet\nplain\n/sys {terse}\nthird\n"
    with FakeModel(*script) as server:
        r = agi("--repl", "--permission-mode", "dontAsk", server=server, input=lines)
    assert r.returncode == 0, r.stderr
    results = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert results[-1].startswith("one")
    results = [m["content"] for m in server.requests[3]["messages"] if m["role"] == "tool"]
    assert "denied" in results[-1] and "two" not in results[-1]
    assert server.requests[4]["messages"][0]["content"].startswith("Be terse.")
    assert not server.requests[3]["messages"][0]["content"].startswith("Be terse.")


def test_a_subagents_disallowed_tools_are_never_offered_to_it(agi, tmp_path):
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "reader.md").write_text(
        "---\nname: reader\ndescription: Reads only\ndisallowedTools: Bash, Write\n---\nRead.\n"
    )
    script = [call("Task", subagent_type="reader", description="d", prompt="p"), text("sub")]
    with FakeModel(*script, text("done")) as server:
        r = agi("--agents", str(agents), "go", server=server)
    assert r.returncode == 0, r.stderr
    parent, sub = offered(server.requests[0]), offered(server.requests[1])
    assert "Bash" in parent and "Write" in parent
    assert "Bash" not in sub and "Write" not in sub and "Read" in sub
