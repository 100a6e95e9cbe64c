"""The command line's flags: the parser (`agi --help`), and the flags as the command line's
layer of options (agi.options.values). Importing this stays light: `--version` and `--help` load
neither typing nor the engine."""

from __future__ import annotations

import argparse

from agi import __version__
from agi.errors import UsageError

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: --version and --help import neither typing
if TYPE_CHECKING:  # nor pathlib nor the engine
    from typing import Any

    from agi.options.values import Layer

DESCRIPTION = "A lightweight LLM agent that behaves like a UNIX tool."
EPILOG = """\
stdout carries only the final answer; progress goes to stderr when it is a terminal.
Exit codes: 0 done, 1 judged failed, 2 usage/configuration, 3 provider failed,
4 limit reached, 5 no valid JSON, 6 stopped by a hook, 130/143 interrupted."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would print usage and exit 2 itself
        raise UsageError(f"{message} (see agi --help)")


_WIDTH: list[int] = []  # the terminal's width, asked once


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Shows `--exit-code[=CRITERIA]`, the one form that takes criteria (a bare --exit-code
    takes none: the next word is the prompt's). argparse makes a formatter for every option
    it adds, and each asked the terminal its size: ~8 ms of every start; asked once here."""

    def __init__(self, prog: str, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("width") is None and not args:
            if not _WIDTH:
                import shutil

                _WIDTH.append(shutil.get_terminal_size().columns - 2)  # as argparse computes it
            kwargs["width"] = _WIDTH[0]
        super().__init__(prog, *args, **kwargs)

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if action.dest == "exit_code":
            return "--exit-code[=CRITERIA]"
        return super()._format_action_invocation(action)

    def _format_usage(self, *args: Any) -> str:
        return (
            super()
            ._format_usage(*args)
            .replace("[--exit-code CRITERIA]", "[--exit-code[=CRITERIA]]")
        )


def positive(kind: type) -> Any:
    """A finite positive number (agi.options.config caps timeouts: 1e12 s is no overflow)."""

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
    from agi.frontends.batch.flags import add_options

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
    from agi.options.values import NAMES, ToolChoice, overlay

    given: dict[str, Any] = {name: getattr(args, name, None) for name in FLAGS}
    given.update({name: True if getattr(args, name, None) else None for name in SWITCHES})
    given["tools"] = ToolChoice.of(args.tools, args.no_bash, args.no_tools)
    given["compact"] = "off" if args.no_compact else None
    given["checkpoints"] = False if getattr(args, "no_checkpoints", None) else None
    spelled = {name: SPELLED.get(name, "--" + name.replace("_", "-")) for name in NAMES}
    return overlay("command line", spelled, **given)


def add_rewind_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--rewind",
        nargs="?",
        const="",
        metavar="N",
        help="list the turns of the session (-s DIR or -c); with N: restore its files and "
        "conversation to before turn N",
    )
    p.add_argument("--rewind-files", metavar="N", help="restore only the files to before turn N")
    p.add_argument(
        "--rewind-conversation", metavar="N", help="rewind only the conversation to before turn N"
    )
    p.add_argument("--dry-run", action="store_true", help="with --rewind*: print what would change")
    p.add_argument(
        "--no-checkpoints",
        action="store_true",
        default=None,
        help="take no checkpoints of the working directory (config: checkpoints = false)",
    )


def rewinding(args: argparse.Namespace) -> bool:
    """Whether the command line asks for --rewind, --rewind-files or --rewind-conversation."""
    asked = any(v is not None for v in (args.rewind, args.rewind_files, args.rewind_conversation))
    if args.dry_run and not asked:
        raise UsageError("--dry-run goes with --rewind, --rewind-files or --rewind-conversation")
    return asked
