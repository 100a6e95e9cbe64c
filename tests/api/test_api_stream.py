"""`agi.stream` (docs/python.md): the `--output jsonl` events as typed objects, the last a
ResultEvent; leaving the `with` block early cancels the run (the model connection closed, the
commands it started ended); a stream closed from another thread raises agi.Cancelled."""

from __future__ import annotations

import json
import subprocess

from api_script import printed, python

from conftest import unique_seconds
from fakeserver import FakeModel, call, hang, text


def served(env: dict[str, str], server: FakeModel) -> dict[str, str]:
    return {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}


def normal(line: dict) -> dict:
    """An event without what differs from run to run: a tool's time, the session's name."""
    if line["type"] == "tool_end":
        line = {**line, "seconds": 0}
    if line["type"] == "result":
        line = {**line, "session": None}
    return line


def test_events_are_the_jsonl_lines_typed(agi, env, tmp_path):
    script = [call("Bash", command="echo hi"), text("done", reasoning="thinking")]
    with FakeModel(*script) as server:
        done = python(
            """
            seen = []
            with agi.stream("go") as events:
                for event in events:
                    seen.append([type(event).__name__, event.type, event.to_json()])
            last = event.result
            print(json.dumps([seen, last.answer, last.exit_code, str(last.session)]))
            """,
            served(env, server),
            tmp_path,
        )
    with FakeModel(*script) as server:
        cli = agi("--output", "jsonl", "go", server=server)
    [[seen, answer, code, session]] = printed(done)
    lines = [json.loads(line) for line in cli.stdout.splitlines()]
    assert [normal(e) for _, _, e in seen] == [normal(line) for line in lines]
    names = {kind: name for name, kind, _ in seen}
    assert names == {
        "step": "StepEvent",
        "reasoning": "ReasoningEvent",
        "text": "TextEvent",
        "tool_start": "ToolStartEvent",
        "tool_end": "ToolEndEvent",
        "usage": "UsageEvent",
        "result": "ResultEvent",
    }
    assert seen[-1][1] == "result" and (answer, code) == ("done", 0)
    assert seen[-1][2]["session"] == session


def test_leaving_the_block_early_ends_the_command_and_the_run(env, tmp_path):
    marker = unique_seconds(300)  # `sleep 300.NNNNNNNN`: no other process has this command line
    with FakeModel(call("Bash", command=f"sleep {marker}"), text("never")) as server:
        done = python(  # the marker in the environment: this program's own argv has it not
            """
            import subprocess
            with agi.stream("wait") as events:
                for event in events:
                    if event.type == "tool_start":
                        break  # the command has been started
            alive = subprocess.run(["pgrep", "-f", os.environ["MARKER"]], capture_output=True)
            print(json.dumps(alive.stdout.decode()))
            r = agi.run("and now?")  # the process's pool serves the next run
            print(json.dumps(r.answer))
            """,
            {**served(env, server), "MARKER": f"sleep {marker}"},
            tmp_path,
            timeout=60,
        )
    left, answer = printed(done)
    assert left == ""  # the sleep the run started is gone when the block is left
    gone = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True)
    assert gone.stdout == ""
    assert answer == "never"
    assert len(server.requests) == 2  # the cancelled run sent nothing after its command


def test_leaving_while_the_model_is_silent_closes_its_connection(env, tmp_path):
    with FakeModel(hang()) as server:
        done = python(
            """
            with agi.stream("hello?", timeout=600) as events:
                for event in events:
                    if event.type == "step":
                        break  # the request is on its way; the model never answers
            print(json.dumps("left"))
            """,
            served(env, server),
            tmp_path,
            timeout=60,  # a hang guard: without the cancel the run would wait 600 s
        )
    assert printed(done) == ["left"]


def test_a_stream_closed_from_another_thread_raises_cancelled(env, tmp_path):
    with FakeModel(hang()) as server:
        done = python(
            """
            import threading
            started = threading.Event()
            events = agi.stream("hello?")
            threading.Thread(target=lambda: (started.wait(), events.close())).start()
            try:
                with events:
                    for event in events:
                        started.set()
            except agi.Cancelled as e:
                session = e.result.session if e.result else None
                print(json.dumps([type(e).__name__, e.exit_code, e.message, str(session)]))
            """,
            served(env, server),
            tmp_path,
            timeout=60,
        )
    [[name, code, message, session]] = printed(done)
    assert (name, code, message) == ("Cancelled", 130, "cancelled")
    with open(f"{session}/trace.jsonl") as lines:
        trace = [json.loads(line) for line in lines]
    assert trace[-1]["type"] == "error" and trace[-1]["exit_code"] == 130
