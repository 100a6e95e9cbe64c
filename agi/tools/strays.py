"""Processes a run started that left their process group and session (`setsid cmd &`, a
daemon), found by the marks they carry and ended with the run (docs: security).

Every command a tool starts gets two marks its children inherit through `setsid`, double
forks and new sessions: `AGI_JOB=<token>` in its environment, and a resource limit of its
own, the real-time CPU limit (RLIMIT_RTTIME, which binds only real-time scheduled processes,
set to about two weeks) at a value that holds the token: `env -i` clears the first, not the
second, and an unprivileged process cannot raise a hard limit back. At the end the processes
whose environment or limits (as /proc shows them) hold either mark are killed, their groups
with them. Without /proc (macOS) only the groups the tools recorded are ended.
"""

from __future__ import annotations

import os
import signal
import sys

MARK = "AGI_JOB"
LIMIT_BASE = 1 << 40  # microseconds of real-time CPU (12.7 days); the token adds at most 2**32
# sets the limit, then runs the command as it was given ($1 the limit, the rest the argv)
MARKING = 'ulimit -R "$1" 2>/dev/null || ulimit -S -R "$1" 2>/dev/null; shift; exec "$@"'


def new_token() -> str:
    return os.urandom(8).hex()


def limit_of(token: str) -> int:
    """The RLIMIT_RTTIME value that marks the processes of `token`."""
    return LIMIT_BASE + int(token[:8], 16)


def marking(argv: list[str], token: str) -> list[str]:
    """argv run by a shell that first marks itself, and so all it starts, with the token's
    limit: the same process (it execs the command), the command's own argv and exit code."""
    bash = _bash()
    if bash is None:
        return argv
    return [bash, "-c", MARKING, "bash", str(limit_of(token)), *argv]


_BASH: list[str | None] = []


def _bash() -> str | None:
    """bash, on Linux (where /proc shows the limit), looked for once."""
    if not _BASH:
        import shutil

        _BASH.append(shutil.which("bash") if sys.platform.startswith("linux") else None)
    return _BASH[0]


def marked(token: str) -> list[int]:
    """The processes whose environment carries `AGI_JOB=token`, or whose real-time CPU limit is
    the token's (never agi itself)."""
    needle = f"{MARK}={token}".encode()
    limit = str(limit_of(token)).encode()
    found: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    me = os.getpid()
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        if _limited(name, limit):
            found.append(int(name))
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read()
        except OSError:  # gone, or another user's
            continue
        if needle in environ.split(b"\0"):
            found.append(int(name))
    return found


def _limited(pid: str, limit: bytes) -> bool:
    """Whether the process's real-time CPU limit, soft or hard, is `limit`."""
    try:
        with open(f"/proc/{pid}/limits", "rb") as f:
            for line in f:
                if line.startswith(b"Max realtime timeout"):
                    return limit in line.split()[3:5]
    except OSError:
        pass
    return False


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
