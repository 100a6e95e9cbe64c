"""`agi.run` and the public names (docs/python.md): a run as `agi PROMPT` makes it, its
Result and `to_json()`, the options layered over the config file and the environment (or
isolated from both), every error with its exit code, and `ask=` — each in a Python program of
its own, against the scripted server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from api_script import printed, python, with_server

from fakeserver import FakeModel, call, status, text

PUBLIC = [
    "AskRequest",
    "AssistantTextEvent",
    "Budget",
    "Cancelled",
    "Error",
    "Event",
    "HookStopped",
    "LimitReached",
    "NoticeEvent",
    "ProviderError",
    "ReasoningEvent",
    "Result",
    "ResultEvent",
    "SchemaError",
    "Session",
    "StepEvent",
    "TextEvent",
    "ToolEndEvent",
    "ToolStartEvent",
    "UsageError",
    "UsageEvent",
    "__version__",
    "arun",
    "astream",
    "run",
    "stream",
]


def served(env: dict[str, str], server: FakeModel) -> dict[str, str]:
    """The environment a user's program runs with: the model and endpoint as AGI_ variables."""
    return {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}


def test_all_names_exactly_the_public_api_each_documented(env, tmp_path):
    done = python(
        """
        names = {}
        for name in agi.__all__:
            value = getattr(agi, name)
            names[name] = bool(getattr(value, "__doc__", None)) or name == "__version__"
        print(json.dumps({"all": agi.__all__, "documented": names, "dir": dir(agi)}))
        """,
        env,
        tmp_path,
    )
    [found] = printed(done)
    assert found["all"] == PUBLIC
    assert all(found["documented"].values()), found["documented"]
    assert set(PUBLIC) <= set(found["dir"])


def test_import_agi_loads_neither_httpx_nor_pydantic_nor_the_engine(env, tmp_path):
    done = python(
        """
        heavy = ("httpx", "pydantic", "agi.engine", "agi.api", "asyncio")
        before = [m for m in heavy if m in sys.modules]
        agi.Result, agi.Error, agi.run, agi.Session, agi.TextEvent  # the names, no run yet
        after = [m for m in ("httpx", "pydantic") if m in sys.modules]
        print(json.dumps([before, after, agi.__version__]))
        """,
        env,
        tmp_path,
    )
    [[before, after, version]] = printed(done)
    assert before == [] and after == []
    import agi  # the version the package and the distribution give

    assert version == agi.__version__


def test_run_answers_as_the_command_line_does(agi, env, tmp_path):
    with FakeModel(text("Hello there")) as server:
        done = python(
            """
            r = agi.run("hi")
            u = r.usage
            fields = [r.answer, r.exit_code, str(r.session), r.steps, r.error]
            usage = [u.input, u.output, u.cached, u.cache_write, u.reasoning, u.cost]
            print(json.dumps({"fields": fields, "usage": usage, "json": r.to_json()}))
            """,
            served(env, server),
            tmp_path,
        )
        cli = agi("--output", "json", "hi", server=server)
    [found] = printed(done)
    answer, code, session, steps, error = found["fields"]
    assert (answer, code, steps, error) == ("Hello there", 0, 1, None)
    assert found["usage"] == [10, 5, 0, 0, 0, None]
    assert Path(session).is_dir() and (Path(session) / "messages.jsonl").is_file()
    expected = json.loads(cli.stdout)
    assert list(found["json"]) == list(expected)  # the same keys, in the same order
    assert {**found["json"], "session": None} == {**expected, "session": None}
    assert found["json"]["session"] == session
    assert server.requests[0]["messages"][-1] == {"role": "user", "content": "hi"}


def test_stdin_is_appended_as_the_command_line_appends_it(agi, env, tmp_path):
    with FakeModel(text("ok")) as server:
        done = python(
            """
            agi.run("Summarise", stdin="line one\\nline two\\n")
            agi.run("", stdin="  just stdin  ")
            """,
            served(env, server),
            tmp_path,
        )
        cli = agi("Summarise", server=server, input="line one\nline two\n")
    assert done.returncode == 0, done.stderr
    assert cli.returncode == 0, cli.stderr
    sent = [r["messages"][-1]["content"] for r in server.requests]
    assert sent[0] == sent[2] == "Summarise\n\n<stdin>\nline one\nline two\n</stdin>"
    assert sent[1] == "just stdin"


def test_arguments_win_over_environment_over_config_file(env, tmp_path):
    config = Path(env["AGI_CONFIG"])
    config.write_text('model = "file-model"\nmax_steps = 7\n')
    program = """
        agi.run("a", model="arg-model")
        agi.run("b")
        """
    with FakeModel(text("ok")) as server:
        both = {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "env-model"}
        assert python(program, both, tmp_path).returncode == 0
        file_only = {**env, "AGI_BASE_URL": server.url}
        assert python('agi.run("c")', file_only, tmp_path).returncode == 0
    assert [r["model"] for r in server.requests] == ["arg-model", "env-model", "file-model"]


