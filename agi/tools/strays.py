"""Processes a run started that left their process group and session (`setsid cmd &`, a
daemon), found by a mark in their environment and ended with the run (docs: security).

Every command a tool starts gets `AGI_JOB=<token>` in its environment; children inherit it
through `setsid`, double forks and new sessions. At the end the processes of this user whose
environment (as /proc shows it) holds the mark are killed, their groups with them. Without
/proc (macOS) only the groups the tools recorded are ended.
"""

from __future__ import annotations

import os
import signal

MARK = "AGI_JOB"


def new_token() -> str:
    return os.urandom(8).hex()


def marked(token: str) -> list[int]:
    """The processes whose environment carries `AGI_JOB=token` (never agi itself)."""
    needle = f"{MARK}={token}".encode()
    found: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    me = os.getpid()
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read()
        except OSError:  # gone, or another user's
            continue
        if needle in environ.split(b"\0"):
            found.append(int(name))
    return found


def end_marked(token: str) -> None:
    """KILL every marked process and its process group."""
    for _ in range(3):  # a fork during the sweep is caught by the next one
        pids = marked(token)
        if not pids:
            return
        for pid in pids:
            for kill in (os.killpg, os.kill):
                try:
                    target = os.getpgid(pid) if kill is os.killpg else pid
                    if kill is os.killpg and target == os.getpgid(0):
                        continue  # never agi's own group
                    kill(target, signal.SIGKILL)
                except (ProcessLookupError, PermissionError, OSError):
                    pass
