"""`agi --repl`: an interactive loop over one session; a turn stores what a one-shot run would."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agi.claude.commands import listing
from agi.claude.extensions import BUILTINS
from agi.errors import AgiError, Interrupted, UsageError
from agi.frontends.views.terminal import escape_controls
from agi.messages import AssistantText, TextDelta
from agi.options.values import overlay

if TYPE_CHECKING:
    from agi.engine.run import Run
    from agi.engine.seams import Event, View

HELP = """\
Type a prompt and press Enter. End a line with \\ to continue it, or put \"\"\" alone on a line
to start and end a multi-line block. Ctrl-C cancels the answer being written; Ctrl-D leaves.
  /session        show the session directory
  /sys FILE ...   use these system prompt files from now on ('default' is the built-in one)
  /compact [FOCUS]  summarise the conversation so far to free the context window
  /help           this text, and the commands of plugins and of commands/ beside the config
  /NAME [ARGS]    run a command (/PLUGIN:NAME when several plugins have NAME)"""


def read_prompt(interactive: bool) -> str:
    """One prompt: a line, continued lines ending in a backslash, or a \"\"\" block."""
    more = "… " if interactive else ""
    line = input("› " if interactive else "")
    if line.strip() == '"""':
        lines = []
        while (line := input(more)).strip() != '"""':
            lines.append(line)
        return "\n".join(lines)
    lines = []
    while line.endswith("\\"):
        lines.append(line[:-1])
        line = input(more)
    lines.append(line)
    return "\n".join(lines)


def enable_history(home: Path) -> None:
    try:
        import readline
    except ImportError:  # line editing is a convenience, not a requirement
        return
    history = home / "history"
    try:
        readline.read_history_file(history)
    except OSError:
        pass
    readline.set_history_length(1000)
    import atexit

    def save() -> None:
        try:
            home.mkdir(parents=True, exist_ok=True, mode=0o700)
            readline.write_history_file(history)
        except OSError:
            pass

    atexit.register(save)


class Conversation:
    """The REPL's side of its run: the settings its next turn takes (/sys changes them)."""

    def __init__(self, run: Run):
        self.run, self.settings = run, run.settings


def command(talk: Conversation, line: str) -> None:
    run = talk.run
    name, _, rest = line.partition(" ")
    if name == "/session":
        print(run.session.path, file=sys.stderr)
    elif name == "/sys":
        files = rest.split()
        if not files:
            raise UsageError("/sys needs one or more files")
        layer = overlay("/sys", {"sys": "/sys"}, sys=files)  # the next turn is assembled with it
        talk.settings = talk.settings.over(layer)
        print(f"system prompt: {', '.join(files)}", file=sys.stderr)
    elif name == "/compact":
        summary = run.compact(rest.strip())  # --timeout limits each turn, and a compaction is one
        print(summary or "(nothing to compact)")
    elif name == "/help":
        print(HELP, file=sys.stderr)
        for command, summary, _ in listing(talk.settings.commands):
            print(f"  {command}  {summary}".rstrip(), file=sys.stderr)
    else:
        raise UsageError(f"unknown command {name} (try /help)")


class Streamed:
    """The REPL's view: the answer streams to stdout as it comes; the rest to the view."""

    def __init__(self, inner: View):
        self.inner = inner

    def handle(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            sys.stdout.write(escape_controls(event.text))  # the REPL's stdout is a terminal
            sys.stdout.flush()
        elif isinstance(event, AssistantText):
            sys.stdout.write("\n")
        else:
            self.inner.handle(event)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def one_turn(talk: Conversation, line: str) -> None:
    """A prompt, or a `/NAME args` line: the turn is assembled from its own settings (a
    command's allow rules and model hold for that turn only)."""
    talk.run.turn(line, talk.settings, BUILTINS)
    sys.stdout.write("\n")
    sys.stdout.flush()


def repl(run: Run) -> int:
    """Loop until Ctrl-D; a failed or cancelled turn returns to the prompt."""
    talk = Conversation(run)
    interactive = sys.stdin.isatty()
    if interactive:
        enable_history(run.settings.home)
        print(
            f"agi — session {run.session.path} — /help for help, Ctrl-D to leave", file=sys.stderr
        )
    while True:
        try:
            line = read_prompt(interactive)
        except EOFError:
            if interactive:
                print(file=sys.stderr)
            run.end_hooks("prompt_input_exit")
            return 0
        except KeyboardInterrupt:
            print(file=sys.stderr)
            continue
        if not line.strip():
            continue
        try:
            if line.split(None, 1)[0] in ("/session", "/sys", "/compact", "/help"):
                command(talk, line.strip())
                continue
            one_turn(talk, line.strip() if line.startswith("/") else line)
        except KeyboardInterrupt:
            run.cancel_tools()
            print("\n(cancelled)", file=sys.stderr)
        except Interrupted:
            raise
        except AgiError as e:
            run.cancel_tools()
            print(f"\nagi: {e}", file=sys.stderr)
