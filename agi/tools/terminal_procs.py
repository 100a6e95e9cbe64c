"""What runs in a Terminal tool's pseudo-terminal (agi.tools.terminal): the process groups of
its session, the program in the foreground, and whether a Bash line starts a program that reads
code typed at the terminal."""

from __future__ import annotations

import os


def session_groups(sid: int) -> set[int]:
    """The process groups of session `sid` (interactive shells put each job in its own group)."""
    groups: set[int] = set()
    try:
        names = os.listdir("/proc")
    except OSError:  # no /proc (macOS): the leader's group is all we know
        return groups
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # state ppid pgrp session ...
        if len(fields) > 3 and int(fields[3]) == sid and fields[0] != "Z":
            groups.add(int(fields[2]))
    return groups


SHELL_NAMES = frozenset(
    {"bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "rbash", "yash", "fish", "busybox"}
)
SANDBOX_NAMES = frozenset({"bwrap"})  # the sandbox's own process, around the program


def foreground(fd: int) -> str | None:
    """The program reading the terminal now: "" for a shell, the name of another program in
    the foreground process group, None when it cannot be told (no /proc, the terminal gone)."""
    try:
        group = os.tcgetpgrp(fd)
        names = os.listdir("/proc")
    except OSError:
        return None
    found: list[str] = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # state ppid pgrp ...
        if len(fields) > 2 and int(fields[2]) == group and fields[0] != "Z":
            found.append(stat[stat.find("(") + 1 : stat.rfind(")")])
    others = [n for n in found if n not in SHELL_NAMES | SANDBOX_NAMES]
    if not found:
        return None
    return others[0] if others else ""


def starts_reader(line: str) -> bool:
    """Whether a Bash line starts a program that reads code typed at the terminal (or cannot
    be read, and so may)."""
    # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
    from agi.policy.bash.parse import split

    parts = split(line, stateful=True)
    # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
    from agi.policy.bash.programs import starts_reader as reads

    return parts is None or any(reads(p.words) for p in parts)
