"""One result class for every surface (agi.engine.result): `--output json`'s object, a batch
line and the MCP server's structuredContent come from the same RunResult, each with the key
names its documentation gives."""

from __future__ import annotations

from pathlib import Path

from agi.engine.result import RunResult, batch_record, mcp_structured
from agi.errors import StepLimit
from agi.messages import Usage

USAGE = {"input": 10, "output": 5, "cached": 0, "cache_write": 0, "reasoning": 0, "cost": 0.25}


def judged() -> RunResult:
    usage = Usage(input=10, output=5, cost=0.25, calls=1)
    verdict = {"success": False, "reason": "the file is missing"}
    return RunResult("I tried.", 1, Path("/s/1"), 2, usage, None, verdict)


def test_each_surface_keeps_its_own_key_names():
    result = judged()
    assert result.to_json() == {
        "answer": "I tried.",
        "session": "/s/1",
        "exit_code": 1,
        "steps": 2,
        "usage": USAGE,
        "judgement": {"success": False, "reason": "the file is missing"},
    }
    assert batch_record(result, "job-7") == {
        "id": "job-7",
        "answer": "I tried.",
        "exit": 1,
        "error": "judged failed: the file is missing",
        "session": "/s/1",
        "steps": 2,
        "usage": USAGE,
    }
    assert mcp_structured(result) == {
        "answer": "I tried.",
        "exit": 1,
        "session": "/s/1",
        "steps": 2,
        "usage": USAGE,
        "verdict": {"success": False, "reason": "the file is missing"},
    }


def test_a_failed_run_keeps_what_it_had_done():
    failed = RunResult.failed(StepLimit(2), judged())
    assert (failed.answer, failed.exit_code, failed.steps) == (None, 4, 2)
    assert failed.to_json()["error"].startswith("step limit reached: 2 model calls")
    assert mcp_structured(failed)["answer"] is None and "verdict" not in mcp_structured(failed)
    assert batch_record(failed, 1)["error"] == failed.error
    empty = RunResult.failed(StepLimit(1))
    assert empty.session is None and empty.to_json()["usage"]["cost"] == 0.0


def test_redacted_takes_the_key_out_of_every_text():
    result = RunResult({"k": ["sk-secret"], "sk-secret": 1}, 5, error="said sk-secret")
    clean = result.redacted(lambda text: text.replace("sk-secret", "[REDACTED]"))
    assert clean.answer == {"k": ["[REDACTED]"], "[REDACTED]": 1}
    assert clean.error == "said [REDACTED]" and result.error == "said sk-secret"