def test_isolated_reads_neither_config_file_nor_agi_variables(env, tmp_path):
    config = Path(env["AGI_CONFIG"])
    config.write_text('sys = ["/nonexistent/system.md"]\nmodel = "file-model"\n')
    (config.parent / "hooks.json").write_text("not json: read, this would fail the run")
    dead = "http://127.0.0.1:9/v1"  # nothing listens there
    polluted = {
        **env,
        "AGI_MODEL": "env-model",
        "AGI_BASE_URL": dead,
        "AGI_API_KEY": "sk-env-0123456789",
    }
    with FakeModel(text("ok")) as server:
        done = python(
            """
            r = agi.run("hi", model="arg-model", base_url=URL, api_key="sk-arg-0123456789",
                        isolated=True)
            print(json.dumps(str(r.session)))
            try:
                agi.run("hi", isolated=True)
            except agi.UsageError as e:
                print(json.dumps([e.exit_code, str(e)]))
            """,
            with_server(polluted, server.url),
            tmp_path,
        )
        not_isolated = python(
            'agi.run("hi", base_url=URL)', with_server(polluted, server.url), tmp_path
        )
    session, (code, message) = printed(done)
    assert server.requests[0]["model"] == "arg-model"
    assert server.requests[0]["messages"][0]["role"] == "system"  # the built-in prompt
    assert server.headers[0]["Authorization"] == "Bearer sk-arg-0123456789"
    assert Path(session).is_relative_to(Path(env["AGI_HOME"]))  # AGI_HOME is still read
    assert code == 2 and "isolated=True reads neither the config file nor AGI_MODEL" in message
    assert not_isolated.returncode == 1
    assert "hooks.json: invalid JSON" in not_isolated.stderr  # beside the config: read


def test_api_key_argument_wins_and_provider_variable_serves_isolated_runs(env, tmp_path):
    program = """
        agi.run("a", model="openai:fake", base_url=URL, api_key="sk-arg-0123456789")
        agi.run("b", model="openai:fake", base_url=URL, isolated=True)
        """
    keys = {"AGI_API_KEY": "sk-env-0123456789", "OPENAI_API_KEY": "sk-openai-0123456789"}
    with FakeModel(text("ok")) as server:
        done = python(program, with_server(env, server.url, **keys), tmp_path)
    assert done.returncode == 0, done.stderr
    sent = [h["Authorization"] for h in server.headers]
    assert sent == ["Bearer sk-arg-0123456789", "Bearer sk-openai-0123456789"]


def test_a_bad_option_names_the_call_and_an_unknown_one_is_a_type_error(env, tmp_path):
    with FakeModel(text("never")) as server:
        done = python(
            """
            for options in ({"sys": ["/nonexistent/sys.md"]}, {"max_steps": "many"}):
                try:
                    agi.run("hi", **options)
                except agi.UsageError as e:
                    print(json.dumps([type(e).__name__, e.exit_code, e.message]))
            try:
                agi.run("hi", colour="blue")
            except TypeError as e:
                print(json.dumps(["TypeError", 0, str(e)]))
            """,
            served(env, server),
            tmp_path,
        )
    sys_error, steps_error, unknown = printed(done)
    assert (
        sys_error[1] == 2
        and sys_error[2]
        == "agi.run(): sys: cannot read /nonexistent/sys.md: No such file or directory"
    )
    assert steps_error[1] == 2 and steps_error[2].startswith("agi.run(): max_steps must be")
    assert unknown[0] == "TypeError" and "colour" in unknown[2]
    assert server.requests == []  # nothing is sent for a usage error


ERRORS = """
def outcome(**options):
    try:
        r = agi.run("go", **options)
        return ["Result", r.exit_code, r.answer, r.verdict]
    except agi.Error as e:
        done = e.result
        kept = None if done is None else [str(done.session), done.steps, done.usage.input]
        kinds = ("UsageError", "ProviderError", "LimitReached", "SchemaError", "HookStopped")
        name = next(n for n in kinds if isinstance(e, getattr(agi, n)))
        return [name, e.exit_code, e.message, kept, isinstance(e, agi.Error)]
"""


