"""Long sessions, end to end: the real `agi` continues a session far larger than the model's
window by compacting it (append-only), compacts after a provider refuses a request for its
length, survives being killed mid-compaction, falls back to a mechanical summary, fires the
PreCompact and SessionStart(compact) hooks, and compacts on demand (`--compact`, `/compact`)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from conftest import AGI, FIXTURES, start_agi, wait_for_file
from fakeserver import FakeModel, _chunk, hang, raw, status, text

SUMMARY_MARK = "Summarise the conversation above for an assistant"
WINDOW = 16_000
BYTES_PER_TOKEN = 3.6  # the estimator's own ratio: real tokenizers give English ~4 bytes a token
TOO_LONG = sorted((FIXTURES / "context_errors" / "too_long").glob("*.json"))


def is_summary(body: dict[str, Any]) -> bool:
    return SUMMARY_MARK in json.dumps(body["messages"][-1])


def responder(answer: str = "All done.", summary: str = "SUMMARY: the task so far.") -> Any:
    """Summary requests get `summary`; the conversation's own requests get `answer`."""
    return lambda body: text(summary if is_summary(body) else answer)


def lines(session: Path) -> list[bytes]:
    return (session / "messages.jsonl").read_bytes().splitlines(keepends=True)


def records(session: Path) -> list[dict[str, Any]]:
    return [m for m in map(json.loads, lines(session)) if "compaction" in m]


def request_bytes(body: dict[str, Any]) -> int:
    return len(json.dumps([body["messages"], body.get("tools", [])], ensure_ascii=False).encode())


def fill(session: Path, agi: Any, target: int) -> None:
    """A session made by agi, then grown to `target` bytes of realistic history: prompts, Bash
    calls with long outputs, answers (the planted facts come first)."""
    with FakeModel(text("Noted.")) as server:
        r = agi(
            "-s",
            str(session),
            "Use tabs, never spaces. The config lives in conf/app.toml.",
            server=server,
        )
    assert r.returncode == 0, r.stderr
    out = []
    turn = 0
    size = (session / "messages.jsonl").stat().st_size
    while size < target:
        turn += 1
        log = "\n".join(
            f"{turn}:{i} INFO worker-{i % 7} processed batch {i * 13}" for i in range(180)
        )
        call_id = f"call_{turn}"
        args = json.dumps({"command": f"grep -n ERROR logs/run-{turn}.log"})
        fn = {"name": "Bash", "arguments": args}
        turn_lines = [
            {"role": "user", "content": f"Step {turn}: check run {turn} for errors."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": call_id, "type": "function", "function": fn}],
            },
            {"role": "tool", "tool_call_id": call_id, "content": log},
            {"role": "assistant", "content": f"Run {turn} has no errors; I kept tabs."},
        ]
        text_lines = "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in turn_lines)
        out.append(text_lines)
        size += len(text_lines.encode())
    with open(session / "messages.jsonl", "a", encoding="utf-8") as f:
        f.write("".join(out))


@pytest.fixture
def config(tmp_path: Path, env: dict[str, str]) -> Path:
    path = Path(env["AGI_CONFIG"])
    path.write_text(f"context_window = {WINDOW}\n")
    return path


