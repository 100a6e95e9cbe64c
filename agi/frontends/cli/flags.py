"""The command line's flags: the parser (`agi --help`), and the flags as the command line's
layer of options (agi.options.values). Importing this stays light: `--version` and `--help` load
neither typing nor the engine."""

from __future__ import annotations

import argparse

from agi import __version__
from agi.errors import UsageError
from agi.options.table import OPTIONS, ordered

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: --version and --help import neither typing
if TYPE_CHECKING:  # nor pathlib nor the engine
    from typing import Any

    from agi.options.table import Option
    from agi.options.values import Layer

DESCRIPTION = "A lightweight LLM agent that behaves like a UNIX tool."
EPILOG = """\
stdout carries only the final answer; progress goes to stderr when it is a terminal.
Exit codes: 0 done, 1 judged failed, 2 usage/configuration, 3 provider failed,
4 limit reached, 5 no valid JSON, 6 stopped by a hook, 130/143 interrupted."""
EXAMPLES = """examples:
  agi "What does this repository do?"
  git diff | agi "Write a commit message for this diff"
  agi -m ollama:qwen3 --schema '[title:string]' "Three release names"
  agi -s notes "Remember: the build is make" && agi -c "How do I build?"
  agi --exit-code="the tests pass" "Fix the failing test"
  agi --project --list-extensions    # a Claude Code project's .claude/ and CLAUDE.md
  agi --list-settings                # the options in effect, and where each came from"""
ENVIRONMENT = """environment:
  AGI_MODEL, AGI_BASE_URL, AGI_API_KEY  as -m, --base-url and the api_key option
  OPENAI_API_KEY, ANTHROPIC_API_KEY, ...  a provider's key (man agi: ENVIRONMENT)
  AGI_CONFIG  the config file; AGI_HOME  sessions and their index
  NO_COLOR    no colour on stderr under --color auto"""
# --help's groups, in order: (title, the table's sections in it); LIMITS and the rest by name
GROUPS = (
    ("general", ("general",)),
    ("model", ("model", "run")),
    ("session", ("session",)),
    ("tools", ("tools", "sandbox")),
    ("extensions (Claude Code's plugins, settings, permissions)", ("claude",)),
    ("output (and input)", ("io",)),
    ("limits", ()),
    ("front ends (serving many runs)", ("serve",)),
)
BY_NAME = {
    **dict.fromkeys(("max_steps", "timeout", "max_cost", "rpm", "tpm"), "limits"),
    **dict.fromkeys(("verbose", "quiet", "color", "schema", "exit_code"), "output (and input)"),
    **dict.fromkeys(("skills", "hooks", "agents", "mcp"), GROUPS[4][0]),
}


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would print usage and exit 2 itself
        raise UsageError(f"{message} (see agi --help)")

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        """As argparse's, but a mistyped flag is named with the closest one (`--shema`: did
        you mean --schema?)."""
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            self.error(f"unrecognized arguments: {' '.join(extra)}{self.closest(extra)}")
        return parsed

    def closest(self, extra: list[str]) -> str:
        """`; did you mean --FLAG?` for the first unknown word that looks like a flag."""
        word = next((w.partition("=")[0] for w in extra if w.startswith("-") and w != "-"), "")
        if not word:
            return ""
        import difflib  # lazy: only for a mistyped flag

        known = [f for f in self._option_string_actions if f.startswith("--") or len(word) < 3]
        close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
        return f"; did you mean {close[0]}?" if close else ""


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


def build_parser() -> Parser:
    """`agi`'s parser from the option table (agi.options.table): every row with a flag, by
    section, in the table's order within each."""
    p = Parser(
        prog="agi",
        description=DESCRIPTION,
        epilog=epilog(),
        allow_abbrev=False,
        formatter_class=Formatter,
        add_help=False,  # -h is a row of the table
    )
    p.add_argument("prompt", nargs="*", help="the task; words are joined with spaces")
    groups = {title: p.add_argument_group(title) for title, _ in GROUPS}
    of = {section: title for title, sections in GROUPS for section in sections}
    for option in ordered():
        if option.flags:
            add_flag(groups[BY_NAME.get(option.name) or of[option.section]], option)
    return p


def epilog() -> str:
    """Exit codes, examples, the config file's path (as agi.options.config finds it, without
    loading it) and the environment."""
    import os

    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    path = os.environ.get("AGI_CONFIG") or os.path.join(base, "agi", "config.toml")
    config = f"config file: {path} (AGI_CONFIG, else $XDG_CONFIG_HOME/agi/config.toml)"
    return "\n\n".join((EPILOG, EXAMPLES, config, ENVIRONMENT))


def add_flag(p: Any, option: Option) -> None:
    """One row as an argparse argument: a switch is None when not given if it is an option
    (so that it says nothing), False if it is a flag of the command line alone."""
    if option.kind == "help":
        p.add_argument(*option.flags, action="help", help=option.help)
        return
    if option.kind == "version":
        version = f"agi {__version__}"
        p.add_argument(*option.flags, action="version", version=version, help=option.help)
        return
    kwargs: dict[str, Any] = {"dest": option.dest, "help": option.help}
    if option.kind == "switch":
        kwargs.update(action="store_true", default=None if option.option else False)
    else:
        kwargs.update(metavar=option.metavar, type=option.parse, choices=option.choices)
        if option.kind == "list":
            kwargs["action"] = "append"
        elif option.kind == "optional":
            kwargs.update(nargs="?", const="")
    p.add_argument(*option.flags, **kwargs)


def sdk_mode(argv: list[str]) -> bool:
    """Whether this is the Claude Agent SDKs' command line (`--output-format`, `--input-format`:
    agi.frontends.sdk); agi's own flags have neither."""
    for arg in argv:
        if arg == "--":
            return False
        if arg.split("=", 1)[0] in ("--output-format", "--input-format"):
            return True
    return False


def rewrite(argv: list[str]) -> list[str]:
    """A bare `--exit-code` takes no value: `agi --exit-code "prove P=NP"` is a prompt."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        if arg == "--":
            return out + argv[i:]
        out.append("--exit-code=" if arg == "--exit-code" else arg)
    return out


def flags_layer(args: argparse.Namespace) -> Layer:
    """The command line's layer of options: only what the flags say (a switch given stands for
    its row's `given` value: `--no-checkpoints` is `checkpoints = false`). Errors name the
    flag (`--sys`, `--plugin-dir`)."""
    # lazy: agi --version loads this module, not that one
    from agi.options.values import layer_from_values

    values: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for option in OPTIONS:
        if option.option and option.flags and option.field:
            got = getattr(args, option.dest, None)
            values[option.name] = (
                (option.given if got else None) if option.kind == "switch" else got
            )
            spelled.setdefault(option.field, option.flags[-1])
    return layer_from_values("command line", values, spelled)


def rewinding(args: argparse.Namespace) -> bool:
    """Whether the command line asks for --rewind, --rewind-files or --rewind-conversation."""
    asked = any(v is not None for v in (args.rewind, args.rewind_files, args.rewind_conversation))
    if args.dry_run and not asked and args.prune is None:
        raise UsageError(
            "--dry-run goes with --rewind, --rewind-files, --rewind-conversation or --prune"
        )
    return asked
