"""What a run came to, in one class for every surface: `--output json`, batch lines, the MCP
server's `structuredContent` and the Python API (`agi.Result`) all derive from `RunResult`
here, each keeping the key names its documentation gives."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agi.messages import Usage
from agi.policy.redaction import map_strings


@dataclass
class RunResult:
    """The result of a run: its `answer` (text, or the parsed JSON under `schema`), the
    `exit_code` it earns (0; 1 when judged failed under `exit_code`; 5 when the judge gave no
    verdict; a failed run's error code), the `session` directory (None when none was opened),
    the agent loop's model calls (`steps`), the whole run's `usage` (`input`, `output`,
    `cached`, `cache_write`, `reasoning`, `cost`; subagents and ghost exchanges included), the
    one-line `error` when the exit code is not 0 or 1, and the judge's `verdict`
    (`{"success", "reason"}`) under `exit_code`."""

    answer: Any = None
    exit_code: int = 0
    session: Path | None = None
    steps: int = 0
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    verdict: dict[str, Any] | None = None

    @classmethod
    def failed(cls, error: BaseException, before: RunResult | None = None) -> RunResult:
        """A run that ended with `error`, having done what `before` says (nothing: None)."""
        code = getattr(error, "exit_code", 130 if isinstance(error, KeyboardInterrupt) else 1)
        base = before if before is not None else cls()
        return replace(base, answer=None, exit_code=code, error=str(error) or type(error).__name__)

    def to_json(self) -> dict[str, Any]:
        """The `--output json` object: answer, session, exit_code, steps, usage, and
        `judgement` under `exit_code`, `error` on failure."""
        body: dict[str, Any] = {
            "answer": self.answer,
            "session": None if self.session is None else str(self.session),
            "exit_code": self.exit_code,
            "steps": self.steps,
            "usage": self.usage.to_dict(),
        }
        if self.verdict is not None:
            body["judgement"] = self.verdict
        if self.error:
            body["error"] = self.error
        return body

    def redacted(self, redact: Callable[[str], str]) -> RunResult:
        """A copy with `redact` applied to every text it holds (the answer's JSON too)."""
        return replace(
            self,
            answer=map_strings(self.answer, redact),
            error=None if self.error is None else redact(self.error),
            verdict=map_strings(self.verdict, redact),
        )


def batch_record(result: RunResult, id: Any) -> dict[str, Any]:
    """A batch output line (docs: batch): `id`, `answer`, `exit`, `error` (also "judged
    failed: …" when the judge said no), `session`, `steps`, `usage`."""
    error = result.error
    if error is None and result.exit_code and result.verdict is not None:
        error = f"judged failed: {result.verdict.get('reason', '')}"
    return {
        "id": id,
        "answer": result.answer,
        "exit": result.exit_code,
        "error": error,
        "session": None if result.session is None else str(result.session),
        "steps": result.steps,
        "usage": result.usage.to_dict(),
    }


def mcp_structured(result: RunResult) -> dict[str, Any]:
    """The MCP server's `structuredContent` (docs: MCP server): `answer` (None unless the run
    finished, judged or not), `exit`, `session`, `steps`, `usage`, and `verdict` under
    `exit_code`."""
    finished = result.exit_code in (0, 1)
    out: dict[str, Any] = {
        "answer": result.answer if finished else None,
        "exit": result.exit_code,
        "session": None if result.session is None else str(result.session),
        "steps": result.steps,
        "usage": result.usage.to_dict(),
    }
    if result.verdict is not None and finished:
        verdict = result.verdict
        reason = str(verdict.get("reason", ""))
        out["verdict"] = {"success": bool(verdict.get("success")), "reason": reason}
    return out
