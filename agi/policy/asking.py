"""Asking a person: what a permission question carries, and the terminal's way of asking it.

This is the seam between the permission check (agi.policy.guard) and a front end. A front end
hands the Guard an `ask` callback, `ask(request: AskRequest) -> str | None`, returning one of
ANSWERS, or None when no one can be asked (the call is then denied, naming why). The command
line and the REPL use `terminal_ask` (a y/N question on /dev/tty when stdin and stderr are a
terminal); the ACP front end plugs in `session/request_permission`. A callback may carry a
`present()` method: when it returns False, no Notification hook fires (nobody is asked).
The callback may be called from several tool threads at once.
"""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

ANSWERS = ("allow_once", "allow_always", "reject_once", "reject_always")
_TTY_LOCK = threading.Lock()  # parallel tool calls ask one question at a time


@dataclass
class AskRequest:
    """One question: may this call run?

    `reason` says why it asks (`rule "Bash(rm:*)" (settings.json) asks`, `permission mode
    acceptEdits`, `a PreToolUse hook asks: ...`); `suggestions` are the rules an
    `allow_always` (or `reject_always`) answer adds for the rest of the session, written as
    Claude Code writes them (`Bash(git commit:*)`, `Write`), `suggestion` the first ("" and
    no "always" choice when there is none)."""

    call_id: str
    tool: str
    input: dict[str, Any]
    reason: str
    suggestion: str
    suggestions: list[str] = field(default_factory=list)  # every rule; none: no "always"
    extra: dict[str, Any] = field(default_factory=dict)  # front-end data (ACP: the toolCall)

    def __post_init__(self) -> None:
        if not self.suggestions and self.suggestion:
            self.suggestions = [self.suggestion]

    def shown(self) -> str:
        """The call in one line, for a question on the terminal."""
        value = self.input.get("command") if self.tool == "Bash" else None
        text = value if isinstance(value, str) else json.dumps(self.input, ensure_ascii=False)
        return f"{self.tool}({text[:200]})"


def person_present() -> bool:
    """A person is at the terminal: stdin and stderr are both a terminal."""
    return bool(sys.stdin and sys.stdin.isatty() and sys.stderr and sys.stderr.isatty())


def resolve_ask(prompt: str, interactive: bool) -> bool:
    """Put a question to the person at the terminal (y/N on /dev/tty); nobody there is a no."""
    if not interactive:
        return False
    with _TTY_LOCK:
        try:
            with open("/dev/tty", "rb+", buffering=0) as tty:  # a terminal is not seekable: raw
                tty.write(f"{prompt} [y/N] ".encode())
                answer = tty.readline().decode(errors="replace")
        except OSError:
            return False
    return answer.strip().lower() in ("y", "yes")


class TerminalAsk:
    """The command line's `ask`: the y/N question when a person is at the terminal, else None."""

    def __init__(self, present: Any = person_present):
        self.present = present

    def __call__(self, request: AskRequest) -> str | None:
        if not self.present():
            return None
        question = f"agi: allow {request.shown()}? {request.reason}"
        return "allow_once" if resolve_ask(question, True) else "reject_once"


terminal_ask = TerminalAsk()
