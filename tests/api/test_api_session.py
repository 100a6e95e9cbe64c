"""`agi.Session` (docs/python.md): a conversation continued turn after turn, `fork()` a copy
that goes its own way, and two processes or threads asking one session taking turns (the
session's lock), proven by the intervals their commands record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from api_script import PRELUDE, printed, python

from conftest import intervals, overlap, timed
from fakeserver import FakeModel, call, text


def served(env: dict[str, str], server: FakeModel) -> dict[str, str]:
    return {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"}


def users(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def test_a_session_continues_and_a_fork_goes_its_own_way(env, tmp_path):
    with FakeModel(text("one"), text("two"), text("three"), text("four")) as server:
        done = python(
            """
            s = agi.Session()
            before = s.path
            a = s.ask("first")
            b = s.ask("second")
            f = s.fork()
            c = f.ask("in the fork")
            d = s.ask("third")
            print(json.dumps([before, str(s.path), str(a.session), str(b.session), str(f.path),
                              str(c.session), str(d.session), [a.answer, b.answer, c.answer,
                              d.answer]]))
            """,
            served(env, server),
            tmp_path,
        )
    [[before, path, a, b, fork, c, d, answers]] = printed(done)
    assert before is None and path == a == b == d and fork == c != path
    assert answers == ["one", "two", "three", "four"]
    assert [users(r) for r in server.requests] == [
        ["first"],
        ["first", "second"],
        ["first", "second", "in the fork"],
        ["first", "second", "third"],  # the fork's turn is not in the session it came from
    ]
    meta = json.loads((Path(fork) / "meta.json").read_text())
    assert meta["forked_from"] == str(Path(path).resolve())


def test_a_session_at_a_path_and_its_options_for_every_turn(env, tmp_path):
    where = tmp_path / "conversation"
    system = tmp_path / "terse.md"
    system.write_text("Be terse.")
    with FakeModel(text("a"), text("b")) as server:
        done = python(
            f"""
            s = agi.Session({str(where)!r}, sys=[{str(system)!r}])
            s.ask("x")
            again = agi.Session({str(where)!r}, sys=[{str(system)!r}])
            r = again.ask("y", max_steps=3)
            print(json.dumps([str(s.path), str(r.session)]))
            """,
            served(env, server),
            tmp_path,
        )
    [[path, session]] = printed(done)
    assert path == session == str(where)
    assert [r["messages"][0]["content"] for r in server.requests] == ["Be terse."] * 2
    assert users(server.requests[1]) == ["x", "y"]


ASKER = """
import sys
s = agi.Session(sys.argv[1])
r = s.ask(sys.argv[2])
print(json.dumps(r.answer))
"""


def test_two_processes_asking_one_session_take_turns(env, tmp_path):
    """Each turn runs a command that records its interval: the turns never overlap, and the
    second one sees the first one's exchange."""
    log = tmp_path / "intervals"
    where = tmp_path / "shared"

    def step(body: dict) -> dict:
        if body["messages"][-1]["role"] == "tool":
            return text(f"done {users(body)[-1]}")
        name = users(body)[-1]
        return call("Bash", command=timed(name, log, "sleep 0.5"))

    with FakeModel(step) as server:
        where.mkdir()
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", PRELUDE + ASKER, str(where), name],
                env=served(env, server),
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name in ("alpha", "beta")
        ]
        outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert sorted(json.loads(out) for out, _ in outs) == ["done alpha", "done beta"]
    spans = intervals(log)
    assert set(spans) == {"alpha", "beta"}
    assert not overlap(spans["alpha"], spans["beta"])
    second = max(spans, key=lambda n: spans[n][0])
    last = next(r for r in reversed(server.requests) if users(r)[-1] == second)
    assert len(users(last)) == 2  # the later turn was sent the earlier one


def test_two_threads_asking_one_session_take_turns(env, tmp_path):
    log = tmp_path / "intervals"

    def step(body: dict) -> dict:
        if body["messages"][-1]["role"] == "tool":
            return text("done")
        return call("Bash", command=timed(users(body)[-1], log, "sleep 0.5"))

    with FakeModel(step) as server:
        done = python(
            """
            import threading
            s = agi.Session()
            answers = []
            threads = [threading.Thread(target=lambda n=n: answers.append(s.ask(n).session))
                       for n in ("one", "two", "three")]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            print(json.dumps(sorted({str(a) for a in answers})))
            """,
            served(env, server),
            tmp_path,
        )
    [[session]] = printed(done)  # one session for the three, made once
    spans = intervals(log)
    names = sorted(spans)
    assert names == ["one", "three", "two"]
    assert not any(overlap(spans[a], spans[b]) for a in names for b in names if a < b)
    messages = (Path(session) / "messages.jsonl").read_text().splitlines()
    assert [json.loads(m)["content"] for m in messages].count("done") == 3