def test_a_2mb_session_continues_within_a_16k_window(agi, tmp_path, config):
    session = tmp_path / "s"
    fill(session, agi, 2_000_000)
    before = lines(session)
    with FakeModel(responder("Run 1 had no errors either.")) as server:
        r = agi("-s", str(session), "Which file holds the config?", server=server, timeout=240)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Run 1 had no errors either.\n"
    assert r.stderr == ""  # a pipe: compaction is silent
    summaries = [b for b in server.requests if is_summary(b)]
    assert len(summaries) >= 3  # summarised in pieces that fit
    for body in server.requests:
        assert request_bytes(body) < WINDOW * BYTES_PER_TOKEN, request_bytes(body)
    after = lines(session)
    assert after[: len(before)] == before  # every original line, byte for byte
    (record,) = records(session)
    assert record["role"] == "user" and record["compaction"]["trigger"] == "auto"
    assert len(before) - 20 < record["compaction"]["summarized"] < len(before)
    assert record["compaction"]["tokens_before"] > WINDOW > record["compaction"]["tokens_after"]
    # each piece's summary is carried into the next
    assert "SUMMARY: the task so far." in json.dumps(summaries[1]["messages"])
    # every user message reaches the summarizer in full (tool outputs may be cut, with a note)
    shown = "".join(m["content"] for b in summaries for m in b["messages"])
    users = [json.loads(x) for x in before if b'"role": "user"' in x or b'"role":"user"' in x]
    kept = [json.loads(x) for x in lines(session)[len(before) + 1 :]]
    assert users and all(u["content"] in shown for u in users if u not in kept)
    assert "characters cut" in shown
    final = server.requests[-1]
    assert final["messages"][1]["content"].startswith("[Summary of the earlier part")
    assert "SUMMARY: the task so far." in final["messages"][1]["content"]
    assert final["messages"][-1]["content"] == "Which file holds the config?"
    # the next run starts from the summary, and needs no new compaction
    with FakeModel(responder("Yes.")) as server:
        r = agi("-s", str(session), "Anything else?", server=server, timeout=120)
    assert r.returncode == 0, r.stderr
    assert not any(is_summary(b) for b in server.requests)
    first = server.requests[0]["messages"]
    assert "SUMMARY: the task so far." in first[1]["content"]


def test_show_and_fork_read_the_compacted_session(agi, tmp_path, config):
    session = tmp_path / "s"
    fill(session, agi, 150_000)
    with FakeModel(responder()) as server:
        assert agi("-s", str(session), "go on", server=server).returncode == 0
    shown = agi("--show", str(session))
    assert shown.returncode == 0, shown.stderr
    (record,) = records(session)
    assert shown.stdout.count("── compacted (auto)") == 1
    assert f"{record['compaction']['summarized']} messages summarised" in shown.stdout
    assert "SUMMARY: the task so far." in shown.stdout
    # the kept copies are not shown twice; every prompt appears once, the new one last
    assert shown.stdout.count("Step 3: check run 3 for errors.") == 1
    stored = [json.loads(x) for x in lines(session)]
    at = next(i for i, m in enumerate(stored) if "compaction" in m)
    copies = stored[at + 1 : at + 1 + record["compaction"]["kept"]]
    prompts = [m["content"] for m in copies if m["role"] == "user"]
    assert prompts and all(shown.stdout.count(p) == 1 for p in prompts)
    assert shown.stdout.rstrip().endswith("All done.")
    with FakeModel(text("forked")) as server:
        r = agi("--fork", str(session), "-s", str(tmp_path / "f"), "and now?", server=server)
    assert r.returncode == 0, r.stderr
    sent = server.requests[0]["messages"]
    assert sent[1]["content"].startswith("[Summary of the earlier part")


