"""The environment of every process agi starts, and the keys withheld from it: no tool, hook,
MCP server or terminal sees a variable holding the API key in use (docs: Security model)."""

from __future__ import annotations

import os
import sys

SECRETS: set[str] = set()  # the API keys of this process's runs: no child sees them


def withhold(key: str | None) -> None:
    """From now on no child process gets a variable whose value contains `key`, nor reads it
    from agi's own environment or memory (`/proc/$PPID/environ`, `/proc/$PPID/mem`, ptrace):
    agi becomes non-dumpable, which puts those out of reach of its uid."""
    if key and len(key) >= 8:
        if not SECRETS:
            _undumpable()
        SECRETS.add(key)


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
    keep = {name.strip() for name in os.environ.get("AGI_TOOL_ENV_KEYS", "").split(",")}
    env = dict(os.environ)
    if "*" not in keep:
        for name, value in os.environ.items():
            if name in keep:
                continue
            if name == "AGI_API_KEY" or any(key in value for key in SECRETS):
                del env[name]
    env.update(extra or {})
    return env
