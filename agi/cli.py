"""The command line: options, stdin, the run, and the only place errors become messages."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from agi import __version__
from agi.errors import AgiError, Interrupted, UsageError

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: --version and --help import neither typing
if TYPE_CHECKING:  # nor pathlib nor the engine
    from typing import Any

    from agi.run import Run

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
    add_session_options(p)
    add_run_options(p)
    add_tool_options(p)
    add_sandbox_options(p)
    add_output_options(p)
    return p


def add_session_options(p: Parser) -> None:
    """Which conversation: a directory, the last one, a copy; and the read-only views."""
    p.add_argument("-s", "--session", metavar="DIR", help="use DIR as the conversation")
    p.add_argument(
        "-c",
        "--continue",
        dest="cont",
        action="store_true",
        help="continue the most recently used session",
    )
    p.add_argument(
        "--fork", metavar="SESSION", help="continue a copy of SESSION (the original is kept)"
    )
    p.add_argument("-i", "--repl", action="store_true", help="interactive loop over one session")
    p.add_argument(
        "--list-sessions", action="store_true", help="list the sessions used, newest first"
    )
    p.add_argument("--show", metavar="SESSION", help="print a readable transcript of SESSION")
    p.add_argument(
        "--compact",
        action="store_true",
        help="compact the session (-s DIR or -c) now; PROMPT words say what the summary keeps",
    )
    p.add_argument(
        "--no-compact",
        action="store_true",
        default=None,
        help="never compact automatically (a request too long for the model then fails)",
    )


def add_run_options(p: Parser) -> None:
    """What the model is told and asked for, and the limits of a run."""
    p.add_argument(
        "--sys",
        action="append",
        metavar="FILE",
        help="system prompt file (repeatable; 'default' is the built-in one)",
    )
    p.add_argument(
        "--schema", metavar="SPEC", help="answer with JSON: a DSL, {JSON Schema} or @FILE"
    )
    p.add_argument(
        "--exit-code",
        metavar="CRITERIA",
        help="judge success: exit 0 or 1 (--exit-code=CRITERIA; the value needs '=')",
    )
    p.add_argument(
        "--react", action="store_true", default=None, help="text ReAct protocol, no native tools"
    )
    p.add_argument("--max-steps", type=positive(int), metavar="N", help="model calls per run (50)")
    p.add_argument(
        "--timeout",
        type=positive(float),
        metavar="SECONDS",
        help="wall-clock limit for the whole run",
    )
    p.add_argument(
        "--max-cost",
        type=positive(float),
        metavar="USD",
        help="stop before the next model call once the run has cost this much",
    )


def add_tool_options(p: Parser) -> None:
    """The tools offered: built-in, the user's own, skills, subagents, MCP servers; and hooks."""
    p.add_argument("--tools", metavar="LIST", help="comma-separated allowlist of tool names")
    p.add_argument(
        "--tool", action="append", metavar="PATH", help="a user-defined tool (repeatable)"
    )
    p.add_argument(
        "--tools-dir", action="append", metavar="DIR", help="every executable in DIR is a tool"
    )
    p.add_argument(
        "--skills", action="append", metavar="DIR", help="a directory of skills (repeatable)"
    )
    p.add_argument(
        "--hooks", action="append", metavar="FILE", help="hooks settings file (repeatable)"
    )
    p.add_argument(
        "--agents", action="append", metavar="DIR", help="subagent definitions (repeatable)"
    )
    p.add_argument(
        "--mcp",
        action="append",
        metavar="FILE",
        help="MCP servers in Claude Code's mcpServers format (repeatable)",
    )
    p.add_argument("--no-tools", action="store_true", default=None, help="offer no tools")
    p.add_argument(
        "--no-bash",
        action="store_true",
        default=None,
        help="no Bash, nor any other built-in tool: only your own tools, skills and MCP tools",
    )


