"""The line a shell receives from keys typed into a terminal, for the permission rules.

Keys accumulate until Enter: `r` sent once and `m x<Enter>` later is the line `rm x`. The usual
readline editing keys are applied (backspace, delete, left/right, home/end, C-a C-e C-b C-f C-u
C-k C-w, C-c); keys whose effect depends on state the judge cannot see (Tab completion, history,
yank, Meta keys, other escapes and control characters) make the line unreadable, and an
unreadable line is judged as a line no rule can vouch for (docs: security), as is a line
with history expansion (`!!`, `!-2`, `^old^new`), which brings back what was typed before.
"""

from __future__ import annotations

import copy
import re

from agi.tools.keys import key

UNREADABLE = "\x00"  # a line the judge cannot replay; agi.policy.bash.parse never vouches for it
MARK = "\x00typed:"  # Terminal.canonical: the lines a send completes, given to the judge
_KEY = re.compile(r"<([^<>\s]+)>")
# an interactive shell's history expansion (`!!`, `!rm`, `^a^b`) runs what earlier lines said
HISTORY = re.compile(r"![^\s=(]|^\s*\^")
_ESCAPES = {
    "[D": "left", "OD": "left", "[C": "right", "OC": "right", "[H": "home", "OH": "home",
    "[1~": "home", "[7~": "home", "[F": "end", "OF": "end", "[4~": "end", "[8~": "end",
    "[3~": "delete",
}  # fmt: skip
_CONTROL = {"\x01": "home", "\x05": "end", "\x02": "left", "\x06": "right", "\x7f": "back"}
_CONTROL |= {"\x08": "back", "\x15": "kill-start", "\x0b": "kill-end", "\x17": "kill-word"}
_CONTROL |= {"\x04": "delete", "\x03": "cancel", "\x0c": "redraw"}


def typed(keys: str) -> str:
    """The characters a terminal sends for `keys` (Vim-style names; unknown names as written)."""

    def one(m: re.Match[str]) -> str:
        sent = key(m.group(1), False)
        return m.group(0) if sent is None else sent

    return _KEY.sub(one, keys)


class LineEditor:
    """The line being typed: text, cursor, and whether it can still be replayed."""

    def __init__(self) -> None:
        self.text = ""
        self.cursor = 0
        self.lost = False

    def copy(self) -> LineEditor:
        return copy.copy(self)

    def feed(self, keys: str) -> list[str]:
        """Apply keys; the lines they complete (UNREADABLE for one that cannot be replayed)."""
        done: list[str] = []
        data = typed(keys)
        at = 0
        while at < len(data):
            ch = data[at]
            at += 1
            if ch in "\r\n":
                done.append(UNREADABLE if self.lost or HISTORY.search(self.text) else self.text)
                self.text, self.cursor, self.lost = "", 0, False
            elif ch == "\x1b":
                seq = re.match(r"\[[0-9;]*[~A-Za-z]|O[A-Za-z]", data[at:])
                action = _ESCAPES.get(seq.group(0)) if seq else None
                at += len(seq.group(0)) if seq else 0
                self._apply(action or "lost")
            elif ch in _CONTROL:
                self._apply(_CONTROL[ch])
            elif ch < " ":
                self.lost = True  # Tab completes, C-r searches, C-y yanks, C-v quotes, …
            else:
                self.text = self.text[: self.cursor] + ch + self.text[self.cursor :]
                self.cursor += 1
        return done

    def _apply(self, action: str) -> None:
        text, at = self.text, self.cursor
        if action == "left":
            self.cursor = max(0, at - 1)
        elif action == "right":
            self.cursor = min(len(text), at + 1)
        elif action == "home":
            self.cursor = 0
        elif action == "end":
            self.cursor = len(text)
        elif action == "back" and at:
            self.text, self.cursor = text[: at - 1] + text[at:], at - 1
        elif action == "delete":
            self.text = text[:at] + text[at + 1 :]
        elif action == "kill-start":
            self.text, self.cursor = text[at:], 0
        elif action == "kill-end":
            self.text = text[:at]
        elif action == "kill-word":
            start = len(text[:at].rstrip()) - len(text[:at].rstrip().split(" ")[-1])
            self.text, self.cursor = text[:start] + text[at:], start
        elif action == "cancel":
            self.text, self.cursor, self.lost = "", 0, False
        elif action == "lost":
            self.lost = True
