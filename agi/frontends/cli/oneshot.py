"""The command line's runs: the spec they are opened with (the view, `--output jsonl`'s event
lines, the session), a prompt to its answer on stdout (text, JSON under --schema, or the
--output json|jsonl result object), `--compact`, and what a failure writes there."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agi import engine
from agi.engine.opening import make_view
from agi.engine.result import RunResult
from agi.engine.spec import RunSpec, SessionChoice
from agi.errors import UsageError
from agi.frontends.views.terminal import escape_controls
from agi.policy import redaction

if TYPE_CHECKING:
    from collections.abc import Callable

    from agi.engine.run import Run
    from agi.engine.seams import Event, View
    from agi.errors import AgiError
    from agi.options.settings import Settings


class EventLines:
    """`--output jsonl`: every event as a line on stdout, as well as to the view it wraps."""

    def __init__(self, inner: View, redact: Callable[[str], str]):
        self.inner, self.redact = inner, redact

    def handle(self, event: Event) -> None:
        self.inner.handle(event)
        # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
        from agi.frontends.views.jsonl import event_line

        sys.stdout.write(shown(self.redact(event_line(event)), json_text=True))
        sys.stdout.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Unopened:
    """A run whose opening failed after its checks (the session could not be opened or
    forked, a SessionStart hook failed): what `fail` needs of it to report that run."""

    def __init__(self, settings: Settings, view: View, partial: RunResult):
        self.settings, self.view, self.partial = settings, view, partial

    def result(self, error: BaseException | None = None) -> RunResult:
        return self.partial if error is None else RunResult.failed(error, self.partial)

    def redact(self, text: str) -> str:
        return redaction.redact(text, redaction.usable([self.settings.model.api_key]))

    def end_hooks(self, reason: str) -> None:
        pass  # the engine ended what the run had started

    def close(self) -> None:
        pass


def open_run(args: argparse.Namespace, settings: Settings, started: float, runs: list[Any]) -> Run:
    """The run the flags ask for, opened through the engine's door; `runs` gets it (or what
    `fail` needs of it when its session could not be opened)."""
    view = make_view(settings, interactive=args.repl)
    if args.repl:
        # lazy: the REPL's code, for --repl alone
        from agi.frontends.cli.repl import Streamed

        view = Streamed(view)  # the answer streams to stdout as it comes
    elif settings.output == "jsonl":
        secrets = redaction.usable([settings.model.api_key])
        view = EventLines(view, lambda text: redaction.redact(text, secrets))
    named = Path(args.session) if args.session else None
    if named is not None and any(c.isspace() for c in named.name) and not named.exists():
        sys.stderr.write(  # `-s "You are terse"`: llm's -s is a system prompt, agi's a session
            f"agi: -s makes a new session directory {str(named)!r} (a system prompt is "
            "--sys FILE)\n"
        )
    choice = SessionChoice(
        path=named,
        cont=args.cont,
        fork=Path(args.fork) if args.fork else None,
        compact=bool(args.compact),
    )
    spec = RunSpec(
        settings,
        view=view,
        interactive=args.repl,
        session=choice,
        session_start=not args.compact,
        started=started,
        on_child_event=getattr(view, "child", None),  # subagents' tool calls, where shown
    )
    try:
        run = engine.open(spec)
    except BaseException as e:
        partial = getattr(e, "result", None)
        if partial is not None:  # its checks had passed: the run is reported, as one
            runs.append(Unopened(settings, view, partial))
        raise
    runs.append(run)
    if args.fork:  # in a pipe too: where the copy went is said nowhere else (docs: sessions)
        sys.stderr.write(f"agi: forked {args.fork} to {run.session.path}\n")
    return run


def one_shot(run: Run, prompt: str) -> int:
    """`agi PROMPT`: the answer on stdout; the exit code the verdict earns. A judge that gave
    no verdict leaves the answer on stdout and says so: exit 5."""
    result = run.ask(prompt)
    where = "" if result.session is None else str(result.session)  # ephemeral: none
    run.view.finish(where, result.usage, time.monotonic() - run.started, result.steps)
    if result.verdict is not None:
        run.view.judgement(result.verdict["success"], result.verdict["reason"])
    write_result(run, result)
    if result.error:
        sys.stderr.write(f"agi: {run.redact(result.error)}\n")
    elif result.exit_code and result.verdict is not None:
        sys.stderr.write(f"agi: judged failed: {run.redact(str(result.verdict['reason']))}\n")
    sys.stdout.flush()  # a full or closed stdout fails here, not at exit
    return result.exit_code


def compact(run: Run, focus: str) -> int:
    """`agi --compact [FOCUS]`: compact the session now and print the summary."""
    summary = run.compact(focus)
    if summary is None:
        raise UsageError("nothing to compact: the session holds no conversation")
    write_result(run, run.result(answer=summary))
    return 0


def write_result(run: Run, result: RunResult) -> None:
    """The answer as the run's --output asks: text, JSON under --schema, or the result object."""
    settings, answer = run.settings, result.answer
    if settings.output in ("json", "jsonl"):
        # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
        from agi.frontends.views.jsonl import result_line

        line = result_line(result, settings.output == "jsonl")
        sys.stdout.write(shown(run.redact(line), True))
    elif answer is not None and settings.schema is not None:
        text = json.dumps(answer, ensure_ascii=False, separators=(",", ":"))
        sys.stdout.write(shown(run.redact(text) + "\n", json_text=True))
    elif answer is not None:
        sys.stdout.write(shown(run.redact(f"{answer}\n")))
    sys.stdout.flush()


def shown(text: str, json_text: bool = False) -> str:
    """What goes to stdout: as it is for a pipe or a file; on a terminal, with the control
    characters of a model's text escaped (docs: security), JSON staying JSON (json.dumps
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
    return escape_controls(text)


def write_failure(run: Run, error: AgiError) -> None:
    """A failed run under --output json|jsonl still writes its result object."""
    if run.settings.output != "text":
        write_result(run, run.result(error))
