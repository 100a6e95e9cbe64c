"""The command line: options, stdin, the run, and the only place errors become messages."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from agi import __version__
from agi.errors import AgiError, Interrupted, TimeLimit, UsageError

DESCRIPTION = "A lightweight LLM agent that behaves like a UNIX tool."
EPILOG = """\
stdout carries only the final answer; progress goes to stderr when it is a terminal.
Exit codes: 0 done, 1 judged failed, 2 usage/configuration, 3 provider failed,
4 limit reached, 5 no valid JSON, 6 stopped by a hook, 130/143 interrupted."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would print usage and exit 2 itself
        raise UsageError(f"{message} (see agi --help)")


def positive(kind: type) -> Any:
    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
        return value

    convert.__name__ = kind.__name__
    return convert


def build_parser() -> Parser:
    p = Parser(
        prog="agi",
        description=DESCRIPTION,
        epilog=EPILOG,
        allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("prompt", nargs="*", help="the task; words are joined with spaces")
    p.add_argument("-m", "--model", help="PROVIDER:MODEL or a bare model name (env AGI_MODEL)")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint ending in /v1 (env AGI_BASE_URL)")
    p.add_argument("-s", "--session", metavar="DIR", help="use DIR as the conversation")
    p.add_argument(
        "-c",
        "--continue",
        dest="cont",
        action="store_true",
        help="continue the most recently used session",
    )
    p.add_argument(
        "--sys",
        action="append",
        metavar="FILE",
        help="system prompt file (repeatable; 'default' is the built-in one)",
    )
    p.add_argument("--max-steps", type=positive(int), metavar="N", help="model calls per run (50)")
    p.add_argument(
        "--timeout",
        type=positive(float),
        metavar="SECONDS",
        help="wall-clock limit for the whole run",
    )
    p.add_argument("--tools", metavar="LIST", help="comma-separated allowlist of tool names")
    p.add_argument("--no-tools", action="store_true", default=None, help="offer no tools")
    p.add_argument("--no-bash", action="store_true", default=None, help="drop the Bash tool")
    p.add_argument("--no-stdin", action="store_true", help="do not read standard input")
    p.add_argument("--output", choices=["text", "json", "jsonl"], help="output format (text)")
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=None,
        help="show progress on stderr even when it is not a terminal",
    )
    p.add_argument(
        "-q", "--quiet", action="store_true", default=None, help="no progress, only errors"
    )
    p.add_argument("--version", action="version", version=f"agi {__version__}")
    return p


def read_prompt(args: argparse.Namespace) -> str:
    """The prompt words, with stdin appended as a context block (or stdin alone)."""
    prompt = " ".join(args.prompt).strip()
    stdin = sys.stdin
    piped = ""
    if not args.no_stdin and stdin is not None and not stdin.isatty():
        piped = stdin.buffer.read().decode("utf-8", "replace")
    if prompt and piped.strip():
        return f"{prompt}\n\n<stdin>\n{piped.rstrip()}\n</stdin>"
    if prompt:
        return prompt
    if piped.strip():
        return piped.strip()
    raise UsageError("no prompt: give it as arguments or on stdin (see agi --help)")


def system_prompt(files: list[str] | None) -> str:
    from agi.prompts import default_system_prompt

    if not files:
        return default_system_prompt()
    parts = []
    for name in files:
        if name == "default":
            parts.append(default_system_prompt())
            continue
        try:
            parts.append(Path(name).expanduser().read_text(encoding="utf-8").strip())
        except OSError as e:
            raise UsageError(f"cannot read --sys file {name}: {e.strerror}") from e
        except UnicodeDecodeError as e:
            raise UsageError(f"--sys file {name} is not UTF-8 text") from e
    return "\n\n".join(parts)


def choose_tools(flags: dict[str, Any], file: dict[str, Any]) -> list[Any]:
    from agi.config import merged
    from agi.tools import builtin_tools

    tools = builtin_tools()
    if merged(flags, file, "no_tools"):
        return []
    if merged(flags, file, "no_bash"):
        tools = [t for t in tools if t.name != "Bash"]
    allow = merged(flags, file, "tools")
    if allow is not None:
        names = [n.strip() for n in (allow.split(",") if isinstance(allow, str) else allow)]
        names = [n for n in names if n]
        known = {t.name for t in tools}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise UsageError(
                f"unknown tool in --tools: {', '.join(unknown)} "
                f"(available: {', '.join(sorted(known))})"
            )
        tools = [t for t in tools if t.name in names]
    return tools


def on_signal(signum: int, frame: Any) -> None:
    raise Interrupted(signum)


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    signal.signal(signal.SIGTERM, on_signal)
    run: Run | None = None
    try:
        args = build_parser().parse_args(argv)
        run = Run(args, started)
        return run.execute()
    except KeyboardInterrupt:
        return fail(Interrupted(signal.SIGINT), run)
    except AgiError as e:
        return fail(e, run)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    finally:
        if run is not None:
            run.cleanup()


