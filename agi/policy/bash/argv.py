"""What the option readers of agi.policy.bash.programs share (docs: permissions): the words' values,
getopt-style option skipping, and what marks a command opaque."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agi.policy.bash.words import Unreducible, Word


@dataclass(frozen=True)
class Opaque:
    """What makes a command opaque: its program, the option that runs code (None: the program
    itself), and whether only an exact rule (no `*`) may vouch for it (code inside a script)."""

    program: str
    option: str | None
    exact: bool = False


UNKNOWN = "\x00"  # marks a word of unknown value (`"$x"`): no option, no safe name


def _values(args: Sequence[Word], strict: bool = False) -> list[str]:
    """The words' values; a word of unknown value is Unreducible when `strict` (a wrapper's
    command must be known), else its text marked UNKNOWN (an argument of unknown value)."""
    out = []
    for w in args:
        if w.value is None or not w.plain:
            if strict:
                raise Unreducible
            out.append(UNKNOWN + w.text)
        else:
            out.append(w.value)
    return out


def getopt(
    args: list[str], flags: str, valued: str, long_flags: str = "", long_valued: str = ""
) -> int:
    """Where the first operand is, for a program with getopt-style options: short `flags`
    and `valued` letters (clustered: `-it`, `-oValue`), long options (`--x`, `--x=v`, `--x v`).
    An option not listed is Unreducible (it may take a value that looks like the command)."""
    longs, long_values = set(long_flags.split()), set(long_valued.split())
    at = 0
    while at < len(args):
        value = args[at]
        if value == "--":
            return at + 1
        if not value.startswith("-") or value == "-":
            return at
        if value.startswith("--"):
            name = value.partition("=")[0]
            if name in long_values:
                at += 1 if "=" in value else 2
                continue
            if name in longs and "=" not in value:
                at += 1
                continue
            raise Unreducible
        letters = value[1:]
        for i, letter in enumerate(letters):
            if letter in valued:
                at += 1 if i + 1 < len(letters) else 2
                break
            if letter not in flags:
                raise Unreducible
        else:
            at += 1
    return at


class Opaqued(Exception):
    """Raised while unwrapping: the command is opaque (`ssh -o ProxyCommand=…`)."""

    def __init__(self, found: Opaque):
        super().__init__(found.program)
        self.found = found