@pytest.mark.parametrize(
    ("script", "options", "expected"),
    [
        ([status(401, {"error": {"message": "bad key"}})], {}, ("ProviderError", 3)),
        ([call("Bash", command="echo again")], {"max_steps": 1}, ("LimitReached", 4)),
        ([text("an answer"), text("not json at all")], {"schema": "n:int"}, ("SchemaError", 5)),
    ],
    ids=["provider", "limit", "schema"],
)
def test_each_failure_raises_its_error_with_its_exit_code(env, tmp_path, script, options, expected):
    with FakeModel(*script) as server:
        done = python(
            ERRORS + f"print(json.dumps(outcome(**{options!r})))",
            served(env, server),
            tmp_path,
        )
    [[name, code, message, kept, is_error]] = printed(done)
    assert (name, code) == expected and is_error
    assert message and "\n" not in message
    assert kept is not None and Path(kept[0]).is_dir()  # the session the run had opened
    if name == "LimitReached":
        assert kept[1] == 1 and kept[2] == 10 and "step limit reached" in message


def test_a_hook_that_stops_the_run_raises_hook_stopped(env, tmp_path):
    hooks = tmp_path / "hooks.json"
    block = {"type": "command", "command": "echo 'not today' >&2; exit 2"}
    hooks.write_text(json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [block]}]}}))
    with FakeModel(text("never")) as server:
        done = python(
            ERRORS + f"print(json.dumps(outcome(hooks=[{str(hooks)!r}])))",
            served(env, server),
            tmp_path,
        )
    [[name, code, message, _, _]] = printed(done)
    assert (name, code) == ("HookStopped", 6) and "not today" in message
    assert server.requests == []


def test_judged_failed_is_a_result_with_exit_code_1_and_no_verdict_is_schema_error(env, tmp_path):
    verdict = json.dumps({"reason": "the file is missing", "success": False})
    with FakeModel(text("I could not."), text(verdict)) as server:
        done = python(
            ERRORS + 'print(json.dumps(outcome(exit_code="the file exists")))',
            served(env, server),
            tmp_path,
        )
    with FakeModel(text("Done."), text("no verdict here")) as server:
        unjudged = python(
            ERRORS + "print(json.dumps(outcome(exit_code=True)))", served(env, server), tmp_path
        )
    [[kind, code, answer, judged]] = printed(done)
    assert (kind, code, answer) == ("Result", 1, "I could not.")
    assert judged == {"reason": "the file is missing", "success": False}
    [[name, code, message, kept, _]] = printed(unjudged)
    assert (name, code) == ("SchemaError", 5) and "could not be judged" in message
    assert kept is not None


def test_the_exception_classes_carry_the_documented_exit_codes(env, tmp_path):
    done = python(
        """
        names = ["UsageError", "ProviderError", "LimitReached", "SchemaError", "HookStopped",
                 "Cancelled"]
        print(json.dumps({n: [getattr(agi, n).exit_code, issubclass(getattr(agi, n), agi.Error)]
                          for n in names}))
        """,
        env,
        tmp_path,
    )
    [codes] = printed(done)
    assert codes == {
        "UsageError": [2, True],
        "ProviderError": [3, True],
        "LimitReached": [4, True],
        "SchemaError": [5, True],
        "HookStopped": [6, True],
        "Cancelled": [130, True],
    }


ASKED = """
asked = []

def answer_with(reply):
    def ask(request):
        asked.append([request.tool, request.input.get("command"), request.suggestion])
        return reply
    return ask

for reply in ("deny", "allow", "allow_always", None):
    options = {"permission_mode": "acceptEdits"}  # a command asks in this mode
    if reply is not None:
        options["ask"] = answer_with(reply)
    r = agi.run("go", **options)
    print(json.dumps([reply, r.answer]))
r = agi.run("go", ask_rules=["Bash"], ask=answer_with("deny"))  # a rule that asks
print(json.dumps(["rule", r.answer]))
print(json.dumps(asked))
"""


def test_ask_decides_what_the_rules_leave_to_a_person(env, tmp_path):
    marker = tmp_path / "ran"

    def step(body):
        results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        if len(results) >= 2 or (results and "denied" in results[-1]):
            return text(" | ".join(results))
        return call("Bash", command=f"echo x >> {marker}")

    with FakeModel(step) as server:
        done = python(ASKED, served(env, server), tmp_path)
    *runs, asked = printed(done)
    by_reply = dict((r, a) for r, a in runs)
    assert "the user said no" in by_reply["deny"]
    assert "denied" not in by_reply["allow"] and "denied" not in by_reply["allow_always"]
    assert "no one is at the terminal" in by_reply[None]  # no ask=: decided as in a pipe
    assert "the user said no" in by_reply["rule"]
    command = f"echo x >> {marker}"
    # deny: asked once; allow: for both calls; allow_always: for the first only; the rule: once
    assert asked == [["Bash", command, "Bash(echo:*)"]] * 5
    assert marker.read_text() == "x\n" * 4  # two calls allowed once each, two after "always"