def fail(error: AgiError, run: Run | None) -> int:
    message = str(error)
    if run is not None:
        try:
            run.after_failure(error)
        except (AgiError, KeyboardInterrupt, OSError):
            pass
        if run.session is not None and error.exit_code in (4, 130, 143):
            message += f"; the session is kept: {run.session.path}"
    view = run.view if run is not None and run.view is not None else None
    if view is not None:
        view.close()
    sys.stderr.write(f"agi: {message}\n")
    sys.stderr.flush()
    return error.exit_code


class Run:
    """One invocation: settings, session, agent; owns the cleanup."""

    def __init__(self, args: argparse.Namespace, started: float):
        self.args, self.started = args, started
        self.session: Any = None
        self.view: Any = None
        self.agent: Any = None
        self.transport: Any = None

    def execute(self) -> int:
        from agi.config import agi_home, config_path, load_file, merged, resolve_model

        args = self.args
        flags = vars(args)
        path = config_path()
        file = load_file(path)
        if args.session and args.cont:
            raise UsageError("--session and --continue cannot be used together")
        prompt = read_prompt(args)
        model = resolve_model(flags, file, path)
        system = system_prompt(merged(flags, file, "sys"))
        tools = choose_tools(flags, file)
        max_steps = merged(flags, file, "max_steps", 50)
        timeout = merged(flags, file, "timeout")
        deadline = self.started + timeout if timeout else None
        if timeout:
            # a backstop: the transport and tools honour the deadline themselves
            def expire(signum: int, frame: Any) -> None:
                raise TimeLimit(timeout)

            signal.signal(signal.SIGALRM, expire)
            signal.setitimer(
                signal.ITIMER_REAL, max(0.1, self.started + timeout - time.monotonic()) + 1
            )
        self.output = merged(flags, file, "output", "text")
        self.view = self.make_view(merged(flags, file, "verbose"), merged(flags, file, "quiet"))
        self.open_session(agi_home(), model)
        self.session.lock(deadline, timeout)
        for warning in self.session.warnings:
            self.view.warn(warning)
        return self.converse(prompt, model, system, tools, max_steps, deadline, timeout)

    def make_view(self, verbose: bool | None, quiet: bool | None) -> Any:
        from agi.render import Silent, Terminal

        tty = sys.stderr.isatty()
        if quiet or not (tty or verbose):
            return Silent()
        return Terminal(color=tty, spinner=tty)

    def open_session(self, home: Path, model: Any) -> None:
        from agi.session import Session, SessionIndex

        index = SessionIndex(home)
        if self.args.cont:
            path = index.latest()
            if path is None:
                raise UsageError("no session to continue: none has been used yet")
        elif self.args.session:
            path = Path(self.args.session)
        else:
            path = index.default_path()
        self.session = Session.open(path, secrets=[model.api_key] if model.api_key else [])
        index.record(self.session.path)

    def converse(
        self,
        prompt: str,
        model: Any,
        system: str,
        tools: list[Any],
        max_steps: int,
        deadline: float | None,
        timeout: float | None,
    ) -> int:
        from agi.agent import Agent
        from agi.tools import Toolbox, ToolContext
        from agi.transport import Transport

        session = self.session
        session.trace(
            {
                "type": "run",
                "agi": __version__,
                "model": model.label,
                "base_url": model.base_url,
                "cwd": os.getcwd(),
                "pid": os.getpid(),
                "system": system,
                "tools": [t.name for t in tools],
            }
        )
        if not session.meta_file.exists():
            session.write_meta(model=model.label)
        self.transport = Transport(model, trace=session.trace, deadline=deadline, timeout=timeout)
        toolbox = Toolbox(tools, ToolContext(deadline=deadline))
        self.agent = Agent(self.transport, toolbox, session, system, max_steps)
        events = self.agent.run(prompt)
        while True:
            try:
                event = next(events)
            except StopIteration as done:
                reply = done.value
                break
            self.view.handle(event)
            self.emit_event(event)
        session.write_meta(model=model.label)
        self.view.finish(
            str(session.path), self.agent.usage, time.monotonic() - self.started, self.agent.steps
        )
        self.write_result(reply.text, 0)
        return 0

    def emit_event(self, event: Any) -> None:
        if self.output == "jsonl":
            from agi.output import event_line

            sys.stdout.write(event_line(event))
            sys.stdout.flush()

    def write_result(self, answer: Any, exit_code: int, error: str | None = None) -> None:
        if self.output in ("json", "jsonl"):
            from agi.output import result_line

            sys.stdout.write(result_line(self, answer, exit_code, error))
        elif answer is not None:
            sys.stdout.write(f"{answer}\n")
        sys.stdout.flush()

    def after_failure(self, error: AgiError) -> None:
        """Keep what the run produced; report the failure in machine-readable output."""
        if self.agent is not None:
            self.agent.salvage()
        if self.session is not None and self.session.meta_file.exists():
            self.session.trace({"type": "error", "exit_code": error.exit_code, "error": str(error)})
            self.session.write_meta()
        if getattr(self, "output", "text") != "text":
            self.write_result(None, error.exit_code, str(error))

    def cleanup(self) -> None:
        from agi.tools.shell import kill_all

        signal.setitimer(signal.ITIMER_REAL, 0)
        if "agi.tools.shell" in sys.modules:
            kill_all()
        if self.transport is not None:
            self.transport.close()
        if self.session is not None:
            self.session.unlock()
