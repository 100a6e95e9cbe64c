"""The environment of every process agi starts, and the keys withheld from it: no tool, hook,
MCP server or terminal sees a variable holding the API key in use (docs: Security model)."""

from __future__ import annotations

import os
import sys

SECRETS: set[str] = set()  # the API keys of this process's runs: no child sees them
FORGOTTEN: set[str] = set()  # the variables wiped from agi's own environment block


def withhold(key: str | None) -> None:
    """From now on no child process gets a variable whose value contains `key`, nor reads it
    from agi's own environment or memory (`/proc/$PPID/environ`, `/proc/$PPID/mem`, ptrace):
    agi becomes non-dumpable, which puts those out of reach of its uid, and the variables that
    hold it are wiped from the environment block the kernel shows, which root reads too."""
    if key and len(key) >= 8 and key not in SECRETS:
        if not SECRETS:
            _undumpable()
        SECRETS.add(key)
        forget(withheld(dict(os.environ)))


def in_use() -> list[str]:
    """The keys withheld so far, the longest first: what every output redacts."""
    return sorted(tuple(SECRETS), key=len, reverse=True)


def _kept() -> set[str]:
    return {name.strip() for name in os.environ.get("AGI_TOOL_ENV_KEYS", "").split(",")}


def withheld(environ: dict[str, str]) -> set[str]:
    """The names of `environ` no child gets: AGI_API_KEY and every variable whose value holds a
    key in use, less those AGI_TOOL_ENV_KEYS names (all of them, when it is `*`)."""
    keep = _kept()
    if "*" in keep:
        return set()
    return {
        name
        for name, value in environ.items()
        if name not in keep and (name == "AGI_API_KEY" or any(key in value for key in SECRETS))
    }


def forget(names: set[str]) -> None:
    """Overwrite with NULs the values of these variables in agi's own environment block, the
    bytes /proc/PID/environ shows: os.environ is a copy, and changing it leaves them there.
    Only when such a variable is set (nothing to do otherwise: start-up stays cheap)."""
    names = names - FORGOTTEN
    if not names or not sys.platform.startswith("linux"):
        return
    FORGOTTEN.update(names)
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end: fields 50 and 51
    except (OSError, IndexError, ValueError):
        return
    if not 0 < start < end:
        return
    try:
        fd = os.open("/proc/self/mem", os.O_RDWR)
    except OSError:
        fd = -1
    try:
        block = os.pread(fd, end - start, start) if fd >= 0 else _peek(start, end - start)
        wanted = {os.fsencode(name) + b"=" for name in names}
        at = 0
        for entry in block.split(b"\0"):
            equals = entry.find(b"=")
            if equals > 0 and entry[: equals + 1] in wanted and len(entry) > equals + 1:
                where, size = start + at + equals + 1, len(entry) - equals - 1
                _poke(fd, where, bytes(size))
            at += len(entry) + 1
    except OSError:
        pass
    finally:
        if fd >= 0:
            os.close(fd)


def _peek(address: int, size: int) -> bytes:
    import ctypes

    return ctypes.string_at(address, size)


def _poke(fd: int, address: int, data: bytes) -> None:
    """Write `data` at `address` of agi's memory: through /proc/self/mem, else in place."""
    if fd >= 0:
        try:
            if os.pwrite(fd, data, address) == len(data):
                return
        except OSError:
            pass
    import ctypes

    ctypes.memmove(address, data, len(data))


def _undumpable() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every process agi starts (tools, hooks, `--describe`, MCP servers,
    command steps, terminals): agi's, less AGI_API_KEY and every variable whose value contains
    a key in use (unless AGI_TOOL_ENV_KEYS names it, comma-separated, or is `*`), plus
    `extra`."""
    env = dict(os.environ)
    for name in withheld(env):
        del env[name]
    env.update(extra or {})
    return env
