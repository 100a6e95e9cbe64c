"""The command line's runs: a prompt to its answer on stdout (text, JSON under --schema, or the
--output json|jsonl result object), `--compact`, and what a failure writes there."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agi.errors import UsageError

if TYPE_CHECKING:
    from agi.engine.run import Run
    from agi.errors import AgiError


class EventLines:
    """`--output jsonl`: every event as a line on stdout, as well as to the view it wraps."""

    def __init__(self, inner: Any, redact: Any):
        self.inner, self.redact = inner, redact

    def handle(self, event: Any) -> None:
        from agi.frontends.views.jsonl import event_line

        self.inner.handle(event)
        sys.stdout.write(shown(self.redact(event_line(event)), json_text=True))
        sys.stdout.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def watch_output(run: Run) -> None:
    """Under `--output jsonl` the run's events go to stdout too."""
    if run.settings.output == "jsonl":
        run.view = EventLines(run.view, run.redact)
        run.ctx.warn = run.view.warn


def one_shot(run: Run, prompt: str, path: Path | None, cont: bool) -> int:
    """`agi PROMPT`: the answer on stdout; the exit code the verdict earns. A judge that gave
    no verdict leaves the answer on stdout and says so: exit 5."""
    watch_output(run)
    result = run.ask(prompt, path, cont)
    run.view.finish(str(result.session), result.usage, time.monotonic() - run.started, result.steps)
    if result.verdict is not None:
        run.view.judgement(result.verdict["success"], result.verdict["reason"])
    write_result(run, result.answer, result.exit, result.error)
    if result.error:
        sys.stderr.write(f"agi: {run.redact(result.error)}\n")
    elif result.exit and result.verdict is not None:
        sys.stderr.write(f"agi: judged failed: {run.redact(str(result.verdict['reason']))}\n")
    sys.stdout.flush()  # a full or closed stdout fails here, not at exit
    return result.exit


def compact(run: Run, focus: str, path: Path | None, cont: bool) -> int:
    """`agi --compact [FOCUS]`: compact the session now and print the summary."""
    if path is not None and not (path / "messages.jsonl").is_file():
        raise UsageError(f"nothing to compact: {path} holds no agi conversation")
    run.open(path, cont)
    run.assemble(run.settings)
    summary = run.compact_now(focus)
    if summary is None:
        raise UsageError("nothing to compact: the session holds no conversation")
    write_result(run, summary, 0)
    return 0


def write_result(run: Run, answer: Any, code: int, error: str | None = None) -> None:
    """The answer as the run's --output asks: text, JSON under --schema, or the result object."""
    settings = run.settings
    if settings.output in ("json", "jsonl"):
        from agi.frontends.views.jsonl import Outcome, result_line

        session = str(run.session.path) if run.session is not None else None
        steps = run.agent.steps if run.agent is not None else 0
        outcome = Outcome(answer, code, session, steps, run.meter.total, run.verdict, error)
        sys.stdout.write(shown(run.redact(result_line(outcome, settings.output == "jsonl")), True))
    elif answer is not None and settings.schema is not None:
        text = json.dumps(answer, ensure_ascii=False, separators=(",", ":"))
        sys.stdout.write(shown(run.redact(text) + "\n", json_text=True))
    elif answer is not None:
        sys.stdout.write(shown(run.redact(f"{answer}\n")))
    sys.stdout.flush()


def shown(text: str, json_text: bool = False) -> str:
    """What goes to stdout: as it is for a pipe or a file; on a terminal, with the control
    characters of a model's text escaped (CONTRACT section 20), JSON staying JSON (json.dumps
    leaves DEL and the C1 codes raw; 0x9b is a CSI of its own)."""
    try:
        terminal = sys.stdout.isatty()
    except (ValueError, OSError):
        terminal = False
    if not terminal:
        return text
    if json_text:
        import re

        return re.sub("[\x7f-\x9f]", lambda m: f"\\u{ord(m.group(0)):04x}", text)
    from agi.frontends.views.terminal import escape_controls

    return escape_controls(text)


def write_failure(run: Run, error: AgiError) -> None:
    """A failed run under --output json|jsonl still writes its result object."""
    if run.settings.output != "text":
        write_result(run, None, error.exit_code, str(error))