def add_sandbox_options(p: Parser) -> None:
    p.add_argument(
        "--sandbox",
        choices=["off", "read-only", "workspace"],
        help="run Bash, user tools and terminals inside bubblewrap (default off)",
    )
    p.add_argument(
        "--allow-write",
        action="append",
        metavar="DIR",
        help="with --sandbox workspace: a writable directory (repeatable; default: the "
        "working directory)",
    )
    p.add_argument(
        "--no-network",
        action="store_true",
        default=None,
        help="with --sandbox: no network inside the sandbox",
    )


def add_output_options(p: Parser) -> None:
    """stdin, stdout's format, and how much goes to stderr."""
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


def rewrite(argv: list[str]) -> list[str]:
    """A bare `--exit-code` takes no value: `agi --exit-code "prove P=NP"` is a prompt."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        if arg == "--":
            return out + argv[i:]
        out.append("--exit-code=" if arg == "--exit-code" else arg)
    return out


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


def on_signal(signum: int, frame: Any) -> None:
    raise Interrupted(signum)


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    signal.signal(signal.SIGTERM, on_signal)
    run: Run | None = None
    try:
        args = build_parser().parse_args(rewrite(sys.argv[1:] if argv is None else argv))
        if args.list_sessions or args.show:
            return inspect(args)
        if args.cont and (args.session or args.fork):
            raise UsageError("--continue cannot be used with --session or --fork")
        if args.compact and (args.repl or args.fork or not (args.session or args.cont)):
            raise UsageError("--compact works on a session: give -s DIR or -c (not -i, --fork)")
        prompt = "" if args.repl or args.compact else read_prompt(args)
        from pathlib import Path

        from agi.run import Run  # after parsing: --version and --help stay light
        from agi.settings import Settings

        settings = Settings.load(vars(args))
        if settings.timeout and not args.repl:
            arm_alarm(started, settings.timeout)
        run = Run(settings, started, interactive=args.repl)
        path = Path(args.session) if args.session else None
        if args.fork:
            from agi.session import SessionIndex, fork

            path = path or SessionIndex(settings.home).default_path()
            fork(Path(args.fork), path)
        if args.repl:
            from agi.repl import repl

            return repl(run, path, args.cont)
        if args.compact:
            return run.compact(" ".join(args.prompt).strip(), path, args.cont)
        code = run.one_shot(prompt, path, args.cont)
        if code and run.verdict is not None:
            sys.stderr.write(f"agi: judged failed: {run.verdict['reason']}\n")
        return code
    except KeyboardInterrupt:
        return fail(Interrupted(signal.SIGINT), run)
    except AgiError as e:
        return fail(e, run)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        if run is not None:
            run.cleanup()


def arm_alarm(started: float, timeout: float) -> None:
    """A backstop for --timeout: the transport and the tools honour the deadline themselves."""
    from agi.errors import TimeLimit

    def expire(signum: int, frame: Any) -> None:
        raise TimeLimit(timeout)

    signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, max(0.1, started + timeout - time.monotonic()) + 1)


def inspect(args: argparse.Namespace) -> int:
    """--list-sessions and --show: read-only views of the sessions."""
    from pathlib import Path

    from agi.config import agi_home
    from agi.transcript import list_sessions, show

    text = list_sessions(agi_home()) if args.list_sessions else show(Path(args.show))
    if text:
        sys.stdout.write(text + "\n")
    return 0


def fail(error: AgiError, run: Run | None) -> int:
    message = str(error)
    if run is not None:
        try:
            run.after_failure(error)
        except (AgiError, KeyboardInterrupt, OSError):
            pass
        from agi.errors import CostLimit

        kept = error.exit_code in (4, 130, 143) and not isinstance(error, CostLimit)
        if run.session is not None and kept:  # the contract's cost line stands alone
            message += f"; the session is kept: {run.session.path}"
    view = run.view if run is not None and run.view is not None else None
    if view is not None:
        view.close()
    detail = getattr(error, "detail", "")  # a bad --schema: the text, and a caret under the fault
    sys.stderr.write(f"agi: {message}\n" + (f"{detail}\n" if detail else ""))
    sys.stderr.flush()
    return error.exit_code