@pytest.mark.parametrize("fixture", TOO_LONG, ids=lambda p: p.stem)
def test_a_too_long_refusal_compacts_and_retries_once(agi, tmp_path, fixture):
    recorded = json.loads(fixture.read_text())
    session = tmp_path / "s"
    fill(session, agi, 40_000)
    before = lines(session)
    script = [status(recorded["status"], recorded["body"]), responder("Answered after compacting.")]
    with FakeModel(*script) as server:
        r = agi("-s", str(session), "continue", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Answered after compacting.\n"
    assert len(server.requests) >= 3  # refused, summarised, sent again
    assert is_summary(server.requests[1]) and not is_summary(server.requests[-1])
    assert lines(session)[: len(before)] == before
    assert len(records(session)) == 1


def test_a_server_that_keeps_refusing_exits_3_with_one_line(agi, tmp_path):
    recorded = json.loads((FIXTURES / "context_errors/too_long/vllm_input_tokens.json").read_text())
    session = tmp_path / "s"
    fill(session, agi, 30_000)
    with FakeModel(status(recorded["status"], recorded["body"])) as server:
        r = agi("-s", str(session), "continue", server=server)
    assert r.returncode == 3
    (line,) = r.stderr.splitlines()
    assert line.startswith("agi: ") and "still too long" in line
    with FakeModel(responder("fine again")) as server:  # the session is intact and continues
        r = agi("-s", str(session), "retry", server=server)
    assert r.returncode == 0 and r.stdout == "fine again\n", r.stderr


def test_compaction_off_suggests_agi_compact(agi, tmp_path):
    recorded = json.loads((FIXTURES / "context_errors/too_long/vllm_input_tokens.json").read_text())
    session = tmp_path / "s"
    fill(session, agi, 30_000)
    with FakeModel(status(recorded["status"], recorded["body"])) as server:
        r = agi("--no-compact", "-s", str(session), "continue", server=server)
    assert r.returncode == 3 and len(server.requests) == 1
    (line,) = r.stderr.splitlines()
    assert "agi --compact" in line


def cut_off(content: str) -> Any:
    """A reply that ends at the output limit (`finish_reason: "length"`)."""
    frames = [_chunk({"role": "assistant", "content": content}), _chunk({}, "length")]
    return raw(b"".join(frames) + b"data: [DONE]\n\n")


@pytest.mark.parametrize("failure", ["error", "empty", "cut off"])
def test_a_failed_summary_falls_back_to_a_mechanical_one(agi, tmp_path, config, failure):
    session = tmp_path / "s"
    fill(session, agi, 200_000)
    bad = {
        "error": status(400, {"error": {"message": "bad request"}}),
        "empty": text(""),
        "cut off": cut_off("SUMMARY: the task so fa"),
    }[failure]

    def reply(body: dict[str, Any]) -> Any:
        return bad if is_summary(body) else text("still working")

    with FakeModel(reply) as server:
        r = agi("-s", str(session), "go on", server=server, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "still working\n"
    (warning,) = r.stderr.splitlines()
    assert warning.startswith("agi: ") and "mechanically" in warning
    (record,) = records(session)
    assert record["compaction"].get("mechanical") is True
    assert "Use tabs, never spaces." in record["content"]  # the first prompt is kept


def test_precompact_and_session_start_compact_hooks(agi, tmp_path, config):
    log = tmp_path / "hooks.log"
    record = f"cat >> {log}; echo >> {log}"
    context = json.dumps(
        {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "RULE: tabs"}}
    )
    hooks = {
        "hooks": {
            "PreCompact": [{"matcher": "auto", "hooks": [{"type": "command", "command": record}]}],
            "SessionStart": [
                {"matcher": "compact", "hooks": [{"type": "command", "command": record}]},
                {
                    "matcher": "compact",
                    "hooks": [{"type": "command", "command": f"echo '{context}'"}],
                },
            ],
        }
    }
    (tmp_path / "hooks").mkdir()
    (tmp_path / "hooks" / "settings.json").write_text(json.dumps(hooks))
    session = tmp_path / "s"
    fill(session, agi, 150_000)
    with FakeModel(responder()) as server:
        r = agi(
            "--hooks",
            str(tmp_path / "hooks" / "settings.json"),
            "-s",
            str(session),
            "go",
            server=server,
        )
    assert r.returncode == 0, r.stderr
    events = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    assert [e["hook_event_name"] for e in events] == ["PreCompact", "SessionStart"]
    assert events[0]["trigger"] == "auto" and events[0]["custom_instructions"] == ""
    assert events[1]["source"] == "compact"
    final = server.requests[-1]["messages"]
    assert final[1]["content"].startswith("[Summary")
    assert "RULE: tabs" in final[2]["content"]  # the hook's context, right after the summary


def test_manual_compact_prints_the_summary_with_the_focus(agi, tmp_path):
    session = tmp_path / "s"
    fill(session, agi, 20_000)
    before = lines(session)
    with FakeModel(responder(summary="SUMMARY focused on config.")) as server:
        r = agi("--compact", "-s", str(session), "keep", "the", "config", "path", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "SUMMARY focused on config.\n"
    assert all(is_summary(b) for b in server.requests)
    assert "keep the config path" in json.dumps(server.requests[0]["messages"])
    assert lines(session)[: len(before)] == before
    (record,) = records(session)
    assert record["compaction"]["trigger"] == "manual"


def test_repl_compact_command(agi, tmp_path):
    session = tmp_path / "s"
    fill(session, agi, 20_000)
    with FakeModel(responder(answer="ok", summary="SUMMARY from the REPL.")) as server:
        r = agi("-i", "-s", str(session), input="/compact the logs\nnext?\n", server=server)
    assert r.returncode == 0, r.stderr
    assert "SUMMARY from the REPL." in r.stdout and "ok" in r.stdout
    assert "the logs" in json.dumps(server.requests[0]["messages"])
    assert server.requests[-1]["messages"][1]["content"].startswith("[Summary")


@pytest.mark.parametrize("point", ["summary_request", "pre_compact", "session_start_compact"])
def test_sigkill_during_a_compaction_leaves_a_session_that_continues(
    agi, tmp_path, env, config, point
):
    session = tmp_path / "s"
    fill(session, agi, 150_000)
    before = lines(session)
    marker = tmp_path / "marker"
    pidfile = tmp_path / "hook.pid"
    wait = f"echo $$ > {pidfile}; touch {marker}; exec sleep 30"
    event, matcher = (
        ("PreCompact", "auto") if point == "pre_compact" else ("SessionStart", "compact")
    )
    hooks = {
        "hooks": {event: [{"matcher": matcher, "hooks": [{"type": "command", "command": wait}]}]}
    }
    (tmp_path / "hooks").mkdir()
    (tmp_path / "hooks" / "settings.json").write_text(json.dumps(hooks))

    def reply(body: dict[str, Any]) -> Any:
        if is_summary(body) and point == "summary_request":
            marker.touch()
            return hang()
        return responder()(body)

    with FakeModel(reply) as server:
        e = dict(env, AGI_BASE_URL=server.url, AGI_MODEL="fake-model")
        argv = [AGI, "--hooks", str(tmp_path / "hooks" / "settings.json"), "-s", str(session), "go"]
        proc = start_agi(argv, e)
        wait_for_file(marker, timeout=60)
        assert marker.exists(), proc.stderr.read() if proc.poll() is not None else "no marker"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()
    if pidfile.exists():  # the hook that was waiting outlives agi: end it
        try:
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    assert lines(session)[: len(before)] == before
    with FakeModel(responder("continued")) as server:
        r = agi("-s", str(session), "continue please", server=server, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "continued\n"
    # a whole record is taken as one; a half one is never taken for whole
    sent = json.dumps(server.requests[-1]["messages"])
    assert sent.count("[Summary of the earlier part") == 1


def test_a_schema_request_refused_for_its_length_is_compacted_and_sent_again(agi, tmp_path):
    recorded = json.loads((FIXTURES / "context_errors/too_long/vllm_input_tokens.json").read_text())
    session = tmp_path / "s"
    fill(session, agi, 40_000)
    script = [
        text("It is Lyon."),  # the run's own answer
        status(recorded["status"], recorded["body"]),  # the JSON request, refused
        responder(answer='{"city": "Lyon"}'),  # the summary, then the JSON again
    ]
    with FakeModel(*script) as server:
        r = agi("-s", str(session), "--schema", "city:str", "Where?", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == '{"city":"Lyon"}\n'
    assert is_summary(server.requests[2]) and not is_summary(server.requests[-1])
    assert len(records(session)) == 1
