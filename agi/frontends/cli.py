"""The command line: options, stdin, the run, and the only place errors become messages."""

from __future__ import annotations

import argparse
import signal
import sys
import time

from agi import __version__
from agi.errors import AgiError, Interrupted, UsageError
from agi.frontends.rewind import add_rewind_options, rewind_command, rewinding

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: --version and --help import neither typing
if TYPE_CHECKING:  # nor pathlib nor the engine
    from typing import Any

    from agi.options import Layer
    from agi.run import Run
    from agi.settings import Settings

DESCRIPTION = "A lightweight LLM agent that behaves like a UNIX tool."
EPILOG = """\
stdout carries only the final answer; progress goes to stderr when it is a terminal.
Exit codes: 0 done, 1 judged failed, 2 usage/configuration, 3 provider failed,
4 limit reached, 5 no valid JSON, 6 stopped by a hook, 130/143 interrupted."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would print usage and exit 2 itself
        raise UsageError(f"{message} (see agi --help)")


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Shows `--exit-code[=CRITERIA]`, the one form that takes criteria (a bare --exit-code
    takes none: the next word is the prompt's)."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if action.dest == "exit_code":
            return "--exit-code[=CRITERIA]"
        return super()._format_action_invocation(action)

    def _format_usage(self, *args: Any) -> str:
        return super()._format_usage(*args).replace(
            "[--exit-code CRITERIA]", "[--exit-code[=CRITERIA]]"
        )


def positive(kind: type) -> Any:
    """A finite positive number (agi.config caps timeouts: 1e12 s is no overflow)."""

    def convert(text: str) -> Any:
        import math

        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number: {text!r}")
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
        formatter_class=Formatter,
    )
    p.add_argument("prompt", nargs="*", help="the task; words are joined with spaces")
    p.add_argument("-m", "--model", help="PROVIDER:MODEL or a bare model name (env AGI_MODEL)")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint ending in /v1 (env AGI_BASE_URL)")
    add_session_options(p)
    add_rewind_options(p)  # --rewind, --no-checkpoints (section 18)
    add_run_options(p)
    add_tool_options(p)
    add_claude_options(p)
    add_sandbox_options(p)
    add_output_options(p)
    from agi.frontends.batch_flags import add_options

    add_options(p)  # --batch, --jobs, --batch-out, --shard
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
        "--acp", action="store_true", help="serve editors: an Agent Client Protocol agent on stdio"
    )
    p.add_argument("--mcp-serve", action="store_true", help="serve other agents: MCP on stdio")
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
        help="judge success: exit 0 or 1; criteria only with '=' (--exit-code='it compiles')",
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


def add_claude_options(p: Parser) -> None:
    """Claude Code's plugins, settings files and permission rules (section 12)."""
    p.add_argument(
        "--plugin-dir",
        dest="plugins",
        action="append",
        metavar="DIR",
        help="load a Claude Code plugin: hooks, agents, skills, commands, MCP (repeatable)",
    )
    p.add_argument(
        "--settings",
        action="append",
        metavar="FILE",
        help="a Claude Code settings.json: its hooks, permissions and env (repeatable)",
    )
    for kind, what in (("allow", "allows"), ("ask", "asks for"), ("deny", "denies")):
        p.add_argument(
            f"--{kind}",
            action="append",
            metavar="RULE",
            help=f"a permission rule that {what} matching calls, e.g. 'Bash(git diff:*)'",
        )
    p.add_argument(
        "--permission-mode",
        choices=["default", "acceptEdits", "plan", "bypassPermissions", "dontAsk"],
        help="for calls no rule decides (README: Permission modes); default: run them",
    )
    p.add_argument(
        "--list-extensions",
        action="store_true",
        help="list the plugins, commands, skills, agents and hooks agi sees, and their files",
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
    """The prompt words, with stdin appended as a context block (or stdin alone); bytes that
    are not UTF-8 (`agi $'caf\\xe9'`) become U+FFFD."""
    from agi.decoding import from_argv, from_bytes

    prompt = " ".join(from_argv(word) for word in args.prompt).strip()
    stdin = sys.stdin
    piped = ""
    if not args.no_stdin and stdin is not None and not stdin.isatty():
        piped = from_bytes(stdin.buffer.read())
    if prompt and piped.strip():
        return f"{prompt}\n\n<stdin>\n{piped.rstrip()}\n</stdin>"
    if prompt:
        return prompt
    if piped.strip():
        return piped.strip()
    raise UsageError("no prompt: give it as arguments or on stdin (see agi --help)")


def main(argv: list[str] | None = None) -> int:
    """`agi`: the run, then its cleanup (SessionEnd hooks, what the tools started) whatever
    happened. SIGHUP is taken like SIGTERM (exit 129); a signal during the cleanup cuts it
    short, and after a finished run it still sets the exit code (CONTRACT section 2)."""
    from agi.process import end_run, exit_now_if_stuck, interrupt_on, standard_streams

    started = time.monotonic()
    if argv is None:  # the real process, not a test calling main() in-process
        standard_streams()
    interrupt_on(signal.SIGTERM, signal.SIGHUP)
    runs: list[Run] = []
    code = invoke(argv, started, runs)
    cut = end_run(runs[0]) if runs else None
    if cut is not None and code == 0:  # the answer was written: no second result object
        code = fail(cut, runs[0], result=False)
    if argv is None:
        code = flush(code)
        exit_now_if_stuck(code)
    return code


def flush(code: int) -> int:
    """What is left for stdout, now: a failure is still reported; a reader that went away
    (EPIPE) is exit 141, quietly, as for filters killed by SIGPIPE."""
    from agi.process import OutputFailed, flush_stdout

    try:
        gone = flush_stdout()
    except OutputFailed as e:
        return fail(e, None) if code == 0 else code
    return 141 if gone and code == 0 else code


def invoke(argv: list[str] | None, started: float, runs: list[Run]) -> int:
    """Parse, run, and turn what went wrong into one line and an exit code."""
    from agi.process import arm_alarm, hide_keys, silence_stdout

    run: Run | None = None
    try:
        args = build_parser().parse_args(rewrite(sys.argv[1:] if argv is None else argv))
        if args.list_sessions or args.show or rewinding(args):
            return inspect(args)
        if args.acp:  # an editor drives agi: ACP on stdio until stdin closes
            from agi.frontends.acp import serve

            return serve(args, flags_layer(args))
        if args.mcp_serve:  # other agents call agi as an MCP tool until stdin closes
            from agi.frontends.mcp_serve import main as serve_mcp

            return serve_mcp(args)
        if args.batch is not None or args.jobs or args.batch_out or args.shard:
            from agi.frontends.batch import batch  # many prompts, one process (section 19)

            return batch(args, flags_layer(args))
        if args.cont and (args.session or args.fork):
            raise UsageError("--continue cannot be used with --session or --fork")
        if args.compact and (args.repl or args.fork or not (args.session or args.cont)):
            raise UsageError("--compact works on a session: give -s DIR or -c (not -i, --fork)")
        if args.compact and (args.schema or args.exit_code is not None):
            raise UsageError("--compact prints the summary: it takes no --schema or --exit-code")
        prompt = "" if args.repl or args.compact or args.list_extensions else read_prompt(args)
        from pathlib import Path

        from agi.run import Run  # after parsing: --version and --help stay light

        settings = settings_for(args)
        if settings is None:
            return 0
        if settings.timeout and not args.repl:
            arm_alarm(started, settings.timeout)
        run = Run(settings, started, interactive=args.repl)
        runs.append(run)
        hide_keys(settings.model.api_key)  # from the tools' environment, once they are built
        path = Path(args.session) if args.session else None
        if args.fork:
            from agi.sessions.session import SessionIndex, fork

            path = path or SessionIndex(settings.home).default_path()
            fork(Path(args.fork), path)
        if args.repl:
            from agi.frontends.repl import repl

            return repl(run, path, args.cont)
        from agi.frontends import oneshot

        if args.compact:
            return oneshot.compact(run, " ".join(args.prompt).strip(), path, args.cont)
        return oneshot.one_shot(run, prompt, path, args.cont)
    except KeyboardInterrupt:
        return fail(Interrupted(signal.SIGINT), run)
    except AgiError as e:
        return fail(e, run)
    except BrokenPipeError:  # the reader of stdout went away: end quietly, as filters do
        silence_stdout()
        return 141
    except OSError as e:  # a system failure no layer below could name better
        where = f": {e.filename}" if e.filename else ""
        return fail(AgiError(f"{e.strerror or e}{where}"), run)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


# how the command line spells an option in errors, where `--` and the name do not
SPELLED = {"plugins": "--plugin-dir", "compact": "--no-compact", "checkpoints": "--no-checkpoints"}
FLAGS = (
    "model", "base_url", "sys", "schema", "exit_code", "max_steps", "timeout", "max_cost",
    "tool", "tools_dir", "skills", "hooks", "agents", "mcp", "plugins", "settings", "allow",
    "ask", "deny", "permission_mode", "sandbox", "allow_write", "output",
)  # fmt: skip
SWITCHES = ("react", "no_network", "verbose", "quiet")  # on, or nothing said


def flags_layer(args: argparse.Namespace) -> Layer:
    """The command line's layer of options: only what the flags say."""
    from agi.options import NAMES, ToolChoice, overlay

    given: dict[str, Any] = {name: getattr(args, name, None) for name in FLAGS}
    given.update({name: True if getattr(args, name, None) else None for name in SWITCHES})
    given["tools"] = ToolChoice.of(args.tools, args.no_bash, args.no_tools)
    given["compact"] = "off" if args.no_compact else None
    given["checkpoints"] = False if getattr(args, "no_checkpoints", None) else None
    spelled = {name: SPELLED.get(name, "--" + name.replace("_", "-")) for name in NAMES}
    return overlay("command line", spelled, **given)


def settings_for(args: argparse.Namespace) -> Settings | None:
    """The run's settings from the command line's layer; None once --list-extensions has
    printed its listing. Nothing is run: a `/command` prompt is expanded inside the run."""
    from agi.options import Options
    from agi.settings import Settings

    listing = args.list_extensions  # a listing needs no model configured
    defaults = Options(model="openai:none") if listing else None
    settings = Settings.load(flags_layer(args), defaults=defaults)
    if listing:
        from agi.claude.extensions import inventory

        sys.stdout.write(inventory(settings))
        return None
    return settings


def inspect(args: argparse.Namespace) -> int:
    """--list-sessions and --show: read-only views of the sessions; --rewind (section 18)."""
    if rewinding(args):
        return rewind_command(args)
    from pathlib import Path

    from agi.config import agi_home
    from agi.frontends.transcript import list_sessions, show

    text = list_sessions(agi_home()) if args.list_sessions else show(Path(args.show))
    if text:
        sys.stdout.write(text + "\n")
    sys.stdout.flush()
    return 0


def fail(error: AgiError, run: Run | None, result: bool = True) -> int:
    """The one `agi:` line (API keys redacted), and with --output json|jsonl the result object
    (`result`: not when one was already written, by a run that succeeded)."""
    message = str(error)
    if run is not None:
        try:
            if result:
                from agi.frontends.oneshot import write_failure

                write_failure(run, error)
        except (AgiError, KeyboardInterrupt, OSError):
            pass
        from agi.errors import CostLimit

        kept = error.exit_code in (4, 129, 130, 143) and not isinstance(error, CostLimit)
        if run.session is not None and kept:  # the contract's cost line stands alone
            message += f"; the session is kept: {run.session.path}"
        message = run.redact(message)
    view = run.view if run is not None and run.view is not None else None
    if view is not None:
        view.close()
    detail = getattr(error, "detail", "")  # a bad --schema: the text, and a caret under the fault
    sys.stderr.write(f"agi: {message}\n" + (f"{detail}\n" if detail else ""))
    sys.stderr.flush()
    return error.exit_code
